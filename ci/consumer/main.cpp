// Consumer check: an installed ccoll, found with find_package(ccoll), runs an allreduce on 4
// threads.
#include <ccoll/ccoll.hpp>

#include <cstdio>
#include <thread>
#include <vector>

int main() {
  using AR =
      ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring,
                       ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>>;
  constexpr int kRanks = 4;
  constexpr std::size_t kCount = 1000;
  ccoll::Config cfg;
  cfg.nranks = kRanks;
  AR ar(cfg);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(kCount));
  for (int r = 0; r < kRanks; ++r)
    for (std::size_t i = 0; i < kCount; ++i) data[r][i] = static_cast<float>(r + 1);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      ar.rank(r).run(data[r].data(), data[r].data(), kCount, ccoll::DataType::f32,
                     ccoll::ReduceOp::sum);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r)
    for (float v : data[r])
      if (v != 10.0f) {
        std::printf("consumer: wrong result %f on rank %d\n", static_cast<double>(v), r);
        return 1;
      }
  std::puts("consumer: ok (4 ranks, 1000 floats, sum = 10)");
  return 0;
}
