#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/algo/tree.hpp"
#include "ccoll/plan/block_trees.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/direct.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/one_shot.hpp"
#include "ccoll/plan/recursive_doubling.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"
#include "sweep.hpp"

namespace plan_test {
using namespace ccoll;
using namespace ccoll::plan;

namespace {

PlanRequest request(Rank p, std::uint64_t count, std::uint32_t nchannels = 1,
                    std::uint32_t nchunks = 0) {
  PlanRequest req;
  req.nranks = p;
  req.count = count;
  req.nchannels = nchannels;
  req.nchunks = nchunks;
  return req;
}

void require_ok(const Plan& plan, const std::string& what) {
  const VerifyReport r = verify(plan);
  INFO(what << ": " << r.error);
  REQUIRE(r.ok);
}

}  // namespace

TEST_CASE("ring plans verify for P = 1..64, several counts, chunks and channels") {
  ccoll::testing::Sweep sweep;
  for (Rank p = 1; p <= 64; ++p)
    for (std::uint64_t count : {0ull, 1ull, 7ull, 97ull, 1000ull})
      for (std::uint32_t ch : {1u, 3u})
        for (std::uint32_t k : {0u, 3u}) {
          if (!sweep.take()) continue;
          const Plan plan = build_ring(request(p, count, ch, k));
          require_ok(plan, "P=" + std::to_string(p) + " count=" + std::to_string(count) +
                               " channels=" + std::to_string(ch) + " chunks=" + std::to_string(k));
        }
}

TEST_CASE("binary tree plans verify for P = 1..64, phased and overlapped") {
  ccoll::testing::Sweep sweep;
  for (Rank p = 1; p <= 64; ++p)
    for (bool overlap : {false, true})
      for (std::uint64_t count : {0ull, 1ull, 13ull, 1000ull})
        for (std::uint32_t ch : {1u, 2u})
          for (std::uint32_t k : {0u, 1u, 4u}) {
            if (!sweep.take()) continue;
            PlanRequest req = request(p, count, ch, k);
            req.overlap = overlap;
            require_ok(build_tree(req),
                       "tree P=" + std::to_string(p) + " overlap=" + std::to_string(overlap) +
                           " count=" + std::to_string(count) + " k=" + std::to_string(k));
          }
}

TEST_CASE("tree rounds: phased 2 floor(log2 P) + 2K, overlapped 2 floor(log2 P) + K") {
  for (Rank p = 2; p <= 64; ++p)
    for (std::uint32_t k : {1u, 2u, 5u, 16u}) {
      int depth = 0;
      while ((2 << depth) <= p) ++depth;  // floor(log2 p)
      PlanRequest req = request(p, 4096, 1, k);
      req.overlap = false;
      const VerifyReport phased = verify(build_tree(req));
      req.overlap = true;
      const VerifyReport overlapped = verify(build_tree(req));
      INFO("P=" << p << " K=" << k << " depth=" << depth);
      REQUIRE(phased.ok);
      REQUIRE(overlapped.ok);
      CHECK(phased.rounds == static_cast<std::uint64_t>(2 * depth + 2 * k));
      CHECK(overlapped.rounds == static_cast<std::uint64_t>(2 * depth + k));
      if (k > 1) CHECK(overlapped.rounds < phased.rounds);
    }
}

TEST_CASE("double binary tree: two trees, every rank a leaf in one of them") {
  for (Rank p = 1; p <= 64; ++p) {
    const auto [t1, t2] = double_binary_tree_parents(p);
    std::vector<int> kids1(static_cast<std::size_t>(p), 0), kids2(static_cast<std::size_t>(p), 0);
    int roots1 = 0, roots2 = 0;
    for (Rank r = 0; r < p; ++r) {
      const auto u = static_cast<std::size_t>(r);
      if (t1[u] < 0)
        ++roots1;
      else
        ++kids1[static_cast<std::size_t>(t1[u])];
      if (t2[u] < 0)
        ++roots2;
      else
        ++kids2[static_cast<std::size_t>(t2[u])];
    }
    CHECK(roots1 == 1);
    CHECK(roots2 == 1);
    int internal_in_both = 0;
    for (Rank r = 0; r < p; ++r) {
      const auto u = static_cast<std::size_t>(r);
      CHECK(kids1[u] <= 2);
      CHECK(kids2[u] <= 2);
      if (kids1[u] > 0 && kids2[u] > 0) ++internal_in_both;
    }
    INFO("P=" << p);
    CHECK(internal_in_both <= (p % 2 == 0 ? 0 : 1));
    for (bool overlap : {false, true})
      for (std::uint64_t count : {0ull, 1ull, 5ull, 777ull})
        for (std::uint32_t ch : {1u, 3u}) {
          PlanRequest req = request(p, count, ch, 3);
          req.overlap = overlap;
          require_ok(build_double_binary_tree(req), "dbtree P=" + std::to_string(p));
        }
  }
}

TEST_CASE("ring: lock-step rounds are K (2P - 1), and every message fits a slot") {
  for (Rank p = 2; p <= 16; ++p)
    for (std::uint32_t k : {1u, 2u, 5u}) {
      const VerifyReport r = verify(build_ring(request(p, 100000, 1, k)));
      REQUIRE(r.ok);
      CHECK(r.rounds == static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(2 * p - 1));
      CHECK(r.steps == static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(p * (2 * p - 1)));
    }
  // A tiny slot forces more chunks than asked for; the verifier checks every message against it.
  for (Rank p : {2, 5, 8}) {
    PlanRequest req = request(p, 1000, 2, 1);
    req.slot_bytes = 12;  // 3 floats
    const Plan plan = build_ring(req);
    CHECK(plan.slot_elems == 3);
    require_ok(plan, "small slots");
  }
}

TEST_CASE("ring: explicit ring orders, reversed odd channels, nslots >= 2") {
  std::mt19937 rng(7);
  for (Rank p = 1; p <= 24; ++p) {
    std::vector<std::vector<Rank>> rings(3, std::vector<Rank>(static_cast<std::size_t>(p)));
    for (auto& ring : rings) {
      std::iota(ring.begin(), ring.end(), 0);
      std::shuffle(ring.begin(), ring.end(), rng);
    }
    const Plan plan = build_ring(request(p, 517, 1, 2), rings);
    CHECK(plan.channels.size() == 3);
    require_ok(plan, "explicit rings P=" + std::to_string(p));
    if (p > 1)  // channel c sends only to the successor in rings[c]
      for (const Connection& c : plan.connections) {
        const auto& ring = rings[c.channel];
        const auto at = std::find(ring.begin(), ring.end(), c.from) - ring.begin();
        CHECK(ring[static_cast<std::size_t>((at + 1) % p)] == c.to);
      }
  }
  const Plan two = build_ring(request(4, 100, 2, 1));
  for (const Connection& c : two.connections)
    CHECK(c.to == (c.channel == 0 ? (c.from + 1) % 4 : (c.from + 3) % 4));
  PlanRequest one_slot = request(4, 100);
  one_slot.nslots = 1;
  CHECK_THROWS_AS(build_ring(one_slot), ccoll::Error);
  CHECK_THROWS_AS(build_ring(request(3, 10), {{0, 1, 1}}), ccoll::Error);
}

TEST_CASE("direct plans verify for P = 1..32, any count, chunks, channels and FIFO depth") {
  ccoll::testing::Sweep sweep;
  for (Rank p = 1; p <= 32; ++p)
    for (std::uint64_t count : {0ull, 1ull, 2ull, 7ull, 97ull, 1000ull})
      for (std::uint32_t ch : {1u, 2u})
        for (std::uint32_t k : {0u, 1u, 3u})
          for (std::uint32_t nslots : {1u, 2u, 4u}) {
            if (p > 12 && (nslots != 2 || count == 2)) continue;  // keeps the suite fast
            if (!sweep.take()) continue;
            PlanRequest req = request(p, count, ch, k);
            req.nslots = nslots;
            const Plan plan = build_direct(req);
            require_ok(plan, "P=" + std::to_string(p) + " count=" + std::to_string(count) +
                                 " channels=" + std::to_string(ch) + " chunks=" +
                                 std::to_string(k) + " nslots=" + std::to_string(nslots));
          }
}

TEST_CASE("one-shot and recursive-doubling plans verify for every P, count, chunks, FIFO depth") {
  ccoll::testing::Sweep sweep;
  for (Rank p = 1; p <= 33; ++p)
    for (std::uint64_t count : {0ull, 1ull, 2ull, 7ull, 97ull, 1000ull})
      for (std::uint32_t ch : {1u, 2u})
        for (std::uint32_t k : {0u, 3u})
          for (std::uint32_t nslots : {1u, 2u}) {
            if (p > 12 && (nslots != 2 || count == 2)) continue;  // keeps the suite fast
            if (!sweep.take()) continue;
            PlanRequest req = request(p, count, ch, k);
            req.nslots = nslots;
            req.slot_bytes = 64;  // 16 floats: 97 and 1000 elements need several chunks
            const std::string what = "P=" + std::to_string(p) + " count=" + std::to_string(count) +
                                     " channels=" + std::to_string(ch) +
                                     " chunks=" + std::to_string(k) +
                                     " nslots=" + std::to_string(nslots);
            require_ok(build_recursive_doubling(req), "recdoubling " + what);
            if (p <= kOneShotMaxRanks) require_ok(build_one_shot(req), "oneshot " + what);
          }
  CHECK_THROWS_WITH_AS(build_one_shot(request(17, 100)), doctest::Contains("at most 16 ranks"),
                       ccoll::Error);
}

TEST_CASE("one-shot: one hop, every peer's input folded in rank order on every rank") {
  for (Rank p = 2; p <= 16; ++p) {
    const Plan plan = build_one_shot(request(p, 100));
    const VerifyReport r = verify(plan);
    REQUIRE(r.ok);
    CHECK(plan.algorithm == "oneshot");
    CHECK(r.rounds == 2);  // every rank sends, then every rank reduces: one hop
    for (Rank q = 0; q < p; ++q) {
      const auto& steps = plan.channels[0].programs[static_cast<std::size_t>(q)].steps;
      REQUIRE(steps.size() == 2);
      CHECK(steps[0].send_count == static_cast<std::uint32_t>(p - 1));
      const Step& reduce = steps[1];
      CHECK(reduce.recv_count == static_cast<std::uint32_t>(p - 1));
      CHECK(reduce.src == Source::Input);
      CHECK(reduce.src_position == q);  // operands in rank order: the same fold everywhere
      for (std::uint32_t i = 0; i < reduce.recv_count; ++i) {
        const Rank from = plan.connections[plan.ports[reduce.recv_begin + i].connection].from;
        CHECK(from == static_cast<Rank>(i < static_cast<std::uint32_t>(q) ? i : i + 1));
      }
    }
  }
}

TEST_CASE("recursive doubling: log2 P hops (two more with extra ranks), lower rank first") {
  for (Rank p = 2; p <= 33; ++p) {
    const Plan plan = build_recursive_doubling(request(p, 100));
    const VerifyReport r = verify(plan);
    REQUIRE(r.ok);
    CHECK(plan.algorithm == "recdoubling");
    Rank m = 1;
    int log_m = 0;
    while (m * 2 <= p) {
      m *= 2;
      ++log_m;
    }
    CHECK(r.rounds == static_cast<std::uint64_t>(1 + log_m + (p > m ? 2 : 0)));
    for (Rank q = 0; q < m; ++q)
      for (const Step& s : plan.channels[0].programs[static_cast<std::size_t>(q)].steps) {
        if (s.recv_count != 1 || s.src == Source::None) continue;
        const Rank from = plan.connections[plan.ports[s.recv_begin].connection].from;
        CHECK(s.src_position == (q < from ? 0 : 1));
      }
  }
}

TEST_CASE("the verifier refuses a local operand placed beyond the received ones") {
  Plan plan = build_one_shot(request(3, 10));
  REQUIRE(verify(plan).ok);
  plan.channels[0].programs[1].steps[1].src_position = 3;  // two operands received
  const VerifyReport r = verify(plan);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("src_position 3") != std::string::npos);
  plan.channels[0].programs[1].steps[1].src_position = 2;  // last: allowed
  CHECK(verify(plan).ok);
}

