// ccoll/topology/forest_plan.hpp: a packed forest (packed_forest.hpp) as an executable Plan.
//
// Ranks are the compute nodes the forest touches, in node order: every active node, and every
// inactive node some tree uses as a relay (an inactive plan rank that forwards without
// contributing or receiving output). Each (reduce tree, broadcast tree) pair of the forest becomes
// one plan::TreeSpec carrying a share of the elements proportional to its weight (seed 001,
// Property 3); plan/tree.hpp turns it into one channel (two with req.overlap). Tree edges through
// switches, NICs or CPUs are plain connections between the two ranks: the route they travel is
// physical.hpp's route(), which the simulator charges. The overlapped schedule of seed 001 (K
// broadcast trees during the reduce stage) runs as req.overlap = true: every tree then reduces and
// broadcasts concurrently, chunk by chunk.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/topology/packed_forest.hpp"
#include "ccoll/topology/physical.hpp"

namespace ccoll::topology {

// Which physical node each plan rank runs on.
struct RankMap {
  std::vector<int> rank_node;  // rank -> node index
  std::vector<int> node_rank;  // node index -> rank (-1: not a rank)
  std::vector<bool> active;    // per rank
  int rank_of(int node) const { return node_rank[PhysicalTopology::idx(node)]; }
};

inline RankMap forest_ranks(const PhysicalTopology& topo, const PackedForest& f) {
  std::vector<bool> used(topo.nodes.size(), false);
  for (int v : f.active) used[PhysicalTopology::idx(v)] = true;
  for (const auto& p : f.pairs) {
    for (auto [a, b] : p.reduce_edges)
      used[PhysicalTopology::idx(a)] = used[PhysicalTopology::idx(b)] = true;
    for (auto [a, b] : p.broadcast_edges)
      used[PhysicalTopology::idx(a)] = used[PhysicalTopology::idx(b)] = true;
  }
  RankMap m;
  m.node_rank.assign(topo.nodes.size(), -1);
  for (int v = 0; v < topo.node_count(); ++v)
    if (used[PhysicalTopology::idx(v)]) {
      m.node_rank[PhysicalTopology::idx(v)] = static_cast<int>(m.rank_node.size());
      m.rank_node.push_back(v);
      m.active.push_back(topo.is_active(v));
    }
  return m;
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

// The forest's plan; req.nranks is set to the number of ranks (see forest_ranks()).
inline plan::Plan forest_plan(const PhysicalTopology& topo, const PackedForest& f,
                              plan::PlanRequest req, RankMap* ranks = nullptr) {
  RankMap m = forest_ranks(topo, f);
  req.nranks = static_cast<plan::Rank>(m.rank_node.size());
  auto plan = plan::build_trees(req, forest_tree_specs(f, m), m.active);
  if (ranks) *ranks = std::move(m);
  return plan;
}

}  // namespace ccoll::topology
