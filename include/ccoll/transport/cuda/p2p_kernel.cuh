// ccoll/transport/cuda/p2p_kernel.cuh: the kernel one rank of transport::CudaP2P launches per call,
// one thread block per channel of that rank's program.
//
// Each block runs its (rank, channel) program as every CUDA executor does (block_program.cuh),
// over connections whose slots and counters live in the peers' GPU memory, reached over NVLink or
// PCIe (peer access, or a CUDA IPC mapping when the ranks are processes). The counters are
// therefore system-scope (sync::ConnectionRef): a post is a release store at system scope after
// BlockGroup's __threadfence_system, so a peer GPU, or a peer process on this GPU, that acquires
// the counter sees the slot bytes this block wrote before it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/transport/cuda/block_program.cuh"

namespace ccoll::transport::cuda {

using P2PPlanTables = BasicPlanTables<sync::Scope::system>;

// The kernel's parameters: this rank's tables of the plan (device memory, failures host-mapped),
// the job's abort word (host-mapped, shared by every rank) and this rank's buffers.
struct P2PKernelArgs {
  P2PPlanTables tables;
  std::uint32_t* abort = nullptr;
  std::uint64_t timeout_ns = 0;
  const void* input = nullptr;
  void* output = nullptr;
};

template <class T, ReduceOp Op>
__global__ void p2p_kernel(const P2PKernelArgs args) {
  run_block<T, Op>(args.tables, blockIdx.x, args.input, args.output, args.abort, args.timeout_ns);
}

}  // namespace ccoll::transport::cuda