TEST_CASE("direct: one hop per phase, rounds, step shapes and the slot working set") {
  for (Rank p = 2; p <= 9; ++p)
    for (std::uint32_t k : {1u, 4u}) {
      const auto up = static_cast<std::uint64_t>(p);
      const Plan plan = build_direct(request(p, 10000, 1, k));
      const VerifyReport r = verify(plan);
      REQUIRE(r.ok);
      CHECK(plan.algorithm == "direct");
      REQUIRE(plan.channels.size() == 2);  // reduce-scatter and all-gather of the one part
      // Every rank pair, both directions, once per channel.
      CHECK(plan.connections.size() == 2 * up * (up - 1));
      // Per chunk and rank: P-1 stage sends, one reduce, P-1 gathers.
      CHECK(r.steps == k * up * (2 * up - 1));
      // Stage, reduce, gather: three rounds for one chunk; the pipeline adds one round per chunk
      // at most twice (the reduce and the gather of a chunk wait for the stage before).
      CHECK(r.rounds >= 3);
      CHECK(r.rounds <= 3 * static_cast<std::uint64_t>(k) * up);
      for (Rank q = 0; q < p; ++q) {
        for (const Step& s : plan.channels[0].programs[static_cast<std::size_t>(q)].steps) {
          if (s.recv_count == 0) {  // stage: one piece of the input to its owner
            CHECK(s.src == Source::Input);
            CHECK(s.send_count == 1);
            CHECK_FALSE(s.write_output);
          } else {  // reduce: everyone's staged piece plus ours, to the output and every peer
            CHECK(s.recv_count == up - 1);
            CHECK(s.send_count == up - 1);
            CHECK(s.final);
            CHECK(s.write_output);
            for (std::uint32_t i = 0; i < s.send_count; ++i)
              CHECK(plan.connections[plan.ports[s.send_begin + i].connection].channel == 1);
          }
        }
        for (const Step& s : plan.channels[1].programs[static_cast<std::size_t>(q)].steps) {
          CHECK(s.recv_count == 1);
          CHECK(s.send_count == 0);
          CHECK(s.src == Source::None);
          CHECK(s.write_output);
        }
      }
    }
  // Default chunking: the fewest chunks whose pieces fit a slot.
  PlanRequest req = request(4, 16u << 20);  // 64 MiB of floats
  req.slot_bytes = 1u << 20;
  req.nslots = 2;
  CHECK(direct_chunks(req, req.count) == 16);  // 4 MiB chunks: 1 MiB pieces fill the slots
  req.nchunks = 5;                             // explicit, but never pieces larger than a slot
  CHECK(direct_chunks(req, req.count) == 16);
  req.nchunks = 100;
  CHECK(direct_chunks(req, req.count) == 100);
  CHECK(direct_chunks(req, 3) == 1);  // no empty chunks
  const Plan big = build_direct(req);
  for (const auto& ch : big.channels)
    for (const auto& prog : ch.programs)
      for (const Step& s : prog.steps) CHECK(s.count <= big.slot_elems);
  CHECK(ccoll::algo::Direct::build(request(3, 99)).algorithm == "direct");
  CHECK(ccoll::algo::Direct::name == "direct");
}

