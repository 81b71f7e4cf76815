// The simulator (sim/simulator.hpp) predicts the collectives beside allreduce from their plans:
// on P ranks joined pairwise by links of bandwidth B, the alpha-beta closed forms hold.
#include <doctest/doctest.h>

#include <cstdint>

#include "ccoll/plan/all_gather.hpp"
#include "ccoll/plan/reduce_scatter.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/rooted.hpp"
#include "ccoll/sim/simulator.hpp"

namespace sim_collectives_test {
using namespace ccoll;

TEST_CASE("simulated collectives match the alpha-beta model") {
  constexpr double kBandwidth = 10e9;  // bytes/s per direction of every rank pair
  constexpr double kAlpha = 2e-6;
  for (int p : {2, 4, 8}) {
    const auto up = static_cast<std::uint64_t>(p);
    plan::PlanRequest req;
    req.nranks = p;
    req.count = up * (std::uint64_t{1} << 22);  // 16 MiB of floats per rank's block
    req.slot_bytes = std::uint64_t{1} << 20;
    req.nslots = 4;
    const double n_bytes = 4.0 * static_cast<double>(req.count);
    const sim::Network net = sim::uniform_network(p, kBandwidth, kAlpha);
    INFO("P = " << p);
    // Ring reduce-scatter and all-gather: (P - 1) / P of the buffer over each rank's link, each
    // half of the ring allreduce's traffic.
    const double ring_half = (p - 1.0) / p * n_bytes / kBandwidth;
    const double allreduce = sim::simulate(plan::build_ring(req), net).time_s;
    const double rs = sim::simulate(plan::build_ring_reduce_scatter(req), net).time_s;
    const double ag = sim::simulate(plan::build_ring_all_gather(req), net).time_s;
    CHECK(rs == doctest::Approx(ring_half).epsilon(0.05));
    CHECK(ag == doctest::Approx(ring_half).epsilon(0.05));
    CHECK(rs + ag == doctest::Approx(allreduce).epsilon(0.05));
    // A pipelined chain broadcast or reduce moves the whole buffer over every link once; the
    // direct broadcast sends it over P - 1 links at once (each pair has its own link here).
    req.root = p - 1;
    const double whole = n_bytes / kBandwidth;
    CHECK(sim::simulate(plan::build_chain_broadcast(req), net).time_s ==
          doctest::Approx(whole).epsilon(0.1));
    CHECK(sim::simulate(plan::build_chain_reduce(req), net).time_s ==
          doctest::Approx(whole).epsilon(0.1));
    CHECK(sim::simulate(plan::build_direct_broadcast(req), net).time_s ==
          doctest::Approx(whole).epsilon(0.05));
  }
}
}  // namespace sim_collectives_test
