// ccoll/algo/one_shot.hpp: the one-shot logical topology policy (every rank sends its input to
// every other rank and reduces all inputs itself: one hop, for small messages); see
// plan/one_shot.hpp.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/one_shot.hpp"

namespace ccoll::algo {

struct OneShot {
  static constexpr std::string_view name = "oneshot";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_one_shot(req); }
};

static_assert(LogicalTopology<OneShot>);

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm one_shot_algorithm() {
  return Algorithm{
      .name = "oneshot",
      .description =
          "one hop for small messages: every rank sends its input to all and reduces all P inputs "
          "(P <= 16)",
      .make = &registered_stateless<OneShot>};
}

}  // namespace ccoll::algo
