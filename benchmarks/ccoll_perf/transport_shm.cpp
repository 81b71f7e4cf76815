// ccoll_perf/transport_shm.cpp: --transport shm, P processes (forked by ccoll_perf, or started by
// mpirun) exchanging through shared memory, each with its own ccoll::Allreduce<SharedMemory, ...>.
// The one host transport with registered windows (--window 1).
#include <string>

#include <ccoll/transport/shared_memory.hpp>

#include "allreduce_collective.hpp"
#include "transport_registry.hpp"

namespace ccoll_perf {

TransportEntry shm_transport() {
  TransportEntry e;
  e.name = "shm";
  e.help = "P processes in shared memory";
  e.ranks = RankPlacement::processes;
  e.windows = true;
  e.make = &make_allreduce_collective<ccoll::transport::SharedMemory>;
  e.describe = [] { return std::string("SharedMemory"); };
  return e;
}

}  // namespace ccoll_perf
