// ccoll/forest/types.hpp: the vocabulary of [TopoSync]'s packed forests: schedules,
// solver options, and the result (reduce/broadcast tree pairs with weights).
//
// A packed forest assigns, for every active worker v, reduce trees (data flows towards v) and
// broadcast trees (away from v) over the compute nodes, with weights w in GB/s. chi(v) is the
// weight of v's reduce trees = the weight of v's broadcast trees ([TopoSync] problem (4)); each
// tree carries a share of the elements proportional to its weight (Property 3). The solvers
// (packed_forest.hpp: multiplicative weights, the default; exact.hpp: exact column
// generation, the reference) both return a PackedForest; to_plan.hpp turns one into a Plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "ccoll/solve/steiner.hpp"

namespace ccoll::forest {

// Which capacity a broadcast tree uses (see packed_forest.hpp for the physics):
//   phased: all reduces, then all broadcasts, each stage with the full link capacity (problem (4));
//   overlapped: [TopoSync] problem (8), a broadcast tree runs either during the reduce stage
//     (sharing its capacity, a K tree) or after it (a J tree);
//   concurrent: reduce and broadcast of every chunk run at the same time, one capacity pool.
enum class ForestSchedule : std::uint8_t { phased, overlapped, concurrent };

inline const char* to_string(ForestSchedule s) {
  switch (s) {
    case ForestSchedule::phased:
      return "phased";
    case ForestSchedule::overlapped:
      return "overlapped";
    case ForestSchedule::concurrent:
      return "concurrent";
  }
  return "?";
}

enum class ForestMethod : std::uint8_t {
  mwu,                // Garg-Koenemann multiplicative weights + weight refit (packed_forest.hpp)
  column_generation,  // exact LP by column generation (exact.hpp): the reference
};

inline const char* to_string(ForestMethod m) {
  return m == ForestMethod::mwu ? "mwu" : "column_generation";
}

struct ForestOptions {
  ForestSchedule schedule = ForestSchedule::phased;
  ForestMethod method = ForestMethod::mwu;
  // The Steiner oracle (inactive workers). The exact subset enumeration costs 2^relays Edmonds
  // runs per call: the mwu method uses it only up to mwu_exact_relays relays.
  solve::SteinerOptions steiner{};
  int mwu_exact_relays = 2;
  // Solve the LP reduced by the rotation of identical machines (symmetry.hpp) when the graph has
  // one and at least symmetry_from compute nodes: the same optimum, M times fewer rows and roots.
  // Below that the flat LP takes milliseconds, and its forests' unequal trees are what the plans
  // of small graphs are tuned for (equal_rate_trees; the reduction repeats every tree M times
  // with one weight). false: the flat LP (the reference the reduction is tested against).
  bool symmetry = true;
  int symmetry_from = 16;
  // Above this many compute nodes, a cluster of machines is planned hierarchically
  // (hierarchical.hpp: a forest over the machines composed with one inside a machine); the flat
  // LP needs a route and an oracle edge per pair of compute nodes.
  int hierarchical_above = 256;
  // The hierarchical forest couples its two levels so that every machine roots every local pair
  // in its share where that carries more, at up to machines x local pairs plan channels; it
  // does so while they number at most this (or twice the fewest-pairs coupling's).
  int balanced_pairs = 256;

  // Multiplicative weights (method mwu). The budgets count work, not time, so that a plan is a
  // function of its inputs: every rank of a job computes the same forest.
  double epsilon = 0.2;       // price step: y *= 1 + epsilon at the bottleneck row
  int max_phases = 30;        // Fleischer phases (each raises the price floor by 1 + epsilon)
  double target_gap = 0.002;  // stop when certified bound <= (1 + target_gap) * total
  int polish_rounds = 30;     // column-generation rounds after the weight refit (step 3)
  // Simplex pivots of steps 2-3 (the LP stops mid-solve past it). The overlapped LP of a
  // worker-pair 8 x 4 cluster (248 rows) needs about 33,000 to reach target_gap (0.7 s); the
  // other presets stay far below.
  long max_pivots = 40000;
  double smoothing = 0.5;  // dual smoothing of those rounds (0: price the LP's duals)
  // Optional wall-clock cap on steps 1-3 (infinite by default): with it, the result depends on
  // the machine's speed and load, so ranks planning independently could disagree.
  double max_seconds = std::numeric_limits<double>::infinity();

  // Column generation (method column_generation).
  int max_rounds = 500;     // column-generation rounds
  double tolerance = 1e-7;  // a tree enters when its price is below 1 - tolerance

