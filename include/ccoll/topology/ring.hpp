// ccoll/topology/ring.hpp: the ring logical topology policy (ranks 0..P-1, req.nchannels rings,
// odd channels reversed); see plan/ring.hpp for the schedule it builds.
#pragma once

#include <string_view>

#include "ccoll/plan/ring.hpp"
#include "ccoll/topology/concepts.hpp"

namespace ccoll::topology {

struct Ring {
  static constexpr std::string_view name = "ring";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_ring(req); }
};

static_assert(LogicalTopology<Ring>);

}  // namespace ccoll::topology