TEST_CASE("trees need no more than one slot per connection") {
  for (Rank p : {2, 7, 16, 33})
    for (bool overlap : {false, true}) {
      PlanRequest req = request(p, 999, 1, 6);
      req.nslots = 1;
      req.overlap = overlap;
      require_ok(build_tree(req), "tree nslots=1");
      require_ok(build_double_binary_tree(req), "dbtree nslots=1");
    }
}

namespace {

// A random tree over the ranks with in_tree[r], rooted at `root`: each rank in a random order
// hangs below a random earlier one (so some nodes get many children, some chains are long).
std::vector<Rank> random_parents(const std::vector<bool>& in_tree, Rank root, std::mt19937& rng) {
  std::vector<Rank> order;
  for (std::size_t r = 0; r < in_tree.size(); ++r)
    if (in_tree[r] && static_cast<Rank>(r) != root) order.push_back(static_cast<Rank>(r));
  std::shuffle(order.begin(), order.end(), rng);
  order.insert(order.begin(), root);
  std::vector<Rank> parent(in_tree.size(), -1);
  for (std::size_t i = 1; i < order.size(); ++i)
    parent[static_cast<std::size_t>(order[i])] = order[rng() % i];
  return parent;
}

// Random active set, relays, reduce and broadcast trees and shares over P ranks.
std::vector<TreeSpec> random_forest(Rank p, bool overlap, std::mt19937& rng,
                                    std::vector<bool>& active) {
  active.assign(static_cast<std::size_t>(p), false);
  for (auto&& a : active) a = rng() % 5 < 3;
  active[rng() % static_cast<std::size_t>(p)] = true;
  const int ntrees = 1 + static_cast<int>(rng() % 3);
  std::vector<TreeSpec> trees(static_cast<std::size_t>(ntrees));
  for (auto& t : trees) {
    std::vector<bool> in_tree = active;
    for (auto&& m : in_tree) m = m || rng() % 2 == 0;
    do t.root = static_cast<Rank>(rng() % static_cast<std::size_t>(p));
    while (!(overlap ? static_cast<bool>(in_tree[static_cast<std::size_t>(t.root)])
                     : static_cast<bool>(active[static_cast<std::size_t>(t.root)])));
    t.reduce_parent = random_parents(in_tree, t.root, rng);
    if (rng() % 2) t.broadcast_parent = random_parents(in_tree, t.root, rng);
    t.share = static_cast<double>(rng() % 4);
  }
  if (std::all_of(trees.begin(), trees.end(), [](const TreeSpec& t) { return t.share == 0; }))
    trees[0].share = 1;
  return trees;
}

}  // namespace

