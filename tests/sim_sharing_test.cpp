// Tests of the simulator's incremental parts against straightforward references
// (docs/simulator.md, "What it models"): max-min fair rates refilled per touched component and per
// path (sim::detail::FairShare) against progressive filling over every flow at once; widest routes
// (sim::widest_routes_from) against their labels found by a scan and Bellman-Ford; and the
// predicted times of several plans against the values the global per-flow filling gave.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/physical/widest_route.hpp"
#include "ccoll/sim/from_physical.hpp"
#include "ccoll/sim/network.hpp"
#include "ccoll/sim/simulator.hpp"

namespace sim_sharing_test {
using namespace ccoll;

namespace {

// Max-min fair rates by progressive filling over all flows together: raise every unfrozen flow's
// rate; the links whose remaining capacity per unfrozen flow is smallest fill first and freeze
// their flows at that level; repeat.
std::vector<double> max_min_reference(const std::vector<double>& capacity,
                                      const std::vector<std::vector<int>>& flow_links) {
  std::vector<double> left = capacity, rate(flow_links.size(), 0);
  std::vector<int> unfrozen(capacity.size(), 0);
  std::vector<bool> frozen(flow_links.size(), false);
  for (const auto& links : flow_links)
    for (int l : links) ++unfrozen[static_cast<std::size_t>(l)];
  for (;;) {
    double share = std::numeric_limits<double>::infinity();
    for (std::size_t l = 0; l < capacity.size(); ++l)
      if (unfrozen[l] > 0) share = std::min(share, left[l] / unfrozen[l]);
    if (!std::isfinite(share)) break;
    std::vector<std::size_t> tight;
    for (std::size_t l = 0; l < capacity.size(); ++l)
      if (unfrozen[l] > 0 && left[l] / unfrozen[l] <= share * (1 + 1e-12)) tight.push_back(l);
    for (std::size_t f = 0; f < flow_links.size(); ++f) {
      if (frozen[f]) continue;
      const auto& links = flow_links[f];
      if (std::none_of(links.begin(), links.end(), [&](int l) {
            return std::find(tight.begin(), tight.end(), static_cast<std::size_t>(l)) !=
                   tight.end();
          }))
        continue;
      frozen[f] = true;
      rate[f] = share;
      for (int l : links) {
        left[static_cast<std::size_t>(l)] =
            std::max(0.0, left[static_cast<std::size_t>(l)] - share);
        --unfrozen[static_cast<std::size_t>(l)];
      }
    }
  }
  return rate;
}

// The label every route must have, computed without the search: W(v), the widest bottleneck, by
// settling the widest reached node found by a scan of all nodes (a bottleneck is kept by
// extension); then, over the links at least W(v) wide, the fewest hops and the least latency (in
// picoseconds, as the search compares them) by Bellman-Ford relaxation of every link until
// nothing changes.
struct RouteLabel {
  double width = 0;
  int hops = 0;
  std::int64_t latency_ps = 0;
  bool operator==(const RouteLabel&) const = default;
};

std::vector<RouteLabel> route_labels_reference(const sim::Network& net, int src) {
  const auto n = net.nodes.size();
  const auto us = static_cast<std::size_t>(src);
  std::vector<double> width(n, 0);
  std::vector<bool> done(n, false);
  width[us] = std::numeric_limits<double>::infinity();
  for (;;) {
    int u = -1;
    for (std::size_t i = 0; i < n; ++i)
      if (width[i] > 0 && !done[i] && (u < 0 || width[i] > width[static_cast<std::size_t>(u)]))
        u = static_cast<int>(i);
    if (u < 0) break;
    done[static_cast<std::size_t>(u)] = true;
    if (u != src && !net.nodes[static_cast<std::size_t>(u)].forwards) continue;
    for (const auto& link : net.links)
      if (link.from == u)
        width[static_cast<std::size_t>(link.to)] =
            std::max(width[static_cast<std::size_t>(link.to)],
                     std::min(width[static_cast<std::size_t>(u)], link.capacity_Bps));
  }
  std::vector<RouteLabel> labels(n);
  for (std::size_t v = 0; v < n; ++v) {
    if (v == us || width[v] == 0) continue;
    constexpr int kUnreached = std::numeric_limits<int>::max();
    std::vector<int> hops(n, kUnreached);
    std::vector<std::int64_t> lat(n, 0);
    hops[us] = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& link : net.links) {
        const auto a = static_cast<std::size_t>(link.from), b = static_cast<std::size_t>(link.to);
        if (hops[a] == kUnreached || link.capacity_Bps < width[v]) continue;
        if (a != us && !net.nodes[a].forwards) continue;
        const int h = hops[a] + 1;
        const std::int64_t l = lat[a] + ccoll::physical::latency_picoseconds(link.latency_s);
        if (h < hops[b] || (h == hops[b] && l < lat[b])) {
          hops[b] = h;
          lat[b] = l;
          changed = true;
        }
      }
    }
    labels[v] = RouteLabel{width[v], hops[v], lat[v]};
  }
  return labels;
}

