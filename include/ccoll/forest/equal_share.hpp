// ccoll/forest/equal_share.hpp: the reduce forest of a reduce-scatter and the broadcast forest of
// an all-gather on a physical graph: trees rooted at every active worker whose weights give every
// root the same rate, solve_equal_share_forest().
//
// [TopoSync]'s allreduce forest (packed_forest.hpp) maximises sum_v chi(v) and gives each root a
// share of the buffer in proportion to chi(v). A reduce-scatter cannot: root v must receive
// exactly its block, |C| / P, so its time is max_v (|C| / P) / chi(v), and the forest to plan
// maximises min_v chi(v). On an uneven graph the two differ: the allreduce optimum hands the roots
// behind a slow link small shares, which a reduce-scatter cannot do (docs/collectives.md, "The
// forest", works one example through).
//
// The LP. A column is a round: one tree of every root, all with the round's weight, so that every
// root gains the same rate; max sum of round weights subject to the link capacities of one stage
// (the reduce stage for a reduce-scatter, the broadcast stage for an all-gather). It is a packing
// LP with the optimum of max_v-min chi(v) over all tree weights: an optimal weighting whose roots'
// rates are equal cuts, at every breakpoint of the roots' cumulative weights, into rounds. The
// cheapest round under link prices y is the cheapest tree of every root under y (the forest
// oracle, problem.hpp: Edmonds' algorithm with every worker active, directed Steiner trees
// otherwise), so column generation prices exactly: a round enters while its price is below 1.
// With an exact oracle the last prices also certify an upper bound (capacities . y / price).
//
// Every pair becomes a plan channel (to_plan.hpp), and column generation leaves many: the optimum
// found is then restricted to the k heaviest pairs of every root, for the smallest k whose exact
// optimum over them (the same column generation, priced by enumerating those pairs) is within
// ForestOptions::prune_loss of it (or k = max_pairs_per_root where that is set).
//
// The result is a PackedForest (types.hpp) whose pairs carry the trees of the stage planned (the
// other half of each pair is the cheapest tree under zero prices, unused); to_plan.hpp's
// forest_block_plan() makes the plan; `optimum_found_GBps` is the unrestricted sum. The flat graph
// only: above ForestOptions::hierarchical_above compute nodes the LP is refused.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/forest/exact.hpp"
#include "ccoll/forest/problem.hpp"
#include "ccoll/forest/refit.hpp"
#include "ccoll/forest/types.hpp"
#include "ccoll/physical/graph.hpp"