TEST_CASE("random forests with relays and different reduce/broadcast trees verify") {
  std::mt19937 rng(2024);
  for (Rank p = 1; p <= 40; ++p)
    for (int trial = 0; trial < 6; ++trial)
      for (bool overlap : {false, true}) {
        std::vector<bool> active;
        const auto trees = random_forest(p, overlap, rng, active);
        const std::uint64_t count =
            1 + rng() % 3000;  // (sequenced: the same draws on every compiler)
        const auto nchunks = static_cast<std::uint32_t>(rng() % 5);
        PlanRequest req = request(p, count, 1, nchunks);
        req.overlap = overlap;
        req.nslots = 1 + static_cast<std::uint32_t>(rng() % 3);
        const Plan plan = build_trees(req, trees, active);
        for (Rank r = 0; r < p; ++r)
          if (!active[static_cast<std::size_t>(r)])
            for (const auto& ch : plan.channels)
              for (const Step& s : ch.programs[static_cast<std::size_t>(r)].steps) {
                CHECK(s.src == Source::None);
                CHECK(!s.write_output);
              }
        require_ok(plan, "forest P=" + std::to_string(p) + " trial " + std::to_string(trial));
      }
}

TEST_CASE("build_trees: shares, nactive_hint and bad trees") {
  const auto sizes = split_by_shares(10, {1, 1, 1});
  CHECK(sizes == std::vector<std::uint64_t>{4, 3, 3});
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> shares(1 + rng() % 6);
    for (auto& s : shares) s = static_cast<double>(rng() % 1000) / 7.0;
    shares[0] += 0.5;
    const std::uint64_t count = rng() % 100000;
    const auto split = split_by_shares(count, shares);
    const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
    CHECK(std::accumulate(split.begin(), split.end(), std::uint64_t{0}) == count);
    for (std::size_t i = 0; i < shares.size(); ++i)
      CHECK(std::abs(static_cast<double>(split[i]) - static_cast<double>(count) * shares[i] / sum) <
            1.0 + 1e-9);
  }
  // Ranks 0..3 are workers, 4 and 5 relays (a switch between two pairs).
  TreeSpec t;
  t.root = 0;
  t.reduce_parent = {-1, 4, 5, 5, 0, 4};
  PlanRequest req = request(6, 100, 1, 2);
  const Plan plan = build_trees(req, {t}, 4);
  CHECK(plan.nactive() == 4);
  require_ok(plan, "nactive_hint");
  TreeSpec cyclic = t;
  cyclic.reduce_parent = {-1, 2, 1, 0, 0, 0};
  CHECK_THROWS_AS(build_trees(req, {cyclic}), ccoll::Error);
  TreeSpec missing = t;
  missing.reduce_parent = {-1, 0, 0, -1, 0, 0};  // active rank 3 not in the tree
  CHECK_THROWS_AS(build_trees(req, {missing}), ccoll::Error);
  TreeSpec relay_root = t;  // rank 4 (a relay) as the root: fine overlapped, not phased
  relay_root.root = 4;
  relay_root.reduce_parent = {4, 4, 5, 5, -1, 4};
  req.overlap = false;
  CHECK_THROWS_AS(build_trees(req, {relay_root}, 4), ccoll::Error);
  req.overlap = true;
  require_ok(build_trees(req, {relay_root}, 4), "relay root overlapped");
}

