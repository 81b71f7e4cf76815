// bench_coordination: control traffic and CPU cost of the Horovod-style coordinator
// ([Horovod-cache]).
//
// Part 1 (printed first): P ranks as threads (default 64) train a model of N tensors (1,000 and
// 10,000) whose gradients each rank produces in its own random order, spread over 20 cycles per
// iteration. It prints the control bytes per cycle: in the warm-up iteration (cache empty, the
// coordinator path gathers names at rank 0) and after it (cache full: one AND-allreduce of one
// bitvector per cycle), and the same with the cache disabled (Horovod's original protocol).
// Part 2 (Google Benchmark): the CPU time of one coordinator cycle on one rank as a function of
// the number of ready tensors, cache warm (P = 1, so no waiting on other threads is timed).
//
// Usage: bench_coordination [--ranks=64] [--iterations=4] [--control_only | --skip_control]
//                           [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/coord/coordinator.hpp"
#include "ccoll/coord/thread_control_plane.hpp"

namespace {

using namespace ccoll;
using namespace ccoll::coord;

struct PhaseBytes {
  std::uint64_t cycles = 0, bitvector = 0, invalid = 0, gather = 0, broadcast = 0;
  std::uint64_t max_cycle_bytes = 0, coordinator_cycles = 0;
  void add(const CycleStats& s) {
    ++cycles;
    bitvector += s.bitvector_bytes;
    invalid += s.invalid_bytes;
    gather += s.gather_bytes;
    broadcast += s.broadcast_bytes;
    max_cycle_bytes = std::max(max_cycle_bytes, s.control_bytes());
    coordinator_cycles += s.coordinator_path;
  }
};

std::string tensor_name(int i) {
  std::string s = "model.layer";
  s += std::to_string(i);
  s += ".weight";
  return s;
}

// Rank 0's view: it receives every rank's request list on the coordinator path.
void control_bytes(int nranks, int ntensors, bool cache, int iterations) {
  ThreadControlGroup group(nranks, std::chrono::seconds(120));
  PhaseBytes warm, steady;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(nranks));
  constexpr int kSubmitCycles = 20;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      ThreadControlPlane cp(group, r);
      CoordinatorOptions opt;
      opt.cache_enabled = cache;
      opt.cache_capacity = static_cast<std::size_t>(ntensors);
      Coordinator c(cp, opt);
      std::mt19937 rng(1234u + static_cast<unsigned>(r));
      std::vector<int> order(static_cast<std::size_t>(ntensors));
      for (int i = 0; i < ntensors; ++i) order[static_cast<std::size_t>(i)] = i;
      for (int it = 0; it < iterations; ++it) {
        std::shuffle(order.begin(), order.end(), rng);
        std::size_t next = 0, done = 0;
        const std::size_t per_cycle = (order.size() + kSubmitCycles - 1) / kSubmitCycles;
        while (done < order.size()) {
          for (std::size_t k = 0; k < per_cycle && next < order.size(); ++k)
            c.submit(tensor_name(order[next++]), DataType::f32, 1024);
          for (const auto& f : c.run_cycle()) done += f.tensors.size();
          if (r == 0) (it == 0 ? warm : steady).add(c.last_cycle());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  auto row = [&](const char* phase, const PhaseBytes& b) {
    if (b.cycles == 0) return;
    const double n = static_cast<double>(b.cycles);
    std::printf(
        "| %6d | %5d | %-5s | %-9s | %6llu | %11llu | %9.0f | %12.0f | %12.0f | %12llu |\n",
        ntensors, nranks, cache ? "on" : "off", phase, static_cast<unsigned long long>(b.cycles),
        static_cast<unsigned long long>(b.coordinator_cycles),
        static_cast<double>(b.bitvector + b.invalid) / n, static_cast<double>(b.gather) / n,
        static_cast<double>(b.broadcast) / n, static_cast<unsigned long long>(b.max_cycle_bytes));
  };
  row("warm-up", warm);
  row("steady", steady);
}

// CPU time of one cycle on one rank with `n` ready tensors, all cached.
void BM_cycle_cached(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ThreadControlGroup group(1);
  ThreadControlPlane cp(group, 0);
  CoordinatorOptions opt;
  opt.cache_capacity = static_cast<std::size_t>(n);
  Coordinator c(cp, opt);
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) names.push_back(tensor_name(i));
  for (const auto& name : names) c.submit(name, DataType::f32, 1024);
  c.run_cycle();  // warm-up: fills the cache through the coordinator path
  for (auto _ : state) {
    state.PauseTiming();
    for (const auto& name : names) c.submit(name, DataType::f32, 1024);
    state.ResumeTiming();
    auto fused = c.run_cycle();
    benchmark::DoNotOptimize(fused.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["bitvector_bytes"] = static_cast<double>(c.last_cycle().bitvector_bytes);
}
BENCHMARK(BM_cycle_cached)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace

void print_control_table(int nranks, int iterations);

int main(int argc, char** argv) {
  int nranks = 64, iterations = 4;
  bool control_only = false, skip_control = false;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ranks=", 8) == 0) {
      nranks = std::atoi(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--iterations=", 13) == 0) {
      iterations = std::atoi(argv[i] + 13);
    } else if (std::strcmp(argv[i], "--control_only") == 0) {
      control_only = true;
    } else if (std::strcmp(argv[i], "--skip_control") == 0) {
      skip_control = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!skip_control) print_control_table(nranks, iterations);
  if (control_only) return 0;
  int rc = static_cast<int>(rest.size());
  benchmark::Initialize(&rc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

void print_control_table(int nranks, int iterations) {
  std::printf(
      "Control payload per cycle seen by rank 0 (bytes; bitvector = AND allreduce payload per "
      "rank, gather = request lists received from all ranks, broadcast = decisions sent)\n\n");
  std::printf(
      "| tensors | ranks | cache | phase     | cycles | coord. path | bitvector | gather/cycle "
      "| bcast/cycle  | max cycle B  |\n");
  std::printf(
      "| ------: | ----: | ----- | --------- | -----: | ----------: | --------: | -----------: "
      "| -----------: | -----------: |\n");
  for (int n : {1000, 10000}) {
    control_bytes(nranks, n, true, iterations);
    control_bytes(nranks, n, false, 2);
  }
  std::printf("\n");
}
