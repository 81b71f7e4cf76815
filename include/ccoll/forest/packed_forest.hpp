// ccoll/forest/packed_forest.hpp: [TopoSync]'s reduce/broadcast tree packing on any physical
// graph, solved fast: solve_packed_forest().
//
// For every active worker v, reduce trees (data flows towards v) and broadcast trees (away from
// v) span the active workers; inactive compute nodes may be relays (directed Steiner trees).
// Tree weights w (GB/s) maximise sum_v chi(v) subject to link capacities ([TopoSync] problem
// (4); (8) for the overlapped schedule); each tree then carries a share of the elements
// proportional to its weight (Property 3). problem.hpp states the LP, its rows (links of the
// physical routes the tree edges travel) and columns (pairs of trees of one root).
//
// Schedules and what the physics gives (types.hpp):
//   - phased: all reduces, then all broadcasts; each stage has the full link capacity
//     (problem (4), time 2|C| / sum chi).
//   - overlapped: problem (8): a broadcast tree either runs during the reduce stage and shares
//     capacity with the reduce trees (K) or runs afterwards with the full capacity (J);
//     time 2|C| / sum chi.
//   - concurrent: reduce and broadcast of every chunk run at the same time for the whole
//     collective (the pipelined schedule of [C-Cube]'s C1 and of plan/tree.hpp with overlap):
//     one capacity pool, time |C| / sum chi.
// Overlap and bandwidth: overlapped >= phased always (J trees alone are a phased forest), with
// equality on a symmetric full-duplex graph (the reduce stage alone bounds sum chi by the best
// reduce packing, and its mirror is an equally good broadcast packing); phased / 2 <= concurrent
// <= phased always, i.e. the concurrent schedule's bandwidth-only time lies between the phased
// time and half of it. On every preset measured a packed forest already keeps both directions of
// its links busy, concurrent = phased / 2 exactly, and overlap buys latency and gradient
// turnaround, not bandwidth; a star around a forwarding GPU is a symmetric graph where it does buy
// bandwidth. forest_test.cpp asserts these facts; docs/results/forest-planner.md measures them.
//
// Method (ForestMethod::mwu, the default):
//   1. Multiplicative weights (mwu_packing.hpp: Garg-Koenemann with Fleischer's phases) with the
//      pricing oracle of problem.hpp (Edmonds' algorithm with all workers active, the
//      directed-Steiner heuristics of steiner.hpp otherwise) finds the trees: 30 coarse phases
//      (epsilon 0.2) visit every root's cheapest pairs under ever-changing link prices. Alone it
//      would need thousands of phases for the last percent.
//   2. The weights of the pairs found are re-fitted exactly by an LP over them (refit.hpp),
//      as [TopoSync] solves its LP over the trees Alg. 1 found.
//   3. Certificate and polish: with an exact oracle, any prices y >= 0 certify OPT <= capacities.y
//      / (cheapest pair under y). While the best bound is not within target_gap, the roots are
//      priced under smoothed duals and under 1/capacity on saturated links, the pairs the LP's
//      duals price below 1 join the LP, and 2-3 repeat from the previous basis (column
//      generation warm-started by step 1; at most polish_rounds rounds and max_pivots pivots).
//      With relays, one exact pricing at the end certifies a bound when they are few.
//   4. Pruning (refit.hpp): light pairs dropped within prune_loss, optional caps on pairs.
// Budgets count work, not time: the plan is a function of its inputs, the same on every rank.
// The result is feasible by construction (weights are scaled to the largest feasible multiple if
// the simplex were ever inaccurate), so total_GBps never exceeds the certified upper bound.
// ForestMethod::column_generation runs the exact reference instead (exact.hpp).
// Scale: on a cluster of identical machines, steps 1-4 run on the LP reduced by the rotation of
// the machines (symmetry.hpp: the same optimum, M times fewer rows and roots), certified also by
// the cut prices of problem.hpp; above ForestOptions::hierarchical_above compute nodes a cluster is
// planned hierarchically (hierarchical.hpp), with the flat solver on its two small problems.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/forest/exact.hpp"
#include "ccoll/forest/hierarchical.hpp"
#include "ccoll/forest/problem.hpp"
#include "ccoll/forest/refit.hpp"
#include "ccoll/forest/symmetry.hpp"
#include "ccoll/forest/types.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/solve/mwu_packing.hpp"

