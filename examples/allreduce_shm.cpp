// example_allreduce_shm: an allreduce among processes on one host, through shared memory.
//
// Run it as P processes, for example under Open MPI (rank and size come from
// OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE; MPI itself is not used):
//     mpirun -np 4 ./example_allreduce_shm
// or by hand:
//     for r in 0 1 2; do CCOLL_RANK=$r CCOLL_SIZE=3 CCOLL_SESSION=demo ./example_allreduce_shm &
//     done
// Without any of these variables it forks P=2 processes itself.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ccoll/ccoll.hpp"

namespace {

int run_rank(const ccoll::Config& config) {
  using AR =
      ccoll::Allreduce<ccoll::transport::SharedMemory, ccoll::algo::Ring, ccoll::schedule::Phased>;
  try {
    AR ar(config);  // collective: every process constructs it
    const std::size_t count = 1 << 20;
    std::vector<float> send(count, static_cast<float>(ar.rank())), recv(count);
    ar.run(send.data(), recv.data(), count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
    const int sum_of_ranks = ar.nranks() * (ar.nranks() - 1) / 2;  // 0 + 1 + ... + (P-1)
    const auto expected = static_cast<float>(sum_of_ranks);
    long wrong = 0;
    for (float x : recv) wrong += x != expected;
    std::printf("rank %d of %d: %ld wrong elements\n", ar.rank(), ar.nranks(), wrong);
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
  // Standalone: fork two ranks.
  ccoll::Config config;
  config.nranks = 2;
  config.session = ccoll::transport::new_session("example");  // one per job, even in containers
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