// One instant of a simulation on both sharings: a few flows start (on random paths) or end
// (random ones of `flows`, the path of each flow in flight). pick(n): a random integer in [0, n).
template <class Pick>
void start_and_end(sim::detail::FairShare& a, sim::detail::FairShare& b,
                   std::vector<std::uint32_t>& flows, int npaths, int most, Pick pick) {
  for (int k = 1 + pick(most); k > 0; --k) {
    if (!flows.empty() && pick(5) < 2) {
      const auto i = static_cast<std::size_t>(pick(static_cast<int>(flows.size())));
      a.remove_flow(flows[i]);
      b.remove_flow(flows[i]);
      flows.erase(flows.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const auto p = static_cast<std::uint32_t>(pick(npaths));
      a.add_flow(p);
      b.add_flow(p);
      flows.push_back(p);
    }
  }
}

// The links of each flow in flight, as max_min_reference takes them.
std::vector<std::vector<int>> links_of(const std::vector<std::uint32_t>& flows,
                                       const std::vector<std::vector<int>>& paths) {
  std::vector<std::vector<int>> out;
  out.reserve(flows.size());
  for (std::uint32_t p : flows) out.push_back(paths[p]);
  return out;
}

}  // namespace

TEST_CASE("incremental max-min rates equal progressive filling over all flows") {
  std::mt19937 rng(20261124);
  std::size_t binding = 0, all = 0;  // links of the paths kept by the filling, and in all
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint32_t>(n)); };
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    const int nlinks = 1 + pick(24);
    std::vector<double> capacity(static_cast<std::size_t>(nlinks));
    // Few distinct capacities on half the graphs, so that links fill at equal levels.
    for (double& c : capacity)
      c = trial % 2 ? 1e9 * (1 + pick(3)) : 1e8 * (1 + pick(1000)) + rng() % 1000;
    sim::detail::FairShare fair(capacity);
    sim::detail::FairShare every(capacity, false);  // no link left out
    std::vector<std::vector<int>> paths;
    const int npaths = 1 + pick(30);
    for (int p = 0; p < npaths; ++p) {
      std::vector<int> links;
      const int hops = 1 + pick(std::min(nlinks, 5));
      while (static_cast<int>(links.size()) < hops) {
        const int l = pick(nlinks);
        if (std::find(links.begin(), links.end(), l) == links.end()) links.push_back(l);
      }
      paths.push_back(links);
      CHECK(fair.add_path(links) == static_cast<std::uint32_t>(p));
      every.add_path(links);
    }
    std::vector<std::uint32_t> flows;  // the path of each flow in flight
    std::vector<std::uint32_t> refilled;
    for (int batch = 0; batch < 40; ++batch) {
      start_and_end(fair, every, flows, npaths, 4, pick);
      fair.reshare(refilled);
      every.reshare(refilled);
      const auto flow_links = links_of(flows, paths);
      const auto want = max_min_reference(capacity, flow_links);
      for (std::size_t f = 0; f < flows.size(); ++f) {
        CAPTURE(f);
        CHECK(fair.flows(flows[f]) > 0);
        CHECK(std::abs(fair.rate(flows[f]) - want[f]) <= 1e-9 * want[f]);
        CHECK(fair.rate(flows[f]) == every.rate(flows[f]));
      }
      for (int l = 0; l < nlinks; ++l) {
        std::size_t n = 0;
        for (const auto& links : flow_links)
          n += static_cast<std::size_t>(std::count(links.begin(), links.end(), l));
        CHECK(fair.link_flows(l) == n);
      }
    }
    for (std::uint32_t p = 0; p < static_cast<std::uint32_t>(npaths); ++p) {
      const auto& kept = fair.binding_links(p);
      CHECK(!kept.empty());
      CHECK(every.binding_links(p) == paths[static_cast<std::size_t>(p)]);
      binding += kept.size();
      all += paths[static_cast<std::size_t>(p)].size();
    }
  }
  // Enough links are left out (569 of 8,746) for the comparison with `every` to cover it.
  CHECK(all - binding > 400);
}

