// The plans of the collectives beside allreduce (plan/collective.hpp): reduce-scatter and
// all-gather (ring, direct), broadcast and reduce (chain, direct) verify over P = 1..33, roots,
// counts (zero, odd, not a multiple of the chunking), channels and FIFO depths; and the verifier
// rejects plans that compute the wrong collective, each with a message that says where.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ccoll/plan/all_gather.hpp"
#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/reduce_scatter.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/rooted.hpp"
#include "ccoll/plan/rooted_trees.hpp"
#include "ccoll/plan/verifier.hpp"
#include "sweep.hpp"

namespace plan_collectives_test {
using namespace ccoll;
using namespace ccoll::plan;

namespace {

using Builder = std::function<Plan(const PlanRequest&)>;

struct Kind {
  const char* name;
  plan::Collective collective;
  Builder build;
  bool ring;  // needs two slots per FIFO
};

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {"ring reduce-scatter", plan::Collective::reduce_scatter, &build_ring_reduce_scatter, true},
      {"direct reduce-scatter", plan::Collective::reduce_scatter, &build_direct_reduce_scatter,
       false},
      {"ring all-gather", plan::Collective::all_gather, &build_ring_all_gather, true},
      {"direct all-gather", plan::Collective::all_gather, &build_direct_all_gather, false},
      {"chain broadcast", plan::Collective::broadcast, &build_chain_broadcast, false},
      {"direct broadcast", plan::Collective::broadcast, &build_direct_broadcast, false},
      {"chain reduce", plan::Collective::reduce, &build_chain_reduce, false},
      {"direct reduce", plan::Collective::reduce, &build_direct_reduce, false},
      {"tree broadcast", plan::Collective::broadcast, &build_tree_broadcast, false},
      {"dbtree broadcast", plan::Collective::broadcast, &build_dbtree_broadcast, false},
      {"tree reduce", plan::Collective::reduce, &build_tree_reduce, false},
      {"dbtree reduce", plan::Collective::reduce, &build_dbtree_reduce, false},
  };
  return k;
}

PlanRequest request(Rank p, std::uint64_t count, std::uint32_t nchannels, std::uint32_t nslots,
                    std::uint64_t slot_bytes, Rank root) {
  PlanRequest req;
  req.nranks = p;
  req.count = count;
  req.nchannels = nchannels;
  req.nslots = nslots;
  req.slot_bytes = slot_bytes;
  req.root = root;
  return req;
}

