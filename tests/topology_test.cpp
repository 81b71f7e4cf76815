// Tests for the physical topology model, presets, routes, loaders and DOT export.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "ccoll/topology/physical.hpp"
#include "ccoll/topology/presets.hpp"

using namespace ccoll::topology;

namespace {

int nvlink_lanes(const PhysicalTopology& t, int a, int b) {
  int lanes = 0;
  for (const auto& l : t.links)
    if (l.from == a && l.to == b && l.type == "nvlink") lanes += l.count;
  return lanes;
}

}  // namespace

TEST_CASE("presets: node counts, NVLink lanes per GPU, validation") {
  struct Expect {
    const char* name;
    int gpus;
    int lanes_per_gpu;  // NVLink lanes out of each GPU (0: PCIe only)
  };
  for (const Expect& e : {Expect{"dgx1p", 8, 4}, Expect{"dgx1v", 8, 6}, Expect{"dgx2", 16, 6},
                          Expect{"dgx-a100", 8, 12}, Expect{"dgx-h100", 8, 18},
                          Expect{"pcie4", 4, 0}, Expect{"pcie8", 8, 0}}) {
    CAPTURE(e.name);
    const auto t = preset(e.name);
    CHECK_NOTHROW(t.validate());
    CHECK(static_cast<int>(t.gpus().size()) == e.gpus);
    CHECK(static_cast<int>(t.active_nodes().size()) == e.gpus);
    for (int g : t.gpus()) {
      int lanes = 0;
      for (const auto& l : t.links)
        if (l.from == g && l.type == "nvlink") lanes += l.count;
      CHECK(lanes == e.lanes_per_gpu);
    }
    // Full duplex: every link has its reverse with the same capacity.
    for (const auto& l : t.links)
      CHECK(t.direct_capacity_GBps(l.to, l.from) == t.direct_capacity_GBps(l.from, l.to));
  }
}

TEST_CASE("dgx1v: the hybrid cube-mesh of seed 004 Fig. 10") {
  const auto t = dgx1v();
  const auto g = [&](int i) { return t.require("gpu" + std::to_string(i)); };
  CHECK(nvlink_lanes(t, g(2), g(3)) == 2);  // seed 004: GPU2-GPU3 has two channels
  CHECK(nvlink_lanes(t, g(2), g(4)) == 0);  // the detour pair: no NVLink
  CHECK(nvlink_lanes(t, g(0), g(2)) == 1);
  CHECK(nvlink_lanes(t, g(0), g(4)) == 2);
  // Routes between NVLink neighbours are the direct link; GPU2 -> GPU4 goes through PCIe/CPU.
  const auto routes = all_routes(t);
  CHECK(routes(g(2), g(3)).size() == 1);
  CHECK(route_capacity_GBps(t, routes(g(2), g(3))) == doctest::Approx(50.0));
  const auto& r24 = routes(g(2), g(4));
  REQUIRE(r24.size() >= 3);
  for (std::size_t i = 0; i + 1 < r24.size(); ++i)
    CHECK(t.nodes[PhysicalTopology::idx(t.links[PhysicalTopology::idx(r24[i])].to)].kind !=
          NodeKind::gpu);
  CHECK(route_capacity_GBps(t, r24) < 25.0);
}

TEST_CASE("cluster preset: seed 001 Fig. 3 ToR and aggregation switch") {
  ClusterOptions o;
  o.machines = 4;
  o.gpus_per_machine = 4;
  o.nic_GBps = 1.25;
  const auto t = cluster(o);
  CHECK_NOTHROW(t.validate());
  CHECK(t.gpus().size() == 16);
  CHECK(t.find("tor") >= 0);
  CHECK(t.find("agg") >= 0);
  CHECK(t.nodes[PhysicalTopology::idx(t.gpus()[5])].id == "m1.gpu1");
  const auto routes = all_routes(t);
  const auto& r = routes(t.require("m0.gpu0"), t.require("m3.gpu2"));
  CHECK(route_capacity_GBps(t, r) == doctest::Approx(1.25));
  CHECK(route_capacity_GBps(t, routes(t.require("m0.gpu0"), t.require("m0.gpu3"))) ==
        doctest::Approx(12.5));
  const auto big = preset("cluster:8x8:nvlink:100");
  CHECK(big.gpus().size() == 64);
  CHECK_NOTHROW(big.validate());
}

TEST_CASE("physical: clear errors") {
  PhysicalTopology t;
  t.add_node("gpu0", NodeKind::gpu);
  t.add_node("gpu1", NodeKind::gpu);
  t.add_node("gpu2", NodeKind::gpu);
  CHECK_THROWS_WITH_AS(t.add_link("gpu0", "gpu9", 10), doctest::Contains("gpu9"), TopologyError);
  CHECK_THROWS_WITH_AS(t.add_link("gpu0", "gpu1", -1), doctest::Contains("bandwidth"),
                       TopologyError);
  CHECK_THROWS_AS(t.add_node("gpu0", NodeKind::gpu), TopologyError);
  t.add_link("gpu0", "gpu1", 10);
  CHECK_THROWS_WITH_AS(t.validate(), doctest::Contains("gpu2"), TopologyError);
  t.set_active(std::vector<std::string>{"gpu0", "gpu1"});
  CHECK_NOTHROW(t.validate());
  CHECK_THROWS_WITH_AS(preset("dgx9"), doctest::Contains("dgx9"), TopologyError);
}