TEST_CASE("max-min rates on cluster-shaped paths: only the NIC links bind between machines") {
  // M machines of G GPUs: GPU -> PCIe -> NIC -> ToR -> NIC -> PCIe -> GPU between machines (PCIe
  // and NIC at 12.5 GB/s, the ToR links at 50), through an NVSwitch inside one (450 GB/s).
  constexpr int M = 6, G = 4;
  std::vector<double> capacity;
  const auto link = [&](double GBps) {
    capacity.push_back(GBps * 1e9);
    return static_cast<int>(capacity.size() - 1);
  };
  std::vector<int> gpu_up, gpu_down, sw_up, sw_down, nic_out, nic_in, tor_out, tor_in;
  for (int m = 0; m < M; ++m) {
    for (int g = 0; g < G; ++g) {
      gpu_up.push_back(link(12.5));
      gpu_down.push_back(link(12.5));
      sw_up.push_back(link(450));
      sw_down.push_back(link(450));
    }
    nic_out.push_back(link(12.5));
    nic_in.push_back(link(12.5));
    tor_out.push_back(link(50));
    tor_in.push_back(link(50));
  }
  sim::detail::FairShare fair(capacity), every(capacity, false);
  std::vector<std::vector<int>> paths;
  for (int a = 0; a < M * G; ++a)
    for (int b = 0; b < M * G; ++b) {
      if (a == b) continue;
      const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
      const auto ma = static_cast<std::size_t>(a / G), mb = static_cast<std::size_t>(b / G);
      if (ma == mb)
        paths.push_back({sw_up[ua], sw_down[ub]});
      else
        paths.push_back(
            {gpu_up[ua], nic_out[ma], tor_out[ma], tor_in[mb], nic_in[mb], gpu_down[ub]});
      fair.add_path(paths.back());
      every.add_path(paths.back());
    }
  std::mt19937 rng(5);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint32_t>(n)); };
  std::vector<std::uint32_t> flows, changed;
  for (int batch = 0; batch < 300; ++batch) {
    CAPTURE(batch);
    start_and_end(fair, every, flows, static_cast<int>(paths.size()), 6, pick);
    fair.reshare(changed);
    // Every path whose flows are in flight and whose rate moved is reported.
    std::vector<double> before(paths.size());
    for (std::uint32_t p = 0; p < paths.size(); ++p) before[p] = every.rate(p);
    every.reshare(changed);
    const auto want = max_min_reference(capacity, links_of(flows, paths));
    for (std::size_t f = 0; f < flows.size(); ++f) {
      CAPTURE(f);
      CHECK(std::abs(fair.rate(flows[f]) - want[f]) <= 1e-9 * want[f]);
      CHECK(fair.rate(flows[f]) == every.rate(flows[f]));
      if (every.rate(flows[f]) != before[flows[f]])
        CHECK(std::find(changed.begin(), changed.end(), flows[f]) != changed.end());
    }
  }
  for (std::uint32_t p = 0; p < paths.size(); ++p)
    CHECK(fair.binding_links(p).size() == 2);  // the NICs, or the NVSwitch's two links
}

