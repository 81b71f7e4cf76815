// Tests for plans on graphs whose GPUs forward for each other (algo/relay_routing.hpp): GPU-only
// rings, tori and random graphs, and the presets, with every registered algorithm planned through
// the registry, verified and run on host threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <any>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/algo/relay_routing.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/sim/from_physical.hpp"
#include "ccoll/sim/simulator.hpp"
#include "sweep.hpp"
#include "topology_plan_runner.hpp"

namespace relay_routing_test {
using namespace ccoll;

namespace {

// `host`: relays run inside the ranks on their GPUs (the default); false: ranks of their own.
algo::Registered make(const std::string& name, const physical::PhysicalTopology& t,
                      bool host = true) {
  algo::AlgorithmRequest req;
  req.topology = &t;
  req.host_relays = host;
  return algo::make_algorithm(algo::find_algorithm(name).algorithm, req);
}

// Every connection of `p` joins ranks on the same node or on nodes a route joins.
void check_routable(const plan::Plan& p, const std::vector<int>& rank_node,
                    const physical::PhysicalTopology& t) {
  REQUIRE(rank_node.size() == static_cast<std::size_t>(p.nranks));
  algo::RouteCache routes(t);
  const physical::Reachability reach(t);
  for (const auto& c : p.connections) {
    const int a = rank_node[static_cast<std::size_t>(c.from)];
    const int b = rank_node[static_cast<std::size_t>(c.to)];
    CAPTURE(t.nodes[static_cast<std::size_t>(a)].id);
    CAPTURE(t.nodes[static_cast<std::size_t>(b)].id);
    CHECK_FALSE(routes.unroutable(a, b));
    CHECK((a == b || reach.routable(a, b)));  // the fast answer agrees with the search
  }
}

// Plans `name` on `t` through the registry, checks the ranks, routes and verifier, simulates it
// and runs it on host threads (float sum, several chunk counts).
void plan_verify_run(const std::string& name, const physical::PhysicalTopology& t,
                     std::size_t count = 1000, bool host = true) {
  CAPTURE(name);
  CAPTURE(t.name);
  CAPTURE(host);
  const auto reg = make(name, t, host);
  REQUIRE(reg.nranks() == static_cast<int>(reg.rank_node().size()));
  plan::PlanRequest req;
  req.nranks = reg.nranks();
  req.count = count;
  req.slot_bytes = 4096;
  const plan::Plan p = reg.build(req);
  CHECK(p.nactive() == static_cast<int>(t.active_nodes().size()));
  const auto report = plan::verify(p);
  INFO(report.error);
  REQUIRE(report.ok);
  check_routable(p, reg.rank_node(), t);
  const auto sim = sim::simulate(p, sim::to_network(t), reg.rank_node());
  CHECK(sim.time_s > 0);
  topology_test::verify_and_run([reg](const plan::PlanRequest& r) { return reg.build(r); }, count);
}

// A connected graph of n GPUs only: a random spanning tree plus `extra` random links.
physical::PhysicalTopology random_gpu_graph(int n, int extra, std::uint32_t seed) {
  std::mt19937 rng(seed);
  physical::PhysicalTopology t;
  t.name = "random" + std::to_string(n) + "-" + std::to_string(seed);
  for (int i = 0; i < n; ++i) t.add_node("gpu" + std::to_string(i), physical::NodeKind::gpu);
  std::set<std::pair<int, int>> linked;
  const auto link = [&](int a, int b) {
    if (a == b || !linked.insert({std::min(a, b), std::max(a, b)}).second) return;
    const double gbps = 10.0 * static_cast<double>(1 + rng() % 3);
    t.add_link(a, b, gbps, 1, 0.7, "link");
  };
  for (int i = 1; i < n; ++i) link(i, static_cast<int>(rng() % static_cast<std::uint32_t>(i)));
  for (int k = 0; k < extra; ++k)
    link(static_cast<int>(rng() % static_cast<std::uint32_t>(n)),
         static_cast<int>(rng() % static_cast<std::uint32_t>(n)));
  return t;
}

// Ranks beyond the active GPUs: relays that run as ranks of their own.
int relay_ranks(const algo::Registered& reg, const physical::PhysicalTopology& t) {
  return reg.nranks() - static_cast<int>(t.active_nodes().size());
}

// On a graph of GPUs that all take part, every relay runs inside a rank: the plan needs one rank
// per GPU (ccoll_perf -t <GPUs>), whatever it forwards.
void check_one_rank_per_gpu(const std::string& name, const physical::PhysicalTopology& t) {
  CAPTURE(name);
  CAPTURE(t.name);
  const auto reg = make(name, t);
  CHECK(reg.nranks() == static_cast<int>(t.gpus().size()));
  CHECK(relay_ranks(reg, t) == 0);
  // The same relays as ranks of their own: as many more ranks as there are hosted relays.
  CHECK(relay_ranks(make(name, t, false), t) == reg.hosted_relays);
}

}  // namespace

TEST_CASE("a ring of four GPUs: every algorithm plans, verifies and runs, relays where needed") {
  const auto t = physical::gpu_ring(4);
  for (const char* name : {"ring", "dbtree", "forest", "tree", "direct", "ps", "oneshot",
                           "recdoubling", "auto", "ring-phased", "dbtree-overlap"}) {
    plan_verify_run(name, t);
    check_one_rank_per_gpu(name, t);
  }
  // Relays as ranks of their own still plan and run (AlgorithmRequest::host_relays = false).
  for (const char* name : {"dbtree", "direct"}) plan_verify_run(name, t, 1000, false);
  // The ring follows the physical ring: no relay; every rank of the direct plan talks to both
  // others, and each of the two diagonals (both ways) goes through one GPU, whose rank forwards.
  CHECK(make("ring", t).hosted_relays == 0);
  CHECK(make("direct", t).hosted_relays == 4);
  CHECK(relay_ranks(make("direct", t, false), t) == 4);
  CHECK(make("forest", t).hosted_relays == 0);
  // dbtree on the 4-ring planned 6 ranks for 4 GPUs (its detours); now 4.
  CHECK(make("dbtree", t).nranks() == 4);
  CHECK(make("dbtree", t, false).nranks() >= 6);
}

TEST_CASE("4 x 4 torus: ring, dbtree and forest") {
  const auto t = physical::torus({4, 4});
  CHECK(t.gpus().size() == 16);
  CHECK(t.links.size() == 64);  // 32 cables, each way
  for (const char* name : {"ring", "dbtree", "forest"}) {
    plan_verify_run(name, t, 4096);
    check_one_rank_per_gpu(name, t);
  }
  // dbtree's detours: 24 relay ranks of their own (40 ranks for 16 GPUs) without placement.
  CHECK(make("dbtree", t, false).nranks() >= 40);
  // A torus has Hamiltonian cycles: the ring follows one and needs no relay.
  const auto ring = make("ring", t);
  CHECK(relay_ranks(ring, t) == 0);
  const auto* rings = std::any_cast<std::shared_ptr<const algo::EmbeddedRings>>(&ring.details());
  REQUIRE(rings != nullptr);
  CHECK_FALSE((*rings)->rings.empty());
}

TEST_CASE("100 random connected GPU-only graphs of 4-12 nodes: ring, dbtree, forest") {
  ccoll::testing::Sweep sweep;
  for (std::uint32_t seed = 1; seed <= 100; ++seed) {
    if (!sweep.take()) continue;
    const int n = 4 + static_cast<int>(seed % 9);
    const auto t = random_gpu_graph(n, static_cast<int>(seed % 4), seed);
    for (const char* name : {"ring", "dbtree", "forest"}) {
      plan_verify_run(name, t, 257);
      check_one_rank_per_gpu(name, t);
    }
  }
}

TEST_CASE("presets for the systems users have: ring, dbtree and forest") {
  for (const char* name : {"mi300x", "dgx-h100", "ring:4", "torus:4x4", "torus:2x2x2",
                           "cluster:2x8:mesh:400", "cluster:2x4:nvswitch:400"}) {
    const auto t = physical::preset(name);
    for (const char* algo : {"ring", "dbtree", "forest"}) plan_verify_run(algo, t, 2048);
  }
}

TEST_CASE("route_through_relays: chains, message order, loads and clear errors") {
  const auto t = physical::gpu_ring(6);
  // direct: every pair; pairs 2 or 3 apart on a 6-ring need 1 or 2 relays.
  const auto reg = make("direct", t, false);  // relays as ranks, to read their programs
  plan::PlanRequest req;
  req.nranks = reg.nranks();
  req.count = 600;
  req.slot_bytes = 400;
  const auto p = reg.build(req);
  REQUIRE(plan::verify(p).ok);
  // 6 x 5 ordered pairs; 6 x 2 are neighbours, 6 x 2 are two apart (1 relay), 6 x 1 three apart
  // (2 relays).
  CHECK(relay_ranks(reg, t) >= 12 * 1 + 6 * 2);
  // Relays are inactive and only forward: one receive, one send, no local operand, no output.
  for (const auto& ch : p.channels)
    for (plan::Rank r = 6; r < p.nranks; ++r)
      for (const auto& s : ch.programs[static_cast<std::size_t>(r)].steps) {
        CHECK(s.recv_count == 1);
        CHECK(s.send_count == 1);
        CHECK(s.src == plan::Source::None);
        CHECK_FALSE(s.write_output);
      }
  for (plan::Rank r = 6; r < p.nranks; ++r) CHECK_FALSE(p.active[static_cast<std::size_t>(r)]);
  check_routable(p, reg.rank_node(), t);

  // The paths spread over the ring: with both directions open, no link carries more than its
  // share of the relayed volume (each direction of each of the 6 cables, 36 pair-hops in all).
  const auto sim = sim::simulate(p, sim::to_network(t), reg.rank_node());
  double busiest = 0, least = 1e300;
  for (const auto& l : sim.links) {
    busiest = std::max(busiest, l.bytes);
    least = std::min(least, l.bytes);
  }
  CHECK(busiest <= 1.5 * least);

  // A plan that connects a pair the routing did not plan for is refused, naming the nodes.
  algo::RelayRouting none;
  none.base_ranks = 6;
  none.rank_node = {0, 1, 2, 3, 4, 5};
  none.add(algo::RelayPath{0, 2, {6}, {1}});
  none.rank_node.push_back(1);
  const auto bare = algo::find_algorithm("direct").algorithm;
  algo::AlgorithmRequest abstract;
  abstract.nranks = 6;
  plan::PlanRequest r6;
  r6.nranks = 6;
  r6.count = 60;
  const auto plain = algo::make_algorithm(bare, abstract).build(r6);
  const physical::Reachability reach(t);
  CHECK_THROWS_WITH_AS(algo::route_through_relays(plain, none, reach),
                       doctest::Contains("no route joins and no relay was planned for"),
                       physical::TopologyError);
}

TEST_CASE("a relay chain takes the fewest hops among the paths of least load") {
  // S and D take part; A and B are idle GPUs. Every path from S to D ends on A-D (5 GB/s), so all
  // share the least bottleneck; S-A-D needs one relay, S-B-A-D two (its first hops are faster,
  // which a search that ranks partial paths by their own bottleneck took for better).
  physical::PhysicalTopology t;
  t.name = "detour";
  for (const char* id : {"S", "A", "B", "D"}) t.add_node(id, physical::NodeKind::gpu);
  t.add_link("S", "A", 10);
  t.add_link("S", "B", 100);
  t.add_link("B", "A", 100);
  t.add_link("A", "D", 5);
  t.active = {true, false, false, true};
  for (const std::string name : {"ring", "dbtree", "direct"}) {
    CAPTURE(name);
    const auto reg = make(name, t, false);
    // Chains of one relay, on A (ring and direct: one for each direction; dbtree's trees relay
    // more pairs); a chain through B would put its first relay there.
    if (name != "dbtree") CHECK(relay_ranks(reg, t) == 2);
    CHECK(relay_ranks(reg, t) > 0);
    for (std::size_t r = 2; r < reg.rank_node().size(); ++r)
      CHECK(t.nodes[static_cast<std::size_t>(reg.rank_node()[r])].id == "A");
    plan_verify_run(name, t, 1000, false);
  }
}

TEST_CASE("graphs with switches keep their plans: no relay where routes exist") {
  for (const char* name : {"dgx1v", "dgx-h100", "cluster:2x4:pcie:100"}) {
    const auto t = physical::preset(name);
    for (const char* algo : {"ring", "dbtree", "tree", "direct", "auto"}) {
      CAPTURE(name);
      CAPTURE(algo);
      const auto reg = make(algo, t);
      const int detours =
          std::string(algo) == "dbtree"
              ? static_cast<int>(
                    (*std::any_cast<std::shared_ptr<const algo::DetourTrees>>(&reg.details()))
                        ->detours.size())
              : 0;
      CHECK(relay_ranks(reg, t) == 0);
      CHECK(reg.hosted_relays == detours);
      CHECK(relay_ranks(make(algo, t, false), t) == detours);
    }
  }
}
}  // namespace relay_routing_test
