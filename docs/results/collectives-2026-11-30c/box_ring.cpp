// The fast boxes' ring alone between two threads (docs/results/collectives-2026-11-30c.md):
// g++ -O2 -std=c++20 -pthread box_ring.cpp -o box_ring && ./box_ring 8
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
struct alignas(64) Box {
  std::atomic<uint64_t> seq;
  uint64_t sig;
  char data[48];
};
constexpr int N = 64;
Box ring[N];
alignas(128) std::atomic<uint64_t> tail{0};  // consumer's count
alignas(128) char pad[128];
int main(int argc, char** argv) {
  const uint64_t iters = 20000000;
  int bytes = argc > 1 ? atoi(argv[1]) : 8;
  std::thread cons([&] {
    char out[64];
    uint64_t sum = 0;
    for (uint64_t i = 1; i <= iters; ++i) {
      Box& b = ring[i % N];
      while (b.seq.load(std::memory_order_acquire) != i) {
      }
      std::memcpy(out, b.data, bytes);
      sum += out[0];
      if (i % 16 == 0) tail.store(i, std::memory_order_release);
    }
    printf("sum %lu\n", sum);
  });
  char in[64] = {1};
  auto t0 = std::chrono::steady_clock::now();
  uint64_t known_tail = 0;
  for (uint64_t i = 1; i <= iters; ++i) {
    if (i - known_tail > N - 16) {
      while ((known_tail = tail.load(std::memory_order_acquire)) + N - 16 < i) {
      }
    }
    Box& b = ring[i % N];
    std::memcpy(b.data, in, bytes);
    b.sig = i;
    b.seq.store(i, std::memory_order_release);
  }
  cons.join();
  auto t1 = std::chrono::steady_clock::now();
  printf("%.1f ns/call\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
}