TEST_CASE("routes are the widest, then the fewest hops, then the least latency, and valid") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    sim::Network net;
    const int n = 2 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) net.add_node("n" + std::to_string(i), rng() % 3 != 0);
    const int m = static_cast<int>(rng() % static_cast<std::uint32_t>(4 * n));
    for (int k = 0; k < m; ++k) {
      const int a = static_cast<int>(rng() % static_cast<std::uint32_t>(n));
      const int b = static_cast<int>(rng() % static_cast<std::uint32_t>(n));
      if (a == b) continue;
      // Few capacities and latencies: many ties, and wide detours that a narrow last link evens.
      net.add_link(a, b, 1e9 * static_cast<double>(1 + rng() % 3),
                   1e-6 * static_cast<double>(rng() % 3));
    }
    for (int src = 0; src < n; ++src) {
      const auto got = sim::widest_routes_from(net, src);
      const auto want = route_labels_reference(net, src);
      REQUIRE(got.size() == want.size());
      for (std::size_t v = 0; v < got.size(); ++v) {
        CAPTURE(src);
        CAPTURE(v);
        const sim::Route& r = got[v];
        if (static_cast<int>(v) == src) continue;
        if (want[v].width == 0) {
          CHECK(r.links.empty());
          CHECK(r.bottleneck_Bps == 0);
          continue;
        }
        // A path from src to v through forwarding nodes, with the label it reports.
        REQUIRE_FALSE(r.links.empty());
        RouteLabel label{std::numeric_limits<double>::infinity(), 0, 0};
        double latency_s = 0;
        int at = src;
        for (const int l : r.links) {
          const sim::NetLink& link = net.links[static_cast<std::size_t>(l)];
          CHECK(link.from == at);
          if (at != src) CHECK(net.nodes[static_cast<std::size_t>(at)].forwards);
          label.width = std::min(label.width, link.capacity_Bps);
          label.hops += 1;
          label.latency_ps += ccoll::physical::latency_picoseconds(link.latency_s);
          latency_s += link.latency_s;
          at = link.to;
        }
        CHECK(at == static_cast<int>(v));
        CHECK(label == want[v]);
        CHECK(r.bottleneck_Bps == label.width);
        CHECK(r.latency_s == latency_s);
      }
    }
  }
}

TEST_CASE("networks refuse figures no simulation can use") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(sim::uniform_network(4, inf, 1e-6), std::invalid_argument);
  CHECK_THROWS_AS(sim::uniform_network(4, 1e9, nan), std::invalid_argument);
  CHECK_THROWS_AS(sim::uniform_network(4, 1e9, -1e-3), std::invalid_argument);
  sim::Network net;
  net.add_node("a", false);
  net.add_node("b", false);
  CHECK_THROWS_AS(net.add_link(0, 1, inf, 0), std::invalid_argument);
  CHECK_THROWS_AS(net.add_link(0, 1, 1e9, nan), std::invalid_argument);
  CHECK_THROWS_AS(net.add_link(0, 1, 1e9, -1e-9), std::invalid_argument);
  CHECK_THROWS_AS(net.add_link(0, 1, 1e9, inf), std::invalid_argument);
  CHECK(net.add_link(0, 1, 1e9, 0) == 0);
}

TEST_CASE("a wide detour to a switch does not win once a narrow link evens the widths") {
  // g0 -> sX directly at 100 GB/s, or through sA at 200; sX -> g1 at 50. Both reach g1 at 50
  // GB/s: the direct two hops win over the three through sA.
  sim::Network net;
  const int g0 = net.add_node("g0", false), g1 = net.add_node("g1", false);
  const int sx = net.add_node("sX", true), sa = net.add_node("sA", true);
  net.add_link(g0, sx, 100e9, 1e-6);
  net.add_link(g0, sa, 200e9, 1e-6);
  net.add_link(sa, sx, 200e9, 1e-6);
  const int last = net.add_link(sx, g1, 50e9, 1e-6);
  const auto routes = sim::widest_routes_from(net, g0);
  CHECK(routes[static_cast<std::size_t>(g1)].links == std::vector<int>{0, last});
  CHECK(routes[static_cast<std::size_t>(g1)].bottleneck_Bps == 50e9);
}

// The planners' routes (physical::routes_from, latencies in microseconds) and the simulator's (on
// sim::to_network, in seconds) are the same links, ties included.
void check_planner_and_simulator_routes_agree(const ccoll::physical::PhysicalTopology& t) {
  const sim::Network net = sim::to_network(t);
  for (const int src : t.compute_nodes()) {
    const auto planned = ccoll::physical::routes_from(t, src);
    const auto simulated = sim::widest_routes_from(net, src);
    for (const int dst : t.compute_nodes()) {
      CAPTURE(src);
      CAPTURE(dst);
      CHECK(planned[static_cast<std::size_t>(dst)] ==
            simulated[static_cast<std::size_t>(dst)].links);
    }
  }
}