namespace ccoll::forest {

namespace detail {

// The rounds found by column generation and their LP weights.
struct Rounds {
  std::vector<std::vector<std::size_t>> rounds;            // per round: its pair per root
  std::vector<double> x;                                   // per round
  double value = 0;                                        // the rate of every root
  double bound = std::numeric_limits<double>::infinity();  // certified, with an exact pricer
  std::size_t rows = 0;
  // Each pair's weight: the rounds that use it, added up.
  std::vector<double> pair_weights(std::size_t npairs) const {
    std::vector<double> w(npairs, 0.0);
    for (std::size_t k = 0; k < rounds.size(); ++k)
      if (k < x.size() && x[k] > 0)
        for (std::size_t j : rounds[k]) w[j] += x[k];
    return w;
  }
};

// Column generation over rounds: `price(y, round)` fills the cheapest round under stage prices y
// and returns its price; a round enters while that is below 1. `exact`: the pricer is exact, so
// every price also certifies a bound. `in_pool(row)`: the stage's rows.
template <class InPool, class Price>
Rounds solve_rounds(const ForestProblem& p, const std::vector<ForestColumn>& pairs,
                    InPool&& in_pool, Price&& price, const std::vector<double>& y0, bool exact,
                    const ForestOptions& opt, std::chrono::steady_clock::time_point t0,
                    PackedForest& stats) {
  Rounds r;
  std::vector<ForestColumn> cols;  // a round as a column: its pairs' stage usage, summed
  std::map<std::vector<std::size_t>, std::size_t> known;
  WeightFit fit(p, cols);
  std::vector<double> y = y0;
  const std::vector<double> cap = p.capacities();
  std::vector<std::size_t> round;
  RefitResult best;
  for (int it = 0; it < std::max(1, opt.max_rounds); ++it) {
    const double cost = price(y, round);
    ++stats.rounds;
    double cy = 0;
    for (std::size_t row = 0; row < cap.size(); ++row) cy += cap[row] * y[row];
    if (exact && cost > 0) r.bound = std::min(r.bound, cy / cost);
    if (it > 0 && !(cost < 1.0 - opt.tolerance)) break;
    if (!known.emplace(round, r.rounds.size()).second) break;
    r.rounds.push_back(round);
    std::map<int, double> usage;
    for (std::size_t j : round)
      for (const auto& [row, a] : pairs[j].usage)
        if (in_pool(row)) usage[row] += a;
    cols.push_back(ForestColumn{});
    cols.back().root = -1;
    cols.back().usage.assign(usage.begin(), usage.end());
    cols.back().key = r.rounds.size();
    fit.add(cols.size() - 1);
    RefitResult solved = fit.solve();
    stats.pivots += solved.pivots;
    ++stats.refits;
    // Weights are feasible whatever the simplex did, its duals are not: an LP that failed its
    // check ends the generation with the last certified weights (or, first, these).
    if (!solved.certified && it > 0) break;
    best = std::move(solved);
    y = best.y;
    if (best.value >= r.bound * (1 - opt.target_gap)) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
        opt.max_seconds)
      break;
  }
  r.x = best.x;
  r.value = best.value;
  r.rows = best.rows;
  return r;
}

}  // namespace detail

// Which stage's trees an equal-share forest plans.
enum class ShareStage : std::uint8_t { reduce, broadcast };

