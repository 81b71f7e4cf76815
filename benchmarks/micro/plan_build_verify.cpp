// bench_plan_build_verify: how long building a plan and verifying it takes (both run once per
// (count, dtype) on first use of an Allreduce, before any data moves). items_per_second counts
// plan steps, so the per-step cost of the symbolic verifier can be read off directly.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"

namespace {

using namespace ccoll::plan;

// 64 MiB of floats, default slots (1 MiB) and model parameters, two channels.
PlanRequest request(std::int64_t nranks, bool overlap) {
  PlanRequest req;
  req.nranks = static_cast<Rank>(nranks);
  req.count = std::uint64_t{16} << 20;
  req.nchannels = 2;
  req.overlap = overlap;
  return req;
}

template <Plan (*Build)(const PlanRequest&)>
void build(benchmark::State& state) {
  const PlanRequest req = request(state.range(0), state.range(1) != 0);
  std::uint64_t steps = 0;
  for (auto _ : state) {
    Plan plan = Build(req);
    benchmark::DoNotOptimize(plan.ports.data());
    steps = 0;
    for (const auto& ch : plan.channels)
      for (const auto& prog : ch.programs) steps += prog.steps.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * steps));
  state.counters["steps"] = static_cast<double>(steps);
}

template <Plan (*Build)(const PlanRequest&)>
void verify_plan(benchmark::State& state) {
  const Plan plan = Build(request(state.range(0), state.range(1) != 0));
  VerifyReport r;
  for (auto _ : state) {
    r = verify(plan);
    benchmark::DoNotOptimize(r.rounds);
  }
  if (!r.ok) state.SkipWithError(r.error.c_str());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * r.steps));
  state.counters["steps"] = static_cast<double>(r.steps);
  state.counters["rounds"] = static_cast<double>(r.rounds);
}

Plan ring(const PlanRequest& req) {
  return build_ring(req);
}
Plan tree(const PlanRequest& req) {
  return build_tree(req);
}
Plan dbtree(const PlanRequest& req) {
  return build_double_binary_tree(req);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t p : {8, 64, 256}) b->Args({p, 1});
  b->Unit(benchmark::kMillisecond);
}
void tree_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t p : {8, 64, 256})
    for (std::int64_t overlap : {0, 1}) b->Args({p, overlap});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(build<ring>)->Name("build/ring")->Apply(sizes);
BENCHMARK(verify_plan<ring>)->Name("verify/ring")->Apply(sizes);
BENCHMARK(build<tree>)->Name("build/tree")->Apply(tree_sizes);
BENCHMARK(verify_plan<tree>)->Name("verify/tree")->Apply(tree_sizes);
BENCHMARK(build<dbtree>)->Name("build/dbtree")->Apply(tree_sizes);
BENCHMARK(verify_plan<dbtree>)->Name("verify/dbtree")->Apply(tree_sizes);

}  // namespace

BENCHMARK_MAIN();
