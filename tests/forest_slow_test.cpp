// Slow sweeps of the packed-forest planner: hundreds of random small graphs against brute-force
// optima, and 64-GPU clusters against the exact column-generation reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/physical/presets.hpp"
#include "forest_harness.hpp"

namespace forest_slow_test {
using namespace ccoll::physical;
using namespace ccoll::forest;
using namespace ccoll::solve;
using namespace forest_test;

TEST_CASE("forest sweep: 600 random graphs, all active or one inactive, against brute force") {
  std::mt19937 rng(101);
  double worst_all = 1, worst_some = 1;
  for (int iter = 0; iter < 600; ++iter) {
    const int n = 3 + iter % 3;
    auto topo = random_small(rng, n, iter % 3 == 0, iter % 2 == 0);
    const bool some = iter % 2 == 1 && n >= 4;
    if (some) {
      std::vector<std::string> act;
      for (int i = 0; i < n; ++i)
        if (i != (iter / 2) % n) act.push_back("gpu" + std::to_string(i));
      topo.set_active(act);
    }
    for (auto sched : kSchedules) {
      CAPTURE(iter);
      const std::string sched_name = to_string(sched);
      CAPTURE(sched_name);
      const double opt = exact_forest_optimum(topo, sched);
      auto o = options(sched);
      if (some) o.steiner.exact_limit = 0, o.mwu_exact_relays = 0;
      const auto f = solve_packed_forest(topo, o);
      check_forest(topo, f);
      CHECK(f.total_GBps <= opt * (1 + 1e-6));
      if (f.upper_bound_GBps > 0) CHECK(f.upper_bound_GBps >= opt * (1 - 1e-6));
      const double r = f.total_GBps / opt;
      CHECK(r >= (some ? 0.95 : 0.99));
      (some ? worst_some : worst_all) = std::min(some ? worst_some : worst_all, r);
    }
  }
  MESSAGE("600 random graphs: worst fast/optimum " << worst_all << " all active, " << worst_some
                                                   << " one inactive");
}

TEST_CASE("forest sweep: 64-GPU clusters against the exact reference") {
  for (const char* name : {"cluster:8x8:nvlink:10", "cluster:8x8:pcie:10"}) {
    const auto topo = preset(name);
    for (auto sched : kSchedules) {
      const std::string topo_name = name;
      CAPTURE(topo_name);
      const std::string sched_name = to_string(sched);
      CAPTURE(sched_name);
      const auto e = solve_packed_forest(topo, options(sched, ForestMethod::column_generation));
      const auto f = solve_packed_forest(topo, options(sched));
      check_forest(topo, f);
      REQUIRE(e.exact_oracle);
      CHECK(f.total_GBps >= 0.99 * e.total_GBps);
      CHECK(f.total_GBps <= e.total_GBps * (1 + 1e-6));
      CHECK(f.upper_bound_GBps >= e.total_GBps * (1 - 1e-6));
      MESSAGE(topo_name << " " << std::string(to_string(sched)) << ": " << f.total_GBps << " of "
                        << e.total_GBps << " GB/s, " << f.pairs.size() << " pairs, " << f.seconds
                        << " s (reference " << e.seconds << " s)");
    }
  }
}
}  // namespace forest_slow_test
