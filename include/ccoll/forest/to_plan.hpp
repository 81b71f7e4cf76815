// ccoll/forest/to_plan.hpp: a packed forest (packed_forest.hpp) as an executable Plan.
//
// Ranks are compute nodes in node order: forest_ranks() takes the nodes the forest touches (every
// active node, and every inactive node some tree uses as a relay: an inactive plan rank that
// forwards without contributing or receiving output); compute_ranks() takes every compute node of
// the graph, a rank set that does not depend on the forest (a node no tree touches gets empty
// programs), which is what a communicator created before planning needs. Each (reduce tree,
// broadcast tree) pair of the forest becomes one plan::TreeSpec carrying a share of the elements
// proportional to its weight ([TopoSync], Property 3); plan/tree.hpp turns it into one channel (two
// with req.overlap). Tree edges through switches, NICs or CPUs are plain connections between the
// two ranks: the route they travel is physical/graph.hpp's route(), which the simulator charges.
// The overlapped schedule of [TopoSync] (K broadcast trees during the reduce stage) runs as
// req.overlap = true: every tree then reduces and broadcasts concurrently, chunk by chunk.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/block_trees.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/tree.hpp"

namespace ccoll::forest {

// Which physical node each plan rank runs on.
struct RankMap {
  std::vector<int> rank_node;  // rank -> node index
  std::vector<int> node_rank;  // node index -> rank (-1: not a rank)
  std::vector<bool> active;    // per rank
  int rank_of(int node) const { return node_rank[physical::PhysicalTopology::idx(node)]; }
};

inline RankMap forest_ranks(const physical::PhysicalTopology& topo, const PackedForest& f) {
  std::vector<bool> used(topo.nodes.size(), false);
  for (int v : f.active) used[physical::PhysicalTopology::idx(v)] = true;
  for (const auto& p : f.pairs) {
    for (auto [a, b] : p.reduce_edges)
      used[physical::PhysicalTopology::idx(a)] = used[physical::PhysicalTopology::idx(b)] = true;
    for (auto [a, b] : p.broadcast_edges)
      used[physical::PhysicalTopology::idx(a)] = used[physical::PhysicalTopology::idx(b)] = true;
  }
  RankMap m;
  m.node_rank.assign(topo.nodes.size(), -1);
  for (int v = 0; v < topo.node_count(); ++v)
    if (used[physical::PhysicalTopology::idx(v)]) {
      m.node_rank[physical::PhysicalTopology::idx(v)] = static_cast<int>(m.rank_node.size());
      m.rank_node.push_back(v);
      m.active.push_back(topo.is_active(v));
    }
  return m;
}

inline RankMap compute_ranks(const physical::PhysicalTopology& topo) {
  RankMap m;
  m.node_rank.assign(topo.nodes.size(), -1);
  for (int v : topo.compute_nodes()) {
    m.node_rank[physical::PhysicalTopology::idx(v)] = static_cast<int>(m.rank_node.size());
    m.rank_node.push_back(v);
    m.active.push_back(topo.is_active(v));
  }
  return m;
}

// Max-min fair link sharing (the simulator's, and that of concurrent channels on real links)
// gives the flows on a link equal rates, not rates in proportion to their trees' planned weights,
// so in a tree set with unequal shares the heaviest trees fall behind and finish last. Cutting
// every tree into round(share / unit) copies (unit = total share / target, at least one copy)
// gives all channels about the same share; the planned rates are then feasible with equal rates
// per flow, and max-min fairness, which maximises the smallest rate, gives every flow at least
// its planned one. target <= 0 keeps one channel per tree.
// (Any tree type with a `share`: plan::TreeSpec, plan::BlockTree.)
template <class Tree>
std::vector<Tree> equal_rate_trees(const std::vector<Tree>& specs, int target) {
  if (target <= 0 || specs.size() < 2) return specs;
  double total = 0;
  for (const auto& t : specs) total += t.share;
  if (!(total > 0) || !std::isfinite(total)) return specs;
  const double unit = total / target;
  std::vector<Tree> out;
  for (const auto& t : specs) {
    const long n = std::max(1L, std::lround(t.share / unit));
    for (long k = 0; k < n; ++k) {
      out.push_back(t);
      out.back().share = t.share / static_cast<double>(n);
    }
  }
  return out;
}

inline std::vector<plan::TreeSpec> forest_tree_specs(const PackedForest& f, const RankMap& m) {
  std::vector<plan::TreeSpec> specs;
  const auto n = m.rank_node.size();
  for (const auto& p : f.pairs) {
    plan::TreeSpec s;
    s.root = m.rank_of(p.root);
    s.reduce_parent.assign(n, -1);
    s.broadcast_parent.assign(n, -1);
    for (auto [a, b] : p.reduce_edges)
      s.reduce_parent[static_cast<std::size_t>(m.rank_of(a))] = m.rank_of(b);
    for (auto [a, b] : p.broadcast_edges)
      s.broadcast_parent[static_cast<std::size_t>(m.rank_of(b))] = m.rank_of(a);
    s.share = std::isfinite(p.weight_GBps) ? p.weight_GBps : 1.0;
    specs.push_back(std::move(s));
  }
  return specs;
}

// A `split` that asks tree_plan_shape() to choose the channels (and, with req.nchunks 0, the
// chunks) of a tree set's plan.
inline constexpr int kAutoSplit = -1;
// The steps (channels x ranks x steps per rank) a plan shaped by tree_plan_shape() stays within:
// building, verifying and simulating a step takes 3-8 microseconds (more with more concurrent
// flows) and about 130 bytes, so this keeps a default plan to about half a second and 10 MB on
// one core.
inline constexpr double kDefaultPlanSteps = 65536;  // 2^16
// Chunks that the pipeline model says buy less than this fraction of the time are not added, and
// trees cut this close to equal shares count as equal.
inline constexpr double kChunkTimeSlack = 0.01;
// The split when no smaller one cuts the trees into equal shares: channels beyond the trees let
// fair sharing hide one channel's latency and pipeline fill behind the others' transfers, which
// the pipeline model does not see (docs/simulator.md, "Trees of unequal weight").
inline constexpr int kAutoSplitTarget = 64;

// The channels and chunks of a plan for a set of trees, and what the model predicts they cost.
struct TreePlanShape {
  int split = 0;             // equal_rate_trees' target
  double channels = 0;       // trees after cutting (overlapped plans use two channels per tree)
  std::uint64_t chunks = 1;  // per channel (of the channel with the largest share)
  std::uint64_t wanted_chunks = 1;  // what the model alone would take (chunks unless limited)
  double steps = 0;  // estimated: sum over channels of ranks in the tree x 2 x chunks
  // Predicted time relative to the best shape searched without the step limit (>= 1):
  // equal-rate imbalance times the pipeline's fill and latency overhead.
  double cost = 1;
  bool limited = false;  // the step limit, not the model, set the chunks
};

namespace shape_detail {

// Longest path (in edges) from a rank of a tree to its root along `parent` (-1: none).
inline double tree_height(const std::vector<plan::Rank>& parent, plan::Rank root) {
  std::size_t most = 0;
  for (std::size_t r = 0; r < parent.size(); ++r) {
    std::size_t d = 0;
    for (plan::Rank u = static_cast<plan::Rank>(r);
         u != root && u >= 0 && static_cast<std::size_t>(u) < parent.size() && d <= parent.size();
         u = parent[static_cast<std::size_t>(u)])
      ++d;
    most = std::max(most, d);
  }
  return static_cast<double>(most);
}

inline double ranks_in(const plan::TreeSpec& t) {
  double n = 1;  // the root
  for (auto p : t.reduce_parent) n += p >= 0 ? 1 : 0;
  return n;
}

}  // namespace shape_detail

// Chooses the equal-rate split of `specs` (trees with shares) and the chunks per channel for
// `req`. An explicit split (>= 0) or req.nchunks (> 0) is kept as given and only estimated.
// Otherwise the split is the smallest from one channel per tree up that cuts the trees into
// channels of equal share within kChunkTimeSlack (cutting into C channels whose largest share is c
// leaves the plan c C / total slower than the weights under fair sharing: equal_rate_trees), and
// kAutoSplitTarget where none below it does; fewer (down to one per tree) where even one chunk per
// channel would exceed `max_steps`; the chunks are the fewest whose pipeline time
// (plan/chunking.hpp, for the largest channel) is within kChunkTimeSlack of the model's optimum,
// at most what keeps the plan within `max_steps`. Trees of equal weight thus get one channel each,
// and a graph without latencies, whose model optimum is thousands of chunks, a few hundred.
inline TreePlanShape tree_plan_shape(const std::vector<plan::TreeSpec>& specs,
                                     const plan::PlanRequest& req, int split,
                                     double max_steps = kDefaultPlanSteps) {
  TreePlanShape best;
  if (specs.empty()) return best;
  double total = 0, fill = 0;
  for (const auto& t : specs) {
    total += t.share;
    const auto& down = t.broadcast_parent.empty() ? t.reduce_parent : t.broadcast_parent;
    fill = std::max(fill, shape_detail::tree_height(t.reduce_parent, t.root) +
                              shape_detail::tree_height(down, t.root));
  }
  if (!(total > 0) || !std::isfinite(total)) total = 0;
  const double per_chunk = req.overlap ? 1.0 : 2.0;
  const double bytes = static_cast<double>(req.count) * static_cast<double>(req.elem_size);
  const auto k = static_cast<int>(specs.size());
  // One split: its channels, chunks and steps, its predicted time relative to the bandwidth-only
  // time of the trees' weights, and that time with the model's own chunks.
  struct Option {
    int split;
    double time, channels, steps, unbounded, imbalance;
    std::uint64_t chunks, wanted;
    bool limited;
  };
  const auto weigh = [&](int target) {
    const auto cut = equal_rate_trees(specs, target);
    double largest = 0, steps_per_chunk = 0;
    for (const auto& t : cut) {
      largest = std::max(largest, t.share);
      steps_per_chunk += 2 * shape_detail::ranks_in(t);
    }
    const double channels = static_cast<double>(cut.size());
    const double imbalance = total > 0 ? largest * channels / total : 1.0;
    const double frac = total > 0 ? largest / total : 1.0;
    const auto elems =
        static_cast<std::uint64_t>(std::max(1.0, std::ceil(static_cast<double>(req.count) * frac)));
    const double n = bytes * frac;
    const auto model = [&](double chunks) {  // pipeline time over its bandwidth-only part
      const double ideal = per_chunk * req.beta_s_per_byte * n;
      return plan::pipeline_time(req.alpha_s, req.beta_s_per_byte, fill, per_chunk, n, chunks) /
             (ideal > 0 ? ideal : 1.0);
    };
    std::uint64_t chunks = plan::resolve_chunks(req, elems, 1, fill, per_chunk);
    const double unbounded = imbalance * model(static_cast<double>(chunks));
    std::uint64_t wanted = chunks;
    bool limited = false;
    if (req.nchunks == 0) {
      // The fewest chunks within the slack of the model's choice (time falls as chunks rise to it).
      const double goal = model(static_cast<double>(chunks)) * (1 + kChunkTimeSlack);
      std::uint64_t lo = 1, hi = chunks;
      while (lo < hi) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        if (model(static_cast<double>(mid)) <= goal)
          hi = mid;
        else
          lo = mid + 1;
      }
      chunks = lo;
      wanted = chunks;
      const auto fit = static_cast<std::uint64_t>(
          std::max(1.0, std::floor(max_steps / std::max(1.0, steps_per_chunk))));
      if (chunks > fit) chunks = fit, limited = true;
      const std::uint64_t slot_elems = req.elem_size ? req.slot_bytes / req.elem_size : 0;
      chunks = std::max(chunks, plan::min_chunks_for_slots(elems, 1, slot_elems));
      chunks = std::min(chunks, elems);
    }
    return Option{target,
                  imbalance * model(static_cast<double>(chunks)),
                  channels * (req.overlap ? 2 : 1),
                  steps_per_chunk * static_cast<double>(chunks),
                  unbounded,
                  imbalance,
                  chunks,
                  wanted,
                  limited};
  };
  const int fallback = std::max(kAutoSplitTarget, k);
  Option pick = weigh(split >= 0 ? split : fallback);
  if (split < 0) {
    for (int t = k; t < fallback; ++t)
      if (const Option o = weigh(t); o.imbalance <= 1 + kChunkTimeSlack) {
        pick = o;
        break;
      }
    // One chunk per channel can still exceed the budget when the trees span many ranks: fewer
    // channels then, down to one per tree, the most that fit.
    for (int t = pick.split - 1; pick.steps > max_steps && t >= k; --t)
      if (const Option o = weigh(t); o.steps < pick.steps) pick = o;
  }
  best.split = pick.split;
  best.channels = pick.channels;
  best.chunks = pick.chunks;
  best.wanted_chunks = pick.wanted;
  best.steps = pick.steps;
  best.cost = pick.unbounded > 0 ? pick.time / pick.unbounded : 1.0;
  best.limited = pick.limited;
  return best;
}