  // Pruning (both methods), after the weights are fitted; every pair is a plan channel. Keep at
  // most max_pairs_per_root pairs per root and max_pairs in all (0: no cap), then drop light
  // pairs while the total stays >= (1 - prune_loss) * the optimum found; weights are refitted
  // after every cut, and PackedForest::prune_loss() reports what was given up. The caps can cost
  // much more than prune_loss: the optimum of a symmetric machine spreads over many roots
  // (docs/results/forest-planner.md measures the trade-off), so none is set by default.
  int max_pairs = 0;
  int max_pairs_per_root = 0;
  double prune_loss = 0.005;
  int swap_rounds = 20;  // under a cap: column generation restricted to the survivors (mwu)
};

using TreeEdge = std::pair<int, int>;  // (from node, to node): the direction data flows

enum class TreePhase : std::uint8_t { reduce, broadcast };

// One reduce tree and one broadcast tree of the same root carrying the same elements.
struct ForestPair {
  int root = 0;                                   // node index
  std::vector<TreeEdge> reduce_edges;             // child -> parent
  std::vector<TreeEdge> broadcast_edges;          // parent -> child
  bool broadcast_shares_reduce_capacity = false;  // overlapped: a K tree of problem (8)
  double weight_GBps = 0;
};

struct ForestTree {
  int root = 0;
  TreePhase phase = TreePhase::reduce;
  bool overlapped = false;  // a broadcast tree that runs during the reduce stage
  double weight_GBps = 0;
  std::vector<TreeEdge> edges;
};

struct PackedForest {
  ForestSchedule schedule = ForestSchedule::phased;
  ForestMethod method = ForestMethod::mwu;
  std::vector<int> active;        // node indices
  std::vector<ForestPair> pairs;  // weight > 0
  double total_GBps = 0;          // sum_v chi(v) of the pairs kept
  double optimum_found_GBps = 0;  // before pruning
  // Certified upper bound on the optimum over all trees (a dual solution priced by an exact
  // oracle), or -1 when the oracle is a heuristic (some relays) and no bound is known.
  double upper_bound_GBps = -1;
  bool exact_oracle = false;
  double seconds = 0;         // planning time
  int symmetry_order = 1;     // M when solved on the quotient by a rotation of M machines
  bool hierarchical = false;  // composed from a machine-level and an intra-machine forest

  // Solver statistics.
  int rounds = 0;           // column generation rounds / MWU phases
  std::size_t columns = 0;  // distinct tree pairs generated
  std::size_t oracle_calls = 0;
  std::size_t augmentations = 0;  // MWU steps
  double mwu_GBps = 0;            // the MWU's own (scaled) solution before the weight refit
  int refits = 0;                 // LP solves of the weight refit / column generation
  std::size_t pivots = 0;         // simplex pivots, all LP solves
  std::size_t lp_rows = 0;

  // 1 - total / optimum found: what pruning gave up.
  double prune_loss() const {
    return optimum_found_GBps > 0 ? 1.0 - total_GBps / optimum_found_GBps : 0.0;
  }

  // Reduce and broadcast trees, identical trees of one root merged (weights added).
  std::vector<ForestTree> trees() const {
    std::vector<ForestTree> out;
    const auto add = [&](int root, TreePhase ph, bool ov, const std::vector<TreeEdge>& e,
                         double w) {
      auto sorted = e;
      std::sort(sorted.begin(), sorted.end());
      for (auto& t : out)
        if (t.root == root && t.phase == ph && t.overlapped == ov && t.edges == sorted) {
          t.weight_GBps += w;
          return;
        }
      out.push_back(ForestTree{root, ph, ov, w, std::move(sorted)});
    };
    for (const auto& p : pairs)
      add(p.root, TreePhase::reduce, false, p.reduce_edges, p.weight_GBps);
    for (const auto& p : pairs)
      add(p.root, TreePhase::broadcast, p.broadcast_shares_reduce_capacity, p.broadcast_edges,
          p.weight_GBps);
    return out;
  }

  // chi(v) per node index.
  std::map<int, double> chi() const {
    std::map<int, double> c;
    for (int v : active) c[v] = 0;
    for (const auto& p : pairs) c[p.root] += p.weight_GBps;
    return c;
  }

  // Bandwidth-only time of an allreduce of `bytes` (Property 2: pipelined, latency ignored).
  double time_s(double bytes) const {
    if (!(total_GBps > 0)) return std::numeric_limits<double>::infinity();
    const double stages = schedule == ForestSchedule::concurrent ? 1.0 : 2.0;
    return stages * bytes / (total_GBps * 1e9);
  }
};

}  // namespace ccoll::forest
