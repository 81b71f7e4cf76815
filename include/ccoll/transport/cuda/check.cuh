// ccoll/transport/cuda/check.cuh: CUDA runtime errors as ccoll::Error.
//
// Every CUDA call of the GPU transports goes through check(), so that a failure reaches the caller
// as ccoll::Error(System) naming the call and CUDA's own message, never as a silent error code or
// a later, unrelated failure.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "ccoll/core/error.hpp"

namespace ccoll::transport::cuda {

inline void check(cudaError_t e, std::string_view what, int rank = -1) {
  if (e == cudaSuccess) return;
  throw Error(ErrorCode::System, rank,
              std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// The current device, or an Error saying that there is none.
inline int current_device() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    throw Error(ErrorCode::System, -1,
                std::string("no CUDA device: ") +
                    (e == cudaSuccess ? "cudaGetDeviceCount found none" : cudaGetErrorString(e)));
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

}  // namespace ccoll::transport::cuda