// The plan of trees `specs` over ranks whose activity is `active`: cut into about `split`
// equal-rate channels (equal_rate_trees; 0: one channel per tree), or, with kAutoSplit, into the
// channels tree_plan_shape() chooses within `max_steps`, its chunks a cap on every channel's (a
// channel with a smaller share keeps the fewer chunks the model gives it).
inline plan::Plan tree_set_plan(plan::PlanRequest req, const std::vector<plan::TreeSpec>& specs,
                                const std::vector<bool>& active, int split,
                                double max_steps = kDefaultPlanSteps) {
  if (split < 0) {
    const TreePlanShape shape = tree_plan_shape(specs, req, split, max_steps);
    if (req.nchunks == 0) req.max_chunks = static_cast<std::uint32_t>(shape.chunks);
    split = shape.split;
  }
  return plan::build_trees(req, equal_rate_trees(specs, split), active);
}

// The forest's plan over the ranks of `m`, every tree cut into about `split` equal-rate channels
// (equal_rate_trees; 0: one channel per tree; kAutoSplit: tree_set_plan's choice); req.nranks is
// set to the number of ranks.
inline plan::Plan forest_plan(const PackedForest& f, const RankMap& m, plan::PlanRequest req,
                              int split) {
  req.nranks = static_cast<plan::Rank>(m.rank_node.size());
  return tree_set_plan(req, forest_tree_specs(f, m), m.active, split);
}

