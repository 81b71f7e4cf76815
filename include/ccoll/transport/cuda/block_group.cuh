// ccoll/transport/cuda/block_group.cuh: a CUDA thread block as the step interpreter's Group.
//
// All threads of the block execute a step together: thread i handles elements i, i + blockDim.x,
// ...; thread 0 polls the counters (one poller per block keeps the counter lines quiet) and
// broadcasts the outcome with __syncthreads_or; after the element loop a barrier and a system-scope
// fence by thread 0 order every thread's slot writes before the stores that post them ([C-Cube]
// Fig. 11 uses threadfence around its lock for the same reason). That fence is the step's only
// one: the posts after it are relaxed stores (kFenceOrdersPosts), where release stores would each
// be a fence of their own. The leader also resolves the step's operand pointers into shared memory
// before that barrier, so the other threads never chase the plan's tables.
//
// The member functions are __host__ __device__ so that the interpreter's CCOLL_HD templates
// instantiate cleanly in nvcc's host pass; they are only ever called on the device.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/runtime/step_operands.hpp"

namespace ccoll::transport::cuda {

struct BlockGroup {
  static constexpr bool kSingleThread = false;
  static constexpr bool kFenceOrdersPosts = true;  // runtime/program_context.hpp
  // Every plan runs as Simple (runtime/program_context.hpp, kRunsLowLatency): the Simple kernels
  // have no LowLatency path, which would cost the Simple loop registers. LowLatency plans run on
  // LowLatencyBlockGroup's kernels.
  static constexpr bool kRunsLowLatency = false;

  CCOLL_HD std::uint64_t first() const {
#if CCOLL_DEVICE_PASS
    return threadIdx.x;
#else
    return 0;
#endif
  }
  CCOLL_HD std::uint64_t stride() const {
#if CCOLL_DEVICE_PASS
    return blockDim.x;
#else
    return 1;
#endif
  }
  CCOLL_HD bool leader() const {
#if CCOLL_DEVICE_PASS
    return threadIdx.x == 0;
#else
    return true;
#endif
  }
  CCOLL_HD void sync() const {
#if CCOLL_DEVICE_PASS
    __syncthreads();
#endif
  }
  // True if any thread passes true, seen by every thread; also a barrier.
  CCOLL_HD bool any(bool value) const {
#if CCOLL_DEVICE_PASS
    return __syncthreads_or(value ? 1 : 0) != 0;
#else
    return value;
#endif
  }
  CCOLL_HD void fence_before_post() const {
#if CCOLL_DEVICE_PASS
    __threadfence_system();
#endif
  }
  // The step's operands, which the leader resolves and every thread reads (runtime/
  // step_operands.hpp): one copy per block in shared memory, where a per-thread array would live in
  // local memory, a copy per thread.
  template <class T>
  CCOLL_HD runtime::StepOperands<T>* shared_operands() const {
#if CCOLL_DEVICE_PASS
    __shared__ runtime::StepOperands<T> operands;
    return &operands;
#else
    return nullptr;  // the host pass never runs a block
#endif
  }
  // The same for a LowLatency step's lines (runtime::LowLatencyOperands), which only the
  // LowLatency kernels ask for.
  template <class T>
  CCOLL_HD runtime::LowLatencyOperands<T>* shared_low_latency_operands() const {
#if CCOLL_DEVICE_PASS
    __shared__ runtime::LowLatencyOperands<T> operands;
    return &operands;
#else
    return nullptr;
#endif
  }
};

// A thread block (Base: BlockGroup or one with another fence) that runs only LowLatency steps
// (runtime/program_context.hpp, kRunsSimple): the kernels built on it have no Simple element
// loop, and the executors launch them for LowLatency plans only.
template <class Base>
struct LowLatencyBlockGroup : Base {
  static constexpr bool kRunsLowLatency = true;
  static constexpr bool kRunsSimple = false;
};

}  // namespace ccoll::transport::cuda
