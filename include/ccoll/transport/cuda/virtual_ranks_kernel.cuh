// ccoll/transport/cuda/virtual_ranks_kernel.cuh: the kernel that runs every program of a plan on
// one GPU, one thread block per (rank, channel) program.
//
// The blocks run the step interpreter (runtime/interpreter.hpp) that the host executors run, with a
// CUDA thread block as its Group, so the GPU executes the very logic the CPU tests check. Blocks
// synchronise only through device-side FIFO counters ([C-Cube] Sec. IV-B's post / wait, device
// scope: every block is on this GPU), so nothing returns to the host between steps. Blocks wait
// for each other, hence the cooperative launch (virtual_ranks.cuh), which guarantees that all of
// them are resident.
//
// Each block keeps its own copy of the per-connection message bases and advances them itself at
// the end of a call: the two ends of a connection advance theirs by the same number of messages
// (each message has one send port and one receive port), so they agree on every message number
// without a grid-wide barrier and without the host touching device memory between calls.
//
// A block whose wait fails (the deadline, measured on %globaltimer, or the abort word) records
// where it stopped and raises the abort word, which lives in host-mapped memory so that the host
// can raise it too (to cancel a kernel) and read it without a copy ordered behind the kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/cuda/block_group.cuh"

namespace ccoll::transport::cuda {

// The most plan ranks (relays included) one kernel serves: their buffer pointers are kernel
// parameters, 2 KiB of the 4 KiB every GPU accepts.
inline constexpr int kMaxVirtualRanks = 128;

// A thread block whose posts need only be visible on this GPU.
struct DeviceScopeBlockGroup : BlockGroup {
  CCOLL_HD void fence_before_post() const {
#if CCOLL_DEVICE_PASS
    __threadfence();
#endif
  }
};

// What block b runs.
struct BlockProgram {
  std::uint32_t first_step = 0;
  std::uint32_t nsteps = 0;
  std::int32_t rank = 0;
  std::uint32_t channel = 0;
  std::uint32_t first_advance = 0;  // this block's entries of KernelArgs::advances
  std::uint32_t nadvance = 0;
};

// At the end of a call, block b adds `messages` to its base of plan connection `connection`.
struct BaseAdvance {
  std::uint32_t connection = 0;
  std::uint32_t messages = 0;
};

// Where a block stopped; result Ok: it did not fail.
struct BlockFailure {
  runtime::StepFailure step;
  std::int32_t rank = -1;
  std::uint32_t channel = 0;
  std::uint64_t when_ns = 0;  // %globaltimer when it gave up
};

// A plan's tables in device memory, as every block of a call sees them.
struct PlanTables {
  const BlockProgram* programs = nullptr;
  const plan::Step* steps = nullptr;
  const plan::Port* ports = nullptr;
  const sync::DeviceConnectionRef* connections = nullptr;
  std::uint64_t* bases = nullptr;  // nblocks x nconnections, block-private rows
  const BaseAdvance* advances = nullptr;
  BlockFailure* failures = nullptr;  // nblocks
  // Gradient queuing ([C-Cube] Sec. III-D, runtime/layer_readiness.hpp): steps done by each
  // program, rank-major (progress[rank * nchannels + channel]), and each block's calls so far.
  std::uint64_t* progress = nullptr;
  std::uint64_t* calls = nullptr;  // nblocks
  std::uint32_t nconnections = 0;
  std::uint32_t nblocks = 0;
  std::uint32_t nchannels = 1;
  std::int32_t nactive = 1;
};

// One call's buffers: rank r's input and output (relays: unused).
struct CallBuffers {
  const void* input[kMaxVirtualRanks] = {};
  void* output[kMaxVirtualRanks] = {};
};

// The kernel's parameters: the plan's tables (device memory), the call's buffers (by value).
struct KernelArgs {
  PlanTables tables;
  std::uint32_t* abort = nullptr;  // host-mapped
  std::uint64_t timeout_ns = 0;
  CallBuffers buffers;
};

// Block `block` runs its program of one call; false: it failed and raised the abort word.
template <class T, ReduceOp Op>
__device__ bool run_block(const PlanTables& tables, unsigned block, const void* input, void* output,
                          std::uint32_t* abort, std::uint64_t timeout_ns) {
  const DeviceScopeBlockGroup group;
  const BlockProgram program = tables.programs[block];
  runtime::ProgramContext<T, sync::DeviceConnectionRef> ctx;
  ctx.steps = tables.steps + program.first_step;
  ctx.nsteps = program.nsteps;
  ctx.ports = tables.ports;
  ctx.connections = tables.connections;
  std::uint64_t* base = tables.bases + static_cast<std::uint64_t>(block) * tables.nconnections;
  ctx.base = base;
  ctx.input = static_cast<const T*>(input);
  ctx.output = static_cast<T*>(output);
  ctx.nactive = tables.nactive;
  ctx.rank = program.rank;
  ctx.channel = program.channel;
  ctx.abort = abort;
  ctx.progress = tables.progress + static_cast<std::uint64_t>(program.rank) * tables.nchannels +
                 program.channel;
  ctx.progress_base = runtime::progress_base_of_call(tables.calls[block]);
  __shared__ std::uint64_t deadline;
  if (group.leader()) {
    // 0: no deadline; a timeout past the end of the clock never expires.
    const std::uint64_t now = sync::now_ns();
    deadline = timeout_ns == 0 ? 0 : timeout_ns > ~now ? ~std::uint64_t{0} : now + timeout_ns;
  }
  group.sync();
  runtime::StepFailure failure;
  const bool ok = runtime::run_program<T, Op>(group, ctx, deadline, &failure);
  group.sync();  // the leader's last posts read the bases
  if (ok) {
    for (std::uint32_t i = threadIdx.x; i < program.nadvance; i += blockDim.x) {
      const BaseAdvance a = tables.advances[program.first_advance + i];
      base[a.connection] += a.messages;
    }
    if (group.leader()) ++tables.calls[block];
  } else if (group.leader()) {
    BlockFailure f;
    f.step = failure;
    f.rank = program.rank;
    f.channel = program.channel;
    f.when_ns = sync::now_ns();
    tables.failures[block] = f;
    __threadfence_system();
    sync::AtomicWord<std::uint32_t>(abort).store_release(1u);
  }
  group.sync();  // the bases are advanced before the block's next call reads them
  return ok;
}

template <class T, ReduceOp Op>
__global__ void virtual_ranks_kernel(const KernelArgs args) {
  const std::int32_t rank = args.tables.programs[blockIdx.x].rank;
  run_block<T, Op>(args.tables, blockIdx.x, args.buffers.input[rank], args.buffers.output[rank],
                   args.abort, args.timeout_ns);
}

}  // namespace ccoll::transport::cuda

