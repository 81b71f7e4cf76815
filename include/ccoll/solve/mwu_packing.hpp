// ccoll/solve/mwu_packing.hpp: fractional packing by multiplicative weights (Garg-Koenemann,
// with Fleischer's round-robin phases), for LPs  max sum_j x_j  s.t.  A x <= c, x >= 0  whose
// columns are too many to list and come from a pricing oracle.
//
// The packed-forest solver's LP (forest/problem.hpp: one column per pair of trees, exponentially
// many) is of this form. [TopoSync] finds its trees with the ellipsoid method (Alg. 1); this is the
// combinatorial alternative the paper's primal-dual argument also supports. Every row r carries a
// price y_r, initially 1 / c_r. Each step takes a column whose price y.A_j is within 1 + epsilon of
// the cheapest, adds to it the largest weight its bottleneck row allows, and multiplies the price
// of every row it uses by 1 + epsilon * (the fraction of that row's capacity it took). Fleischer's
// phases visit the groups (roots) in turn and keep augmenting a group's column until its price
// passes (1 + epsilon) times the phase's floor, so the oracle runs about once per group and phase,
// not once per step.
//
// Guarantees. Accumulated weights are made feasible by dividing by the largest row congestion
// (always, not only at the theory's stopping point). With an exact oracle, any prices y certify
// OPT <= c.y / min_j y.A_j (weak duality: y / min_j y.A_j is dual feasible); the floor of a
// finished phase lower-bounds min_j y.A_j because prices only rise, so every phase yields a bound
// for free. The loop stops when bound <= (1 + target_gap) * solution, or at its phase or time
// budget. The theory (Garg and Koenemann 1998, Fleischer 2000) gives a (1 - O(epsilon)) solution
// after O(m log m / epsilon^2) steps; in practice the certified gap is the figure to trust, and the
// columns found are refitted exactly by the caller (forest/refit.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ccoll::solve {

struct MwuOptions {
  double epsilon = 0.1;
  int max_phases = 4000;
  double max_seconds = std::numeric_limits<double>::infinity();
  double target_gap = 0;  // stop once the certified bound is within this of the solution
};

struct MwuResult {
  std::vector<double> x;                                         // per column, feasible
  double value = 0;                                              // sum of x
  double upper_bound = std::numeric_limits<double>::infinity();  // certified (exact oracle only)
  std::vector<double> bound_prices;  // the row prices that certified upper_bound (normalised)
  int no_column = -1;  // a group the oracle found no column for (then nothing else is done)
  int phases = 0;
  std::size_t augmentations = 0;
  std::size_t oracle_calls = 0;
  double seconds = 0;
};

