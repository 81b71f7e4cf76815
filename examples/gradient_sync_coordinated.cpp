// GradientSync<AR, Coordinated>: four threads play four data-parallel workers that mark their
// gradients ready in a random order of their own every step; the ranks agree at run time which
// gradients to all-reduce together (docs/gradients.md, "The coordinated mode"). Prints what the
// coordination did and checks every gradient.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "ccoll/gradient/coordinated_sync.hpp"

namespace g = ccoll::gradient;

int main() {
  const std::vector<g::TensorSpec> tensors = {{"conv.w", 4096, ccoll::DataType::f32},
                                              {"conv.b", 64, ccoll::DataType::f32},
                                              {"fc.w", 65536, ccoll::DataType::f32},
                                              {"fc.b", 10, ccoll::DataType::f32}};
  g::Coordinated policy;
  policy.fusion_threshold_bytes = 1 << 20;  // HOROVOD_FUSION_THRESHOLD
  policy.cycle_time = std::chrono::microseconds(200);
  policy.groups = {{"fc", {"fc.w", "fc.b"}}};  // all-reduced together, never split

  using AR = ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring>;
  ccoll::Config config;
  config.nranks = 4;
  g::GradientSync<AR, g::Coordinated> sync(config, tensors, policy, {.op = ccoll::ReduceOp::avg});

  const int steps = 100;
  std::atomic<long> wrong{0};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(config.nranks));
  for (int rank = 0; rank < config.nranks; ++rank)
    workers.emplace_back([&, rank] {
      std::vector<std::vector<float>> grads;
      std::vector<void*> ptrs;
      grads.reserve(tensors.size());
      ptrs.reserve(tensors.size());
      for (const auto& t : tensors) grads.emplace_back(t.count);
      for (auto& v : grads) ptrs.push_back(v.data());
      auto& engine = sync.attach(rank, ptrs);
      std::vector<int> order = {0, 1, 2, 3};
      std::mt19937 rng(static_cast<unsigned>(rank));
      for (int step = 0; step < steps; ++step) {
        std::shuffle(order.begin(), order.end(), rng);  // autograd's order: any, per rank
        for (int t : order) {
          std::fill(grads[static_cast<std::size_t>(t)].begin(),
                    grads[static_cast<std::size_t>(t)].end(), static_cast<float>(rank + step));
          engine.ready(t);  // the framework wrote tensor t's gradient
        }
        engine.wait();  // every gradient: the mean over the workers
        const float mean = 1.5f + static_cast<float>(step);  // (0 + 1 + 2 + 3) / 4 + step
        for (const auto& v : grads)
          wrong += std::count_if(v.begin(), v.end(), [&](float x) { return x != mean; });
      }
    });
  for (auto& w : workers) w.join();

  const auto s = sync.rank(0).stats();
  std::printf(
      "%d steps, 4 ranks: %llu cycles, %llu fused allreduces; %llu tensors decided from the "
      "response cache, %llu on the coordinator path (%llu cycles); wrong elements: %ld\n",
      steps, static_cast<unsigned long long>(s.cycles),
      static_cast<unsigned long long>(s.fused_allreduces),
      static_cast<unsigned long long>(s.cached_responses),
      static_cast<unsigned long long>(s.new_responses),
      static_cast<unsigned long long>(s.coordinator_cycles), wrong.load());
  return wrong == 0 ? 0 : 1;
}