namespace ccoll::forest {

namespace forest_detail {

// mwu_pack's oracle interface over the roots of a forest problem.
struct RootOracle {
  ForestOracle& oracle;
  const ForestProblem& problem;
  void set_prices(const std::vector<double>& y) { oracle.set_prices(y); }
  double price(int group, ForestColumn& out) {
    return oracle.price(problem.roots[static_cast<std::size_t>(group)], out);
  }
  bool exact() const { return oracle.exact(); }
};

}  // namespace forest_detail

// Steps 1-4 of the header comment on the whole graph (or its quotient by the machines' rotation).
inline PackedForest solve_packed_forest_flat(const physical::PhysicalTopology& topo,
                                             const ForestOptions& opt = {}) {
  using namespace forest_detail;
  if (opt.method == ForestMethod::column_generation) return solve_packed_forest_exact(topo, opt);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const ForestProblem full = make_forest_problem(topo, opt.schedule);
  PackedForest out = start_forest(full, opt.schedule, ForestMethod::mwu);
  if (single_worker(full, out)) return out;
  const MachineRotation rot =
      opt.symmetry && full.n >= opt.symmetry_from ? find_machine_rotation(topo) : MachineRotation{};
  const SymmetricProblem sym = reduce_by_rotation(full, rot);
  const ForestProblem& p = sym.order() > 1 ? sym.quotient : full;
  solve::SteinerOptions so = opt.steiner;
  so.exact_limit = std::min(so.exact_limit, opt.mwu_exact_relays);
  ForestOracle oracle(p, so);
  out.exact_oracle = oracle.exact();

  // 1. Multiplicative weights.
  std::vector<ForestColumn> cols;
  RootOracle ro{oracle, p};
  solve::MwuOptions mo;
  mo.epsilon = opt.epsilon;
  mo.max_phases = opt.max_phases;
  mo.max_seconds = opt.max_seconds * 0.25;  // infinite by default
  mo.target_gap = opt.target_gap;
  const solve::MwuResult mwu =
      mwu_pack(p.capacities(), static_cast<int>(p.roots.size()), ro, cols, mo);
  out.augmentations = mwu.augmentations;
  out.mwu_GBps = mwu.value;
  out.rounds = mwu.phases;
  if (mwu.no_column >= 0) no_tree(topo, p, p.roots[static_cast<std::size_t>(mwu.no_column)]);
  std::vector<double> best_x = mwu.x;
  double best = mwu.value;
  double bound = out.exact_oracle ? mwu.upper_bound : std::numeric_limits<double>::infinity();

  // 2-3. Exact weights for the pairs found; certify; add the pairs the duals price below 1.
  // Any prices y >= 0 certify OPT <= capacities.y / (cheapest pair under y) when the oracle is
  // exact, so every pricing round is also a bound. Pricing uses smoothed duals (Wentges): a mix
  // of the LP's duals and the prices of the best bound so far; the LP's duals alone jump between
  // degenerate vertices and make column generation tail off. One more candidate is tried every
  // round: 1 / capacity on the links the best solution saturates, 0 elsewhere, which is the
  // optimal dual of the cut-like bounds that decide symmetric machines (all NICs, say).
  const std::vector<double> cap = p.capacities();
  std::vector<double> center = mwu.bound_prices;  // normalised: cheapest pair costs 1
  ColumnSet set(cols);
  WeightFit fit(p, cols);
  for (std::size_t j = 0; j < cols.size(); ++j) fit.add(j);
  // Prices the roots under y; adds the pairs the LP's duals `lp_y` price below 1; tightens the
  // bound. Returns whether a pair was added.
  const auto price_at = [&](const std::vector<double>& y, const std::vector<double>& lp_y) {
    oracle.set_prices(y);
    double min_cost = std::numeric_limits<double>::infinity();
    bool added = false;
    for (int root : p.roots) {
      ForestColumn c;
      const double cost = oracle.price(root, c);
      min_cost = std::min(min_cost, cost);
      double lp_cost = 0;
      for (const auto& [row, a] : c.usage) lp_cost += a * lp_y[static_cast<std::size_t>(row)];
      if (lp_cost < 1.0 - 1e-9) {
        bool fresh = false;
        const std::size_t j = set.insert(std::move(c), &fresh);
        if (fresh) fit.add(j), added = true;
      }
    }
    if (out.exact_oracle && min_cost > 0) {
      double d = 0;
      for (std::size_t i = 0; i < y.size(); ++i) d += cap[i] * y[i];
      if (d / min_cost < bound) {
        bound = d / min_cost;
        center = y;
        for (auto& v : center) v /= min_cost;
      }
    }
    return added;
  };
  // 1 / capacity on the links x saturates, 0 elsewhere.
  const auto tight_prices = [&](const std::vector<double>& x) {
    std::vector<double> load(cap.size(), 0.0), t(cap.size(), 0.0);
    for (std::size_t j = 0; j < cols.size() && j < x.size(); ++j)
      if (x[j] > 0)
        for (const auto& [row, a] : cols[j].usage) load[static_cast<std::size_t>(row)] += a * x[j];
    for (std::size_t i = 0; i < cap.size(); ++i)
      t[i] = load[i] >= cap[i] * (1 - 1e-6) ? 1.0 / cap[i] : 0.0;
    return t;
  };
  // The cut bounds, which the dual prices of the LPs rarely reach on symmetric machines.
  if (out.exact_oracle) {
    ForestColumn c;
    for (const auto& cy : cut_prices(topo, p)) {
      oracle.set_prices(cy);
      double min_cost = std::numeric_limits<double>::infinity(), d = 0;
      for (int root : p.roots) min_cost = std::min(min_cost, oracle.price(root, c));
      for (std::size_t i = 0; i < cy.size(); ++i) d += cap[i] * cy[i];
      if (min_cost > 0 && d / min_cost < bound) {
        bound = d / min_cost;
        center = cy;
        for (auto& v : center) v /= min_cost;
      }
    }
  }
  std::vector<double> y(cap.size()), last_y;
  for (int round = 0; round < opt.polish_rounds; ++round) {
    if (bound <= (1 + opt.target_gap) * best) break;
    if (static_cast<long>(out.pivots) >= opt.max_pivots) break;
    solve::LpOptions lo;
    lo.max_pivots = static_cast<std::size_t>(opt.max_pivots) - out.pivots;
    lo.max_seconds = std::max(0.0, opt.max_seconds - elapsed());
    const RefitResult r = fit.solve(lo);
    ++out.refits;
    out.pivots += r.pivots;
    out.lp_rows = r.rows;
    last_y = r.y;
    if (r.value > best) best = r.value, best_x = r.x;
    if (bound <= (1 + opt.target_gap) * best) break;
    bool added = false;
    if (out.exact_oracle) added |= price_at(tight_prices(best_x), r.y);
    if (!center.empty()) {
      for (std::size_t i = 0; i < y.size(); ++i)
        y[i] = opt.smoothing * center[i] + (1 - opt.smoothing) * r.y[i];
      added |= price_at(y, r.y);
    }
    if (!added) added = price_at(r.y, r.y);  // the smoothed prices mispriced: the LP's own
    if (!added || elapsed() > opt.max_seconds) break;
  }
  // With a heuristic oracle there is no bound yet; when the relays are few enough to enumerate
  // (steiner.exact_limit), one exact pricing of the final duals and of the saturated links
  // certifies one.
  const int relays = p.relays();
  if (!out.exact_oracle && relays <= opt.steiner.exact_limit) {
    ForestOracle exact(p, opt.steiner);
    const auto certify = [&](const std::vector<double>& yy) {
      exact.set_prices(yy);
      double min_cost = std::numeric_limits<double>::infinity(), d = 0;
      ForestColumn c;
      for (int root : p.roots) min_cost = std::min(min_cost, exact.price(root, c));
      for (std::size_t i = 0; i < yy.size(); ++i) d += cap[i] * yy[i];
      if (min_cost > 0) bound = std::min(bound, d / min_cost);
    };
    if (!last_y.empty()) certify(last_y);
    certify(tight_prices(best_x));
  }
  best_x.resize(cols.size(), 0.0);
  out.columns = cols.size();
  out.oracle_calls = oracle.calls();
  out.optimum_found_GBps = best;
  if (std::isfinite(bound)) {
    if (bound < best * (1 - 1e-6))
      throw std::logic_error("solve_packed_forest: solution " + std::to_string(best) +
                             " GB/s exceeds its certified bound " + std::to_string(bound));
    out.upper_bound_GBps = std::max(bound, best);
  }

  // 4. Fewer pairs. Under a cap on pairs, a few rounds of column generation restricted to the
  // survivors (price under their LP's duals, add, refit, cut back to the cap) let pairs that fit
  // the survivors replace some of them; on the presets this wins back up to a point of the loss
  // (docs/results/forest-planner.md), cheaply.
  auto pr = prune(fit, best_x, best, opt.max_pairs, opt.max_pairs_per_root, opt.prune_loss);
  out.pivots += pr.pivots;
  out.refits += pr.refits;
  const bool capped = opt.max_pairs > 0 || opt.max_pairs_per_root > 0;
  for (int round = 0; capped && round < opt.swap_rounds; ++round) {
    if (pr.value >= (1 - opt.prune_loss) * best) break;
    const RefitResult r = fit.solve();
    out.pivots += r.pivots;
    if (!price_at(r.y, r.y)) break;
    const RefitResult r2 = fit.solve();
    out.pivots += r2.pivots;
    auto next = prune(fit, r2.x, best, opt.max_pairs, opt.max_pairs_per_root, opt.prune_loss);
    out.pivots += next.pivots;
    out.refits += next.refits + 2;
    if (next.value > pr.value) pr = std::move(next);
    if (elapsed() > opt.max_seconds) break;
  }
  pr.x.resize(cols.size(), 0.0);
  add_pairs(p, cols, pr.x, out);
  sym.expand(out);
  out.seconds = elapsed();
  return out;
}

// The flat solver, or above opt.hierarchical_above compute nodes the hierarchical one
// (hierarchical.hpp), which falls back to the flat one where the hierarchy does not apply.
inline PackedForest solve_packed_forest(const physical::PhysicalTopology& topo,
                                        const ForestOptions& opt = {}) {
  if (opt.method == ForestMethod::mwu &&
      static_cast<long>(topo.compute_nodes().size()) > opt.hierarchical_above)
    return solve_packed_forest_hierarchical(
        topo, opt, [](const physical::PhysicalTopology& t, const ForestOptions& o) {
          return solve_packed_forest_flat(t, o);
        });
  return solve_packed_forest_flat(topo, opt);
}

}  // namespace ccoll::forest
