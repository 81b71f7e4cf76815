// Large sweeps of every plan builder through the verifier (the fast suite, plan_test.cpp, samples
// the same space more thinly).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"

namespace plan_slow_test {
using namespace ccoll::plan;

namespace {

const std::uint64_t kCounts[] = {0, 1, 2, 3, 7, 31, 64, 97, 1000, 4099};

PlanRequest request(Rank p, std::uint64_t count, std::uint32_t nchannels, std::uint32_t nchunks,
                    std::uint32_t nslots, bool overlap) {
  PlanRequest req;
  req.nranks = p;
  req.count = count;
  req.nchannels = nchannels;
  req.nchunks = nchunks;
  req.nslots = nslots;
  req.overlap = overlap;
  req.slot_bytes = 64;  // 16 floats: large counts need many chunks
  return req;
}

void check(const Plan& plan, const PlanRequest& req) {
  const VerifyReport r = verify(plan);
  INFO(plan.algorithm << " P=" << req.nranks << " count=" << req.count
                      << " channels=" << req.nchannels << " chunks=" << req.nchunks
                      << " nslots=" << req.nslots << ": " << r.error);
  REQUIRE(r.ok);
}

}  // namespace

TEST_CASE("ring sweep: P = 1..64, counts, channels 1..4, chunks") {
  for (Rank p = 1; p <= 64; ++p)
    for (std::uint64_t count : kCounts)
      for (std::uint32_t ch = 1; ch <= 4; ++ch)
        for (std::uint32_t k : {0u, 1u, 7u})
          for (std::uint32_t ns : {2u}) {
            const PlanRequest req = request(p, count, ch, k, ns, false);
            check(build_ring(req), req);
          }
}

TEST_CASE("tree and double binary tree sweep: P = 1..64, both schedules") {
  for (Rank p = 1; p <= 64; ++p)
    for (std::uint64_t count : kCounts)
      for (std::uint32_t ch : {1u, 2u, 3u})
        for (std::uint32_t k : {0u, 3u})
          for (std::uint32_t ns : {1u, 3u})
            for (bool overlap : {false, true}) {
              const PlanRequest req = request(p, count, ch, k, ns, overlap);
              check(build_tree(req), req);
              check(build_double_binary_tree(req), req);
            }
}

TEST_CASE("random forests sweep: relays, distinct reduce and broadcast trees, many shares") {
  std::mt19937 rng(99);
  for (Rank p = 1; p <= 64; ++p)
    for (int trial = 0; trial < 40; ++trial) {
      const bool overlap = trial % 2 == 1;
      std::vector<bool> active(static_cast<std::size_t>(p));
      for (auto&& a : active) a = rng() % 3 != 0;
      active[rng() % static_cast<std::size_t>(p)] = true;
      std::vector<TreeSpec> trees(1 + rng() % 5);
      for (auto& t : trees) {
        std::vector<Rank> members;
        for (Rank r = 0; r < p; ++r)
          if (active[static_cast<std::size_t>(r)] || rng() % 2) members.push_back(r);
        std::vector<Rank> roots;
        for (Rank r : members)
          if (overlap || active[static_cast<std::size_t>(r)]) roots.push_back(r);
        t.root = roots[rng() % roots.size()];
        for (auto* parent : {&t.reduce_parent, &t.broadcast_parent}) {
          std::vector<Rank> order;
          for (Rank r : members)
            if (r != t.root) order.push_back(r);
          std::shuffle(order.begin(), order.end(), rng);
          order.insert(order.begin(), t.root);
          parent->assign(static_cast<std::size_t>(p), -1);
          for (std::size_t i = 1; i < order.size(); ++i)  // bushy or chain-like at random
            (*parent)[static_cast<std::size_t>(order[i])] =
                order[trial % 4 == 0 ? i - 1 : rng() % i];
        }
        t.share = 0.25 + static_cast<double>(rng() % 8);
      }
      const std::uint64_t count = rng() % 5000;  // (sequenced: the same draws on every compiler)
      const auto nchunks = static_cast<std::uint32_t>(rng() % 6);
      const auto nslots = 1 + static_cast<std::uint32_t>(rng() % 3);
      const PlanRequest req = request(p, count, 1, nchunks, nslots, overlap);
      check(build_trees(req, trees, active), req);
    }
}
}  // namespace plan_slow_test
