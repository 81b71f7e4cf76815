// Tests for relays run inside the ranks that host them (plan/placement.hpp, algo::host_relays):
// the rewrite itself, its refusals, the verifier's part (a placement that orders a relay's steps
// behind its host's deadlocks; the placed plan does not), the connection set across counts, and
// every collective on GPU-only graphs with one rank per GPU.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/placement.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/sim/from_physical.hpp"
#include "ccoll/sim/simulator.hpp"
#include "collective_reference.hpp"
#include "rank_threads.hpp"

namespace placement_test {
using namespace ccoll;

namespace {

algo::Registered make(const std::string& name, const physical::PhysicalTopology& t,
                      bool host = true) {
  algo::AlgorithmRequest req;
  req.topology = &t;
  req.host_relays = host;
  return algo::make_algorithm(algo::find_algorithm(name).algorithm, req);
}

plan::Plan build(const algo::Registered& reg, std::uint64_t count, std::uint32_t nchannels = 1,
                 plan::Collective collective = plan::Collective::allreduce, int root = 0) {
  plan::PlanRequest req;
  req.nranks = reg.nranks();
  req.count = count;
  req.nchannels = nchannels;
  req.slot_bytes = 1024;
  req.collective = collective;
  req.root = root;
  return reg.build(req);
}

using Key = std::tuple<std::uint32_t, plan::Rank, plan::Rank>;

std::set<Key> keys(const plan::Plan& p) {
  std::set<Key> k;
  for (const auto& c : p.connections) k.emplace(c.channel, c.from, c.to);
  return k;
}

using ccoll::testing::on_threads;

Config small_config(int p) {
  Config c;
  c.nranks = p;
  c.slot_bytes = 256;  // many chunks per call, and FIFOs that fill
  c.nslots = 2;
  c.nchannels = 2;
  c.timeout = std::chrono::milliseconds(20000);
  return c;
}

// `p` with each hosted rank's steps appended to its host's program on the same channel: one
// sequential program per (rank, channel), the placement place_programs avoids.
plan::Plan appended(const plan::Plan& p, const plan::Placement& placement) {
  plan::Plan out = p;
  std::vector<plan::Rank> number(placement.host.size(), -1);
  plan::Rank kept = 0;
  for (std::size_t r = 0; r < placement.host.size(); ++r)
    if (placement.host[r] == static_cast<plan::Rank>(r)) number[r] = kept++;
  const auto runs_on = [&](plan::Rank r) {
    return number[static_cast<std::size_t>(placement.host[static_cast<std::size_t>(r)])];
  };
  out.active.assign(static_cast<std::size_t>(kept), true);
  out.reset(kept, static_cast<std::uint32_t>(p.channels.size()));
  for (std::size_t c = 0; c < p.channels.size(); ++c)
    for (std::size_t r = 0; r < placement.host.size(); ++r)
      for (const auto& s : p.channels[c].programs[r].steps)
        out.channels[c]
            .programs[static_cast<std::size_t>(runs_on(static_cast<plan::Rank>(r)))]
            .steps.push_back(s);
  // Connections stay distinct by taking the channel of their original index.
  for (std::size_t k = 0; k < p.connections.size(); ++k) {
    out.connections[k].from = runs_on(p.connections[k].from);
    out.connections[k].to = runs_on(p.connections[k].to);
    out.connections[k].channel = static_cast<std::uint32_t>(k);
  }
  return out;
}

}  // namespace

TEST_CASE("place_programs: a relay's programs move to its host's own channels") {
  // dbtree on a ring of four GPUs: relays (ranks 4 and up: its allreduce trees' detours, and the
  // chains of its rooted trees' edges) on GPUs that run ranks.
  const auto t = physical::gpu_ring(4);
  const auto separate = make("dbtree", t, false);
  const plan::Rank n = separate.nranks();
  REQUIRE(n > 4);
  const plan::Plan p = build(separate, 1000, 2);
  REQUIRE(plan::verify(p).ok);
  const plan::Placement placement = algo::relay_placement(separate.rank_node());
  CHECK(placement.nkept() == 4);
  CHECK(placement.max_hosted() >= 1);
  for (plan::Rank r = 0; r < 4; ++r) CHECK(placement.host[static_cast<std::size_t>(r)] == r);
  for (plan::Rank r = 4; r < n; ++r) {
    const plan::Rank h = placement.host[static_cast<std::size_t>(r)];
    CHECK(h < 4);
    CHECK(separate.rank_node()[static_cast<std::size_t>(h)] ==
          separate.rank_node()[static_cast<std::size_t>(r)]);
  }
  const plan::Plan placed = plan::place_programs(p, placement);
  CHECK(placed.nranks == 4);
  CHECK(placed.nactive() == 4);
  CHECK(placed.root == p.root);
  CHECK(placed.channels.size() > p.channels.size());
  // Every step and message survives: the same ports, connections and message counts.
  std::size_t steps = 0, placed_steps = 0;
  for (const auto& ch : p.channels)
    for (const auto& prog : ch.programs) steps += prog.steps.size();
  for (const auto& ch : placed.channels)
    for (const auto& prog : ch.programs) placed_steps += prog.steps.size();
  CHECK(placed_steps == steps);
  CHECK(placed.ports.size() == p.ports.size());
  REQUIRE(placed.connections.size() == p.connections.size());
  for (std::size_t k = 0; k < p.connections.size(); ++k) {
    CHECK(placed.connections[k].messages_per_call == p.connections[k].messages_per_call);
    CHECK(placed.connections[k].from != placed.connections[k].to);
  }
  CHECK(keys(placed).size() == placed.connections.size());
  // The kept ranks' own programs are where they were.
  for (std::size_t c = 0; c < p.channels.size(); ++c)
    for (std::size_t r = 0; r < 4; ++r)
      CHECK(placed.channels[c].programs[r].steps.size() == p.channels[c].programs[r].steps.size());
  const auto report = plan::verify(placed);
  INFO(report.error);
  CHECK(report.ok);
  // The registered algorithm places its plans the same way.
  const auto hosted = make("dbtree", t);
  CHECK(hosted.nranks() == 4);
  CHECK(hosted.hosted_relays == n - 4);
  CHECK(keys(build(hosted, 1000, 2)) == keys(placed));
}

TEST_CASE("place_programs refuses placements that cannot run") {
  const auto t = physical::gpu_ring(4);
  const auto separate = make("dbtree", t, false);
  const plan::Plan p = build(separate, 100);
  plan::Placement placement = algo::relay_placement(separate.rank_node());
  const auto refuses = [&](const plan::Placement& bad, const std::string& what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(plan::place_programs(p, bad), doctest::Contains(what.c_str()), Error);
  };
  plan::Placement wrong_size = placement;
  wrong_size.host.pop_back();
  refuses(wrong_size, "names " + std::to_string(p.nranks - 1) + " ranks; the plan has " +
                          std::to_string(p.nranks));
  plan::Placement hosts_active = placement;
  hosts_active.host[1] = 0;  // rank 1 is active
  refuses(hosts_active, "rank 1 is active; only relays can be hosted");
  plan::Placement chain = placement;
  chain.host[5] = 4;  // 4 is itself hosted
  refuses(chain, "which is not a rank of its own");
  plan::Placement out_of_range = placement;
  out_of_range.host[5] = 9;
  refuses(out_of_range, "which is not a rank of its own");
  // A relay hosted by a rank it talks to would send to itself.
  plan::Placement self = placement;
  for (const auto& c : p.connections)
    if (c.from == 4 && c.to < 4) self.host[4] = c.to;
  refuses(self, "to itself");
  // The trivial placement is the plan itself.
  plan::Placement identity;
  for (plan::Rank r = 0; r < p.nranks; ++r) identity.host.push_back(r);
  CHECK(plan::place_programs(p, identity).connections.size() == p.connections.size());
  CHECK(plan::place_programs(p, identity).nranks == p.nranks);
}

TEST_CASE("the verifier is what makes a placement safe: appended relay steps deadlock") {
  // Running a relay's steps after its host's own on one channel orders messages that the plan
  // leaves independent; on the 4-ring's dbtree and 6-ring's direct plan some host then waits for
  // a message that only its own later (relay) steps would forward. The placed plan, each relay
  // program on a channel of its own, verifies.
  int deadlocks = 0;
  for (const auto& [algorithm, ring_gpus] : std::vector<std::pair<std::string, int>>{
           {"dbtree", 4}, {"direct", 6}, {"ring", 6}, {"dbtree", 6}}) {
    // Named copies: doctest's CAPTURE takes them into a lambda, which a binding cannot enter.
    const std::string name = algorithm;
    const int gpus = ring_gpus;
    CAPTURE(name);
    CAPTURE(gpus);
    const auto t = physical::gpu_ring(gpus);
    const auto separate = make(name, t, false);
    const plan::Plan p = build(separate, 4096, 2);
    const plan::Placement placement = algo::relay_placement(separate.rank_node());
    const auto naive = plan::verify(appended(p, placement));
    if (!naive.ok) {
      ++deadlocks;
      INFO(naive.error);
      CHECK(naive.error.find("deadlock") != std::string::npos);
    }
    const auto placed = plan::verify(plan::place_programs(p, placement));
    INFO(placed.error);
    CHECK(placed.ok);
  }
  CHECK(deadlocks > 0);
}

TEST_CASE("placed plans of every count use the connections of the reference plans") {
  // The communicator fixes its connection set from reference plans; a placed plan for any other
  // count, channel count or root must find every connection there, so labels may not depend on
  // which programs a small plan leaves empty.
  for (const std::string preset : {"ring:4", "ring:6", "torus:3x3", "dgx1v"})
    for (const std::string name : {"dbtree", "direct", "tree", "ring"}) {
      CAPTURE(preset);
      CAPTURE(name);
      const auto t = physical::preset(preset);
      const auto reg = make(name, t);
      CHECK(reg.nranks() == static_cast<int>(t.gpus().size()));
      for (std::uint32_t nch : {1u, 2u}) {
        const std::uint64_t ref_count = static_cast<std::uint64_t>(reg.nranks()) * nch * 4096;
        const auto reference = keys(build(reg, ref_count, nch));
        for (std::uint64_t count : {1ull, 3ull, 17ull, 1000ull, 100000ull}) {
          CAPTURE(count);
          const plan::Plan p = build(reg, count, nch);
          CHECK(p.nranks == reg.nranks());
          const auto report = plan::verify(p);
          INFO(report.error);
          CHECK(report.ok);
          for (const Key& k : keys(p)) CHECK(reference.count(k) == 1);
        }
      }
    }
}

TEST_CASE("every collective on GPU-only graphs, one rank per GPU, relays inside ranks") {
  using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;
  const std::vector<std::uint64_t> counts{1, 7, 300};
  for (const std::string preset : {"ring:4", "ring:5", "torus:2x3", "dgx1v"})
    for (const std::string name : {"auto", "direct", "tree", "dbtree", "ring"}) {
      CAPTURE(preset);
      CAPTURE(name);
      const auto t = physical::preset(preset);
      const auto reg = make(name, t);
      const int p = static_cast<int>(t.gpus().size());
      REQUIRE(reg.nranks() == p);
      const auto run = [&](auto& coll) {
        const auto outcome = on_threads(p, [&](int rank) {
          return ccoll::testing::check_collective_cases(coll, coll.rank(rank), p, counts, false);
        });
        for (int r = 0; r < p; ++r) {
          INFO(coll.name() << " rank " << r);
          CHECK(outcome[static_cast<std::size_t>(r)] == "");
        }
      };
      // The trees plan broadcast and reduce besides allreduce (dbtree on the graph: rooted trees on
      // its ring's positions), the others every collective (the embedded ring: its ring forms and
      // chains along its rings).
      const auto plans = [&](plan::Collective c) { return algo::plans_collective(reg, c); };
      const bool rooted_only = name == "tree" || name == "dbtree";
      for (plan::Collective c : {plan::Collective::reduce_scatter, plan::Collective::all_gather,
                                 plan::Collective::broadcast, plan::Collective::reduce})
        if (!rooted_only || plan::has_root(c)) CHECK(plans(c));
      // auto's relay programs are numbered by the union of its size classes' plans at every root
      // (algo::host_relays), built on the first call of each element size: with 256-byte slots
      // its largest classes are plans of a million steps. 4 KiB slots keep them small; the other
      // algorithms fill their FIFOs.
      Config config = small_config(p);
      if (name == "auto") config.slot_bytes = 4096;
      if (plans(plan::Collective::reduce_scatter)) {
        ReduceScatter<transport::HostThreads, algo::Registered, Overlapped> rs(config, reg);
        run(rs);
      }
      if (plans(plan::Collective::all_gather)) {
        AllGather<transport::HostThreads, algo::Registered, Overlapped> ag(config, reg);
        run(ag);
      }
      if (plans(plan::Collective::broadcast)) {
        Broadcast<transport::HostThreads, algo::Registered, Overlapped> bc(config, reg);
        run(bc);
      }
      if (plans(plan::Collective::reduce)) {
        Reduce<transport::HostThreads, algo::Registered, Overlapped> rd(config, reg);
        run(rd);
      }
    }
}

TEST_CASE("the simulator predicts a placed plan as the plan with relays as ranks") {
  // A relay's steps run on its GPU either way: the prediction must not change with placement.
  for (const std::string preset : {"ring:4", "torus:3x3", "dgx1v"})
    for (const std::string name : {"dbtree", "direct"}) {
      CAPTURE(preset);
      CAPTURE(name);
      const auto t = physical::preset(preset);
      const auto hosted = make(name, t), separate = make(name, t, false);
      const sim::Network net = sim::to_network(t);
      const auto a = sim::simulate(build(hosted, 1 << 20, 2), net, hosted.rank_node());
      const auto b = sim::simulate(build(separate, 1 << 20, 2), net, separate.rank_node());
      CHECK(a.time_s > 0);
      CHECK(a.time_s == doctest::Approx(b.time_s).epsilon(1e-9));
    }
}

namespace {

// A plan source that ignores the request's FIFO depth (a fresh request: 4 slots).
plan::Plan ring_of_default_depth(const plan::PlanRequest& r) {
  plan::PlanRequest q;
  q.nranks = r.nranks;
  q.count = r.count;
  q.elem_size = r.elem_size;
  q.slot_bytes = r.slot_bytes;
  return plan::build_ring(q);
}

// Tree plans whose small ones make rank 2 a relay (pruned from the tree).
plan::Plan tree_with_a_relay_below_1000(const plan::PlanRequest& r) {
  if (r.count >= 1000) return plan::build_tree(r);
  plan::TreeSpec t;
  t.root = 0;
  t.reduce_parent = plan::binary_tree_parents(r.nranks);
  t.share = 1.0;
  return plan::build_trees(r, {t}, 2);
}

}  // namespace

TEST_CASE("a plan whose relays are not the reference plans' is refused") {
  // Placement changes which ranks are relays, so the cache must hold every plan to the active
  // set it laid the calls out for: the verifier accepts a plan by its own, and this one left
  // rank 2's output unwritten and its input out of the sums of the others (3 instead of 6).
  Config c = small_config(3);
  transport::HostThreads::Executor ex(c, &tree_with_a_relay_below_1000, "tree-with-relay");
  const auto outcome = on_threads(3, [&](int rank) {
    std::vector<float> in(100, static_cast<float>(rank + 1)), out(100, -7.0f);
    ex.run(rank, in.data(), out.data(), in.size(), DataType::f32, ReduceOp::sum);
    return std::string("ran, out[0] = ") + std::to_string(out[0]);
  });
  int refused = 0;
  for (const std::string& o : outcome) {
    CAPTURE(o);
    CHECK(o.find("threw: ") == 0);
    refused += o.find("makes rank 2 a relay") != std::string::npos ? 1 : 0;
  }
  CHECK(refused >= 1);
}

TEST_CASE("a plan proven deadlock-free for deeper FIFOs than the connections have is refused") {
  // The proof holds for the depth the plan names; the ring needs two slots, so on connections of
  // one slot it verified and then waited until the timeout on every rank.
  Config c = small_config(3);
  c.nslots = 1;
  c.nchannels = 1;
  c.timeout = std::chrono::milliseconds(10000);
  transport::HostThreads::Executor ex(c, &ring_of_default_depth, "ring-default-depth");
  const auto outcome = on_threads(3, [&](int rank) {
    std::vector<float> in(1000, 1.0f), out(1000, 0.0f);
    ex.run(rank, in.data(), out.data(), in.size(), DataType::f32, ReduceOp::sum);
    return std::string("ran");
  });
  // The rank that prepares the plan first refuses it; the others stop on its abort, not at the
  // timeout.
  int refused = 0;
  for (const std::string& o : outcome) {
    CAPTURE(o);
    CHECK(o.find("timeout") == std::string::npos);
    CHECK(o.find("threw: ") == 0);
    refused += o.find("Config::nslots = 1") != std::string::npos ? 1 : 0;
  }
  CHECK(refused >= 1);
}
}  // namespace placement_test
