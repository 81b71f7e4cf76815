// ccoll/algo/double_binary_tree.hpp: NCCL's double binary tree as a logical topology policy
// (two complementary trees, each carrying half of the data); see plan/double_binary_tree.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/plan/double_binary_tree.hpp"

namespace ccoll::algo {

struct DoubleBinaryTree {
  static constexpr std::string_view name = "dbtree";
  static plan::Plan build(const plan::PlanRequest& req) {
    return plan::build_double_binary_tree(req);
  }
};

static_assert(LogicalTopology<DoubleBinaryTree>);

}  // namespace ccoll::algo

CCOLL_REGISTER_ALGORITHM(
    DoubleBinaryTree,
    ccoll::algo::Algorithm{
        "dbtree", "NCCL's double binary tree: two complementary trees, half of the data each",
        false, true, &ccoll::algo::registered_stateless<ccoll::algo::DoubleBinaryTree>})
