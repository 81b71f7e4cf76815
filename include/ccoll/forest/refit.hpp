// ccoll/forest/refit.hpp: exact tree weights for a given set of tree pairs, and pruning
// to fewer pairs.
//
// The multiplicative-weights packer (mwu_packing.hpp) is good at finding the trees an optimum uses
// and slow at settling their weights; the exact answer for a fixed set of trees is a small LP
// ([TopoSync] problem (4) or (8) restricted to those trees, as the paper does after Alg. 1).
// refit() solves it over the rows the trees touch and returns weights that are feasible by
// construction: a result the simplex check does not certify is scaled down to the largest feasible
// multiple, so a numerical failure costs bandwidth, never correctness.
//
// Every pair becomes a plan channel (to_plan.hpp), so fewer pairs make cheaper plans. prune()
// caps the number of pairs and drops light ones while the refitted total stays within a given
// loss of the optimum found; PackedForest reports what it gave up (prune_loss()).
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

#include "ccoll/forest/problem.hpp"
#include "ccoll/solve/lp.hpp"

namespace ccoll::forest {

struct RefitResult {
  std::vector<double> x;   // per column of the full list, feasible (0 outside the subset)
  double value = 0;        // sum of x
  std::vector<double> y;   // dual prices per problem row (0 on rows no subset column touches)
  double dual_value = 0;   // capacities . y (= value at a certified optimum)
  bool certified = false;  // the LP passed its optimality check
  std::size_t pivots = 0;
  std::size_t rows = 0;  // LP rows
};

// The LP of [TopoSync] problem (4)/(8) over a growing set of columns: rows are added as columns
// touch them, and every solve continues from the previous basis (column generation).
class WeightFit {
 public:
  WeightFit(const ForestProblem& p, const std::vector<ForestColumn>& cols)
      : p_(p), cols_(cols), row_of_(static_cast<std::size_t>(p.rows()), -1) {}

  std::size_t size() const { return members_.size(); }
  const ForestProblem& problem() const { return p_; }
  const std::vector<ForestColumn>& columns() const { return cols_; }

  // Adds cols[j] (once), enabled.
  void add(std::size_t j) {
    if (j >= in_.size()) in_.resize(cols_.size(), -1);
    if (in_[j] >= 0) return;
    in_[j] = static_cast<std::ptrdiff_t>(members_.size());
    solve::LpColumn c;
    c.objective = 1.0;
    c.entries.reserve(cols_[j].usage.size());
    for (const auto& [row, a] : cols_[j].usage) {
      auto& lr = row_of_[static_cast<std::size_t>(row)];
      if (lr < 0) {
        lr = lp_.add_row(p_.row_capacity(row));
        rows_.push_back(row);
      }
      c.entries.emplace_back(lr, a);
    }
    lp_.add_column(std::move(c));
    members_.push_back(j);
    enabled_.push_back(1);
  }

  // A disabled column keeps its place in the LP (and the basis stays valid) but is driven out of
  // the solution by a negative objective: removal without a fresh solve.
  void enable(std::size_t j, bool on) {
    add(j);
    const auto k = static_cast<std::size_t>(in_[j]);
    enabled_[k] = static_cast<char>(on);
    lp_.set_objective(k, on ? 1.0 : -1.0);
  }

  RefitResult solve(const solve::LpOptions& opt = {}) {
    RefitResult r;
    r.x.assign(cols_.size(), 0.0);
    r.y.assign(static_cast<std::size_t>(p_.rows()), 0.0);
    if (members_.empty()) {
      r.certified = true;
      return r;
    }
    const solve::LpResult lp = lp_.solve(opt);
    r.pivots = lp.pivots;
    r.rows = lp_.rows();
    r.certified = lp.status == solve::LpStatus::optimal;
    for (std::size_t k = 0; k < members_.size(); ++k)
      if (enabled_[k]) r.x[members_[k]] = lp.x[k];
    for (std::size_t i = 0; i < rows_.size(); ++i)
      r.y[static_cast<std::size_t>(rows_[i])] = lp.dual[i];
    r.dual_value = lp.dual_objective;
    // Feasible whatever the simplex did.
    const double cg = max_congestion(p_, cols_, r.x);
    if (cg > 1.0)
      for (auto& v : r.x) v /= cg;
    for (double v : r.x) r.value += v;
    return r;
  }

