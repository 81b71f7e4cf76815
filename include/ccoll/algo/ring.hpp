// ccoll/algo/ring.hpp: the ring logical topology policy (ranks 0..P-1, req.nchannels rings,
// odd channels reversed); see plan/ring.hpp for the schedule it builds.
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/plan/ring.hpp"

namespace ccoll::algo {

struct Ring {
  static constexpr std::string_view name = "ring";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_ring(req); }
};

static_assert(LogicalTopology<Ring>);

}  // namespace ccoll::algo

CCOLL_REGISTER_ALGORITHM(
    Ring,
    ccoll::algo::Algorithm{
        "ring",
        "P ranks in a ring: reduce-scatter then all-gather, nchannels rings (odd ones reversed)",
        false, true, &ccoll::algo::registered_stateless<ccoll::algo::Ring>})
