// ccoll/algo/direct.hpp: the direct logical topology policy (every rank exchanges with every
// other rank in one hop: reduce-scatter, then all-gather); see plan/direct.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/plan/direct.hpp"

namespace ccoll::algo {

struct Direct {
  static constexpr std::string_view name = "direct";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_direct(req); }
};

static_assert(LogicalTopology<Direct>);

}  // namespace ccoll::algo

CCOLL_REGISTER_ALGORITHM(
    Direct,
    ccoll::algo::Algorithm{
        "direct", "one hop: every rank reduces its 1/P share from all others, then sends it to all",
        false, true, &ccoll::algo::registered_stateless<ccoll::algo::Direct>})
