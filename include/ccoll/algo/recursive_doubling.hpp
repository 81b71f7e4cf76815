// ccoll/algo/recursive_doubling.hpp: the recursive-doubling logical topology policy (log2 P
// pairwise exchanges of the whole buffer, for small messages); see plan/recursive_doubling.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/recursive_doubling.hpp"

namespace ccoll::algo {

struct RecursiveDoubling {
  static constexpr std::string_view name = "recdoubling";
  static plan::Plan build(const plan::PlanRequest& req) {
    return plan::build_recursive_doubling(req);
  }
};

static_assert(LogicalTopology<RecursiveDoubling>);

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm recursive_doubling_algorithm() {
  return Algorithm{
      .name = "recdoubling",
      .description =
          "log2 P pairwise exchanges of the whole buffer, for small messages (extra ranks fold in)",
      .make = &registered_stateless<RecursiveDoubling>};
}

}  // namespace ccoll::algo
