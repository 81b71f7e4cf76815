// The floor of a symmetric exchange between two processes: each writes its own cache line and
// polls the other's, `lines` times in a row per iteration. g++ -O2 -o line_pingpong
// line_pingpong.cpp
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
struct alignas(128) Line {
  std::atomic<uint64_t> v;
  char pad[120];
};
int main(int argc, char** argv) {
  int lines = argc > 1 ? atoi(argv[1]) : 1;  // serial lines per exchange
  auto* m =
      (Line*)mmap(nullptr, 4096 * 4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  const long N = 2000000;
  pid_t pid = fork();
  int r = pid == 0 ? 1 : 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 1; i <= N; ++i) {
      uint64_t s = (uint64_t)rep * N + i;
      for (int l = 0; l < lines; ++l) {
        m[r * 8 + l].v.store(s, std::memory_order_release);
        while (m[(1 - r) * 8 + l].v.load(std::memory_order_acquire) < s) __builtin_ia32_pause();
      }
    }
    auto t1 = std::chrono::steady_clock::now();
    if (r == 0)
      printf("lines %d: %.3f us/iter\n", lines,
             std::chrono::duration<double, std::micro>(t1 - t0).count() / N);
  }
  if (pid) wait(nullptr);
}
