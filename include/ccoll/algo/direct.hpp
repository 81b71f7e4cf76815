// ccoll/algo/direct.hpp: the direct logical topology policy (every rank exchanges with every
// other rank in one hop: reduce-scatter, then all-gather); see plan/direct.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/direct.hpp"

namespace ccoll::algo {

struct Direct {
  static constexpr std::string_view name = "direct";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_direct(req); }
};

static_assert(LogicalTopology<Direct>);

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm direct_algorithm() {
  return Algorithm{
      .name = "direct",
      .description =
          "one hop: every rank reduces its 1/P share from all others, then sends it to all",
      .make = &registered_stateless<Direct>};
}

}  // namespace ccoll::algo
