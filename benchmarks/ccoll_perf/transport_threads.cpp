// ccoll_perf/transport_threads.cpp: --transport threads, P threads of this process sharing one
// ccoll::Allreduce<HostThreads, ...>, each thread running its rank's view.
#include <string>

#include <ccoll/transport/host_threads.hpp>

#include "allreduce_collective.hpp"
#include "transport_registry.hpp"

namespace ccoll_perf {

TransportEntry threads_transport() {
  TransportEntry e;
  e.name = "threads";
  e.help = "P threads in this process";
  e.ranks = RankPlacement::threads;
  e.make = &make_allreduce_collective<ccoll::transport::HostThreads>;
  e.describe = [] { return std::string("HostThreads"); };
  return e;
}

}  // namespace ccoll_perf
