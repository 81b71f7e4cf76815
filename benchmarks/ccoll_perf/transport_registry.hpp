// ccoll_perf/transport_registry.hpp: ccoll_perf's transports (--transport), as one table.
//
// A transport is an entry: its --transport name, its account in --help, where its ranks run (which
// decides how ccoll_perf starts them: threads of this process, processes it forks or mpirun
// starts, or GPUs) and, on the host, how ccoll's Allreduce is made on it. Each transport is a file
// that returns its entry (transport_threads.cpp, transport_shm.cpp, transport_mpi.cpp,
// transport_cuda.cpp); transport_registry.cpp lists them, so the table is complete in every
// binary that links it, whatever a linker keeps of a static library (no registration from the
// initializers of object files that nothing refers to). The flags, --help and the errors read the
// table; a new transport is a new file and a line in transport_registry.cpp. A GPU transport's
// ranks run through a device backend registered under the same name (device_backend.hpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/config.hpp"

namespace ccoll_perf {

class Collective;          // runner.hpp
struct CollectiveCall;     // runner.hpp
struct PreparedAlgorithm;  // perf_prepare.hpp

// Where a transport's ranks run, which decides how ccoll_perf starts them (main.cpp).
enum class RankPlacement {
  threads,    // P threads of this process
  processes,  // P processes: forked by ccoll_perf, or the MPI processes of mpirun
  mpirun,     // the MPI processes of mpirun only
  device,     // every rank in this process, on GPUs (a device backend, device_backend.hpp)
};

// ccoll's Allreduce (or the collective `call` names) for `algo` on a host transport (runner.hpp's
// Collective).
using CollectiveFactory = std::unique_ptr<Collective> (*)(const PreparedAlgorithm& algo,
                                                          const ccoll::Config& config,
                                                          const CollectiveCall& call);

struct TransportEntry {
  std::string_view name;  // --transport NAME, the rows' transport column
  std::string_view help;  // --help: "NAME (help)"
  RankPlacement ranks = RankPlacement::threads;
  bool windows = false;  // registered windows (--window 1)
  // Why this build cannot run it, after "--transport NAME: " (empty: it can).
  std::string_view unavailable;
  CollectiveFactory make = nullptr;  // host transports; null on a GPU
  // The header's account of the transport on the host (a class, a library and its version).
  std::string (*describe)() = nullptr;
};

// Every transport, in --help's order.
const std::vector<TransportEntry>& transports();
// Null when there is no transport of that name.
const TransportEntry* find_transport(std::string_view name);
// The entry of a name from the table; throws std::invalid_argument for any other.
const TransportEntry& transport_entry(std::string_view name);
bool is_device(std::string_view name);

// "threads, shm, ... or cuda-p2p": the names, for --transport's error.
std::string transport_names();
// --help's account of --transport: "NAME (help)" for each, the host transports listed first, then
// the GPU transports.
std::string transport_help();
// A usage error (UsageError) saying why this build cannot run `t`, if it cannot.
void check_transport_built(const TransportEntry& t);

}  // namespace ccoll_perf
