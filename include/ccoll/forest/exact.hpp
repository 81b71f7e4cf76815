// ccoll/forest/exact.hpp: the exact packed-forest optimum by column generation, the
// reference the fast solver (packed_forest.hpp) is measured against.
//
// Column generation over (reduce tree, broadcast tree) pairs (problem.hpp): the restricted
// LP (lp.hpp, solved afresh and checked every round) gives dual link prices; the pricing oracle
// finds, for every root, the cheapest pair under those prices; pairs priced below 1 enter the LP.
// With an exact oracle (every compute node active: Edmonds; few relays: Steiner subset
// enumeration) the loop ends at the optimum of [TopoSync] problem (4) / (8) over all trees, and the
// duals of every round certify an upper bound (upper_bound_GBps). It replaces the ellipsoid method
// of [TopoSync]'s Alg. 1 with the same primal-dual idea. It is slow on large graphs (the LP grows
// by up to one column per root per round and tails off); an LP that fails its optimality check
// throws rather than returning a wrong optimum. On identical machines it solves the LP reduced by
// their rotation (symmetry.hpp), whose optimum is the same.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ccoll/forest/problem.hpp"
#include "ccoll/forest/refit.hpp"
#include "ccoll/forest/symmetry.hpp"
#include "ccoll/forest/types.hpp"
#include "ccoll/physical/graph.hpp"

namespace ccoll::forest {

namespace forest_detail {

// Columns without duplicates (same trees).
class ColumnSet {
 public:
  explicit ColumnSet(std::vector<ForestColumn>& cols) : cols_(cols) {
    for (std::size_t j = 0; j < cols_.size(); ++j) index_[cols_[j].key].push_back(j);
  }
  // Index of c in the set; appends it when new. `added` tells which.
  std::size_t insert(ForestColumn&& c, bool* added = nullptr) {
    auto& bucket = index_[c.key];
    for (std::size_t j : bucket)
      if (cols_[j].same_trees(c)) {
        if (added) *added = false;
        return j;
      }
    bucket.push_back(cols_.size());
    cols_.push_back(std::move(c));
    if (added) *added = true;
    return cols_.size() - 1;
  }

 private:
  std::vector<ForestColumn>& cols_;
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> index_;
};

inline PackedForest start_forest(const ForestProblem& p, ForestSchedule schedule,
                                 ForestMethod method) {
  PackedForest out;
  out.schedule = schedule;
  out.method = method;
  for (int r : p.roots) out.active.push_back(p.node[static_cast<std::size_t>(r)]);
  return out;
}

// A single active worker has nothing to send: one empty pair of infinite weight.
inline bool single_worker(const ForestProblem& p, PackedForest& out) {
  if (p.roots.size() != 1) return false;
  out.pairs.push_back(
      ForestPair{out.active[0], {}, {}, false, std::numeric_limits<double>::infinity()});
  out.total_GBps = out.optimum_found_GBps = std::numeric_limits<double>::infinity();
  out.exact_oracle = true;
  return true;
}

[[noreturn]] inline void no_tree(const physical::PhysicalTopology& topo, const ForestProblem& p,
                                 int root) {
  throw physical::TopologyError(
      "no tree rooted at \"" +
      topo.nodes[physical::PhysicalTopology::idx(p.node[static_cast<std::size_t>(root)])].id +
      "\" spans the active nodes");
}

}  // namespace forest_detail

inline PackedForest solve_packed_forest_exact(const physical::PhysicalTopology& topo,
                                              const ForestOptions& opt = {}) {
  using namespace forest_detail;
  const auto t0 = std::chrono::steady_clock::now();
  const ForestProblem full = make_forest_problem(topo, opt.schedule);
  PackedForest out = start_forest(full, opt.schedule, ForestMethod::column_generation);
  if (single_worker(full, out)) return out;
  const MachineRotation rot =
      opt.symmetry && full.n >= opt.symmetry_from ? find_machine_rotation(topo) : MachineRotation{};
  const SymmetricProblem sym = reduce_by_rotation(full, rot);
  const ForestProblem& p = sym.order() > 1 ? sym.quotient : full;
  ForestOracle oracle(p, opt.steiner);
  out.exact_oracle = oracle.exact();

  std::vector<ForestColumn> cols;
  ColumnSet set(cols);
  // Start from the trees that are cheapest under 1/capacity prices (wide links first).
  {
    std::vector<double> y(static_cast<std::size_t>(p.rows()));
    for (int r = 0; r < p.rows(); ++r) y[static_cast<std::size_t>(r)] = 1.0 / p.row_capacity(r);
    oracle.set_prices(y);
    for (int r : p.roots) {
      ForestColumn c;
      if (!(oracle.price(r, c) < std::numeric_limits<double>::infinity())) no_tree(topo, p, r);
      set.insert(std::move(c));
    }
  }
  RefitResult lp;
  WeightFit fit(p, cols);
  for (std::size_t j = 0; j < cols.size(); ++j) fit.add(j);
  for (out.rounds = 0; out.rounds < opt.max_rounds; ++out.rounds) {
    lp = fit.solve();
    ++out.refits;
    out.pivots += lp.pivots;
    out.lp_rows = lp.rows;
    if (!lp.certified)
      throw std::runtime_error("solve_packed_forest_exact: the restricted LP of round " +
                               std::to_string(out.rounds) + " failed its optimality check (" +
                               std::to_string(cols.size()) + " columns, " +
                               std::to_string(lp.rows) + " rows)");
    oracle.set_prices(lp.y);
    bool added = false;
    double min_cost = std::numeric_limits<double>::infinity();
    for (int r : p.roots) {
      ForestColumn c;
      const double cost = oracle.price(r, c);
      min_cost = std::min(min_cost, cost);
      if (cost < 1.0 - opt.tolerance) {
        bool fresh = false;
        const std::size_t j = set.insert(std::move(c), &fresh);
        if (fresh) fit.add(j), added = true;
      }
    }
    if (out.exact_oracle && min_cost > 0) {
      // y / min_cost is dual feasible: every pair costs >= 1 under it.
      const double ub = lp.dual_value / min_cost;
      out.upper_bound_GBps = out.upper_bound_GBps < 0 ? ub : std::min(out.upper_bound_GBps, ub);
    }
    if (!added) {
      ++out.rounds;
      break;
    }
  }
  out.columns = cols.size();
  out.oracle_calls = oracle.calls();
  out.optimum_found_GBps = lp.value;
  if (out.upper_bound_GBps >= 0 && lp.value > out.upper_bound_GBps * (1 + 1e-6))
    throw std::runtime_error("solve_packed_forest_exact: solution " + std::to_string(lp.value) +
                             " GB/s exceeds its certified bound " +
                             std::to_string(out.upper_bound_GBps));
  const auto pr = prune(fit, lp.x, lp.value, opt.max_pairs, opt.max_pairs_per_root, opt.prune_loss);
  out.pivots += pr.pivots;
  out.refits += pr.refits;
  add_pairs(p, cols, pr.x, out);
  sym.expand(out);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace ccoll::forest
