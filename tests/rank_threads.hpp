// tests/rank_threads.hpp: a test's ranks as threads, each reporting what went wrong.
//
//   const auto outcome = ccoll::testing::on_threads(p, [&](int rank) -> std::string { ... });
//   // outcome[r]: "" when rank r was fine, else its account ("threw: ..." for an escaping error)
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace ccoll::testing {

// Runs fn(rank) on P threads and joins them; fn returns "" or what went wrong.
template <class F>
std::vector<std::string> on_threads(int p, F&& fn) {
  std::vector<std::string> out(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      std::string& o = out[static_cast<std::size_t>(r)];
      try {
        o = fn(r);
      } catch (const std::exception& e) {
        o = "threw: ";
        o += e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace ccoll::testing
