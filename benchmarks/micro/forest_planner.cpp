// bench_forest_planner: planning time and quality of the packed-forest planner ([TopoSync]) on
// DGX-1V and on 8 machines x 8 GPUs (NVLink or PCIe inside, 10 or 100 Gbit/s between), with all
// workers active and with some inactive, for the phased, overlapped and concurrent schedules.
//
// Counters: total_GBps (sum chi of the plan), found_GBps (before pruning), bound_GBps (certified
// upper bound, -1 without an exact oracle), ratio_bound = total / bound, pairs (= plan channels),
// phases (MWU), oracle (oracle calls), refits (LP solves), pivots. With CCOLL_FOREST_EXACT=1 the
// exact reference (forest_exact.hpp, column generation; seconds to minutes on 64 GPUs) runs once
// per case, outside the timing, and adds exact_GBps and ratio_exact = total / exact (only where
// its oracle is exact: every worker active, or few relays). The max_pairs:K cases cap the pairs
// (plan channels) of the phased forest and report the bandwidth given up (prune_loss). The
// mwu_only cases run the multiplicative weights alone (no weight refit, no column generation).
//
// The graph shapes of the topology work: full-mesh machines (cluster:8x8:mesh, MI300X-style),
// GPU-only graphs (ring:8, torus:4x4) and the single machines mi300x and dgx-h100. Clusters of
// identical machines are solved on the LP reduced by the machines' rotation (symmetry counter: its
// order M); cluster:8x4:pairwise is the largest worker-pair graph, and the 128 x 8 clusters (1,024
// GPUs) are planned hierarchically (hierarchical = 1; bound_GBps is then the machines' cut bound,
// and the exact reference is not run). peak_rss_MB is the process's peak resident set so far (run
// one case per process to attribute it).
//
// Usage: bench_forest_planner [Google Benchmark flags], e.g. --benchmark_filter=dgx1v
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <any>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/solve/arborescence.hpp"

