// Tests of the discrete-event simulator (include/ccoll/sim): closed forms of [C-Cube] Eq. 2-7
// on a uniform network, max-min link sharing, FIFO slot limits, turnaround, traces, and physical
// topologies.
#include <doctest/doctest.h>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/model/alpha_beta.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/sim/chrome_trace.hpp"
#include "ccoll/sim/from_physical.hpp"
#include "ccoll/sim/simulator.hpp"
#include "sweep.hpp"

namespace sim_test {
using namespace ccoll;

namespace {

constexpr double kAlpha = 2e-6;
constexpr double kBandwidth = 10e9;  // bytes/s
const model::AlphaBeta kLink{kAlpha, 1.0 / kBandwidth};

plan::PlanRequest request(int P, double bytes) {
  plan::PlanRequest req;
  req.nranks = P;
  req.count = static_cast<std::uint64_t>(bytes / 4);
  req.elem_size = 4;
  req.slot_bytes = std::uint64_t{1} << 32;  // no slot-driven chunking: the closed forms' setting
  req.alpha_s = kLink.alpha_s;
  req.beta_s_per_byte = kLink.beta_s_per_byte;
  return req;
}

int floor_log2(int P) {
  int d = 0;
  while ((2 << d) <= P) ++d;
  return d;
}

// A hand-made plan: `senders` ranks each send one message of `elems` to the last rank.
plan::Plan fan_in(int senders, std::uint64_t elems) {
  plan::Plan p;
  p.algorithm = "fan-in";
  p.count = elems;
  p.slot_elems = elems;
  p.nslots = 2;
  p.reset(senders + 1, 1);
  std::vector<plan::Rank> from;
  for (int r = 0; r < senders; ++r) {
    p.add_step(0, r, 0, elems, plan::Source::Input, {}, {senders}, false, false);
    from.push_back(r);
  }
  p.add_step(0, senders, 0, elems, plan::Source::Input, from, {}, true, true);
  p.finalize();
  return p;
}

}  // namespace

TEST_CASE("ring matches [C-Cube] Eq. 2: 2(P-1) alpha + 2 (P-1)/P beta N") {
  for (int P : {2, 3, 4, 5, 8, 16, 33, 64}) {
    const auto net = sim::uniform_network(P, kBandwidth, kAlpha);
    for (double N : {4096.0 * P, 1e6 * P / 4, 64e6}) {
      const auto req = request(P, N);
      const auto plan = plan::build_ring(req);
      const auto res = sim::simulate(plan, net);
      const double bytes = static_cast<double>(req.count) * 4;
      const double closed = model::ring_allreduce_time(kLink, P, bytes);
      CAPTURE(P);
      CAPTURE(N);
      CHECK(res.time_s == doctest::Approx(closed).epsilon(0.05));
      // Every ring link carries 2 (P-1)/P of the data.
      for (const auto& l : res.links)
        CHECK(l.bytes == doctest::Approx(2.0 * (P - 1) / P * bytes).epsilon(0.01));
      CHECK(res.rank_finish_s.size() == static_cast<std::size_t>(P));
    }
  }
}

TEST_CASE("trees match [C-Cube] Eq. 3 (phased) and Eq. 7's pipeline (overlapped)") {
  for (int P : {2, 4, 8, 16, 64, 128}) {
    const auto net = sim::uniform_network(P, kBandwidth, kAlpha);
    const int depth = floor_log2(P);  // heap-ordered binary tree
    for (double N : {1e6, 16e6}) {
      for (std::uint32_t K : {1u, 4u, 32u, 100u}) {
        auto req = request(P, N);
        req.nchunks = K;
        const double bytes = static_cast<double>(req.count) * 4;
        const double step = kLink.time(bytes / K);
        CAPTURE(P);
        CAPTURE(N);
        CAPTURE(K);
        for (bool overlap : {false, true}) {
          req.overlap = overlap;
          const auto res = sim::simulate(plan::build_tree(req), net);
          // The exact pipeline: (depth + K - 1) steps per phase, or 2 depth + K - 1 overlapped.
          const double exact =
              overlap ? (2.0 * depth + K - 1) * step : 2.0 * (depth + K - 1) * step;
          CHECK(res.time_s == doctest::Approx(exact).epsilon(1e-6));
          // Turnaround: overlapped, the first chunk is back after 2 depth steps; phased, after the
          // whole reduce and depth more.
          const double first = overlap ? 2.0 * depth * step : (2.0 * depth + K - 1) * step;
          CHECK(res.turnaround_s == doctest::Approx(first).epsilon(1e-6));
          // The seeds count log P + K steps per phase: within 5% once K is large enough for the
          // missing step to matter less than that.
          if (P >= 4 && K >= 32) {
            const double eq = overlap ? model::overlapped_tree_time(kLink, depth, bytes, K)
                                      : model::phased_tree_time(kLink, depth, bytes, K);
            CHECK(res.time_s == doctest::Approx(eq).epsilon(0.05));
          }
        }
      }
    }
  }
}

TEST_CASE("trees at the optimal K match [C-Cube] Eq. 6 and Eq. 7") {
  const model::AlphaBeta link{1e-6, 1.0 / kBandwidth};
  ccoll::testing::Sweep sweep;
  for (int P : {8, 64, 256}) {
    const auto net = sim::uniform_network(P, kBandwidth, link.alpha_s);
    const double depth = floor_log2(P);
    for (double N : {16e6, 64e6}) {
      if (!sweep.take()) continue;
      auto req = request(P, N);
      req.alpha_s = link.alpha_s;
      const double bytes = static_cast<double>(req.count) * 4;
      const double k4 = model::phased_tree_optimal_chunks(link, depth, bytes);  // Eq. 4
      CAPTURE(P);
      CAPTURE(N);
      CAPTURE(k4);
      REQUIRE(k4 > 20);
      req.nchunks = static_cast<std::uint32_t>(std::lround(k4));
      req.overlap = false;
      CHECK(sim::simulate(plan::build_tree(req), net).time_s ==
            doctest::Approx(model::phased_tree_optimal_time(link, depth, bytes)).epsilon(0.05));
      req.overlap = true;  // Eq. 7 as printed: the overlapped tree at Eq. 4's K
      CHECK(sim::simulate(plan::build_tree(req), net).time_s ==
            doctest::Approx(model::overlapped_tree_time_seed004_eq7(link, depth, bytes))
                .epsilon(0.05));
      req.nchunks = static_cast<std::uint32_t>(
          std::lround(model::overlapped_tree_optimal_chunks(link, depth, bytes)));
      CHECK(sim::simulate(plan::build_tree(req), net).time_s ==
            doctest::Approx(model::overlapped_tree_optimal_time(link, depth, bytes)).epsilon(0.05));
    }
  }
}

TEST_CASE("concurrent flows share a link max-min fairly") {
  // Senders 0..n-1 each reach the receiver through their own link to a switch, then one shared
  // link switch -> receiver.
  for (int n : {1, 2, 3, 5}) {
    sim::Network net;
    for (int r = 0; r <= n; ++r) net.add_node(std::to_string(r).insert(0, 1, 'r'), false);
    const int sw = net.add_node("switch", true);
    for (int r = 0; r < n; ++r) net.add_link(r, sw, 4e9, 1e-6);
    net.add_link(sw, n, 2e9, 1e-6);
    const std::uint64_t elems = 1 << 20;
    const auto res = sim::simulate(fan_in(n, elems), net);
    const double bytes = 4.0 * elems;
    // Shared link: n flows at 2/n GB/s each (alone, a flow is capped by the 2 GB/s link).
    CAPTURE(n);
    CHECK(res.time_s == doctest::Approx(n * bytes / 2e9 + 2e-6).epsilon(1e-9));
    double total = 0;
    for (const auto& l : res.links) total += l.bytes;
    CHECK(total == doctest::Approx(2.0 * n * bytes));
  }
  // Unequal bottlenecks: flow A limited to 0.5 GB/s by its own link, flow B takes the rest.
  sim::Network net;
  for (int r = 0; r < 3; ++r) net.add_node(std::to_string(r).insert(0, 1, 'r'), false);
  const int sw = net.add_node("switch", true);
  net.add_link(0, sw, 0.5e9, 0);
  net.add_link(1, sw, 4e9, 0);
  net.add_link(sw, 2, 2e9, 0);
  const double bytes = 4.0 * (1 << 20);
  const auto res = sim::simulate(fan_in(2, 1 << 20), net);
  // B runs at 1.5 GB/s until it is done, then A alone at 0.5 GB/s: A is the last, at bytes / 0.5.
  CHECK(res.time_s == doctest::Approx(bytes / 0.5e9).epsilon(1e-9));
}

TEST_CASE("flows that end at different times: max-min rates are recomputed as each ends") {
  // Senders 0..2 send 1, 2 and 3 units through one shared 2 GB/s link (their own links are
  // faster). All three run at 2/3 GB/s until the first is done, the last two at 1 GB/s, then the
  // last alone: it finishes at 3 + 2 + 1 = 6 units / (2 GB/s). Each sender's step ends when its
  // message has arrived, so the senders' finish times show each flow's end.
  const std::uint64_t unit = 1 << 18;
  sim::Network net;
  for (int r = 0; r < 4; ++r) net.add_node(std::to_string(r).insert(0, 1, 'r'), false);
  const int sw = net.add_node("switch", true);
  for (int r = 0; r < 3; ++r) net.add_link(r, sw, 8e9, 1e-6);
  net.add_link(sw, 3, 2e9, 1e-6);
  plan::Plan p;
  p.algorithm = "staggered";
  p.count = 6 * unit;
  p.slot_elems = 3 * unit;
  p.nslots = 2;
  p.reset(4, 1);
  std::uint64_t offset = 0;
  for (int r = 0; r < 3; ++r) {
    const std::uint64_t n = static_cast<std::uint64_t>(r + 1) * unit;
    p.add_step(0, r, offset, n, plan::Source::Input, {}, {3}, false, false);
    p.add_step(0, 3, offset, n, plan::Source::None, {r}, {}, true, true);
    offset += n;
  }
  p.finalize();
  const auto res = sim::simulate(p, net);
  const double u = 4.0 * unit / 2e9;  // one unit through the shared link alone
  REQUIRE(res.rank_finish_s.size() == 4);
  CHECK(res.rank_finish_s[0] == doctest::Approx(3 * u + 2e-6).epsilon(1e-9));
  CHECK(res.rank_finish_s[1] == doctest::Approx(5 * u + 2e-6).epsilon(1e-9));
  CHECK(res.rank_finish_s[2] == doctest::Approx(6 * u + 2e-6).epsilon(1e-9));
  CHECK(res.time_s == doctest::Approx(6 * u + 2e-6).epsilon(1e-9));
}

TEST_CASE("ready: when each chunk is complete everywhere ([C-Cube]'s gradient queue)") {
  for (int P : {4, 8, 16}) {
    const auto net = sim::uniform_network(P, kBandwidth, kAlpha);
    const int depth = floor_log2(P);
    const std::uint32_t K = 16;
    auto req = request(P, 4e6);
    req.nchunks = K;
    const double bytes = static_cast<double>(req.count) * 4;
    const double step = kLink.time(bytes / K);
    for (bool overlap : {false, true}) {
      req.overlap = overlap;
      const auto res = sim::simulate(plan::build_tree(req), net);
      CAPTURE(P);
      CAPTURE(overlap);
      // The pieces tile the buffer, once each.
      REQUIRE(res.ready.size() == K);
      std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;
      for (const auto& r : res.ready) pieces.emplace_back(r.begin, r.end);
      std::sort(pieces.begin(), pieces.end());
      CHECK(pieces.front().first == 0);
      CHECK(pieces.back().second == req.count);
      for (std::size_t i = 1; i < pieces.size(); ++i)
        CHECK(pieces[i].first == pieces[i - 1].second);
      // The tree delivers chunks in order, one per step: chunk k is back everywhere after
      // 2 depth + k steps (overlapped) or after the whole reduce, depth more, and k (phased).
      for (std::uint32_t k = 0; k < K; ++k) {
        const double expect = overlap ? (2.0 * depth + k) * step : (2.0 * depth + K - 1 + k) * step;
        CHECK(res.ready[k].time_s == doctest::Approx(expect).epsilon(1e-6));
        CHECK(res.ready[k].begin == pieces[k].first);
      }
      CHECK(res.turnaround_s == res.ready.front().time_s);
      CHECK(res.ready.back().time_s == doctest::Approx(res.time_s).epsilon(1e-9));
    }
  }
  // The ring completes every piece in its last P - 1 steps: nothing is ready before the
  // all-gather has begun.
  const int P = 8;
  const auto res =
      sim::simulate(plan::build_ring(request(P, 8e6)), sim::uniform_network(P, kBandwidth, kAlpha));
  REQUIRE(!res.ready.empty());
  CHECK(res.ready.front().time_s > res.time_s * (P - 1.0) / (2.0 * (P - 1)));
}

TEST_CASE("FIFO slots bound how far a sender runs ahead; reduction cost is charged") {
  // Rank 0 sends K chunks to rank 1, which reduces each with its input (reduce_Bps).
  const std::uint32_t K = 8;
  const std::uint64_t elems = 1 << 18;  // 1 MiB of floats per chunk
  const double bytes = 4.0 * elems;
  for (std::uint32_t nslots : {1u, 2u, 8u}) {
    plan::Plan p;
    p.algorithm = "stream";
    p.count = K * elems;
    p.slot_elems = elems;
    p.nslots = nslots;
    p.reset(2, 1);
    for (std::uint32_t k = 0; k < K; ++k) {
      p.add_step(0, 0, k * elems, elems, plan::Source::Input, {}, {1}, false, false);
      p.add_step(0, 1, k * elems, elems, plan::Source::Input, {0}, {}, true, true);
    }
    p.finalize();
    sim::SimOptions opt;
    opt.reduce_Bps = bytes / 1e-4;              // 100 us per chunk
    const double transfer = kLink.time(bytes);  // ~107 us
    const auto res = sim::simulate(p, sim::uniform_network(2, kBandwidth, kAlpha), {}, opt);
    CAPTURE(nslots);
    if (nslots == 1) {
      // Message k+1 waits for message k's step to finish: transfer + reduce each.
      CHECK(res.time_s == doctest::Approx(K * (transfer + 1e-4)).epsilon(1e-6));
    } else {
      // The receiver keeps up (100 us < transfer): the transfers pipeline.
      CHECK(res.time_s == doctest::Approx(K * transfer + 1e-4).epsilon(1e-6));
    }
  }
}

TEST_CASE("a plan that cannot finish is reported, not hung") {
  plan::Plan p;
  p.count = 4;
  p.slot_elems = 4;
  p.reset(2, 1);
  p.add_step(0, 0, 0, 4, plan::Source::Input, {1}, {1}, true, true);
  p.add_step(0, 1, 0, 4, plan::Source::Input, {0}, {0}, true, true);
  p.finalize();
  CHECK_THROWS_WITH_AS(sim::simulate(p, sim::uniform_network(2, 1e9, 0)),
                       doctest::Contains("stalls at rank 0"), std::runtime_error);
  CHECK_THROWS_AS(sim::simulate(p, sim::uniform_network(2, 1e9, 0), {0, 5}), std::invalid_argument);
}

TEST_CASE("double binary tree runs and beats the single phased tree on bandwidth") {
  for (int P : {4, 8, 16, 32}) {
    auto req = request(P, 64e6);
    const auto net = sim::uniform_network(P, kBandwidth, kAlpha);
    const auto dbt = plan::build_double_binary_tree(req);
    REQUIRE(plan::verify(dbt).ok);
    const auto res = sim::simulate(dbt, net);
    req.overlap = false;
    const auto tree = sim::simulate(plan::build_tree(req), net);
    CAPTURE(P);
    CHECK(res.time_s > 0);
    CHECK(res.time_s < tree.time_s);
    // No allreduce beats the time to move N bytes through one link.
    CHECK(res.time_s > 64e6 / kBandwidth);
  }
}

TEST_CASE("Chrome trace has one slice per step and link counters") {
  auto req = request(4, 1e6);
  req.nchunks = 4;
  const auto plan = plan::build_tree(req);
  sim::SimOptions opt;
  opt.record_trace = true;
  const auto res = sim::simulate(plan, sim::uniform_network(4, kBandwidth, kAlpha), {}, opt);
  REQUIRE(res.spans.size() == res.steps);
  std::ostringstream os;
  sim::write_chrome_trace(os, res, static_cast<std::uint32_t>(plan.channels.size()));
  const auto doc = nlohmann::json::parse(os.str());
  std::size_t slices = 0, counters = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ++slices;
      CHECK(e["dur"].get<double>() >= 0);
    }
    if (e["ph"] == "C") ++counters;
  }
  CHECK(slices == res.steps);
  CHECK(counters > 0);
}