// Trees carrying less than this fraction of their root's block are left out of a block plan (the
// others share it): a tree of a few elements costs a channel and its latency, and a reference
// plan (runtime/plan_cache.hpp) might give it none.
inline constexpr double kMinBlockTreeShare = 1e-3;

// The reduce-scatter or reduce (reduce trees), all-gather or broadcast (broadcast trees) plan of an
// equal-share forest (equal_share.hpp; for reduce and broadcast, the forest of req.root) over the
// ranks of `m`: each root's trees split its block, or the buffer, by weight (plan/block_trees.hpp).
// `split` > 0 cuts the trees into about that many channels of equal rate (equal_rate_trees' rule,
// so that max-min fair sharing of a link gives each its planned rate), kAutoSplit the fewest from
// one per tree up to kAutoSplitTarget that are equal within kChunkTimeSlack, 0 one channel per
// tree. req.nranks is set to the number of ranks.
inline plan::Plan forest_block_plan(const PackedForest& f, const RankMap& m, plan::PlanRequest req,
                                    plan::Collective coll, int split) {
  req.nranks = static_cast<plan::Rank>(m.rank_node.size());
  const auto n = m.rank_node.size();
  const std::map<int, double> chi = f.chi();
  std::vector<plan::BlockTree> trees;
  for (const auto& p : f.pairs) {
    const double w = std::isfinite(p.weight_GBps) ? p.weight_GBps : 1.0;
    const double whole =
        chi.count(p.root) != 0 && std::isfinite(chi.at(p.root)) ? chi.at(p.root) : w;
    if (whole > 0 && w < kMinBlockTreeShare * whole) continue;
    plan::BlockTree t;
    t.root = m.rank_of(p.root);
    t.parent.assign(n, -1);
    if (plan::reduces(coll))
      for (auto [a, b] : p.reduce_edges)
        t.parent[static_cast<std::size_t>(m.rank_of(a))] = m.rank_of(b);
    else
      for (auto [a, b] : p.broadcast_edges)
        t.parent[static_cast<std::size_t>(m.rank_of(b))] = m.rank_of(a);
    t.share = w;
    trees.push_back(std::move(t));
  }
  const auto cut = [&](int target) { return equal_rate_trees(trees, target); };
  const auto imbalance = [](const std::vector<plan::BlockTree>& ts) {
    double total = 0, largest = 0;
    for (const auto& t : ts) total += t.share, largest = std::max(largest, t.share);
    return total > 0 ? largest * static_cast<double>(ts.size()) / total : 1.0;
  };
  std::vector<plan::BlockTree> channels = trees;
  if (split > 0) {
    channels = cut(split);
  } else if (split < 0) {
    const int from = static_cast<int>(trees.size());
    channels = cut(std::max(kAutoSplitTarget, from));
    for (int t = from; t < kAutoSplitTarget; ++t)
      if (auto c = cut(t); imbalance(c) <= 1 + kChunkTimeSlack) {
        channels = std::move(c);
        break;
      }
  }
  return plan::build_block_trees(req, coll, channels, m.active, "forest");
}

// The forest's plan over the ranks it touches; req.nranks is set to the number of ranks (see
// forest_ranks()).
inline plan::Plan forest_plan(const physical::PhysicalTopology& topo, const PackedForest& f,
                              plan::PlanRequest req, RankMap* ranks = nullptr) {
  RankMap m = forest_ranks(topo, f);
  req.nranks = static_cast<plan::Rank>(m.rank_node.size());
  auto plan = plan::build_trees(req, forest_tree_specs(f, m), m.active);
  if (ranks) *ranks = std::move(m);
  return plan;
}

}  // namespace ccoll::forest
