// ccoll/algo/ring.hpp: the ring logical topology policy (ranks 0..P-1, req.nchannels rings,
// odd channels reversed); see plan/ring.hpp for the schedule it builds. For the other collectives
// (req.collective) it builds their ring forms: plan/reduce_scatter.hpp's and plan/all_gather.hpp's
// rings, and plan/rooted.hpp's chains from the root for broadcast and reduce (NCCL's ring
// broadcast and reduce are such chains).
//
// Registered on a physical graph ("ring" with a topology), the rings are embedded in it instead
// (algo/embedding.hpp): Hamiltonian cycles of routes chosen by bottleneck bandwidth, so that the
// most-loaded link carries as little as possible, each used in both directions; on a graph
// without such a cycle, one ring in a depth-first walk's order whose gaps are relayed through the
// GPUs in between (algo/relay_routing.hpp).
#pragma once

#include <memory>
#include <string_view>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/embedding.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/all_gather.hpp"
#include "ccoll/plan/reduce_scatter.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/rooted.hpp"

namespace ccoll::algo {

struct Ring {
  static constexpr std::string_view name = "ring";
  static plan::Plan build(const plan::PlanRequest& req) {
    switch (req.collective) {
      case plan::Collective::reduce_scatter:
        return plan::build_ring_reduce_scatter(req);
      case plan::Collective::all_gather:
        return plan::build_ring_all_gather(req);
      case plan::Collective::broadcast:
        return plan::build_chain_broadcast(req);
      case plan::Collective::reduce:
        return plan::build_chain_reduce(req);
      case plan::Collective::allreduce:
        break;
    }
    return plan::build_ring(req);
  }
};

static_assert(LogicalTopology<Ring>);

// "ring": on abstract ranks the policy above; on a graph its embedded rings (details():
// std::shared_ptr<const EmbeddedRings>).
inline Registered registered_ring(const AlgorithmRequest& req) {
  if (req.topology == nullptr) return registered_stateless<Ring>(req);
  auto rings = std::make_shared<const EmbeddedRings>(embed_rings(*req.topology));
  auto build = [rings](const plan::PlanRequest& r) { return ring_plan(*rings, r); };
  return Registered("ring", build, static_cast<int>(rings->nodes.size()), rings->nodes, rings);
}

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm ring_algorithm() {
  return Algorithm{
      .name = "ring",
      .description =
          "P ranks in a ring: reduce-scatter then all-gather, nchannels rings (odd ones reversed); "
          "on a graph, rings embedded in it",
      .make = &registered_ring};
}

}  // namespace ccoll::algo
