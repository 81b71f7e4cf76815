// ccoll/algo/recursive_doubling.hpp: the recursive-doubling logical topology policy (log2 P
// pairwise exchanges of the whole buffer, for small messages); see plan/recursive_doubling.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/plan/recursive_doubling.hpp"

namespace ccoll::algo {

struct RecursiveDoubling {
  static constexpr std::string_view name = "recdoubling";
  static plan::Plan build(const plan::PlanRequest& req) {
    return plan::build_recursive_doubling(req);
  }
};

static_assert(LogicalTopology<RecursiveDoubling>);

}  // namespace ccoll::algo

CCOLL_REGISTER_ALGORITHM(
    RecursiveDoubling,
    ccoll::algo::Algorithm{
        "recdoubling",
        "log2 P pairwise exchanges of the whole buffer, for small messages (extra ranks fold in)",
        false, true, &ccoll::algo::registered_stateless<ccoll::algo::RecursiveDoubling>})
