// ccoll/transport/cuda/virtual_ranks_kernel.cuh: the kernel that runs every program of a plan on
// one GPU, one thread block per (rank, channel) program.
//
// Each block runs its program as every CUDA executor does (block_program.cuh). Blocks synchronise
// through device-scope FIFO counters (every block is on this GPU) and wait for each other, hence
// the cooperative launch (virtual_ranks.cuh), which guarantees that all of them are resident.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/poll.hpp"
#include "ccoll/transport/cuda/block_program.cuh"
#include "ccoll/transport/cuda/call_buffers.hpp"
#include "ccoll/transport/cuda/launch_fit.hpp"
#include "ccoll/transport/cuda/session_protocol.hpp"

namespace ccoll::transport::cuda {

// The kernel's parameters: the plan's tables (device memory), the call's buffers (by value).
struct KernelArgs {
  PlanTables tables;
  AbortWords abort;  // raise: host-mapped; watch: device memory
  std::uint64_t timeout_ns = 0;
  CallBuffers buffers;
};

// Launch bounds: at most 64 registers per thread, so that two blocks of 512 threads fit an SM
// (launch_fit.hpp; scripts/kernel_resources checks that nothing spills). LowLatency: the kernel of
// LowLatency plans (block_program.cuh), which has no Simple element loop; the other one runs
// every plan as Simple.
template <class T, ReduceOp Op, bool LowLatency = false>
__global__ void __launch_bounds__(kMaxThreadsPerBlock, kMinBlocksPerSm)
    virtual_ranks_kernel(const KernelArgs args) {
  const RankBuffers mine = args.buffers.rank[args.tables.programs[blockIdx.x].rank];
  run_block<T, Op, sync::Scope::device, LowLatency>(args.tables, blockIdx.x, mine.input,
                                                    mine.output, args.abort, args.timeout_ns);
}

}  // namespace ccoll::transport::cuda

namespace ccoll::transport::cuda {

// ---------------------------------------------------------------------------------------------
// The persistent session: one kernel runs a sequence of calls fed through a queue in host-mapped
// memory, so that a whole backward pass pays one launch.

// A queued call is one record per rank (session_protocol.hpp's SessionWork): the plan's tables
// (device memory; nullptr: the session ends) and the rank's buffers.
struct SessionArgs {
  SessionQueueView queue;  // session_queue.cuh's ring, as the device sees it
  // The executor's abort words (raise: host-mapped; watch: device memory). The calls' waits
  // watch the device copy; the waits between calls, one of which has no deadline, the
  // host-mapped word, which abort() raises with a plain store: they poll host memory anyway.
  AbortWords abort;
  std::uint64_t timeout_ns = 0;
  std::uint32_t nranks = 1;  // the plans' ranks: block b runs rank b % nranks's program
};

// The queue's protocol is every session's (session_protocol.hpp: the leader's wait for an item,
// its arrival, completion in order). Item j may start on a block once every block has finished
// item j-1 if the plan changes (the plans share the slot pool); calls of one plan follow each other
// through its FIFOs alone, so blocks of different channels may be on different items. A block's
// outputs need only be seen on this GPU when it arrives: the last block fences at system scope
// before it publishes the item's completion to the host.
// Each call runs in its plan's protocol (PlanTables::low_latency): the kernel has both data paths.
// No launch bounds: unbounded it takes 62 to 64 registers for f32 sum and bf16 avg without
// spilling (scripts/kernel_resources), and dtypes with wider accumulators may take more, where a
// bound would make them spill. Its launches fit their threads per block to what ptxas gave it
// (launch_fit.hpp).
template <class T, ReduceOp Op>
__global__ void session_kernel(const SessionArgs args) {
  const DeviceScopeBlockGroup group;
  const unsigned nblocks = gridDim.x;
  sync::AtomicWord<std::uint64_t, sync::Scope::device> completed(args.queue.completed);
  __shared__ const PlanTables* tables;
  __shared__ const void* input;
  __shared__ void* output;
  __shared__ bool stop;
  const PlanTables* previous = nullptr;
  for (std::uint64_t j = 0;; ++j) {
    if (group.leader()) {
      // No deadline while idle: a session may wait for its next call as long as it likes. The
      // block's record is its rank's (block c * nranks + r runs rank r's program of channel c),
      // read whole by each poll: one PCIe round trip takes the call.
      SessionWork w;
      stop = session_wait_record(args.queue, j, blockIdx.x % args.nranks, args.abort.raise, w) !=
             sync::WaitResult::Ok;
      if (!stop) {
        tables = static_cast<const PlanTables*>(w.plan);
        stop = tables == nullptr;
        input = w.input;
        output = w.output;
      }
      // A new plan shares the slot pool with the last one: every block must be done with it. An
      // abort ends this wait and the kernel: the session has failed.
      if (!stop && j > 0 && tables != previous)
        stop = sync::poll_until([&] { return completed.load_acquire() >= j; }, args.abort.raise,
                                0) != sync::WaitResult::Ok;
    }
    group.sync();
    if (stop) return;
    // Registers: the leader overwrites the shared copies for the next item.
    const PlanTables* const item_tables = tables;
    const void* const item_input = input;
    void* const item_output = output;
    group.sync();
    previous = item_tables;
    bool ok = true;
    if (blockIdx.x < item_tables->nblocks)
      ok =
          item_tables->low_latency != 0
              ? run_block<T, Op, sync::Scope::device, true>(
                    *item_tables, blockIdx.x, item_input, item_output, args.abort, args.timeout_ns)
              : run_block<T, Op, sync::Scope::device, false>(
                    *item_tables, blockIdx.x, item_input, item_output, args.abort, args.timeout_ns);
    if (!ok) return;
    // The leader's verdict through the barrier itself, not the shared `stop`: the leader rewrites
    // that at the next item's top, perhaps before every thread has read it.
    const bool cut = group.leader() && !session_item_done<sync::Scope::device>(
                                           args.queue, j, nblocks, args.abort.raise);
    if (group.any(cut)) return;
  }
}

}  // namespace ccoll::transport::cuda
