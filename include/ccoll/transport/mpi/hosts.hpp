// ccoll/transport/mpi/hosts.hpp: which ranks of an MPI communicator share a host.
//
// A host is a shared-memory node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), split further by the
// environment variable CCOLL_MPI_HOST: ranks that name different hosts are treated as different
// hosts (emulated hosts on one machine, or a host per socket), and the ranks of a node where it is
// unset or empty form a host of their own. A host is named by the rank, in the communicator, of
// its first rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "ccoll/transport/mpi/check.hpp"

namespace ccoll::transport::mpi {

struct Hosts {
  OwnedComm host;            // this rank's host
  int host_rank = 0;         // this rank's rank on its host
  std::vector<int> host_of;  // per rank of the communicator: its host's first rank
};

// The MPI_Comm_split colour of the host CCOLL_MPI_HOST names: 0 where it is unset or empty, 1 and
// up for a name (a hash of it).
inline int host_colour(const char* name) {
  if (name == nullptr || *name == '\0') return 0;
  std::uint32_t hash = 2166136261u;
  for (const char* p = name; *p != '\0'; ++p)
    hash = (hash ^ static_cast<unsigned char>(*p)) * 16777619u;
  return 1 + static_cast<int>(hash % 0x7fffffffu);
}

// Collective over `comm`. Every rank makes the same MPI calls whatever its environment (the split
// by CCOLL_MPI_HOST included, also where it is unset): a variable set on some ranks of a node
// only must not leave ranks of one node in different collectives.
inline Hosts find_hosts(MPI_Comm comm, int self) {
  Hosts h;
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, self, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type (shared memory)", self);
  const OwnedComm on_node = OwnedComm::adopt(node);
  MPI_Comm host = MPI_COMM_NULL;
  check(MPI_Comm_split(node, host_colour(std::getenv("CCOLL_MPI_HOST")), self, &host),
        "MPI_Comm_split (CCOLL_MPI_HOST)", self);
  h.host = OwnedComm::adopt(host);
  check(MPI_Comm_rank(host, &h.host_rank), "MPI_Comm_rank (host)", self);
  int leader = self;
  check(MPI_Bcast(&leader, 1, MPI_INT, 0, host), "MPI_Bcast (host leader)", self);
  int nranks = 0;
  check(MPI_Comm_size(comm, &nranks), "MPI_Comm_size", self);
  h.host_of.resize(static_cast<std::size_t>(nranks));
  check(MPI_Allgather(&leader, 1, MPI_INT, h.host_of.data(), 1, MPI_INT, comm),
        "MPI_Allgather (hosts)", self);
  return h;
}

}  // namespace ccoll::transport::mpi
