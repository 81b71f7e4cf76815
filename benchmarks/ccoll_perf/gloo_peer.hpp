// ccoll_perf/gloo_peer.hpp: Gloo's collectives as a RankCollective (--peer gloo): gloo::allreduce,
// gloo::allgather, gloo::broadcast, gloo::reduce, and gloo::ReduceScatterHalvingDoubling for
// reduce-scatter (-C).
//
// The ranks are the MPI processes of mpirun: Gloo's context takes rank and size from
// MPI_COMM_WORLD, and each rank's TCP pair addresses are exchanged with one MPI_Alltoall (what
// Gloo's own MPI context did; Debian's libgloo is built without it), so no store or shared
// directory is needed between hosts. The pairs use a gloo::transport::tcp device bound to one
// network interface (--gloo_iface, default lo).
//
// Built only where CMake found Gloo (CCOLL_HAVE_GLOO, which needs MPI too); only gloo_peer.cpp's
// object library and the ccoll_perf executable link libgloo.
#pragma once

#if CCOLL_HAVE_GLOO
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "runner.hpp"

namespace ccoll_perf {

// Connects this MPI process to every other one over `iface`; collective over MPI_COMM_WORLD.
// `timeout`: Gloo's per-operation timeout (unset: Gloo's default). Throws on failure.
std::unique_ptr<RankCollective> make_gloo_peer(const std::string& iface,
                                               std::optional<std::chrono::milliseconds> timeout,
                                               const CollectiveCall& call);

// The Gloo function that serves collective `c` (the peer's algo column).
std::string gloo_function_name(ccoll::plan::Collective c);

// For the output header: the package, and what the peer runs for collective `c`.
std::string gloo_description(ccoll::plan::Collective c);

}  // namespace ccoll_perf
#endif
