// ccoll/transport/mpi/hosts.hpp: which ranks of an MPI communicator share a host.
//
// A host is a shared-memory node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), split further by the
// environment variable CCOLL_MPI_HOST where set: ranks that name different hosts are treated as
// different hosts (emulated hosts on one machine, or a host per socket). A host is named by the
// rank, in the communicator, of its first rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "ccoll/transport/mpi/check.hpp"

namespace ccoll::transport::mpi {

struct Hosts {
  MPI_Comm host = MPI_COMM_NULL;  // this rank's host (the caller frees it)
  int host_rank = 0;              // this rank's rank on its host
  std::vector<int> host_of;       // per rank of the communicator: its host's first rank
};

// Collective over `comm`.
inline Hosts find_hosts(MPI_Comm comm, int self) {
  Hosts h;
  check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, self, MPI_INFO_NULL, &h.host),
        "MPI_Comm_split_type (shared memory)", self);
  const char* name = std::getenv("CCOLL_MPI_HOST");
  if (name != nullptr && *name != '\0') {
    std::uint32_t hash = 2166136261u;
    for (const char* p = name; *p != '\0'; ++p)
      hash = (hash ^ static_cast<unsigned char>(*p)) * 16777619u;
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(h.host, static_cast<int>(hash & 0x7fffffffu), self, &sub),
          "MPI_Comm_split (CCOLL_MPI_HOST)", self);
    MPI_Comm_free(&h.host);
    h.host = sub;
  }
  check(MPI_Comm_rank(h.host, &h.host_rank), "MPI_Comm_rank (host)", self);
  int leader = self;
  check(MPI_Bcast(&leader, 1, MPI_INT, 0, h.host), "MPI_Bcast (host leader)", self);
  int nranks = 0;
  check(MPI_Comm_size(comm, &nranks), "MPI_Comm_size", self);
  h.host_of.resize(static_cast<std::size_t>(nranks));
  check(MPI_Allgather(&leader, 1, MPI_INT, h.host_of.data(), 1, MPI_INT, comm),
        "MPI_Allgather (hosts)", self);
  return h;
}

}  // namespace ccoll::transport::mpi
