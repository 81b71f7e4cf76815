// Cost of one steady_clock read, one pause instruction and one rdtsc on this host.
#include <x86intrin.h>
#include <chrono>
#include <cstdio>
int main() {
  auto t0 = std::chrono::steady_clock::now();
  long s = 0;
  for (int i = 0; i < 10000000; ++i)
    s += std::chrono::steady_clock::now().time_since_epoch().count();
  auto t1 = std::chrono::steady_clock::now();
  printf("clock %.1f ns\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / 1e7);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10000000; ++i) _mm_pause();
  t1 = std::chrono::steady_clock::now();
  printf("pause %.1f ns\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / 1e7);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10000000; ++i) s += __rdtsc();
  t1 = std::chrono::steady_clock::now();
  printf("rdtsc %.1f ns %ld\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / 1e7,
         s & 1);
}
