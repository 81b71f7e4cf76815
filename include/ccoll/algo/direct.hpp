// ccoll/algo/direct.hpp: the direct logical topology policy (every rank exchanges with every
// other rank in one hop: reduce-scatter, then all-gather); see plan/direct.hpp. For the other
// collectives (req.collective) their one-hop forms: plan/reduce_scatter.hpp, plan/all_gather.hpp
// and plan/rooted.hpp (the root sends to, or receives from, every rank directly).
#pragma once

#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/all_gather.hpp"
#include "ccoll/plan/direct.hpp"
#include "ccoll/plan/reduce_scatter.hpp"
#include "ccoll/plan/rooted.hpp"

namespace ccoll::algo {

struct Direct {
  static constexpr std::string_view name = "direct";
  static plan::Plan build(const plan::PlanRequest& req) {
    switch (req.collective) {
      case plan::Collective::reduce_scatter:
        return plan::build_direct_reduce_scatter(req);
      case plan::Collective::all_gather:
        return plan::build_direct_all_gather(req);
      case plan::Collective::broadcast:
        return plan::build_direct_broadcast(req);
      case plan::Collective::reduce:
        return plan::build_direct_reduce(req);
      case plan::Collective::allreduce:
        break;
    }
    return plan::build_direct(req);
  }
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
