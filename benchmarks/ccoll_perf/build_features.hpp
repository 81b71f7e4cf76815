// ccoll_perf/build_features.hpp: what this ccoll_perf was built with, as constants (CMake defines
// the CCOLL_HAVE_* macros on ccoll_perf_core): the parser accepts a peer or a transport only where
// it can run, and says why not elsewhere.
#pragma once

namespace ccoll_perf {

// Whether this ccoll_perf has MPI: the mpirun mode, --transport mpi|mpi-hybrid and --peer mpi
// (CMake enabled MPI: CCOLL_HAVE_MPI; scripts/bench leaves it out unless asked).
#if CCOLL_HAVE_MPI
inline constexpr bool kHaveMpi = true;
#else
inline constexpr bool kHaveMpi = false;
#endif

// Whether this ccoll_perf has the Gloo peer (CMake found Gloo: CCOLL_HAVE_GLOO).
#if CCOLL_HAVE_GLOO
inline constexpr bool kHaveGloo = true;
#else
inline constexpr bool kHaveGloo = false;
#endif

// Whether this ccoll_perf has the GPU transports (CMake enabled CUDA: CCOLL_HAVE_CUDA) and the
// NCCL peer (CMake found NCCL too: CCOLL_HAVE_NCCL).
#if CCOLL_HAVE_CUDA
inline constexpr bool kHaveCuda = true;
#else
inline constexpr bool kHaveCuda = false;
#endif
#if CCOLL_HAVE_NCCL
inline constexpr bool kHaveNccl = true;
#else
inline constexpr bool kHaveNccl = false;
#endif
// Whether the library has the one-GPU-per-rank transport that --transport cuda-p2p would run.
#if CCOLL_HAVE_CUDA && __has_include("ccoll/transport/cuda/p2p.cuh")
inline constexpr bool kLibraryHasCudaP2P = true;
#else
inline constexpr bool kLibraryHasCudaP2P = false;
#endif

}  // namespace ccoll_perf
