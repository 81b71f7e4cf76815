// ccoll/algo/tree.hpp: the single binary tree logical topology policy (heap layout, one tree
// per channel); the schedule's req.overlap picks [C-Cube]'s overlapped C1 (Sec. III-C) or the
// phased baseline. See plan/tree.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/plan/tree.hpp"

namespace ccoll::algo {

struct Tree {
  static constexpr std::string_view name = "tree";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_tree(req); }
};

static_assert(LogicalTopology<Tree>);

}  // namespace ccoll::algo

CCOLL_REGISTER_ALGORITHM(Tree,
                         ccoll::algo::Algorithm{
                             "tree",
                             "one binary tree (heap layout): reduce to rank 0, broadcast back; "
                             "phased by default ([C-Cube] baseline B)",
                             false, false, &ccoll::algo::registered_stateless<ccoll::algo::Tree>})