TEST_CASE("planners and the simulator route alike, where latencies tie only in one unit") {
  using ccoll::physical::NodeKind;
  // Both routes are 50 GB/s and two hops; 0.1 + 0.5 us and 0.2 + 0.4 us tie in microseconds but
  // not once each is converted to seconds and summed.
  ccoll::physical::PhysicalTopology t;
  for (const char* g : {"g0", "g1"}) t.add_node(g, NodeKind::gpu);
  for (const char* sw : {"sA", "sB"}) t.add_node(sw, NodeKind::switch_);
  t.add_link("g0", "sA", 100, 1, 0.1);
  t.add_link("sA", "g1", 50, 1, 0.5);
  t.add_link("g0", "sB", 200, 1, 0.2);
  t.add_link("sB", "g1", 50, 1, 0.4);
  check_planner_and_simulator_routes_agree(t);
  check_planner_and_simulator_routes_agree(ccoll::physical::dgx1v());
  check_planner_and_simulator_routes_agree(ccoll::physical::dgx_h100());
  check_planner_and_simulator_routes_agree(ccoll::physical::pcie_server());
  // Random graphs of GPUs and switches with few distinct figures: many ties.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    CAPTURE(trial);
    ccoll::physical::PhysicalTopology r;
    const int n = 3 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i)
      r.add_node("n" + std::to_string(i), rng() % 2 == 0 ? NodeKind::gpu : NodeKind::switch_);
    for (int k = 0; k < 3 * n; ++k) {
      const int a = static_cast<int>(rng() % static_cast<std::uint32_t>(n));
      const int b = static_cast<int>(rng() % static_cast<std::uint32_t>(n));
      if (a == b) continue;
      r.add_link(a, b, 25.0 * static_cast<double>(1 + rng() % 3), 1,
                 0.1 * static_cast<double>(1 + rng() % 5));
    }
    check_planner_and_simulator_routes_agree(r);
  }
}

TEST_CASE("predicted times of plans on physical topologies are those of the global filling") {
  // time_s, turnaround_s and the sum of rank_finish_s from the simulator that refilled every flow
  // in flight at each instant and chose routes by scanning all nodes (2026-11-24).
  struct Case {
    const char* topology;
    const char* algo;
    double time_s, turnaround_s, finish_sum_s;
  };
  const Case cases[] = {
      {"dgx1v", "forest", 0.0002705149719173319, 3.8349327666666662e-05, 0.0020753457913308369},
      {"dgx1v", "ring", 0.00022053567999999986, 0.00022053487999999994, 0.0017642851199999989},
      {"dgx1v", "dbtree", 0.00046246520000000078, 7.5980479999999994e-05, 0.0054938460800000102},
      {"dgx2", "forest", 0.00036135304420739249, 3.612861765813072e-05, 0.005676398493984945},
      {"cluster:4x4:pcie:100", "forest", 0.0029170101626224969, 0.00074507667925956147,
       0.046668162601959946},
      {"cluster:4x4:pcie:100", "ps", 0.0081030483200000003, 0.00202828128, 0.12964877312},
      {"cluster:2x4:pairwise", "forest", 0.0012062157645250575, 0.00018378861219693122,
       0.0092358009035088309},
      {"cluster:2x8:nvswitch:400", "forest", 0.0014316924130864182, 8.7681566666666623e-05,
       0.022905078609382686},
      {"cluster:4x8:nvswitch:400", "blink", 0.002140467878530763, 7.4617706666666638e-05,
       0.068478473339651083},
  };
  for (const auto& c : cases) {
    CAPTURE(c.topology);
    CAPTURE(c.algo);
    const auto t = physical::preset(c.topology);
    algo::AlgorithmRequest ar;
    ar.topology = &t;
    // The relays as ranks of their own, as when the figures were taken: rank_finish_s has one
    // entry per plan rank (the times are the same with relays inside ranks: placement_test.cpp).
    ar.host_relays = false;
    const auto reg = algo::make_algorithm(algo::find_algorithm(c.algo).algorithm, ar);
    plan::PlanRequest req;
    req.nranks = reg.nranks();
    req.count = std::uint64_t{1} << 22;
    sim::SimOptions so;
    so.step_overhead_s = 1e-6;
    const auto r = sim::simulate(reg.build(req), sim::to_network(t), reg.rank_node(), so);
    double finish_sum = 0;
    for (double f : r.rank_finish_s) finish_sum += f;
    CHECK(r.time_s == doctest::Approx(c.time_s).epsilon(1e-9));
    CHECK(r.turnaround_s == doctest::Approx(c.turnaround_s).epsilon(1e-9));
    CHECK(finish_sum == doctest::Approx(c.finish_sum_s).epsilon(1e-9));
  }
}
}  // namespace sim_sharing_test
