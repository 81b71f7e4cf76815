// ccoll/transport/mpi_hybrid.hpp: the hierarchical MPI transport: one rank per MPI process, shared
// memory between the ranks of one host, MPI point-to-point messages between hosts.
//
//   ccoll::Allreduce<ccoll::transport::MpiHybrid, ccoll::algo::Ring> ar(ccoll::Config{}, {}, comm);
//
// Same executor, control plane and calling rules as transport::Mpi (transport/mpi.hpp); only the
// links differ (transport/mpi/hybrid.hpp). On one host every connection is in shared memory and
// the transport runs like transport::SharedMemory, with MPI doing the rendezvous; across hosts a
// plan's host-crossing connections are MPI messages.
#pragma once

#include <mpi.h>

#include <string_view>

#include "ccoll/core/config.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/mpi/executor.hpp"
#include "ccoll/transport/mpi/hybrid.hpp"

namespace ccoll::transport {

struct MpiHybrid {
  static constexpr std::string_view name = "mpi-hybrid";
  using connection_type = mpi::HybridConnection;
  using Executor = mpi::Executor<mpi::HybridLinks>;

  static Config resolve(const Config& c) { return mpi::resolve_on(c, MPI_COMM_WORLD); }
  static Config resolve(const Config& c, MPI_Comm comm) { return mpi::resolve_on(c, comm); }
};

static_assert(Transport<MpiHybrid>);

}  // namespace ccoll::transport
