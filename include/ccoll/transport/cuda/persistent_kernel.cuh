// ccoll/transport/cuda/persistent_kernel.cuh: a persistent kernel that runs a whole plan on one
// GPU, every (rank, channel) program in its own thread block.
//
// This is the "virtual ranks" layout: the P ranks of a plan are
// blocks of one kernel, their buffers and connections live in device memory, and the counters are
// cuda::atomic_ref words, so the same interpreter that the host executors run moves the data,
// with [C-Cube] Sec. IV-B's device-side post/wait (no host intervention between steps). Blocks wait
// for each other, so all nranks x nchannels blocks must be resident at once: launch_persistent_plan
// checks the occupancy before launching. A failed wait (deadline or another block's abort) records
// a StepFailure per block and raises the abort word so that the other blocks stop too.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/cuda/block_group.cuh"

namespace ccoll::transport::cuda {

// One context per block (block b runs contexts[b]); failures[b] receives block b's outcome.
template <class T, ReduceOp Op, class C = sync::ConnectionRef>
__global__ void persistent_plan_kernel(const runtime::ProgramContext<T, C>* contexts,
                                       std::uint64_t timeout_ns, runtime::StepFailure* failures,
                                       std::uint32_t* abort_word) {
  const BlockGroup group;
  const runtime::ProgramContext<T, C>& ctx = contexts[blockIdx.x];
  __shared__ std::uint64_t deadline;
  if (group.leader()) deadline = sync::now_ns() + timeout_ns;
  group.sync();
  runtime::StepFailure failure;
  const bool ok = runtime::run_program<T, Op>(group, ctx, deadline, &failure);
  if (group.leader()) {
    if (!ok) {
      failures[blockIdx.x] = failure;
      sync::AtomicWord<std::uint32_t>(abort_word).store_release(1u);
    } else {
      failures[blockIdx.x] = runtime::StepFailure{};
    }
  }
}

// Launches the kernel with `nblocks` blocks of `threads` threads after checking that they can all
// be resident; returns cudaErrorCooperativeLaunchTooLarge when they cannot.
template <class T, ReduceOp Op, class C = sync::ConnectionRef>
cudaError_t launch_persistent_plan(const runtime::ProgramContext<T, C>* contexts, unsigned nblocks,
                                   unsigned threads, std::uint64_t timeout_ns,
                                   runtime::StepFailure* failures, std::uint32_t* abort_word,
                                   cudaStream_t stream = nullptr) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_plan_kernel<T, Op, C>,
                                                    static_cast<int>(threads), 0);
  if (e != cudaSuccess) return e;
  if (static_cast<long long>(per_sm) * sms < static_cast<long long>(nblocks))
    return cudaErrorCooperativeLaunchTooLarge;
  persistent_plan_kernel<T, Op, C>
      <<<nblocks, threads, 0, stream>>>(contexts, timeout_ns, failures, abort_word);
  return cudaGetLastError();
}

}  // namespace ccoll::transport::cuda
