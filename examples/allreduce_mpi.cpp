// example_allreduce_mpi: allreduce among MPI processes, within and across hosts.
//
//     mpirun -np 4 ./example_allreduce_mpi            # MpiHybrid: shared memory inside a host
//     mpirun -np 4 ./example_allreduce_mpi --messages # Mpi: every connection an MPI message
//
// The ranks of a sub-communicator (here: even and odd world ranks) run their own allreduce, as
// any MPI communicator would. The forest variant plans reduce/broadcast trees on the hosts' links,
// measured at setup by ping-pong (transport/mpi/measure.hpp).
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/transport/mpi.hpp"
#include "ccoll/transport/mpi/measure.hpp"
#include "ccoll/transport/mpi_hybrid.hpp"

namespace {

template <class Transport>
long run(MPI_Comm comm) {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  // Ring: a plan for any number of ranks.
  ccoll::Allreduce<Transport, ccoll::algo::Ring, Overlapped> ring(ccoll::Config{},
                                                                  ccoll::algo::Ring{}, comm);
  // Forest: trees planned on the physical topology, here the measured one.
  const auto links = ccoll::transport::mpi::measure_host_links(comm);
  ccoll::Allreduce<Transport, ccoll::algo::PackedForest, Overlapped> forest(
      ccoll::Config{}, ccoll::algo::PackedForest(ccoll::transport::mpi::measured_topology(links)),
      comm);

  const std::size_t count = 1 << 20;
  std::vector<float> send(count, static_cast<float>(ring.rank() + 1)), recv(count);
  const int sum_of_ranks = ring.nranks() * (ring.nranks() + 1) / 2;  // 1 + 2 + ... + P
  const auto expected = static_cast<float>(sum_of_ranks);
  long wrong = 0;
  ring.run(send.data(), recv.data(), count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
  for (float x : recv) wrong += x != expected;
  forest.run(send.data(), recv.data(), count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
  for (float x : recv) wrong += x != expected;
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const bool messages = argc > 1 && std::strcmp(argv[1], "--messages") == 0;
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm parity = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &parity);
  int rc = 0;
  try {
    long wrong = 0;
    for (MPI_Comm comm : {MPI_COMM_WORLD, parity})
      wrong += messages ? run<ccoll::transport::Mpi>(comm) : run<ccoll::transport::MpiHybrid>(comm);
    std::printf("rank %d: %ld wrong elements\n", world_rank, wrong);
    rc = wrong == 0 ? 0 : 1;
  } catch (const ccoll::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", world_rank, e.what());
    rc = 2;
  }
  MPI_Comm_free(&parity);
  MPI_Finalize();
  return rc;
}
