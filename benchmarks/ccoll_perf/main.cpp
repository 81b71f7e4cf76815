// ccoll_perf: placeholder until the benchmark lands.
#include <cstdio>
int main() {
  std::puts("ccoll_perf: not built yet");
  return 2;
}