// The forest with every root's rate equal; PackedForest::chi() gives that rate for every root
// (`total_GBps` is their sum), and `upper_bound_GBps` the certified bound on that sum (-1 without
// an exact oracle).
//
// `root_node` >= 0 plans the trees of that one root (an active node) instead: a broadcast's
// (broadcast stage) or a reduce's (reduce stage), the packing of its trees, whose rate the graph's
// cuts around it bound (Edmonds' theorem, with every worker active).
inline PackedForest solve_equal_share_forest(const physical::PhysicalTopology& topo,
                                             ShareStage stage, const ForestOptions& opt = {},
                                             int root_node = -1) {
  using namespace forest_detail;
  const auto t0 = std::chrono::steady_clock::now();
  const ForestProblem p = make_forest_problem(topo, ForestSchedule::phased);
  PackedForest out = start_forest(p, ForestSchedule::phased, ForestMethod::column_generation);
  if (single_worker(p, out)) return out;
  if (p.n > opt.hierarchical_above)
    throw Error(ErrorCode::Unsupported, -1,
                "an equal-share forest is planned on the flat graph, up to " +
                    std::to_string(opt.hierarchical_above) + " compute nodes; this one has " +
                    std::to_string(p.n));
  std::vector<int> roots = p.roots;  // local indices of the roots planned
  if (root_node >= 0) {
    roots.clear();
    for (int i = 0; i < p.n; ++i)
      if (p.node[static_cast<std::size_t>(i)] == root_node &&
          p.terminal[static_cast<std::size_t>(i)])
        roots.push_back(i);
    if (roots.empty())
      throw Error(ErrorCode::InvalidArgument, -1,
                  "the root of a forest's broadcast or reduce must be an active worker");
  }
  solve::SteinerOptions so = opt.steiner;
  so.exact_limit = std::min(so.exact_limit, opt.mwu_exact_relays);
  ForestOracle oracle(p, so);
  out.exact_oracle = oracle.exact();
  // The pool of the stage planned; the other pool is priced 0 and left out of the rounds.
  const int pool = stage == ShareStage::reduce ? 0 : 1;
  const int links = p.links();
  const auto in_pool = [&](int row) { return row / links == pool; };
  const std::vector<double> cap = p.capacities();

  std::vector<ForestColumn> pairs;  // every tree pair any round used
  ColumnSet pair_set(pairs);
  // The stage's price of pair j under y.
  const auto pair_price = [&](std::size_t j, const std::vector<double>& y) {
    double c = 0;
    for (const auto& [row, a] : pairs[j].usage)
      if (in_pool(row)) c += a * y[static_cast<std::size_t>(row)];
    return c;
  };
  // Exact pricing: every root's cheapest tree under y (the other pool priced 0).
  const auto cheapest = [&](const std::vector<double>& y, std::vector<std::size_t>& round) {
    std::vector<double> priced(static_cast<std::size_t>(p.rows()), 0.0);
    for (int row = 0; row < p.rows(); ++row)
      if (in_pool(row)) priced[static_cast<std::size_t>(row)] = y[static_cast<std::size_t>(row)];
    oracle.set_prices(priced);
    round.clear();
    for (int root : roots) {
      ForestColumn c;
      if (!(oracle.price(root, c) < std::numeric_limits<double>::infinity()))
        no_tree(topo, p, root);
      round.push_back(pair_set.insert(std::move(c)));
    }
    double total = 0;
    for (std::size_t j : round) total += pair_price(j, y);
    return total;
  };
  std::vector<double> y0(static_cast<std::size_t>(p.rows()), 0.0);
  for (int row = 0; row < p.rows(); ++row)
    if (in_pool(row)) y0[static_cast<std::size_t>(row)] = 1.0 / cap[static_cast<std::size_t>(row)];
  const detail::Rounds all =
      detail::solve_rounds(p, pairs, in_pool, cheapest, y0, out.exact_oracle, opt, t0, out);
  detail::Rounds chosen = all;
  // Every pair is a plan channel: keep the fewest heaviest pairs per root whose restricted
  // optimum (priced exactly over them) stays within opt.prune_loss of the optimum found.
  std::vector<double> weight = all.pair_weights(pairs.size());
  std::vector<std::vector<std::size_t>> by_root(roots.size());
  for (std::size_t j = 0; j < pairs.size(); ++j)
    if (weight[j] > 0)
      for (std::size_t i = 0; i < roots.size(); ++i)
        if (roots[i] == pairs[j].root) by_root[i].push_back(j);
  std::size_t most = 0;
  for (auto& v : by_root) {
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return weight[a] != weight[b] ? weight[a] > weight[b] : a < b;
    });
    most = std::max(most, v.size());
  }
  // With a cap (ForestOptions::max_pairs_per_root) below what the optimum uses, the cap's
  // restricted optimum is taken whatever it loses.
  const std::size_t limit = opt.max_pairs_per_root > 0
                                ? std::min(most, static_cast<std::size_t>(opt.max_pairs_per_root))
                                : most;
  for (std::size_t k = 1; k < most && k <= limit; ++k) {
    const auto kept = [&](const std::vector<double>& y, std::vector<std::size_t>& round) {
      round.clear();
      double total = 0;
      for (const auto& v : by_root) {
        std::size_t pick = v.front();
        double low = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < v.size() && i < k; ++i)
          if (const double c = pair_price(v[i], y); c < low) low = c, pick = v[i];
        round.push_back(pick);
        total += low;
      }
      return total;
    };
    // Each restricted solve has its own time budget: the full one may have spent the first.
    detail::Rounds few = detail::solve_rounds(p, pairs, in_pool, kept, y0, false, opt,
                                              std::chrono::steady_clock::now(), out);
    if (few.value >= (1 - opt.prune_loss) * all.value || k == limit) {
      chosen = std::move(few);
      break;
    }
  }
  weight = chosen.pair_weights(pairs.size());
  const double bound = all.bound;
  add_pairs(p, pairs, weight, out);
  out.optimum_found_GBps = all.value * static_cast<double>(roots.size());
  out.upper_bound_GBps =
      out.exact_oracle && std::isfinite(bound) ? bound * static_cast<double>(roots.size()) : -1;
  out.columns = pairs.size();
  out.oracle_calls = oracle.calls();
  out.lp_rows = chosen.rows;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace ccoll::forest
