// ccoll_perf/transport_mpi.cpp: --transport mpi (messages through MPI point-to-point) and
// mpi-hybrid (shared memory inside a host, MPI between hosts), on the MPI processes of mpirun
// (MPI_COMM_WORLD). Without MPI both are still listed, and naming one says how this ccoll_perf
// was built.
#include <string>
#include <string_view>

#include "transport_registry.hpp"

#if CCOLL_HAVE_MPI
#include <ccoll/transport/mpi.hpp>
#include <ccoll/transport/mpi_hybrid.hpp>

#include "allreduce_collective.hpp"
#include "controls.hpp"
#endif

namespace ccoll_perf {

namespace {
#if CCOLL_HAVE_MPI
constexpr CollectiveFactory kMakeMpi = &make_allreduce_collective<ccoll::transport::Mpi>;
constexpr CollectiveFactory kMakeMpiHybrid =
    &make_allreduce_collective<ccoll::transport::MpiHybrid>;
constexpr std::string_view kUnavailable;
std::string describe_mpi() {
  return "Mpi: point-to-point messages of " + mpi_library_version();
}
std::string describe_mpi_hybrid() {
  return "MpiHybrid: shared memory inside a host, messages of " + mpi_library_version() +
         " between hosts";
}
#else
constexpr CollectiveFactory kMakeMpi = nullptr;
constexpr CollectiveFactory kMakeMpiHybrid = nullptr;
// scripts/bench leaves MPI out unless its arguments name it.
constexpr std::string_view kUnavailable =
    "this ccoll_perf was built without MPI (`scripts/setup -DCCOLL_ENABLE_MPI=AUTO ccoll_perf`, or "
    "scripts/bench with these arguments, builds it with MPI where MPI is installed)";
std::string describe_mpi() {
  return "Mpi";
}
std::string describe_mpi_hybrid() {
  return "MpiHybrid";
}
#endif
}  // namespace

TransportEntry mpi_transport() {
  TransportEntry e;
  e.name = "mpi";
  e.help = "the MPI processes of mpirun -np P, messages through MPI point-to-point";
  e.ranks = RankPlacement::mpirun;
  e.make = kMakeMpi;
  e.unavailable = kUnavailable;
  e.describe = &describe_mpi;
  return e;
}

TransportEntry mpi_hybrid_transport() {
  TransportEntry e;
  e.name = "mpi-hybrid";
  e.help = "MPI processes, shared memory inside a host, MPI between hosts";
  e.ranks = RankPlacement::mpirun;
  e.make = kMakeMpiHybrid;
  e.unavailable = kUnavailable;
  e.describe = &describe_mpi_hybrid;
  return e;
}

}  // namespace ccoll_perf