namespace ccoll::transport::cuda {

// ---------------------------------------------------------------------------------------------
// The persistent session: one kernel runs a sequence of calls fed through a queue in host-mapped
// memory, so that a whole backward pass pays one launch.

// One queued call (host-mapped). tables == nullptr: the session ends.
struct WorkItem {
  const PlanTables* tables = nullptr;  // device memory
  CallBuffers buffers;
};

// The words the host and the kernel share while a session runs (host-mapped), each on its own
// line: the host writes `posted`, the kernel `completed`.
struct SessionControl {
  alignas(128) std::uint64_t posted = 0;     // items the host has written
  alignas(128) std::uint64_t completed = 0;  // items every block has finished
};

struct SessionArgs {
  WorkItem* items = nullptr;  // host-mapped ring of `depth` items
  std::uint32_t depth = 1;
  SessionControl* control = nullptr;   // host-mapped
  std::uint64_t* arrivals = nullptr;   // device memory, depth words: blocks done with item j
  std::uint64_t* completed = nullptr;  // device memory: the device's copy of control->completed
  std::uint32_t* abort = nullptr;      // host-mapped: the executor's abort word
  std::uint64_t timeout_ns = 0;
};

// Item j may start on a block once every block has finished item j-1 if the plan changes (the
// plans share the slot pool); calls of one plan follow each other through its FIFOs alone, so
// blocks of different channels may be on different items. Items complete in order: the last block
// to finish item j publishes it only after item j-1 was published.
template <class T, ReduceOp Op>
__global__ void session_kernel(const SessionArgs args) {
  const DeviceScopeBlockGroup group;
  const unsigned nblocks = gridDim.x;
  sync::AtomicWord<std::uint64_t> posted(&args.control->posted);
  sync::AtomicWord<std::uint32_t> abort(args.abort);
  sync::AtomicWord<std::uint64_t, sync::Scope::device> completed(args.completed);
  __shared__ const PlanTables* tables;
  __shared__ const void* input;
  __shared__ void* output;
  __shared__ bool stop;
  const PlanTables* previous = nullptr;
  for (std::uint64_t j = 0;; ++j) {
    if (group.leader()) {
      stop = false;
      sync::Backoff backoff;
      // No deadline while idle: a session may wait for its next call as long as it likes.
      while (posted.load_acquire() <= j) {
        if (abort.load_relaxed() != 0) {
          stop = true;
          break;
        }
        backoff.pause();
      }
      if (!stop) {
        const WorkItem& item = args.items[j % args.depth];
        tables = item.tables;
        stop = tables == nullptr;
        if (!stop && blockIdx.x < tables->nblocks) {
          const std::int32_t rank = tables->programs[blockIdx.x].rank;
          input = item.buffers.input[rank];
          output = item.buffers.output[rank];
        }
      }
      if (!stop && j > 0 && tables != previous) {
        sync::Backoff wait_all;
        while (completed.load_acquire() < j && abort.load_relaxed() == 0) wait_all.pause();
      }
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
      ok = run_block<T, Op>(*item_tables, blockIdx.x, item_input, item_output, args.abort,
                            args.timeout_ns);
    if (!ok) return;
    if (group.leader()) {
      __threadfence();
      sync::AtomicWord<std::uint64_t, sync::Scope::device> arrived(&args.arrivals[j % args.depth]);
      if (arrived.fetch_add_acq_rel(1) + 1 == nblocks) {
        // The last block of item j: every block's outputs are written. The word is free again:
        // the host posts item j + depth only after it has seen item j complete.
        arrived.store_relaxed(0);
        sync::Backoff in_order;
        while (completed.load_acquire() < j) {
          if (abort.load_relaxed() != 0) return;  // item j - 1 was cut short: j never completes
          in_order.pause();
        }
        __threadfence_system();
        completed.store_release(j + 1);
        sync::AtomicWord<std::uint64_t>(&args.control->completed).store_release(j + 1);
      }
    }
  }
}

}  // namespace ccoll::transport::cuda
