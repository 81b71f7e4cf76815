// Slow tests of ccoll::Allreduce: more than 2^31 elements (64-bit index math end to end), and
// many calls in a row on 16 threads.
#include <doctest/doctest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "ccoll/algo/ring.hpp"
#include "ccoll/ccoll.hpp"

namespace allreduce_slow_test {
using namespace ccoll;

TEST_CASE("threads: 2^31 + 5 one-byte elements, in place, on 2 ranks") {
  const std::size_t n = (std::size_t{1} << 31) + 5;
  Config c;
  c.nranks = 2;
  c.slot_bytes = 4u << 20;
  Allreduce<transport::HostThreads, algo::Ring, schedule::Phased> ar(c);
  std::vector<std::vector<std::uint8_t>> buf(2);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(2));
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto& b = buf[static_cast<std::size_t>(r)];
      b.resize(n);
      for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i % 7) + r);
      ar.rank(r).run(b.data(), b.data(), n, DataType::u8, ReduceOp::sum);
    });
  for (auto& t : threads) t.join();
  std::size_t wrong = 0;
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < n; ++i)
      wrong += buf[static_cast<std::size_t>(r)][i] != static_cast<std::uint8_t>(2 * (i % 7) + 1);
  CHECK(wrong == 0);
  // The last elements lie beyond 2^31: check them explicitly.
  CHECK(buf[1][n - 1] == static_cast<std::uint8_t>(2 * ((n - 1) % 7) + 1));
}

TEST_CASE("threads: 2000 small calls on 16 threads") {
  Config c;
  c.nranks = 16;
  c.slot_bytes = 4096;
  Allreduce<transport::HostThreads, algo::Ring, schedule::Phased> ar(c);
  std::vector<long> wrong(16, 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(16));
  for (int r = 0; r < 16; ++r)
    threads.emplace_back([&, r] {
      std::vector<std::int32_t> in(257), out(257);
      for (int call = 0; call < 2000; ++call) {
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = r + call + static_cast<int>(i);
        ar.rank(r).run(in.data(), out.data(), in.size(), DataType::i32, ReduceOp::sum);
        for (std::size_t i = 0; i < in.size(); ++i)
          wrong[static_cast<std::size_t>(r)] += out[i] != 120 + 16 * (call + static_cast<int>(i));
      }
    });
  for (auto& t : threads) t.join();
  for (long w : wrong) CHECK(w == 0);
}
}  // namespace allreduce_slow_test
