// ccoll/algo/one_shot.hpp: the one-shot logical topology policy (every rank sends its input to
// every other rank and reduces all inputs itself: one hop, for small messages); see
// plan/one_shot.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/plan/one_shot.hpp"

namespace ccoll::algo {

struct OneShot {
  static constexpr std::string_view name = "oneshot";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_one_shot(req); }
};

static_assert(LogicalTopology<OneShot>);

}  // namespace ccoll::algo

CCOLL_REGISTER_ALGORITHM(
    OneShot,
    ccoll::algo::Algorithm{
        "oneshot",
        "one hop for small messages: every rank sends its input to all and reduces all P inputs "
        "(P <= 16)",
        false, true, &ccoll::algo::registered_stateless<ccoll::algo::OneShot>})
