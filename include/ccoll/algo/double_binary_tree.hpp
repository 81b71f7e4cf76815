// ccoll/algo/double_binary_tree.hpp: NCCL's double binary tree as a logical topology policy
// (two complementary trees, each carrying half of the data); see plan/double_binary_tree.hpp.
// Broadcast and reduce (req.collective): the root's peers in the two trees, each hung under the
// root (plan/rooted_trees.hpp).
//
// Registered on a physical graph ("dbtree" with a topology), the trees' positions follow the first
// embedded ring (algo/embedding.hpp), as NCCL lays its trees on its ring order, and a tree edge
// whose ends no route joins, or whose route is narrower than a path through another GPU, is
// detoured through relay ranks ([C-Cube] Sec. IV-A; double_binary_tree_with_detours, then
// algo/relay_routing.hpp for edges that need more than one relay). Its broadcast and reduce are
// the rooted trees above over the same positions, their edges relayed where no route joins them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/embedding.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/placement.hpp"
#include "ccoll/plan/rooted_trees.hpp"

namespace ccoll::algo {

struct DoubleBinaryTree {
  static constexpr std::string_view name = "dbtree";
  static plan::Plan build(const plan::PlanRequest& req) {
    if (req.collective == plan::Collective::broadcast) return plan::build_dbtree_broadcast(req);
    if (req.collective == plan::Collective::reduce) return plan::build_dbtree_reduce(req);
    return plan::build_double_binary_tree(req);
  }
};

static_assert(LogicalTopology<DoubleBinaryTree>);

// "dbtree": on abstract ranks the policy above; on a graph the detoured trees along the embedded
// ring (details(): std::shared_ptr<const DetourTrees>).
inline Registered registered_double_binary_tree(const AlgorithmRequest& req) {
  if (req.topology == nullptr) return registered_stateless<DoubleBinaryTree>(req);
  const auto rings = embed_rings(*req.topology);
  const std::vector<plan::Rank> order(rings.rings.front().begin(), rings.rings.front().end());
  auto trees =
      std::make_shared<const DetourTrees>(double_binary_tree_with_detours(*req.topology, order));
  auto build = [trees, order](const plan::PlanRequest& r) {
    if (plan::has_root(r.collective)) {
      // Broadcast and reduce: the rooted trees over the tree positions (the ring's order), with
      // the root's position; the detours' relays idle, and edges no route joins relayed by
      // with_relays (algo/registered.hpp), which reads every root's plan.
      std::vector<plan::Rank> position(order.size());
      for (std::size_t i = 0; i < order.size(); ++i)
        position[static_cast<std::size_t>(order[i])] = static_cast<plan::Rank>(i);
      if (r.root < 0 || static_cast<std::size_t>(r.root) >= order.size())
        throw_invalid_argument(-1, "root", "an active rank, below " + std::to_string(order.size()),
                               std::to_string(r.root));
      plan::PlanRequest positions = r;
      positions.nranks = static_cast<plan::Rank>(order.size());
      positions.root = position[static_cast<std::size_t>(r.root)];
      plan::Plan p = plan::relabel_ranks(DoubleBinaryTree::build(positions), order,
                                         static_cast<plan::Rank>(trees->rank_node.size()));
      p.algorithm = "dbtree";
      return p;
    }
    plan::Plan p = detour_tree_plan(*trees, r);
    p.algorithm = "dbtree";
    return p;
  };
  return Registered("dbtree", build, static_cast<int>(trees->rank_node.size()), trees->rank_node,
                    trees);
}

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm double_binary_tree_algorithm() {
  return Algorithm{
      .name = "dbtree",
      .description = "NCCL's double binary tree: two complementary trees, half of the data each",
      .make = &registered_double_binary_tree};
}

}  // namespace ccoll::algo