TEST_CASE("physical topologies: routes through switches and NICs, per-link utilisation") {
  SUBCASE("ring over two PCIe machines is bound by the 10 Gbps NICs") {
    // [TopoSync] Fig. 3 by hand (physical::cluster builds the same; GCC 12 -O3 reports a false
    // -Wrestrict inside it when it is inlined here).
    physical::PhysicalTopology topo;
    for (int m = 0; m < 2; ++m) {
      const std::string host(1, static_cast<char>('a' + m));
      for (int g = 0; g < 4; ++g)
        topo.add_node(host + std::to_string(g), physical::NodeKind::gpu, host);
    }
    for (int m = 0; m < 2; ++m) {
      const std::string host(1, static_cast<char>('a' + m));
      const int pcie = topo.add_node(host + "pcie", physical::NodeKind::switch_, host);
      const int nic = topo.add_node(host + "nic", physical::NodeKind::nic, host);
      for (int g = 0; g < 4; ++g) topo.add_link(m * 4 + g, pcie, 12.5, 1, 1.0, "pcie");
      topo.add_link(pcie, nic, 12.5, 1, 1.0, "pcie");
    }
    const int tor = topo.add_node("tor", physical::NodeKind::switch_);
    topo.add_link(topo.find("anic"), tor, 1.25, 1, 2.0, "net");
    topo.add_link(topo.find("bnic"), tor, 1.25, 1, 2.0, "net");
    const auto net = sim::to_network(topo);
    const auto nodes = sim::compute_rank_nodes(topo);
    REQUIRE(nodes.size() == 8);
    const auto req = request(8, 64e6);
    const auto res = sim::simulate(plan::build_ring(req), net, nodes);
    const double bytes = static_cast<double>(req.count) * 4;
    // 2 (P-1) steps of N/P bytes, each crossing one machine boundary at 1.25 GB/s.
    const double bound = 2.0 * 7 * (bytes / 8) / 1.25e9;
    CHECK(res.time_s == doctest::Approx(bound).epsilon(0.05));
    double nic_util = 0;
    for (const auto& l : res.links)
      if (l.name.find("nic") != std::string::npos && l.name.find("tor") != std::string::npos)
        nic_util = std::max(nic_util, l.utilisation);
    CHECK(nic_util > 0.9);
    CHECK(nic_util <= 1.0 + 1e-9);
  }
  SUBCASE("every link stays within its capacity on DGX-1V") {
    const auto topo = physical::dgx1v();
    const auto res = sim::simulate(plan::build_ring(request(8, 16e6)), sim::to_network(topo),
                                   sim::compute_rank_nodes(topo));
    CHECK(res.time_s > 0);
    for (const auto& l : res.links) {
      CHECK(l.utilisation <= 1.0 + 1e-9);
      CHECK(l.busy_s <= res.time_s * (1 + 1e-9));
    }
  }
}
}  // namespace sim_test
