// ccoll/algo/tree.hpp: the single binary tree logical topology policy (heap layout, one tree
// per channel); the schedule's req.overlap picks [C-Cube]'s overlapped C1 (Sec. III-C) or the
// phased baseline. See plan/tree.hpp. Broadcast and reduce (req.collective): the binary tree
// rooted at req.root (plan/rooted_trees.hpp).
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/rooted_trees.hpp"
#include "ccoll/plan/tree.hpp"

namespace ccoll::algo {

struct Tree {
  static constexpr std::string_view name = "tree";
  static plan::Plan build(const plan::PlanRequest& req) {
    if (req.collective == plan::Collective::broadcast) return plan::build_tree_broadcast(req);
    if (req.collective == plan::Collective::reduce) return plan::build_tree_reduce(req);
    return plan::build_tree(req);
  }
};

static_assert(LogicalTopology<Tree>);

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm tree_algorithm() {
  return Algorithm{.name = "tree",
                   .description =
                       "one binary tree (heap layout): reduce to rank 0, broadcast back; "
                       "phased by default ([C-Cube] baseline B)",
                   .default_overlap = false,
                   .make = &registered_stateless<Tree>};
}

}  // namespace ccoll::algo
