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

// A persistent kernel (a session) runs until it is closed. On the legacy default stream, the
// per-thread default stream or a blocking stream (cudaStreamCreate), every later operation of the
// legacy default stream (cudaMemcpy, cudaMemset, a launch on stream 0) would wait for it, and a
// host waiting for one of them would never close it: such streams are refused.
inline void require_non_blocking_stream(cudaStream_t stream, std::string_view what, int rank = -1) {
  bool blocking = stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
  if (!blocking) {
    unsigned flags = 0;
    check(cudaStreamGetFlags(stream, &flags), "cudaStreamGetFlags", rank);
    blocking = (flags & cudaStreamNonBlocking) == 0;
  }
  if (blocking)
    throw Error(ErrorCode::InvalidArgument, rank,
                std::string(what) +
                    " needs a stream made with cudaStreamCreateWithFlags(&s, "
                    "cudaStreamNonBlocking): its kernel runs until close(), and on a default or "
                    "blocking stream every later operation of the legacy default stream "
                    "(cudaMemcpy, cudaMemset, a launch on stream 0) would wait for it forever");
}

}  // namespace ccoll::transport::cuda
