// ccoll/topology/direct.hpp: the direct logical topology policy (every rank exchanges with every
// other rank in one hop: reduce-scatter, then all-gather); see plan/direct.hpp.
#pragma once

#include <string_view>

#include "ccoll/plan/direct.hpp"
#include "ccoll/topology/concepts.hpp"

namespace ccoll::topology {

struct Direct {
  static constexpr std::string_view name = "direct";
  static plan::Plan build(const plan::PlanRequest& req) { return plan::build_direct(req); }
};

static_assert(LogicalTopology<Direct>);

}  // namespace ccoll::topology
