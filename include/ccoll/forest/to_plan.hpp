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
#include <vector>

#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/physical/graph.hpp"
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
inline std::vector<plan::TreeSpec> equal_rate_trees(const std::vector<plan::TreeSpec>& specs,
                                                    int target) {
  if (target <= 0 || specs.size() < 2) return specs;
  double total = 0;
  for (const auto& t : specs) total += t.share;
  if (!(total > 0) || !std::isfinite(total)) return specs;
  const double unit = total / target;
  std::vector<plan::TreeSpec> out;
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

// The forest's plan over the ranks of `m`, every tree cut into about `split` equal-rate channels
// (equal_rate_trees; 0: one channel per tree); req.nranks is set to the number of ranks.
inline plan::Plan forest_plan(const PackedForest& f, const RankMap& m, plan::PlanRequest req,
                              int split) {
  req.nranks = static_cast<plan::Rank>(m.rank_node.size());
  return plan::build_trees(req, equal_rate_trees(forest_tree_specs(f, m), split), m.active);
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