TEST_CASE("overlapped tree: the root's reduce step finishes chunk k and sends it down") {
  PlanRequest req = request(7, 700, 1, 7);
  req.overlap = true;
  const Plan plan = build_tree(req);
  REQUIRE(plan.channels.size() == 2);
  const auto& root = plan.channels[0].programs[0].steps;
  REQUIRE(root.size() == 7);
  for (const Step& s : root) {
    CHECK(s.final);
    CHECK(s.write_output);
    CHECK(s.recv_count == 2);
    REQUIRE(s.send_count == 2);
    for (std::uint32_t i = 0; i < s.send_count; ++i)  // read by the broadcast channel
      CHECK(plan.connections[plan.ports[s.send_begin + i].connection].channel == 1);
  }
  CHECK(plan.channels[1].programs[0].steps.empty());
  req.overlap = false;
  const Plan phased = build_tree(req);
  REQUIRE(phased.channels.size() == 1);
  const auto& proot = phased.channels[0].programs[0].steps;
  REQUIRE(proot.size() == 14);
  for (std::size_t i = 0; i < 7; ++i) CHECK((proot[i].final && proot[i].send_count == 0));
  for (std::size_t i = 7; i < 14; ++i) CHECK(proot[i].src == Source::Output);
}

TEST_CASE("chunking: [C-Cube] Eq. 4 and the slot limit") {
  // K_opt = sqrt(log2(P) beta N / alpha): P = 16, N = 64 MiB, alpha = 5 us, beta = 1/(10 GB/s).
  const double k = std::sqrt(4.0 * 1e-10 * 67108864.0 / 5e-6);
  CHECK(optimal_chunks(5e-6, 1e-10, 16, 67108864.0) == static_cast<std::uint32_t>(std::llround(k)));
  // The builders apply it with the tree's depth: P = 16 (depth 4 = log2 16) phased gives Eq. 4's
  // K = 73 chunks, overlapped sqrt(2) times more (104).
  PlanRequest big = request(16, std::uint64_t{64} << 20, 1, 0);
  big.elem_size = 1;
  big.overlap = false;
  CHECK(build_tree(big).channels[0].programs[0].steps.size() == 2 * 73);
  big.overlap = true;
  CHECK(build_tree(big).channels[0].programs[0].steps.size() == 104);
  CHECK(optimal_chunks(5e-6, 1e-10, 1, 1e9) == 1);
  CHECK(optimal_chunks(5e-6, 1e-10, 16, 0) == 1);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {  // the integer optimum of the pipeline model
    const double alpha = 1e-6 * (1 + rng() % 50), beta = 1e-11 * (1 + rng() % 100);
    const double fill = 1 + rng() % 20, per_chunk = 1 + rng() % 2;
    const double bytes = static_cast<double>(1 + rng() % (1u << 28));
    const std::uint32_t best = pipeline_optimal_chunks(alpha, beta, fill, per_chunk, bytes);
    const double t_best = pipeline_time(alpha, beta, fill, per_chunk, bytes, best);
    for (std::uint32_t other = 1; other < 2000; other += 1 + other / 16)
      CHECK(t_best <= pipeline_time(alpha, beta, fill, per_chunk, bytes, other) * (1 + 1e-12));
  }
  CHECK(min_chunks_for_slots(0, 4, 10) == 1);
  CHECK(min_chunks_for_slots(40, 4, 10) == 1);
  CHECK(min_chunks_for_slots(41, 4, 10) == 2);
  PlanRequest req = request(8, 1 << 20, 1, 1);
  req.slot_bytes = 4096;  // 1024 floats: 1 Mi elements need 1024 chunks of one piece
  CHECK(resolve_chunks(req, 1 << 20, 1, 6, 2) == 1024);
  req.nchunks = 0;
  req.count = 10;
  CHECK(resolve_chunks(req, 10, 1, 6, 2) <= 10);
}

TEST_CASE("policies satisfy LogicalTopology and build what their builders build") {
  static_assert(ccoll::algo::LogicalTopology<ccoll::algo::Ring>);
  static_assert(ccoll::algo::LogicalTopology<ccoll::algo::Tree>);
  static_assert(ccoll::algo::LogicalTopology<ccoll::algo::DoubleBinaryTree>);
  const PlanRequest req = request(6, 1234, 2, 2);
  CHECK(ccoll::algo::Ring::build(req).algorithm == "ring");
  CHECK(ccoll::algo::Tree::build(req).algorithm == "tree-overlap");
  CHECK(ccoll::algo::DoubleBinaryTree::build(req).algorithm == "dbtree-overlap");
  CHECK(ccoll::algo::Ring::name == "ring");
  require_ok(ccoll::algo::DoubleBinaryTree::build(req), "policy");
}

