// ccoll/topology/tree.hpp: the single binary tree logical topology policy (heap layout, one tree
// per channel); the schedule's req.overlap picks seed 004's overlapped C1 or the phased baseline.
// See plan/tree.hpp.
#pragma once

#include <string_view>

#include "ccoll/plan/tree.hpp"
#include "ccoll/topology/concepts.hpp"

namespace ccoll::topology {

struct Tree {
  static constexpr std::string_view name = "tree";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_tree(req); }
};

static_assert(LogicalTopology<Tree>);

}  // namespace ccoll::topology
