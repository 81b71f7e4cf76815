// ccoll/algo/double_binary_tree.hpp: NCCL's double binary tree as a logical topology policy
// (two complementary trees, each carrying half of the data); see plan/double_binary_tree.hpp.
// Broadcast and reduce (req.collective): the root's peers in the two trees, each hung under the
// root (plan/rooted_trees.hpp).
//
// Registered on a physical graph ("dbtree" with a topology), the trees' positions follow the first
// embedded ring (algo/embedding.hpp), as NCCL lays its trees on its ring order, and a tree edge
// whose ends no route joins, or whose route is narrower than a path through another GPU, is
// detoured through relay ranks ([C-Cube] Sec. IV-A; double_binary_tree_with_detours, then
// algo/relay_routing.hpp for edges that need more than one relay).
#pragma once

#include <memory>
#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/embedding.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
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
  auto trees = std::make_shared<const DetourTrees>(
      double_binary_tree_with_detours(*req.topology, rings.rings.front()));
  auto build = [trees](const plan::PlanRequest& r) {
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
