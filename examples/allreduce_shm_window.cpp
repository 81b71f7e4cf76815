// example_allreduce_shm_window: the shared-memory allreduce on buffers in a registered window, so
// that each call reads the peers' buffers directly instead of staging every message (docs/api.md,
// "Registered windows").
//
// Run it as P processes, for example under Open MPI (MPI itself is not used):
//     mpirun -np 4 ./example_allreduce_shm_window
// Without a launcher's variables it forks P=2 processes itself.
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "ccoll/ccoll.hpp"

namespace {

int run_rank(const ccoll::Config& config) {
  using AR =
      ccoll::Allreduce<ccoll::transport::SharedMemory, ccoll::algo::Ring, ccoll::schedule::Phased>;
  try {
    AR ar(config);
    const std::size_t count = 4 << 20;  // 16 MiB of floats: above the in-band size, so direct
    const std::size_t bytes = count * sizeof(float);
    // Collective: every rank allocates the same windows in the same order, and places its
    // buffers at the same offsets in them.
    const std::span<std::byte> window = ar.allocate_window(2 * bytes);
    auto* grad = reinterpret_cast<float*>(window.data());
    auto* sum = reinterpret_cast<float*>(window.data() + bytes);
    for (std::size_t i = 0; i < count; ++i) grad[i] = static_cast<float>(ar.rank());
    ar.run(grad, sum, count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
    ar.run(sum, sum, count, ccoll::DataType::f32, ccoll::ReduceOp::avg);  // in place, too
    const int sum_of_ranks = ar.nranks() * (ar.nranks() - 1) / 2;         // 0 + 1 + ... + (P-1)
    const auto expected = static_cast<float>(sum_of_ranks);
    long wrong = 0;
    for (std::size_t i = 0; i < count; ++i) wrong += sum[i] != expected;
    std::printf("rank %d of %d: %ld wrong elements, %llu of 2 calls direct\n", ar.rank(),
                ar.nranks(), wrong, static_cast<unsigned long long>(ar.executor().direct_calls()));
    return wrong == 0 ? 0 : 1;
  } catch (const ccoll::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}

}  // namespace

int main() {
  const bool launched =
      std::getenv("CCOLL_SIZE") || std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
  if (launched) return run_rank(ccoll::Config{});
  ccoll::Config config;
  config.nranks = 2;
  config.session =
      ccoll::transport::new_session("example-window");  // one per job, even in containers
  for (int r = 0; r < config.nranks; ++r) {
    if (::fork() == 0) {
      config.rank = r;
      const int rc = run_rank(config);
      std::fflush(stdout);
      ::_exit(rc);
    }
  }
  int status = 0, failed = 0;
  while (::wait(&status) > 0) failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return failed == 0 ? 0 : 1;
}
