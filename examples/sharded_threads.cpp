// examples/sharded_threads.cpp: one step of sharded data parallelism (ZeRO, FSDP) with ccoll's
// collectives on host threads: each rank reduce-scatters its gradients into the shard of the
// parameters it owns, updates that shard, and all-gathers the updated shards into the full
// parameters; a broadcast from rank 0 starts every rank from the same weights.
//
//   build/examples/example_sharded_threads [ranks] [parameters per rank]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <ccoll/ccoll.hpp>

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::size_t shard = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1 << 16;
  if (nranks < 1 || shard == 0) {
    std::fprintf(stderr, "usage: %s [ranks >= 1] [parameters per rank >= 1]\n", argv[0]);
    return 2;
  }
  const std::size_t total = shard * static_cast<std::size_t>(nranks);
  ccoll::Config cfg;
  cfg.nranks = nranks;
  using T = ccoll::transport::HostThreads;
  ccoll::Broadcast<T, ccoll::algo::Ring> broadcast(cfg);
  ccoll::ReduceScatter<T, ccoll::algo::Ring> reduce_scatter(cfg);
  ccoll::AllGather<T, ccoll::algo::Ring> all_gather(cfg);

  std::vector<int> wrong(static_cast<std::size_t>(nranks), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      // Rank 0's initial weights reach every rank.
      std::vector<float> params(total, r == 0 ? 1.0f : 0.0f);
      broadcast.rank(r).run(params.data(), params.data(), total, ccoll::DataType::f32, 0);
      // Gradients: every rank's contribution to parameter i is (i % 7) + r.
      std::vector<float> grads(total);
      for (std::size_t i = 0; i < total; ++i)
        grads[i] = static_cast<float>(i % 7) + static_cast<float>(r);
      // The average gradient of this rank's shard, written in place into its slice of grads.
      float* my_shard = grads.data() + static_cast<std::size_t>(r) * shard;
      reduce_scatter.rank(r).run(grads.data(), my_shard, shard, ccoll::DataType::f32,
                                 ccoll::ReduceOp::avg);
      // SGD on the shard this rank owns, then every rank gathers every updated shard.
      float* my_params = params.data() + static_cast<std::size_t>(r) * shard;
      for (std::size_t j = 0; j < shard; ++j) my_params[j] -= 0.5f * my_shard[j];
      all_gather.rank(r).run(my_params, params.data(), shard, ccoll::DataType::f32);
      // Expected: 1 - 0.5 * ((i % 7) + (P - 1) / 2) everywhere.
      for (std::size_t i = 0; i < total; ++i) {
        const double want =
            1.0 - 0.5 * (static_cast<double>(i % 7) + (static_cast<double>(nranks) - 1) / 2);
        if (std::fabs(params[i] - want) > 1e-5) ++wrong[static_cast<std::size_t>(r)];
      }
    });
  for (auto& t : threads) t.join();
  int bad = 0;
  for (int w : wrong) bad += w;
  std::printf("sharded step on %d ranks, %zu parameters: %s\n", nranks, total,
              bad == 0 ? "every rank holds the updated parameters" : "WRONG");
  return bad == 0 ? 0 : 1;
}
