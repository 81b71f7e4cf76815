// bench_topology_scale: what planning costs on large clusters: building and checking a cluster
// preset of 1,024 to 10,000 GPUs, answering "is every plan connection routable" for a ring over all
// of them, and making the registry's ring, tree and double binary tree for it (the ring: its order
// and relay check; trees: also one plan, 4 chunks per tree). The target is < 5 s and < 2 GB for
// 10,000 GPUs (docs/results/topology-scale-*.md).
//
// Counters: gpus, nodes, links; peak_rss_MB is the process's peak resident set so far (run one
// case per process, --benchmark_filter, to attribute it).
//
// Usage: bench_topology_scale [Google Benchmark flags], e.g. --benchmark_filter=10000
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/physical/presets.hpp"

namespace {

using namespace ccoll;

double peak_rss_MB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

std::string cluster_name(int gpus, const char* kind) {
  return "cluster:" + std::to_string(gpus / 8) + "x8:" + kind + ":400";
}

void counters(benchmark::State& state, const physical::PhysicalTopology& t) {
  state.counters["gpus"] = static_cast<double>(t.gpus().size());
  state.counters["nodes"] = static_cast<double>(t.nodes.size());
  state.counters["links"] = static_cast<double>(t.links.size());
  state.counters["peak_rss_MB"] = peak_rss_MB();
}

// Build the preset and validate it (every active node reaches every other one).
void BM_LoadAndValidate(benchmark::State& state, const char* kind) {
  const std::string name = cluster_name(static_cast<int>(state.range(0)), kind);
  physical::PhysicalTopology t;
  for (auto _ : state) {
    t = physical::preset(name);
    t.validate();
    benchmark::DoNotOptimize(t.links.data());
  }
  counters(state, t);
}

// Route checks for a ring over every GPU, pair by pair, and for all pairs at once.
void BM_RouteChecks(benchmark::State& state, const char* kind) {
  const auto t = physical::preset(cluster_name(static_cast<int>(state.range(0)), kind));
  const auto gpus = t.active_nodes();
  for (auto _ : state) {
    const physical::Reachability reach(t);
    std::size_t ok = 0;
    for (std::size_t i = 0; i < gpus.size(); ++i)
      ok += reach.routable(gpus[i], gpus[(i + 1) % gpus.size()]) ? 1 : 0;
    if (ok != gpus.size() || !reach.all_routable(gpus)) state.SkipWithError("unroutable pair");
  }
  counters(state, t);
}

// The registry's algorithm for the whole cluster, and (trees) one plan of 64 MiB of floats.
void BM_Plan(benchmark::State& state, const char* kind, const char* algo) {
  const auto t = physical::preset(cluster_name(static_cast<int>(state.range(0)), kind));
  const auto spec = algo::find_algorithm(algo);
  const bool build = std::string(algo) != "ring";  // a ring plan has 2P - 1 steps per rank
  for (auto _ : state) {
    algo::AlgorithmRequest req;
    req.topology = &t;
    const auto reg = algo::make_algorithm(spec.algorithm, req);
    if (build) {
      plan::PlanRequest r;
      r.nranks = reg.nranks();
      r.count = 16u << 20;
      r.nchunks = 4;
      const auto p = reg.build(r);
      benchmark::DoNotOptimize(p.channels.data());
    }
    benchmark::DoNotOptimize(reg.rank_node().data());
  }
  counters(state, t);
}

}  // namespace

BENCHMARK_CAPTURE(BM_LoadAndValidate, nvswitch, "nvswitch")
    ->Arg(1024)
    ->Arg(4096)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoadAndValidate, pcie, "pcie")->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RouteChecks, nvswitch, "nvswitch")
    ->Arg(1024)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, ring_nvswitch, "nvswitch", "ring")
    ->Arg(1024)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, tree_nvswitch, "nvswitch", "tree")
    ->Arg(1024)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, dbtree_nvswitch, "nvswitch", "dbtree")
    ->Arg(1024)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