std::string verify_error(const Plan& plan) {
  const VerifyReport r = verify(plan);
  return r.ok ? std::string() : r.error;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("collective plans verify over ranks, roots, counts, channels and FIFO depths") {
  long plans = 0;
  testing::Sweep sweep;
  for (Rank p = 1; p <= 33; ++p) {
    const bool small = p <= 9;
    std::vector<Rank> roots;
    if (small)
      for (Rank r = 0; r < p; ++r) roots.push_back(r);
    else
      roots = {0, p / 2, p - 1};
    // Per-rank counts: zero, one, odd, and more than a slot holds (16 elements of 4 bytes).
    const std::vector<std::uint64_t> per_rank =
        small ? std::vector<std::uint64_t>{0, 1, 3, 37, 101} : std::vector<std::uint64_t>{1, 37};
    const std::vector<std::uint32_t> depths =
        small ? std::vector<std::uint32_t>{1, 2, 3} : std::vector<std::uint32_t>{2};
    const std::vector<std::uint32_t> channels =
        small ? std::vector<std::uint32_t>{1, 2, 3} : std::vector<std::uint32_t>{2};
    for (const Kind& kind : kinds())
      for (std::uint64_t n : per_rank)
        for (std::uint32_t nslots : depths)
          for (std::uint32_t nch : channels) {
            const bool rooted = has_root(kind.collective);
            // Blocked collectives address P blocks; rooted ones a count that is no multiple of P.
            const std::uint64_t count =
                has_blocks(kind.collective) ? n * static_cast<std::uint64_t>(p) : n * 3 + 1;
            for (Rank root : rooted ? roots : std::vector<Rank>{0}) {
              if (!sweep.take()) continue;
              const PlanRequest req = request(p, count, nch, nslots, 64, root);
              INFO(kind.name << " P=" << p << " count=" << count << " nslots=" << nslots
                             << " channels=" << nch << " root=" << root);
              if (kind.ring && p > 1 && nslots < 2) {
                CHECK_THROWS_AS(kind.build(req), Error);
                continue;
              }
              const Plan plan = kind.build(req);
              CHECK(plan.collective == kind.collective);
              CHECK(plan.count == count);
              if (rooted) CHECK(plan.root == root);
              const std::string error = verify_error(plan);
              CHECK_MESSAGE(error.empty(), error);
              ++plans;
            }
          }
  }
  CHECK(plans > 10000 / static_cast<long>(testing::sweep_share().stride));
}

TEST_CASE("collective plans move what they must: hops and messages") {
  // Ring reduce-scatter and all-gather: each block crosses P - 1 links once per chunk; the chain
  // broadcast P - 1 links per chunk; direct forms one hop.
  for (Rank p : {2, 5, 8}) {
    const auto up = static_cast<std::uint64_t>(p);
    const std::uint64_t b = 100;
    PlanRequest req = request(p, b * up, 1, 2, 1 << 20, 0);
    for (const Builder& build :
         {Builder(&build_ring_reduce_scatter), Builder(&build_ring_all_gather)}) {
      const Plan plan = build(req);
      std::uint64_t messages = 0;
      for (const Connection& c : plan.connections) messages += c.messages_per_call;
      CHECK(messages == up * (up - 1));  // one chunk per block, P - 1 hops each
      CHECK(verify(plan).rounds == up);  // one step per hop, every rank busy in every round
    }
    const Plan chain = build_chain_broadcast(req);
    CHECK(chain.connections.size() == up - 1);
    const Plan direct = build_direct_reduce(req);
    CHECK(direct.connections.size() == up - 1);
    for (const Connection& c : direct.connections) CHECK(c.to == 0);
  }
}

TEST_CASE("rooted trees: log-depth, and the double binary tree sends each element once per rank") {
  // Elements each rank sends in a plan.
  auto sent = [](const Plan& plan) {
    std::vector<std::uint64_t> out(static_cast<std::size_t>(plan.nranks), 0);
    for (const auto& ch : plan.channels)
      for (std::size_t r = 0; r < ch.programs.size(); ++r)
        for (const auto& st : ch.programs[r].steps) out[r] += st.count * st.send_count;
    return out;
  };
  for (Rank p : {5, 8, 9, 16})
    for (Rank root : {Rank{0}, Rank{3}}) {
      INFO("P=" << p << " root=" << root);
      const std::uint64_t n = 6000;
      const PlanRequest req = request(p, n, 2, 2, 1u << 20, root);
      const Plan db = build_dbtree_broadcast(req);
      const auto db_sent = sent(db);
      for (Rank r = 0; r < p; ++r) {
        INFO("rank " << r);
        // The root sends each element once (half down each tree); a peer sends the half it
        // forwards to at most two children in the tree where it is internal, so at most once
        // per element on average: at most n, where one binary tree asks 2n of internal ranks.
        CHECK(db_sent[static_cast<std::size_t>(r)] <= n + 2);
      }
      const Plan tree = build_tree_broadcast(req);
      const auto tree_sent = sent(tree);
      CHECK(*std::max_element(tree_sent.begin(), tree_sent.end()) > n);
      // The reduce mirrors the broadcast: the same messages in the other direction.
      const auto db_reduce_sent = sent(build_dbtree_reduce(req));
      std::uint64_t total_b = 0, total_r = 0;
      for (Rank r = 0; r < p; ++r) {
        total_b += db_sent[static_cast<std::size_t>(r)];
        total_r += db_reduce_sent[static_cast<std::size_t>(r)];
      }
      CHECK(total_b == total_r);
      CHECK(total_b == n * static_cast<std::uint64_t>(p - 1));  // every peer receives it once
    }
}

TEST_CASE("the verifier refuses plans that compute another collective") {
  const Rank p = 4;
  const PlanRequest req = request(p, 4 * 10, 1, 2, 1 << 20, 1);

  SUBCASE("an allreduce is no reduce-scatter: it writes outside the rank's block") {
    Plan plan = build_ring(req);
    plan.collective = plan::Collective::reduce_scatter;
    CHECK(contains(verify_error(plan), "outside its output [0,10)"));
  }
  SUBCASE("a reduce-scatter that never finalizes") {
    Plan plan = build_ring_reduce_scatter(req);
    for (auto& prog : plan.channels[0].programs)
      for (auto& s : prog.steps) s.final = false;
    CHECK(contains(verify_error(plan), "is never finalized"));
  }
  SUBCASE("an all-gather that reads input outside its block") {
    Plan plan = build_ring_all_gather(req);
    auto& first = plan.channels[0].programs[2].steps[0];
    REQUIRE(first.src == Source::Input);
    first.offset = 0;  // rank 2's block is [20,30)
    CHECK(contains(verify_error(plan), "reads input elements [0,10) outside its input [20,30)"));
  }
  SUBCASE("a broadcast that combines two copies of the root's input") {
    // Rank 2 forwards the root's input to rank 1, which also has it from the root.
    Plan plan;
    PlanRequest small = request(3, 8, 1, 2, 1 << 20, 0);
    PlanBuilder b(plan, "twice", small, 1);
    plan.collective = plan::Collective::broadcast;
    const std::uint32_t to1 = b.connection(0, 1, 0), to2 = b.connection(0, 2, 0),
                        relay = b.connection(2, 1, 0);
    b.add(0, 0, 0, 8, Source::Input, {}, {to1, to2}, true, false);
    b.add(0, 2, 0, 8, Source::None, {to2}, {relay}, true, false);
    b.add(0, 1, 0, 8, Source::None, {to1, relay}, {}, true, false);
    b.finish();
    CHECK(contains(verify_error(plan), "combines two contributions in element range [0,8)"));
  }
  SUBCASE("an all-gather that finalizes") {
    Plan plan = build_ring_all_gather(req);
    plan.channels[0].programs[0].steps[0].final = true;
    CHECK(contains(verify_error(plan), "does not reduce"));
  }
  SUBCASE("an all-gather whose blocks land in the wrong place") {
    Plan plan = build_direct_all_gather(req);
    // Rank 0 labels rank 3's block as rank 2's: rank 0's output at [20,30) then holds rank 3's.
    for (auto& s : plan.channels[0].programs[0].steps)
      if (s.recv_count == 1 && plan.connections[plan.ports[s.recv_begin].connection].from == 3)
        s.offset = 20;
    CHECK(contains(verify_error(plan), "receives [20,30) as message 0"));
  }
  SUBCASE("a broadcast in which another rank reads its input") {
    Plan plan = build_direct_broadcast(req);
    for (auto& s : plan.channels[0].programs[2].steps) s.src = Source::Input;
    CHECK(contains(verify_error(plan), "outside its input (none)"));
  }
  SUBCASE("a broadcast from the wrong root") {
    Plan plan = build_chain_broadcast(req);
    plan.root = 0;  // built from root 1
    CHECK(contains(verify_error(plan), "rank 1 channel 0 step 0: reads input elements"));
  }
  SUBCASE("a reduce that writes output on a rank other than the root") {
    Plan plan = build_chain_reduce(req);
    for (auto& s : plan.channels[0].programs[3].steps) s.write_output = true;
    CHECK(contains(verify_error(plan), "outside its output (none)"));
  }
  SUBCASE("blocks that do not divide, and a root that is no active rank") {
    Plan plan = build_ring_reduce_scatter(req);
    plan.count = 41;
    CHECK(contains(verify_error(plan), "a count that is a multiple of 4"));
    Plan rooted = build_direct_reduce(req);
    rooted.root = 7;
    CHECK(contains(verify_error(rooted), "root 7 is not an active rank"));
    rooted.root = 1;
    rooted.active[1] = false;
    CHECK_FALSE(verify_error(rooted).empty());
  }
  SUBCASE("builders refuse counts and roots that do not fit") {
    PlanRequest bad = req;
    bad.count = 41;
    CHECK_THROWS_AS(build_ring_reduce_scatter(bad), Error);
    CHECK_THROWS_AS(build_direct_all_gather(bad), Error);
    bad = req;
    bad.root = 4;
    CHECK_THROWS_AS(build_chain_broadcast(bad), Error);
    bad.root = -1;
    CHECK_THROWS_AS(build_direct_reduce(bad), Error);
  }
}

TEST_CASE("collective names and buffer spans follow NCCL") {
  CHECK(collective_name(plan::Collective::reduce_scatter) == "reduce_scatter");
  CHECK(reduces(plan::Collective::reduce));
  CHECK_FALSE(reduces(plan::Collective::all_gather));
  // Rank with block 2 of 10 elements in a 40-element space.
  CHECK(output_span(plan::Collective::reduce_scatter, 40, 2, 10, false).begin == 20);
  CHECK(input_span(plan::Collective::all_gather, 40, 2, 10, false).end == 30);
  CHECK(input_span(plan::Collective::broadcast, 40, 2, 10, false).end == 0);
  CHECK(output_span(plan::Collective::reduce, 40, 2, 10, true).end == 40);
}

TEST_CASE("ring forms on given ring orders (embedded rings) verify, every root and channel count") {
  // A physical graph's embedded rings visit the ranks in any order; the reduce-scatter, all-gather
  // and chains along them must compute the same collectives: block j still rank j's.
  std::uint32_t seed = 7;
  const auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  for (Rank p = 1; p <= 9; ++p)
    for (std::uint32_t nrings : {1u, 2u, 3u}) {
      std::vector<std::vector<Rank>> rings(nrings);
      for (auto& ring : rings) {
        ring.resize(static_cast<std::size_t>(p));
        for (Rank r = 0; r < p; ++r) ring[static_cast<std::size_t>(r)] = r;
        for (std::size_t i = ring.size(); i > 1; --i) std::swap(ring[i - 1], ring[next() % i]);
      }
      for (std::uint64_t per_rank : {1ull, 7ull, 300ull})
        for (Rank root = 0; root < p; ++root) {
          INFO("P=" << p << " rings=" << nrings << " per rank=" << per_rank << " root=" << root);
          const PlanRequest req =
              request(p, per_rank * static_cast<std::uint64_t>(p), 1, 2, 64, root);
          const std::vector<Plan> plans{
              build_chain_broadcast_on(req, rings), build_chain_reduce_on(req, rings),
              root == 0 ? build_ring_reduce_scatter_on(req, rings) : Plan{},
              root == 0 ? build_ring_all_gather_on(req, rings) : Plan{}};
          for (const Plan& plan : plans) {
            if (plan.nranks == 0) continue;
            CHECK(plan.channels.size() == nrings);
            const auto report = verify(plan);
            INFO(plan.algorithm << " " << collective_name(plan.collective) << ": " << report.error);
            CHECK(report.ok);
          }
        }
    }
  // A ring that is not a permutation of the ranks is refused.
  const PlanRequest req = request(3, 9, 1, 2, 64, 0);
  CHECK_THROWS_AS(build_ring_reduce_scatter_on(req, {{0, 1, 1}}), Error);
  CHECK_THROWS_AS(build_chain_broadcast_on(req, {{0, 1}}), Error);
}
}  // namespace plan_collectives_test
