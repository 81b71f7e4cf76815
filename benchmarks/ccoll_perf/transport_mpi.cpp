// ccoll_perf/transport_mpi.cpp: --transport mpi (messages through MPI point-to-point) and
// mpi-hybrid (shared memory inside a host, MPI between hosts), on the MPI processes of mpirun
// (MPI_COMM_WORLD). Without MPI both are still parsed, and making one says how this ccoll_perf
// was built.
#include <memory>
#include <stdexcept>
#include <string>

#if CCOLL_HAVE_MPI
#include <ccoll/transport/mpi.hpp>
#include <ccoll/transport/mpi_hybrid.hpp>

#include "controls.hpp"
#endif

#include "allreduce_collective.hpp"
#include "transport_registry.hpp"

namespace ccoll_perf {

namespace {
#if CCOLL_HAVE_MPI
constexpr CollectiveFactory kMakeMpi = &make_allreduce_collective<ccoll::transport::Mpi>;
constexpr CollectiveFactory kMakeMpiHybrid =
    &make_allreduce_collective<ccoll::transport::MpiHybrid>;
std::string describe_mpi() {
  return "Mpi: point-to-point messages of " + mpi_library_version();
}
std::string describe_mpi_hybrid() {
  return "MpiHybrid: shared memory inside a host, messages of " + mpi_library_version() +
         " between hosts";
}
#else
std::unique_ptr<Collective> built_without_mpi(const PreparedAlgorithm&, const ccoll::Config&,
                                              const CollectiveCall&) {
  throw std::invalid_argument("--transport mpi: this ccoll_perf was built without MPI");
}
constexpr CollectiveFactory kMakeMpi = &built_without_mpi;
constexpr CollectiveFactory kMakeMpiHybrid = &built_without_mpi;
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
  e.describe = &describe_mpi;
  return e;
}

TransportEntry mpi_hybrid_transport() {
  TransportEntry e;
  e.name = "mpi-hybrid";
  e.help = "MPI processes, shared memory inside a host, MPI between hosts";
  e.ranks = RankPlacement::mpirun;
  e.make = kMakeMpiHybrid;
  e.describe = &describe_mpi_hybrid;
  return e;
}

}  // namespace ccoll_perf
