#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/topology/ring.hpp"

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
