#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/topology/double_binary_tree.hpp"
#include "ccoll/topology/ring.hpp"
#include "ccoll/topology/tree.hpp"

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
  for (Rank p = 1; p <= 64; ++p)
    for (std::uint64_t count : {0ull, 1ull, 7ull, 97ull, 1000ull})
      for (std::uint32_t ch : {1u, 3u})
        for (std::uint32_t k : {0u, 3u}) {
          const Plan plan = build_ring(request(p, count, ch, k));
          require_ok(plan, "P=" + std::to_string(p) + " count=" + std::to_string(count) +
                               " channels=" + std::to_string(ch) + " chunks=" + std::to_string(k));
        }
}

TEST_CASE("binary tree plans verify for P = 1..64, phased and overlapped") {
  for (Rank p = 1; p <= 64; ++p)
    for (bool overlap : {false, true})
      for (std::uint64_t count : {0ull, 1ull, 13ull, 1000ull})
        for (std::uint32_t ch : {1u, 2u})
          for (std::uint32_t k : {0u, 1u, 4u}) {
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
