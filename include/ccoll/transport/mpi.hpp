// ccoll/transport/mpi.hpp: the MPI transport: one rank per MPI process, on any intracommunicator,
// every connection over MPI point-to-point messages.
//
//   MPI_Init(&argc, &argv);
//   ccoll::Allreduce<ccoll::transport::Mpi, ccoll::algo::Ring> ar(ccoll::Config{}, {}, comm);
//   ar.run(send, recv, count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
//
// The executor (transport/mpi/executor.hpp) is collective over the communicator; its links
// (transport/mpi/point_to_point.hpp) carry each message with MPI_Isend / MPI_Irecv, nslots in
// flight per connection. transport::MpiHybrid (transport/mpi_hybrid.hpp) uses shared memory
// between the ranks of one host instead.
//
// Calls: from one thread per process at a time (MPI_THREAD_SINGLE or FUNNELED suffices), in the
// same order on every rank, like any MPI collective. Destroy the object before MPI_Finalize to
// release its MPI resources (after it, destruction releases only memory).
#pragma once

#include <mpi.h>

#include <string_view>

#include "ccoll/core/config.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/mpi/executor.hpp"
#include "ccoll/transport/mpi/point_to_point.hpp"

namespace ccoll::transport {

struct Mpi {
  static constexpr std::string_view name = "mpi";
  using connection_type = mpi::Connection;
  using Executor = mpi::Executor<mpi::PointToPointLinks>;

  static Config resolve(const Config& c) { return mpi::resolve_on(c, MPI_COMM_WORLD); }
  static Config resolve(const Config& c, MPI_Comm comm) { return mpi::resolve_on(c, comm); }
};

static_assert(Transport<Mpi>);

}  // namespace ccoll::transport