// Oracle interface:
//   void set_prices(const std::vector<double>& y);   // row prices for the next price() calls
//   double price(int group, Column& out);            // cheapest column of `group` (or +inf)
//   bool exact() const;                              // price() returns true minima
// Column needs `std::vector<std::pair<int, double>> usage` (row, coefficient > 0).
// New columns are appended to `cols`; columns with identical usage vectors are one LP column and
// are merged (the first found is kept, even if another group found it too); x has one entry per
// column of `cols`, including any the caller passed in (they start at weight 0).
template <class Column, class Oracle>
MwuResult mwu_pack(const std::vector<double>& cap, int groups, Oracle& oracle,
                   std::vector<Column>& cols, const MwuOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::size_t m = cap.size();
  const double eps = opt.epsilon;
  MwuResult res;
  std::vector<double> y(m), load(m, 0.0), x(cols.size(), 0.0);
  for (std::size_t r = 0; r < m; ++r) y[r] = 1.0 / cap[r];
  bool dirty = true;

  std::unordered_map<std::uint64_t, std::vector<std::size_t>> index;
  const auto hash = [](const Column& c) {
    std::uint64_t h = 1469598103934665603ull;
    for (const auto& [r, a] : c.usage) {
      h ^= static_cast<std::uint64_t>(r) * 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h ^= static_cast<std::uint64_t>(a * 16.0) + (h << 6) + (h >> 2);
    }
    return h;
  };
  const auto intern = [&](Column&& c) {
    const std::uint64_t h = hash(c);
    auto& bucket = index[h];
    for (std::size_t j : bucket)
      if (cols[j].usage == c.usage) return j;
    bucket.push_back(cols.size());
    cols.push_back(std::move(c));
    x.push_back(0.0);
    return cols.size() - 1;
  };
  for (std::size_t j = 0; j < cols.size(); ++j) index[hash(cols[j])].push_back(j);

  Column scratch{};
  const auto price = [&](int g, std::size_t& col) {
    if (dirty) oracle.set_prices(y), dirty = false;
    ++res.oracle_calls;
    const double c = oracle.price(g, scratch);
    if (!(c < inf)) return inf;
    col = intern(std::move(scratch));
    scratch = Column{};
    return c;
  };
  const auto cost_of = [&](std::size_t j) {
    double c = 0;
    for (const auto& [r, a] : cols[j].usage) c += y[static_cast<std::size_t>(r)] * a;
    return c;
  };
  const auto augment = [&](std::size_t j) {
    double u = inf;
    for (const auto& [r, a] : cols[j].usage) u = std::min(u, cap[static_cast<std::size_t>(r)] / a);
    x[j] += u;
    for (const auto& [r, a] : cols[j].usage) {
      const auto R = static_cast<std::size_t>(r);
      load[R] += u * a;
      y[R] *= 1.0 + eps * u * a / cap[R];
    }
    dirty = true;
    ++res.augmentations;
  };
  const auto dual_objective = [&] {
    double d = 0;
    for (std::size_t r = 0; r < m; ++r) d += cap[r] * y[r];
    return d;
  };
  const auto congestion = [&] {
    double c = 0;
    for (std::size_t r = 0; r < m; ++r) c = std::max(c, load[r] / cap[r]);
    return c;
  };

  std::vector<std::size_t> current(static_cast<std::size_t>(groups), 0);
  std::vector<double> last(static_cast<std::size_t>(groups), inf);
  double floor = inf;
  for (int g = 0; g < groups; ++g) {
    last[static_cast<std::size_t>(g)] = price(g, current[static_cast<std::size_t>(g)]);
    if (!(last[static_cast<std::size_t>(g)] < inf)) {
      res.no_column = g;
      res.x = std::move(x);
      return res;
    }
    floor = std::min(floor, last[static_cast<std::size_t>(g)]);
  }
  const bool exact = oracle.exact();
  const auto certify = [&](double min_price) {
    if (!exact || !(min_price > 0)) return;
    const double b = dual_objective() / min_price;
    if (b < res.upper_bound) {
      res.upper_bound = b;
      res.bound_prices = y;
      for (auto& v : res.bound_prices) v /= min_price;
    }
  };
  certify(floor);
  std::vector<double> best_x;
  double best_value = -1;
  const auto snapshot = [&] {
    const double cg = congestion();
    if (!(cg > 0)) return;
    double s = 0;
    for (double v : x) s += v;
    if (s / cg > best_value) {
      best_value = s / cg;
      best_x = x;
      for (auto& v : best_x) v /= cg;
    }
  };

  for (res.phases = 0; res.phases < opt.max_phases; ++res.phases) {
    const double threshold = floor * (1.0 + eps);
    for (int g = 0; g < groups; ++g) {
      // A group's last oracle price is a lower bound on its cheapest column now (prices only
      // rise): no need to ask the oracle while that bound is above the threshold.
      if (last[static_cast<std::size_t>(g)] >= threshold) continue;
      auto& j = current[static_cast<std::size_t>(g)];
      double c = cost_of(j);
      if (c >= threshold) c = price(g, j);
      while (c < threshold) {
        augment(j);
        c = cost_of(j);
        if (c >= threshold) c = price(g, j);
      }
      last[static_cast<std::size_t>(g)] = c;
    }
    // Prices only rose during the phase, so every group's cheapest column now costs at least the
    // price it was last found at.
    floor = *std::min_element(last.begin(), last.end());
    certify(floor);
    snapshot();
    // Keep prices in range (the algorithm is invariant under scaling y and the floor together).
    if (floor > 1e100) {
      for (auto& v : y) v /= floor;
      floor = 1.0;
      dirty = true;
    }
    const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
    if (res.upper_bound <= (1.0 + opt.target_gap) * best_value || elapsed > opt.max_seconds) {
      ++res.phases;
      break;
    }
  }
  res.x = best_value >= 0 ? std::move(best_x) : std::vector<double>(cols.size(), 0.0);
  res.x.resize(cols.size(), 0.0);
  res.value = std::max(0.0, best_value);
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

}  // namespace ccoll::solve
