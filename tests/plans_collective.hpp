// tests/plans_collective.hpp: whether a registered algorithm plans a collective, for the tests
// that sweep every collective over algorithms that plan only some (the trees: allreduce,
// broadcast and reduce).
#pragma once

#include <cstdint>

#include "ccoll/algo/registered.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::testing {

// A probe of 64 elements a rank on `reg`'s ranks: a plan of collective `c`, or a ccoll::Error.
inline bool plans_collective(const algo::Registered& reg, plan::Collective c) {
  plan::PlanRequest probe;
  probe.nranks = reg.nranks();
  probe.count = static_cast<std::uint64_t>(reg.nranks()) * 64;
  probe.collective = c;
  try {
    return reg.build(probe).collective == c;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace ccoll::testing
