// Time per call of an 8-byte (by default) allreduce between two forked processes over shared
// memory, 15 blocks; prints the minimum and median. Build from the repository root:
//   g++ -std=c++20 -O2 -DNDEBUG -Iinclude -o call_latency call_latency.cpp -pthread
//   ./call_latency ITERS [COUNT [IN_BAND_BYTES [PROTOCOL [NSLOTS]]]]
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "ccoll/algo/by_size.hpp"
#include "ccoll/ccoll.hpp"
int main(int argc, char** argv) {
  long iters = argc > 1 ? atol(argv[1]) : 1000000;
  std::size_t count = argc > 2 ? atol(argv[2]) : 2;
  using AR = ccoll::Allreduce<ccoll::transport::SharedMemory, ccoll::algo::BySize,
                              ccoll::schedule::Phased>;
  ccoll::Config config;
  config.nranks = 2;
  if (argc > 3) config.in_band_agreement_bytes = atol(argv[3]);
  if (argc > 4) config.protocol = argv[4];
  if (argc > 5) config.nslots = atoi(argv[5]);
  config.session = "lat-" + std::to_string(::getpid());
  for (int r = 0; r < 2; ++r) {
    if (::fork() == 0) {
      config.rank = r;
      AR ar(config);
      std::vector<float> s(count, 1.f), d(count);
      std::vector<double> t;
      for (int rep = 0; rep < 15; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < iters; ++i)
          ar.run(s.data(), d.data(), count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
        auto t1 = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
      }
      std::sort(t.begin(), t.end());
      if (r == 0) std::printf("min %.4f med %.4f us\n", t[0], t[t.size() / 2]);
      std::fflush(stdout);
      ::_exit(d[0] == 2.f ? 0 : 1);
    }
  }
  int st;
  while (::wait(&st) > 0) {
  }
}