 private:
  const ForestProblem& p_;
  const std::vector<ForestColumn>& cols_;
  solve::PackingSimplex lp_;
  std::vector<int> row_of_, rows_;
  std::vector<std::size_t> members_;
  std::vector<char> enabled_;
  std::vector<std::ptrdiff_t> in_;  // LP column of cols[j], -1 when not a member
};

// Optimal weights for the columns cols[subset[k]] ([TopoSync] problem (4)/(8) over those trees).
inline RefitResult refit(const ForestProblem& p, const std::vector<ForestColumn>& cols,
                         const std::vector<std::size_t>& subset) {
  WeightFit fit(p, cols);
  for (std::size_t j : subset) fit.add(j);
  return fit.solve();
}

struct PruneResult {
  std::vector<double> x;  // per column, feasible
  double value = 0;
  std::size_t pivots = 0;
  int refits = 0;
};

// Fewer pairs, each step followed by a refit of the weights (warm-started: a few pivots each).
// Caps: at most max_per_root pairs per root and max_pairs in all (0: no cap), reached by dropping
// the lightest pairs a batch at a time and refitting, so that the survivors' weights adapt before
// the next cut (cutting to the cap at once keeps pairs that only fit together with the ones cut).
// Loss: then drop the lightest pairs while the total stays >= (1 - loss) * reference; pairs whose
// weights add up to the loss still allowed can go without a refit (removing a pair never breaks
// feasibility), the refit wins some back, and the drop is repeated (a few rounds). `fit` holds the
// LP the weights x came from; columns outside x's support are disabled first.
inline PruneResult prune(WeightFit& fit, std::vector<double> x, double reference, int max_pairs,
                         int max_per_root, double loss) {
  const ForestProblem& p = fit.problem();
  const auto& cols = fit.columns();
  PruneResult out;
  const double eps = 1e-12 * std::max(1.0, reference);
  std::vector<char> keep(cols.size(), 0);
  std::vector<std::size_t> support;
  // support = kept pairs with weight, heaviest first.
  const auto collect = [&] {
    support.clear();
    for (std::size_t j = 0; j < cols.size(); ++j)
      if (keep[j] && x[j] > eps) support.push_back(j);
    std::sort(support.begin(), support.end(),
              [&](std::size_t a, std::size_t b) { return x[a] != x[b] ? x[a] > x[b] : a < b; });
  };
  const auto drop = [&](std::size_t j) {
    keep[j] = 0;
    fit.enable(j, false);
  };
  const auto refit_kept = [&] {
    const auto r = fit.solve();
    out.pivots += r.pivots;
    ++out.refits;
    x = r.x;
    collect();
  };
  for (std::size_t j = 0; j < cols.size(); ++j)
    if (x[j] > eps) keep[j] = 1;
  for (std::size_t j = 0; j < cols.size(); ++j)
    if (!keep[j]) fit.enable(j, false);
  collect();
  for (int guard = 0; guard < 1000; ++guard) {
    bool cut = false;
    if (max_per_root > 0) {
      std::vector<int> per(static_cast<std::size_t>(p.n), 0);
      for (std::size_t j : support) ++per[static_cast<std::size_t>(cols[j].root)];
      // The lightest pair of every root over its cap.
      for (auto it = support.rbegin(); it != support.rend(); ++it) {
        auto& k = per[static_cast<std::size_t>(cols[*it].root)];
        if (k > max_per_root) drop(*it), k = -1, cut = true;  // one per root per step
      }
    }
    if (max_pairs > 0 && support.size() > static_cast<std::size_t>(max_pairs)) {
      const std::size_t excess = support.size() - static_cast<std::size_t>(max_pairs);
      const std::size_t batch = std::max<std::size_t>(1, (excess + 3) / 4);
      for (std::size_t k = 0; k < batch; ++k) drop(support[support.size() - 1 - k]);
      cut = true;
    }
    if (!cut) break;
    refit_kept();
  }
  for (int round = 0; round < 3 && loss > 0 && support.size() > 1; ++round) {
    double total = 0;
    for (std::size_t j : support) total += x[j];
    double allowed = total - (1 - loss) * reference;
    std::size_t kept = support.size();
    while (kept > 1 && x[support[kept - 1]] <= allowed) allowed -= x[support[--kept]];
    if (kept == support.size()) break;
    for (std::size_t k = kept; k < support.size(); ++k) drop(support[k]);
    refit_kept();
  }
  std::vector<double> result(cols.size(), 0.0);
  for (std::size_t j : support) result[j] = x[j];
  out.x = std::move(result);
  for (double v : out.x) out.value += v;
  return out;
}

}  // namespace ccoll::forest