namespace {

// A hand-made plan: P ranks, one channel, `count` elements, slots of 4 elements.
Plan hand_plan(Rank p, std::uint64_t count = 4, std::uint32_t nchannels = 1) {
  Plan plan;
  plan.algorithm = "hand";
  plan.count = count;
  plan.slot_elems = 4;
  plan.nslots = 2;
  plan.reset(p, nchannels);
  return plan;
}

std::string error_of(Plan plan, bool finalize = true) {
  if (finalize) plan.finalize();
  const VerifyReport r = verify(plan);
  CHECK(!r.ok);
  return r.error;
}

bool contains(const std::string& text, const std::string& part) {
  INFO(text);
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("verifier accepts a correct hand-made two-rank allreduce") {
  Plan plan = hand_plan(2);
  plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
  plan.add_step(0, 1, 0, 4, Source::Input, {0}, {0}, true, true);
  plan.add_step(0, 0, 0, 4, Source::None, {1}, {}, true, false);
  plan.finalize();
  const VerifyReport r = verify(plan);
  CHECK(r.ok);
  CHECK(r.rounds == 3);
  CHECK(r.steps == 3);
  CHECK_NOTHROW(verify_or_throw(plan));
}

TEST_CASE("verifier rejects double counting, missing inputs and bad finalization") {
  {  // rank 0 adds its input again to the reduced value it gets back
    Plan plan = hand_plan(2);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {0}, true, false);
    plan.add_step(0, 0, 0, 4, Source::Input, {1}, {}, true, true);
    CHECK(
        contains(error_of(plan),
                 "rank 0's input counted twice in element range [0,4) at rank 0 channel 0 step 1"));
  }
  {  // rank 2 never contributes: the root finalizes an incomplete sum
    Plan plan = hand_plan(3);
    plan.add_step(0, 1, 0, 4, Source::Input, {}, {0}, false, false);
    plan.add_step(0, 0, 0, 4, Source::Input, {1}, {1, 2}, true, true);
    plan.add_step(0, 1, 0, 4, Source::None, {0}, {}, true, false);
    plan.add_step(0, 2, 0, 4, Source::None, {0}, {}, true, false);
    CHECK(contains(error_of(plan),
                   "finalizes element range [0,4) before it holds every active "
                   "rank's input (misses rank 2's input)"));
  }
  {  // nobody finalizes
    Plan plan = hand_plan(2);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {0}, true, false);
    plan.add_step(0, 0, 0, 4, Source::None, {1}, {}, true, false);
    CHECK(contains(error_of(plan), "rank 0's output element range [0,4) is never finalized"));
  }
  {  // part of the output is never written
    Plan plan = hand_plan(2, 8);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {0}, true, true);
    plan.add_step(0, 0, 0, 4, Source::None, {1}, {}, true, false);
    CHECK(contains(error_of(plan), "rank 0's output element range [4,8) is never written"));
  }
  {  // a relay may not read input
    Plan plan = hand_plan(2);
    plan.active = {true, false};
    plan.add_step(0, 1, 0, 4, Source::Input, {}, {0}, false, false);
    plan.add_step(0, 0, 0, 4, Source::Input, {1}, {}, true, true);
    CHECK(contains(error_of(plan), "rank 1 channel 0 step 0: relay reads its input"));
  }
  {  // two channels of one rank write the same output elements: a race
    Plan plan = hand_plan(2, 4, 2);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {}, true, false);
    plan.add_step(1, 1, 0, 4, Source::Input, {}, {0}, false, false);
    plan.add_step(1, 0, 0, 4, Source::None, {1}, {}, true, false);
    CHECK(contains(error_of(plan), "channel 0 also writes (channels run concurrently: a race)"));
  }
  {  // in place, input and output are one memory: reading the input after writing the output
    Plan plan = hand_plan(2);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 0, 0, 4, Source::Input, {1}, {}, true, true);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {}, true, true);
    plan.add_step(0, 1, 0, 4, Source::Input, {}, {0}, false, false);
    CHECK(contains(error_of(plan),
                   "rank 1 channel 0 step 1 reads input element range [0,4) after "
                   "channel 0 wrote its output there"));
  }
  {  // a step that sends a value it neither reads nor receives (the slot's old contents)
    Plan plan = hand_plan(2);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 0, 0, 4, Source::None, {}, {1}, false, false);
    plan.add_step(0, 0, 0, 4, Source::None, {1}, {}, true, false);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {}, true, false);
    plan.add_step(0, 1, 0, 4, Source::Output, {0}, {0}, true, true);
    CHECK(contains(error_of(plan),
                   "rank 0 channel 0 step 1: sends a value it neither reads nor "
                   "receives"));
  }
  {  // a FIFO deeper than any call's messages is verified without a record per slot
    Plan plan = hand_plan(2);
    plan.nslots = std::uint32_t{1} << 31;
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 0, 0, 4, Source::None, {1}, {}, true, false);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {0}, true, true);
    plan.finalize();
    const VerifyReport r = verify(plan);
    CHECK_MESSAGE(r.ok, r.error);
  }
  {  // two connections with one (from, to, channel): one FIFO in every transport
    Plan plan = hand_plan(2);
    plan.connections = {Connection{0, 1, 0, 0}, Connection{0, 1, 0, 0}, Connection{1, 0, 0, 0}};
    CHECK(contains(error_of(plan, false), "join the same ranks in the same channel"));
  }
}

