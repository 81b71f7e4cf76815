// Tests for the packed-forest planner on clusters of identical machines: the LP reduced by the
// rotation of the machines (forest/symmetry.hpp) against the flat exact LP, the cut bounds that
// certify it, and the hierarchical forest (forest/hierarchical.hpp): feasible, within its
// machines' cut bound, which itself bounds the exact optimum, and plans from it verified and run
// on host threads.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/forest/exact.hpp"
#include "ccoll/forest/hierarchical.hpp"
#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/forest/symmetry.hpp"
#include "ccoll/forest/to_plan.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/verifier.hpp"
#include "forest_harness.hpp"
#include "sweep.hpp"
#include "topology_plan_runner.hpp"

namespace forest_scale_test {
using namespace ccoll::physical;
using namespace ccoll::forest;
using namespace forest_test;

namespace {

struct Case {
  const char* preset;
  std::vector<int> active_local;  // GPUs active in every machine (empty: all)
  int machines;
};

PhysicalTopology make(const Case& c) {
  auto topo = preset(c.preset);
  if (!c.active_local.empty()) {
    std::vector<std::string> ids;
    for (int m = 0; m < c.machines; ++m)
      for (int g : c.active_local) {
        // Appended piecewise: g++ 12 -O3 warns (-Wrestrict, a false positive) on operator+ chains.
        std::string id = "m";
        id += std::to_string(m);
        id += ".gpu";
        id += std::to_string(g);
        ids.push_back(std::move(id));
      }
    topo.set_active(ids);
  }
  return topo;
}

}  // namespace

TEST_CASE("forest symmetry: the LP reduced by the machines' rotation has the flat LP's optimum") {
  const std::vector<Case> cases = {
      {"cluster:2x4:pairwise", {}, 2},    {"cluster:3x2:pairwise", {}, 3},
      {"cluster:2x2:nvlink:25", {}, 2},   {"cluster:3x2:pcie:100", {}, 3},
      {"cluster:2x3:pcie:25", {0, 1}, 2},  // a relay per machine
  };
  for (const auto& c : cases)
    for (auto sched : {ForestSchedule::phased, ForestSchedule::concurrent}) {
      const std::string name = c.preset;
      CAPTURE(name);
      const std::string schedule = to_string(sched);
      CAPTURE(schedule);
      const auto topo = make(c);
      CHECK(find_machine_rotation(topo).machines == c.machines);
      auto flat_opt = options(sched, ForestMethod::column_generation);
      flat_opt.symmetry = false;
      const auto flat = solve_packed_forest(topo, flat_opt);
      REQUIRE(flat.exact_oracle);
      CHECK(flat.symmetry_order == 1);
      auto sym_opt = options(sched, ForestMethod::column_generation);
      sym_opt.symmetry_from = 0;
      const auto sym = solve_packed_forest(topo, sym_opt);
      CHECK(sym.symmetry_order == c.machines);
      check_forest(topo, sym);
      CHECK(sym.total_GBps == doctest::Approx(flat.total_GBps).epsilon(1e-6));
      CHECK(sym.upper_bound_GBps >= flat.total_GBps * (1 - 1e-6));
      // The default planner on the quotient.
      auto fast_opt = options(sched);
      fast_opt.symmetry_from = 0;
      const auto fast = solve_packed_forest(topo, fast_opt);
      CHECK(fast.symmetry_order == c.machines);
      check_forest(topo, fast);
      CHECK(fast.total_GBps <= flat.total_GBps * (1 + 1e-6));
      CHECK(fast.total_GBps >= (c.active_local.empty() ? 0.99 : 0.95) * flat.total_GBps);
      CHECK(fast.upper_bound_GBps >= flat.total_GBps * (1 - 1e-6));
    }
}

TEST_CASE("forest symmetry: rotations that are not symmetries are refused") {
  auto topo = preset("cluster:2x4:pcie:10");
  topo.set_active(std::vector<std::string>{"m0.gpu0", "m0.gpu1", "m1.gpu0"});
  CHECK_FALSE(find_machine_rotation(topo));
  CHECK_FALSE(find_machine_rotation(preset("dgx1v")));
  auto skew = preset("cluster:2x2:pcie:10");
  skew.links[0].bandwidth_GBps *= 2;  // one machine's link differs
  CHECK_FALSE(find_machine_rotation(skew));
  const auto f = solve_packed_forest(topo, options(ForestSchedule::phased));
  CHECK(f.symmetry_order == 1);
  check_forest(topo, f);
}

TEST_CASE("forest symmetry: pairwise 4 x 4 reaches its cut bound, certified") {
  // Every GPU has 3 x 12.5 + 12 x 1.25 = 52.5 GB/s in and out, and every reduce tree leaves all
  // 15 GPUs but its root: sum chi <= 16 x 52.5 / 15 = 56.
  const auto topo = preset("cluster:4x4:pairwise");
  const auto f = solve_packed_forest(topo, options(ForestSchedule::phased));
  check_forest(topo, f);
  CHECK(f.upper_bound_GBps == doctest::Approx(56.0).epsilon(1e-9));
  CHECK(f.optimum_found_GBps >= 0.998 * 56.0);
  CHECK(f.total_GBps >= 0.99 * 56.0);
}

TEST_CASE("forest symmetry: pairwise 8 x 4 within 1% of its certified bound in every schedule") {
  // 31 sum chi <= 32 x (3 x 12.5 + 28 x 1.25): 74.84, the exact optimum. The overlapped LP
  // needs about 33,000 pivots for it (0.7 s).
  const auto topo = preset("cluster:8x4:pairwise");
  ccoll::testing::Sweep sweep;
  for (auto sched : kSchedules) {
    if (!sweep.take()) continue;
    const std::string schedule = to_string(sched);
    CAPTURE(schedule);
    const auto f = solve_packed_forest(topo, options(sched));
    check_forest(topo, f);
    const double bound = (sched == ForestSchedule::concurrent ? 0.5 : 1.0) * 32 * 72.5 / 31;
    CHECK(f.upper_bound_GBps == doctest::Approx(bound).epsilon(1e-9));
    CHECK(f.total_GBps >= 0.99 * bound);
  }
}

TEST_CASE("hierarchical forest: within its cut bound, which bounds the exact optimum") {
  const std::vector<Case> cases = {
      {"cluster:3x4:nvswitch:100", {}, 3},
      {"cluster:4x2:pcie:25", {}, 4},
      {"cluster:3x4:pcie:100", {0, 1, 3}, 3},
  };
  ccoll::testing::Sweep sweep;
  for (const auto& c : cases)
    for (auto sched : kSchedules) {
      if (!sweep.take()) continue;
      const std::string name = c.preset;
      CAPTURE(name);
      const std::string schedule = to_string(sched);
      CAPTURE(schedule);
      const auto topo = make(c);
      auto o = options(sched);
      o.hierarchical_above = 0;
      const auto h = solve_packed_forest(topo, o);
      REQUIRE(h.hierarchical);
      check_forest(topo, h);
      const auto exact = solve_packed_forest(topo, options(sched, ForestMethod::column_generation));
      CHECK(h.total_GBps <= exact.total_GBps * (1 + 1e-6));
      CHECK(h.upper_bound_GBps >= exact.total_GBps * (1 - 1e-6));
      // All active: the exact optimum. With a relay per PCIe machine the GPUs' links bind
      // inside the machines: the balanced coupling meets them phased; concurrent, the local
      // trees are sized without the rails that share those links, and the phased levels scaled
      // to one pool carry 83% (the concurrent levels 67%).
      const double floor =
          c.active_local.empty() || sched != ForestSchedule::concurrent ? 0.99 : 0.82;
      CHECK(h.total_GBps >= floor * exact.total_GBps);
    }
  // NVSwitch machines: the NIC layer binds and the composition reaches its bound.
  auto o = options(ForestSchedule::phased);
  o.hierarchical_above = 0;
  const auto topo = preset("cluster:8x8:nvswitch:400");
  const auto h = solve_packed_forest(topo, o);
  REQUIRE(h.hierarchical);
  CHECK(h.upper_bound_GBps == doctest::Approx(12.5 * 8 / 7).epsilon(1e-9));
  CHECK(h.total_GBps >= 0.999 * h.upper_bound_GBps);
  // PCIe machines, concurrent: the GPUs' own links bind beside the NIC layer; the phased levels
  // scaled to one pool carry 98% of the cut bound (the concurrent levels 72%).
  {
    auto oc = options(ForestSchedule::concurrent);
    oc.hierarchical_above = 0;
    const auto pcie = solve_packed_forest(preset("cluster:128x8:pcie:100"), oc);
    REQUIRE(pcie.hierarchical);
    CHECK(pcie.upper_bound_GBps == doctest::Approx(12.5 * 128 / 127 / 2).epsilon(1e-9));
    CHECK(pcie.total_GBps >= 0.97 * pcie.upper_bound_GBps);
  }
  // Machines joined GPU to GPU: no hierarchy, the flat planner answers.
  const auto pw = preset("cluster:2x4:pairwise");
  const auto f = solve_packed_forest(pw, o);
  CHECK_FALSE(f.hierarchical);
  check_forest(pw, f);
}

TEST_CASE("hierarchical forest: plans verified and run on host threads, through the registry") {
  for (const auto& c : std::vector<Case>{{"cluster:4x4:nvswitch:100", {}, 4},
                                         {"cluster:4x4:pcie:25", {0, 2, 3}, 4}}) {
    const std::string name = c.preset;
    CAPTURE(name);
    const auto topo = make(c);
    ccoll::algo::PackedForestOptions po;
    po.solver.hierarchical_above = 0;
    po.split = 8;
    const ccoll::algo::PackedForest forest(topo, po);
    CHECK(forest.forest(false).hierarchical);
    for (bool overlap : {false, true})
      topology_test::verify_and_run(
          [&](const ccoll::plan::PlanRequest& r) {
            auto req = r;
            req.overlap = overlap;
            return forest.build(req);
          },
          3001);
  }
  // 64 ranks: verified only.
  ccoll::algo::PackedForestOptions po;
  po.solver.hierarchical_above = 0;
  const ccoll::algo::PackedForest forest(preset("cluster:8x8:nvswitch:100"), po);
  ccoll::plan::PlanRequest req;
  req.count = 1 << 16;
  const auto plan = forest.build(req);
  CHECK(plan.nranks == 64);
  const auto report = ccoll::plan::verify(plan);
  INFO(report.error);
  CHECK(report.ok);
}
}  // namespace forest_scale_test
