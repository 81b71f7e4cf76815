// bench_schedule_planners: how long the gradient-level planners take on the shipped profiles
// (targets: MG-WFBP and ASC-WFBP under 10 ms and the exact optimum under 1 s for DenseNet-201's
// 604 tensors), with [ASC-WFBP]'s cost model (a = 1.4 ms, b = 1.7 ns/B, gamma = 1.5, 32 workers).
// The optimal planner reports, as counters, whether it proved optimality (1/0), its gap to the
// lower bound and the iteration time it found; its time includes the proof.
#include <benchmark/benchmark.h>

#include <string>

#include "ccoll/gradient/asc_wfbp.hpp"
#include "ccoll/gradient/mg_wfbp.hpp"
#include "ccoll/gradient/optimal.hpp"
#include "ccoll/gradient/profile.hpp"

namespace {

using namespace ccoll::gradient;

const char* const kModels[] = {"resnet50",    "resnet152", "densenet161", "densenet201",
                               "inceptionv4", "googlenet", "bert_base"};

const ModelProfile& profile(std::int64_t i) {
  static std::vector<ModelProfile> loaded = [] {
    std::vector<ModelProfile> v;
    for (const char* m : kModels)
      v.push_back(load_profile(std::string(CCOLL_SOURCE_DIR) + "/data/profiles/" + m + ".json"));
    return v;
  }();
  return loaded[static_cast<std::size_t>(i)];
}

const CommModel kSeed000 = CommModel::from_line(1.4e-3, 1.7e-9, 1.5);

template <Schedule (*Plan)(const ModelProfile&, const CommModel&)>
void planner(benchmark::State& state) {
  const ModelProfile& p = profile(state.range(0));
  state.SetLabel(p.name);
  for (auto _ : state) benchmark::DoNotOptimize(Plan(p, kSeed000));
  state.counters["layers"] = p.num_layers();
  state.counters["iteration_s"] = iteration_time(p, Plan(p, kSeed000), kSeed000);
}

Schedule asc(const ModelProfile& p, const CommModel& c) {
  return plan_asc_wfbp(p, c, 2);
}

void optimal(benchmark::State& state) {
  const ModelProfile& p = profile(state.range(0));
  state.SetLabel(p.name);
  OptimalResult r;
  for (auto _ : state) {
    r = solve_optimal(p, kSeed000);
    // The whole struct, not r.iteration_s: libbenchmark 1.7.1 corrupts a double passed alone
    // (its "+r,m" constraint under GCC -O3), which printed a wrong iteration time here.
    benchmark::DoNotOptimize(r);
  }
  state.counters["layers"] = p.num_layers();
  state.counters["iteration_s"] = r.iteration_s;
  state.counters["lower_bound_s"] = r.lower_bound_s;
  state.counters["proven"] = r.proven_optimal ? 1 : 0;
  state.counters["gap_pct"] = 100 * r.gap();
}

void models(benchmark::internal::Benchmark* b) {
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(std::size(kModels)); ++i) b->Arg(i);
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(planner<plan_mg_wfbp>)->Name("mg_wfbp_exact")->Apply(models);
BENCHMARK(planner<plan_mg_wfbp_paper>)->Name("mg_wfbp_paper_rule")->Apply(models);
BENCHMARK(planner<asc>)->Name("asc_wfbp")->Apply(models);
BENCHMARK(optimal)->Name("optimal")->Apply(models)->Iterations(1);

BENCHMARK_MAIN();
