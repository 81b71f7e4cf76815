// example_allreduce_threads: an allreduce among the threads of one process.
//
// Each of P threads holds a vector of floats; after ar.run every thread holds the element-wise
// sum. Usage: example_allreduce_threads [P=4] [count=1000000]
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::size_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;

  ccoll::Config config;
  config.nranks = nranks;
  using AR =
      ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring,
                       ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>>;
  AR ar(config);  // set up once: shared FIFOs, plan cache

  std::vector<int> wrong(static_cast<std::size_t>(nranks), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(nranks));
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<float> grad(count, static_cast<float>(rank + 1));
      for (int step = 0; step < 3; ++step)  // many calls; no allocation after the first
        ar.rank(rank).run(grad.data(), grad.data(), count, ccoll::DataType::f32,
                          ccoll::ReduceOp::avg);
      // avg of 1..P is (P+1)/2; after three in-place averages it stays (P+1)/2.
      const float expected = static_cast<float>(nranks + 1) / 2.0f;
      for (float g : grad) wrong[static_cast<std::size_t>(rank)] += g != expected;
    });
  }
  for (auto& t : threads) t.join();
  int total = 0;
  for (int w : wrong) total += w;
  std::printf("%s: %d threads x %zu floats, %d wrong elements\n", ar.name().c_str(), nranks, count,
              total);
  return total == 0 ? 0 : 1;
}
