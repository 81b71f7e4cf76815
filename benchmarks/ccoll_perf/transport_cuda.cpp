// ccoll_perf/transport_cuda.cpp: the GPU transports' entries, cuda-virtual (P ranks as thread
// blocks of one kernel on one GPU) and cuda-p2p (one GPU per rank). Host code only: the ranks run
// through the device backends of the same names (cuda_virtual_backend.cu, cuda_p2p_backend.cu,
// registered in device_backend.hpp), built only with CUDA; the entries say why a build cannot run
// them.
#include <string_view>

#include "build_features.hpp"
#include "transport_registry.hpp"

namespace ccoll_perf {

namespace {
constexpr std::string_view kWithoutCuda =
    "this ccoll_perf was built without CUDA (configure with nvcc on the PATH and "
    "CCOLL_ENABLE_CUDA=AUTO or ON)";
}  // namespace

TransportEntry cuda_virtual_transport() {
  TransportEntry e;
  e.name = "cuda-virtual";
  e.help = "P ranks as thread blocks of one kernel on one GPU, if built with CUDA";
  e.ranks = RankPlacement::device;
  if (!kHaveCuda) e.unavailable = kWithoutCuda;
  return e;
}

TransportEntry cuda_p2p_transport() {
  TransportEntry e;
  e.name = "cuda-p2p";
  e.help = "one GPU per rank, where the library has it";
  e.ranks = RankPlacement::device;
  if (!kHaveCuda) {
    e.unavailable = kWithoutCuda;
  } else if (!kLibraryHasCudaP2P) {
    e.unavailable =
        "not available in this build (the library has no ccoll/transport/cuda/p2p.cuh yet); "
        "--transport cuda-virtual runs every rank on one GPU";
  }
  return e;
}

}  // namespace ccoll_perf