TEST_CASE("block trees leave out relays with no active rank below them") {
  // Reduce to rank 0 over ranks {0, 1}; relay 2 hangs under the root as a leaf. With prod, a
  // relay leaf's operand-less message would have folded the slot's old contents into the result.
  PlanRequest req;
  req.nranks = 3;
  req.count = 64;
  req.slot_bytes = 4096;
  req.collective = plan::Collective::reduce;
  req.root = 0;
  for (const plan::Collective coll : {plan::Collective::reduce, plan::Collective::broadcast}) {
    req.collective = coll;
    BlockTree t;
    t.root = 0;
    t.parent = {-1, 0, 0};
    const Plan plan = build_block_trees(req, coll, {t}, {true, true, false}, "relay-leaf");
    const VerifyReport r = verify(plan);
    CHECK_MESSAGE(r.ok, r.error);
    for (const auto& ch : plan.channels) CHECK(ch.programs[2].steps.empty());
    // A relay between the root and an active rank stays: 0 <- 2 <- 1.
    t.parent = {-1, 2, 0};
    const Plan through = build_block_trees(req, coll, {t}, {true, true, false}, "relay-inner");
    CHECK_MESSAGE(verify(through).ok, verify(through).error);
    CHECK_FALSE(through.channels[0].programs[2].steps.empty());
  }
}

TEST_CASE("verifier rejects structural errors") {
  {  // oversized message
    Plan plan = hand_plan(2, 8);
    plan.add_step(0, 0, 0, 8, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 1, 0, 8, Source::Input, {0}, {0}, true, true);
    plan.add_step(0, 0, 0, 8, Source::None, {1}, {}, true, false);
    CHECK(contains(error_of(plan),
                   "rank 0 channel 0 step 0: message of 8 elements exceeds slot_elems 4"));
  }
  {  // the receiver expects a different chunk than the sender sent
    Plan plan = hand_plan(2, 8);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 1, 4, 4, Source::Input, {0}, {0}, true, true);
    plan.add_step(0, 0, 4, 4, Source::None, {1}, {}, true, false);
    CHECK(contains(error_of(plan),
                   "receives [4,8) as message 0 on connection 0 (0->1, channel 0), "
                   "but the sender sent [0,4)"));
  }
  {  // a send nobody receives
    Plan plan = hand_plan(2);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, true, true);
    plan.add_step(0, 1, 0, 4, Source::Input, {}, {}, true, true);
    CHECK(contains(error_of(plan), "carries 1 sends but 0 receives"));
  }
  {  // chunk outside the buffer
    Plan plan = hand_plan(1, 4);
    plan.add_step(0, 0, 2, 4, Source::Input, {}, {}, true, true);
    CHECK(contains(error_of(plan), "chunk [2,6) outside [0,4)"));
  }
  {  // stale message numbers (finalize() not called after editing)
    Plan plan = hand_plan(2);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {0}, true, true);
    plan.add_step(0, 0, 0, 4, Source::None, {1}, {}, true, false);
    CHECK(contains(error_of(plan, false), "messages_per_call 0 but carries 1 messages"));
  }
  {  // a port on a connection that does not start at the sending rank
    Plan plan = hand_plan(3);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, true, true);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {}, true, true);
    plan.add_step(0, 2, 0, 4, Source::Input, {}, {}, true, true);
    plan.finalize();
    plan.channels[0].programs[2].steps[0].send_begin =
        plan.channels[0].programs[0].steps[0].send_begin;
    plan.channels[0].programs[2].steps[0].send_count = 1;
    CHECK(contains(error_of(plan, false),
                   "rank 2 channel 0 step 0: sends on connection 0 (0->1, "
                   "channel 0), which does not start at this rank"));
  }
}

TEST_CASE("verifier finds deadlocks and says who waits on whom") {
  {  // both ranks receive before they send
    Plan plan = hand_plan(2);
    plan.add_step(0, 0, 0, 4, Source::Input, {1}, {}, true, true);
    plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
    plan.add_step(0, 1, 0, 4, Source::Input, {0}, {}, true, true);
    plan.add_step(0, 1, 0, 4, Source::Input, {}, {0}, false, false);
    const std::string e = error_of(plan);
    CHECK(contains(e, "deadlock"));
    CHECK(contains(e, "rank 0 channel 0 step 0 waits for message 0 from rank 1"));
    CHECK(contains(e, "rank 1 channel 0 step 0 waits for message 0 from rank 0"));
  }
  {  // a swapped order that only deadlocks once the FIFO is full: rank 0 sends 3 messages before
     // it receives, rank 1 likewise, with 2 slots per connection
    Plan plan = hand_plan(2, 12);
    for (Rank me : {0, 1}) {
      for (std::uint64_t c = 0; c < 3; ++c)
        plan.add_step(0, me, 4 * c, 4, Source::Input, {}, {1 - me}, false, false);
      for (std::uint64_t c = 0; c < 3; ++c)
        plan.add_step(0, me, 4 * c, 4, Source::Input, {1 - me}, {}, true, true);
    }
    const std::string e = error_of(plan);
    CHECK(contains(e, "deadlock (nslots 2)"));
    CHECK(contains(e,
                   "rank 0 channel 0 step 2 waits for a free slot on connection 0 (0->1, channel "
                   "0) (all 2 slots full; rank 1 has consumed 0)"));
    plan.finalize();
    plan.nslots = 3;  // deep enough FIFOs: the same plan is fine
    CHECK(verify(plan).ok);
  }
  {  // a ring whose every rank receives before it sends
    Plan plan = hand_plan(3);
    for (Rank r = 0; r < 3; ++r)
      plan.add_step(0, r, 0, 4, Source::Input, {(r + 2) % 3}, {(r + 1) % 3}, true, true);
    CHECK(contains(error_of(plan), "deadlock"));
  }
}

