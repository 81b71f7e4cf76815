// A wider sweep of the coordination invariants (tests/coordination_harness.hpp): more seeds, more
// ranks, caches smaller than a group, mixed dtypes, the cache off. Label `slow`.
#include <doctest/doctest.h>

#include "coordination_harness.hpp"

namespace coordination_slow_test {
using namespace coordination_harness;

TEST_CASE("coordination invariants over many seeds, rank counts and cache sizes") {
  for (std::uint32_t seed = 1; seed <= 8; ++seed) {
    for (int nranks : {2, 5, 16}) {
      for (std::size_t capacity : {std::size_t{1024}, std::size_t{13}, std::size_t{3}}) {
        Scenario s;
        s.seed = seed;
        s.nranks = nranks;
        s.ntensors = 48;
        s.ngroups = 4;
        s.group_size = 4;  // a cache of 3 can never hold a whole group: always the coordinator
        s.iterations = 4;
        s.max_submit_per_cycle = 1 + static_cast<int>(seed % 9);
        s.options.cache_capacity = capacity;
        s.options.cache_enabled = seed % 4 != 0;
        s.options.fusion_threshold_bytes = 4096u << (seed % 4);
        CAPTURE(seed);
        CAPTURE(nranks);
        CAPTURE(capacity);
        const auto logs = simulate(s);
        if (s.options.cache_enabled && capacity >= static_cast<std::size_t>(s.ntensors)) {
          for (std::size_t it = 1; it < logs[0].coordinator_cycles.size(); ++it)
            CHECK(logs[0].coordinator_cycles[it] == 0);
        }
      }
    }
  }
}
}  // namespace coordination_slow_test