namespace {

using namespace ccoll::physical;
using namespace ccoll::forest;
using namespace ccoll::solve;

// [TopoSync] Fig. 6's notation per machine of a DGX-1 cluster: "2G" = GPUs A and G, "3G" = A, B, G,
// "4H" = A, B, G, H, a number k = the first k GPUs.
std::vector<std::string> fig6_active(const std::vector<std::string>& pattern) {
  std::vector<std::string> ids;
  for (std::size_t m = 0; m < pattern.size(); ++m) {
    std::vector<int> g;
    if (pattern[m] == "2G")
      g = {0, 6};
    else if (pattern[m] == "3G")
      g = {0, 1, 6};
    else if (pattern[m] == "4H")
      g = {0, 1, 6, 7};
    else
      for (int i = 0; i < std::atoi(pattern[m].c_str()); ++i) g.push_back(i);
    for (int i : g) {
      // Appended piecewise: g++ 12 -O3 warns (-Wrestrict, a false positive) on operator+ chains.
      std::string id = "m";
      id += std::to_string(m);
      id += ".gpu";
      id += std::to_string(i);
      ids.push_back(std::move(id));
    }
  }
  return ids;
}

struct Case {
  std::string topology;
  std::string active_name;
  std::vector<std::string> active;  // empty: every GPU
};

// mwu_phases > 0: the multiplicative weights alone (epsilon 0.1, that many phases, no refit).
void run(benchmark::State& state, const Case& c, ForestSchedule schedule, int max_pairs = 0,
         int mwu_phases = 0) {
  auto topo = preset(c.topology);
  if (!c.active.empty()) topo.set_active(c.active);
  ForestOptions o;
  o.schedule = schedule;
  o.max_pairs = max_pairs;
  if (mwu_phases > 0) {
    o.epsilon = 0.1;
    o.max_phases = mwu_phases;
    o.target_gap = 0;
    o.polish_rounds = 0;
    o.prune_loss = 0;
  }
  PackedForest f;
  for (auto _ : state) {
    f = solve_packed_forest(topo, o);
    benchmark::DoNotOptimize(f.total_GBps);
  }
  state.counters["total_GBps"] = f.total_GBps;
  state.counters["found_GBps"] = f.optimum_found_GBps;
  state.counters["bound_GBps"] = f.upper_bound_GBps;
  state.counters["ratio_bound"] = f.upper_bound_GBps > 0 ? f.total_GBps / f.upper_bound_GBps : 0;
  state.counters["pairs"] = static_cast<double>(f.pairs.size());
  state.counters["prune_loss"] = f.prune_loss();
  state.counters["phases"] = f.rounds;
  state.counters["oracle"] = static_cast<double>(f.oracle_calls);
  state.counters["refits"] = f.refits;
  state.counters["pivots"] = static_cast<double>(f.pivots);
  state.counters["symmetry"] = f.symmetry_order;
  state.counters["hierarchical"] = f.hierarchical ? 1 : 0;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  state.counters["peak_rss_MB"] = static_cast<double>(u.ru_maxrss) / 1024.0;
  const char* e = std::getenv("CCOLL_FOREST_EXACT");
  const bool small = static_cast<long>(topo.compute_nodes().size()) <= o.hierarchical_above;
  if (max_pairs == 0 && mwu_phases == 0 && small && e != nullptr && e[0] == '1') {
    ForestOptions x = o;
    x.method = ForestMethod::column_generation;
    x.prune_loss = 0;
    x.max_pairs = 0;
    const auto ref = solve_packed_forest(topo, x);
    if (ref.exact_oracle) {
      state.counters["exact_GBps"] = ref.total_GBps;
      state.counters["ratio_exact"] = f.total_GBps / ref.total_GBps;
      state.counters["exact_s"] = ref.seconds;
    }
  }
}

std::string name(const Case& c, ForestSchedule s) {
  std::string n = "forest/";
  n += c.topology;
  n += "/";
  n += c.active_name;
  n += "/";
  n += to_string(s);
  return n;
}

const bool registered = [] {
  const std::vector<std::string> fig6{"2G", "3G", "4H", "6", "8", "5", "2G", "4H"};
  std::vector<Case> cases{{"dgx1v", "all", {}},
                          {"dgx1v", "gpu0257", {"gpu0", "gpu2", "gpu5", "gpu7"}}};
  for (const char* t : {"cluster:8x8:nvlink:100", "cluster:8x8:nvlink:10", "cluster:8x8:pcie:100",
                        "cluster:8x8:pcie:10"}) {
    cases.push_back({t, "all", {}});
    cases.push_back({t, "fig6", fig6_active(fig6)});
  }
  for (const char* t : {"cluster:8x8:mesh:100", "cluster:2x4:mesh:100", "mi300x", "dgx-h100",
                        "ring:8", "torus:4x4", "cluster:4x4:pairwise", "cluster:8x4:pairwise",
                        "cluster:128x8:nvswitch:400", "cluster:128x8:pcie:100"})
    cases.push_back({t, "all", {}});
  for (const auto& c : cases)
    for (auto s : {ForestSchedule::phased, ForestSchedule::overlapped, ForestSchedule::concurrent})
      benchmark::RegisterBenchmark(name(c, s).c_str(),
                                   [c, s](benchmark::State& st) { run(st, c, s); })
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
  // Channels against bandwidth: the phased forest under a cap on pairs (plan channels).
  for (const char* t : {"dgx1v", "cluster:8x8:nvlink:100", "cluster:8x8:pcie:100"})
    for (int cap : {64, 32, 16, 8}) {
      const Case c{t, "all", {}};
      std::string n = name(c, ForestSchedule::phased);
      n += "/max_pairs:";
      n += std::to_string(cap);
      benchmark::RegisterBenchmark(
          n.c_str(), [c, cap](benchmark::State& st) { run(st, c, ForestSchedule::phased, cap); })
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
  // Why the refit: multiplicative weights alone need many phases for the last percent.
  for (const char* t : {"dgx1v", "cluster:8x8:nvlink:100"})
    for (int phases : {30, 100, 300}) {
      const Case c{t, "all", {}};
      std::string n = "mwu_only/";
      n += t;
      n += "/phases:";
      n += std::to_string(phases);
      benchmark::RegisterBenchmark(
          n.c_str(),
          [c, phases](benchmark::State& st) { run(st, c, ForestSchedule::phased, 0, phases); })
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
  return true;
}();

// Through the registry, as `ccoll plan --algo forest` plans (its simulator aside): the forest,
// the plan of 16 Mi floats with the CLI's default split (64) and the verifier. Counters: ranks,
// channels, steps (all programs), verified (1: the verifier accepted the plan).
void registry(benchmark::State& state, const std::string& topology) {
  const auto topo = preset(topology);
  ccoll::algo::AlgorithmRequest req;
  req.topology = &topo;
  req.split = 64;
  ccoll::plan::Plan plan;
  bool ok = false;
  double total = 0, bound = 0;
  for (auto _ : state) {
    const auto reg =
        ccoll::algo::make_algorithm(ccoll::algo::find_algorithm("forest").algorithm, req);
    ccoll::plan::PlanRequest pr;
    pr.nranks = reg.nranks();
    pr.count = 1u << 24;
    pr.overlap = false;
    plan = reg.build(pr);
    ok = ccoll::plan::verify(plan).ok;
    const auto& f = std::any_cast<const ccoll::algo::PackedForest&>(reg.details()).forest(false);
    total = f.total_GBps;
    bound = f.upper_bound_GBps;
  }
  std::size_t steps = 0;
  for (const auto& c : plan.channels)
    for (const auto& p : c.programs) steps += p.steps.size();
  state.counters["ranks"] = plan.nranks;
  state.counters["channels"] = static_cast<double>(plan.channels.size());
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["verified"] = ok ? 1 : 0;
  state.counters["total_GBps"] = total;
  state.counters["bound_GBps"] = bound;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  state.counters["peak_rss_MB"] = static_cast<double>(u.ru_maxrss) / 1024.0;
}

const bool registered_registry = [] {
  for (const char* t :
       {"cluster:8x4:pairwise", "cluster:128x8:nvswitch:400", "cluster:128x8:pcie:100"}) {
    std::string n = "registry/";
    n += t;
    benchmark::RegisterBenchmark(n.c_str(), [t](benchmark::State& st) { registry(st, t); })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  return true;
}();

// The oracle's core: a minimum arborescence on a complete digraph of n nodes (random costs),
// heap form against matrix form.
template <bool Dense>
void edmonds(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  std::vector<ArcEdge> edges;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) edges.push_back(ArcEdge{a, b, u(rng)});
  ArborescenceSolver solver;
  std::vector<int> out;
  int root = 0;
  for (auto _ : state) {
    const bool ok =
        Dense ? solver.solve_dense(n, edges, root, out) : solver.solve_sparse(n, edges, root, out);
    benchmark::DoNotOptimize(ok);
    root = (root + 1) % n;
  }
}
BENCHMARK_TEMPLATE(edmonds, false)
    ->Name("edmonds/heap")
    ->Arg(8)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(edmonds, true)
    ->Name("edmonds/matrix")
    ->Arg(8)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