TEST_CASE("verify_or_throw raises InvalidPlan") {
  Plan plan = hand_plan(2);
  plan.add_step(0, 0, 0, 4, Source::Input, {1}, {}, true, true);
  plan.add_step(0, 0, 0, 4, Source::Input, {}, {1}, false, false);
  plan.add_step(0, 1, 0, 4, Source::Input, {0}, {}, true, true);
  plan.add_step(0, 1, 0, 4, Source::Input, {}, {0}, false, false);
  plan.finalize();
  try {
    verify_or_throw(plan);
    FAIL("expected an exception");
  } catch (const ccoll::Error& e) {
    CHECK(e.code() == ccoll::ErrorCode::InvalidPlan);
    CHECK(contains(e.what(), "hand: deadlock"));
  }
}

TEST_CASE("more than 64 ranks: multi-word rank sets") {
  for (Rank p : {65, 100, 130}) {
    require_ok(build_ring(request(p, 1000, 2, 1)), "ring P=" + std::to_string(p));
    PlanRequest req = request(p, 3000, 1, 3);
    req.overlap = p % 2 == 0;
    require_ok(build_double_binary_tree(req), "dbtree P=" + std::to_string(p));
  }
  // Rank 99's set bit lives in the second word: it adds its input again to the broadcast value.
  PlanRequest req = request(100, 10, 1, 1);
  req.overlap = false;
  const Plan plan = build_tree(req);
  require_ok(plan, "tree P=100");
  Plan twice = plan;
  REQUIRE(twice.channels[0].programs[99].steps.size() == 2);  // reduce send, broadcast recv
  twice.channels[0].programs[99].steps[1].src = Source::Input;
  CHECK(contains(
      verify(twice).error,
      "rank 99's input counted twice in element range [0,10) at rank 99 channel 0 step 1"));
  Plan relay = plan;
  relay.active[99] = false;
  CHECK(contains(verify(relay).error, "rank 99 channel 0 step 0: relay reads its input"));
  Plan dropped = plan;
  dropped.channels[0].programs[0].steps[0].src = Source::None;  // the root forgets its own input
  CHECK(contains(verify(dropped).error, "misses rank 0's input"));
}

TEST_CASE("lock-step timeline: [C-Cube] Fig. 7 for P = 7, K = 4") {
  PlanRequest req = request(7, 400, 1, 4);
  for (bool overlap : {false, true}) {
    req.overlap = overlap;
    LockstepTimeline t;
    const VerifyReport r = verify(build_tree(req), t);
    REQUIRE(r.ok);
    for (std::size_t k = 0; k < 4; ++k) {
      CHECK(t[0][3][k] == k + 1);  // a leaf sends chunk k up in round k + 1
      CHECK(t[0][1][k] == k + 2);  // level 1
      CHECK(t[0][0][k] == k + 3);  // the root completes chunk k
      if (overlap) {
        CHECK(t[1][1][k] == k + 4);  // level 1 forwards it down (broadcast channel)
        CHECK(t[1][3][k] == k + 5);  // the leaf has it
      } else {
        CHECK(t[0][0][4 + k] == k + 7);  // the root broadcasts after all K chunks are reduced
        CHECK(t[0][3][4 + k] == k + 9);
      }
    }
  }
}

TEST_CASE("test sweeps: CCOLL_TEST_SWEEP takes one case in STRIDE, from OFFSET") {
  using ccoll::testing::parse_sweep_share;
  using ccoll::testing::Sweep;
  CHECK(parse_sweep_share(nullptr).stride == 1);
  CHECK(parse_sweep_share("").stride == 1);
  CHECK(parse_sweep_share("4").stride == 4);
  CHECK(parse_sweep_share("4").offset == 0);
  CHECK(parse_sweep_share("4/7").offset == 3);
  for (const char* bad : {"x", "0", "4/", "4/x", "4/1z", "-3"}) {
    CAPTURE(bad);
    CHECK(parse_sweep_share(bad).stride == 1);
  }
  Sweep every(ccoll::testing::SweepShare{});  // whatever CCOLL_TEST_SWEEP says
  Sweep quarter(parse_sweep_share("4/2"));
  std::vector<int> taken;
  for (int i = 0; i < 10; ++i) {
    CHECK(every.take());
    if (quarter.take()) taken.push_back(i);
  }
  CHECK(taken == std::vector<int>{2, 6});
  CHECK(quarter.taken() == 2);
  CHECK(every.taken() == 10);
}
}  // namespace plan_test
