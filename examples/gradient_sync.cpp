// example_gradient_sync: data-parallel gradient averaging driven by a gradient-level schedule.
//
// P threads play P data-parallel workers of one model. Each iteration, every worker runs a
// (simulated) backward pass from the last layer to the first, marks each gradient ready as soon as
// it is written, and waits; GradientSync all-reduces the gradients meanwhile, fused and overlapped
// as the chosen planner decided. Afterwards every gradient holds the average over the workers.
//
// Usage: example_gradient_sync [P=4] [policy=asc] [profile.json]
//   policy: wfbp, single, mg, asc, optimal, horovod, bucket
//   profile: a model profile (data/profiles/*.json); default: a small built-in 8-layer model
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "ccoll/gradient/asc_wfbp.hpp"
#include "ccoll/gradient/fusion_buffer.hpp"
#include "ccoll/gradient/mg_wfbp.hpp"
#include "ccoll/gradient/optimal.hpp"
#include "ccoll/gradient/single_layer.hpp"
#include "ccoll/gradient/sync.hpp"
#include "ccoll/gradient/wfbp.hpp"

namespace g = ccoll::gradient;

static g::Schedule choose(const std::string& policy, const g::ModelProfile& p,
                          const g::CommModel& c) {
  if (policy == "wfbp") return g::plan_wfbp(p);
  if (policy == "single") return g::plan_single_layer(p);
  if (policy == "mg") return g::plan_mg_wfbp(p, c);
  if (policy == "asc") return g::plan_asc_wfbp(p, c, 2);
  if (policy == "optimal") return g::plan_optimal(p, c, 2);
  if (policy == "horovod") return g::plan_horovod_fusion(p);
  if (policy == "bucket") return g::plan_ddp_buckets(p);
  std::fprintf(stderr, "unknown policy '%s'\n", policy.c_str());
  std::exit(2);
}

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::string policy = argc > 2 ? argv[2] : "asc";

  // The model: its layers' gradient sizes and backward times (layer 1 at the input).
  g::ModelProfile profile;
  if (argc > 3) {
    profile = g::load_profile(argv[3]);
  } else {
    profile.name = "tiny-cnn";
    profile.forward_s = 2e-3;
    const std::uint64_t bytes[] = {7 * 7 * 3 * 64 * 4,    64 * 4,  3 * 3 * 64 * 128 * 4, 128 * 4,
                                   3 * 3 * 128 * 256 * 4, 256 * 4, 256 * 1024 * 4,       1024 * 4};
    for (int l = 0; l < 8; ++l) {
      std::string name("layer");
      name += std::to_string(l + 1);
      profile.layers.push_back({name, bytes[l], l % 2 == 0 ? 6e-4 : 5e-5});
    }
  }
  const std::vector<g::TensorSpec> tensors = g::tensors_from_profile(profile, ccoll::DataType::f32);

  // What the planners assume about one allreduce (here a guess for threads of one host: 20 us of
  // startup, 5 GB/s); docs/gradients.md says how to measure it instead.
  const g::CommModel model = g::CommModel::from_line(20e-6, 1.0 / 5e9, 1.5);
  const g::Schedule schedule = choose(policy, profile, model);
  // The example's backward pass only writes the gradients, so all of them are ready almost at
  // once: the model's prediction for that case is what the measurement compares with.
  g::ModelProfile instant = profile;
  instant.forward_s = 0;
  for (auto& l : instant.layers) l.backward_s = 0;
  const g::Timeline predicted = g::evaluate(instant, schedule, model);

  using AR = ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring>;
  ccoll::Config config;
  config.nranks = nranks;
  config.timeout = std::chrono::seconds(30);
  g::GradientSync<AR> sync(config, tensors, schedule, {.op = ccoll::ReduceOp::avg});

  const int iterations = 5;
  std::vector<int> wrong(static_cast<std::size_t>(nranks), 0);
  std::vector<double> seconds(static_cast<std::size_t>(nranks), 0);
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(nranks));
  for (int rank = 0; rank < nranks; ++rank) {
    workers.emplace_back([&, rank] {
      std::vector<std::vector<float>> grads;
      std::vector<void*> ptrs;
      grads.reserve(tensors.size());
      ptrs.reserve(tensors.size());
      for (const auto& t : tensors) grads.emplace_back(t.count);
      for (auto& v : grads) ptrs.push_back(v.data());
      auto& engine = sync.attach(rank, ptrs);  // once: binds the buffers, starts the workers
      const auto start = std::chrono::steady_clock::now();
      for (int it = 0; it < iterations; ++it) {
        for (int l = static_cast<int>(tensors.size()) - 1; l >= 0; --l) {  // backward: L..1
          for (float& x : grads[static_cast<std::size_t>(l)]) x = static_cast<float>(rank + 1);
          engine.ready(l);  // its allreduce may start now, while layer l - 1 is computed
        }
        engine.wait();  // every gradient is the average over the workers
      }
      seconds[static_cast<std::size_t>(rank)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
          iterations;
      const float expected = static_cast<float>(nranks + 1) / 2.0f;  // exact in float
      for (const auto& v : grads)
        for (float x : v) wrong[static_cast<std::size_t>(rank)] += x != expected;
    });
  }
  for (auto& w : workers) w.join();

  int total = 0;
  for (int w : wrong) total += w;
  std::printf("%s on %d threads, policy %s (%s, K=%d, %zu messages, %d channels)\n",
              profile.name.c_str(), nranks, schedule.policy.c_str(),
              g::typing_string(g::typing_from_schedule(schedule, profile.num_layers())).c_str(),
              schedule.max_concurrent, schedule.messages.size(), sync.nchannels());
  std::printf("measured: %.3f ms per iteration (backward simulated as writes only)\n",
              seconds[0] * 1e3);
  std::printf("model:    %.3f ms (the assumed a, b and gamma; gradients ready at once)\n",
              predicted.comm_end_s * 1e3);
  std::printf("%d wrong elements\n", total);
  return total == 0 ? 0 : 1;
}
