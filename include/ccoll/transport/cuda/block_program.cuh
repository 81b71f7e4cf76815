// ccoll/transport/cuda/block_program.cuh: one (rank, channel) program of a plan run by one thread
// block, the piece every CUDA executor shares.
//
// A block runs the step interpreter (runtime/interpreter.hpp) that the host executors run, with a
// CUDA thread block as its Group, so the GPU executes the very logic the CPU tests check. Blocks
// synchronise only through FIFO counters ([C-Cube] Sec. IV-B's post / wait), so nothing returns to
// the host between steps. The scope S of those counters is the executor's: device for the virtual
// ranks of one GPU (virtual_ranks_kernel.cuh), system for ranks on several GPUs or in several
// processes (p2p_kernel.cuh), whose peers reach the counters over NVLink or PCIe.
//
// Each block keeps its own row of per-connection message bases and advances it itself at the end
// of a call: the two ends of a connection advance theirs by the same number of messages (each
// message has one send port and one receive port), so they agree on every message number without
// a barrier and without the host touching device memory between calls.
//
// A block whose wait fails (the deadline, measured on %globaltimer, or the abort word) records
// where it stopped and raises the abort word (AbortWords): the one in host-mapped memory, which
// the host reads without a copy ordered behind the kernel, and the one its peers' waits watch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <new>
#include <type_traits>

#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/runtime/step_marks.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/cuda/block_group.cuh"
#include "ccoll/transport/cuda/block_tables.hpp"
#include "ccoll/transport/cuda/failure_record.hpp"
#include "ccoll/transport/cuda/launch_fit.hpp"

namespace ccoll::transport::cuda {

// The abort word as the blocks of a kernel see it. `raise`: host-mapped, so that the host sees a
// failure without a copy ordered behind the kernel, and can raise it itself. `watch`: what the
// waits poll, a copy in device memory: hundreds of waiting blocks each reading the host-mapped
// word every DevicePollSchedule::kCheckNs would queue that many PCIe reads, and a wait stalls for
// its read. Ranks on one GPU watch a word that the host's abort() raises with an asynchronous
// copy (virtual_ranks.cuh); ranks on several GPUs or in several processes watch a
// sync::RelayedAbortWord per rank, which one of the rank's waiters at a time refreshes from the
// host-mapped word (sync/poll.hpp). A failing block raises both.
struct AbortWords {
  std::uint32_t* raise = nullptr;
  std::uint32_t* watch = nullptr;
};

// A thread block whose posts need only be visible on this GPU.
struct DeviceScopeBlockGroup : BlockGroup {
  CCOLL_HD void fence_before_post() const {
#if CCOLL_DEVICE_PASS
    __threadfence();
#endif
  }
};

// The block group whose fence before a post matches counters of scope S: BlockGroup's own fence is
// system-wide, which posts that a peer GPU or another process reads need.
template <sync::Scope S>
using ScopedBlockGroup =
    std::conditional_t<S == sync::Scope::device, DeviceScopeBlockGroup, BlockGroup>;

// The group of a kernel for counters of scope S that runs LowLatency plans (LowLatency: only
// LowLatency steps, flagged lines) or every plan as Simple.
template <sync::Scope S, bool LowLatency>
using ProtocolBlockGroup =
    std::conditional_t<LowLatency, LowLatencyBlockGroup<ScopedBlockGroup<S>>, ScopedBlockGroup<S>>;

// A plan's tables, as every block of a call sees them (device memory, except `failures`, which an
// executor may place in host-mapped memory).
template <sync::Scope S>
struct BasicPlanTables {
  const BlockProgram* programs = nullptr;
  const plan::Step* steps = nullptr;
  const plan::Port* ports = nullptr;
  const sync::BasicConnectionRef<S>* connections = nullptr;
  std::uint64_t* bases = nullptr;  // nblocks x nconnections, block-private rows
  const BaseAdvance* advances = nullptr;
  // The programs in block-local form (block_tables.hpp), which a block whose program fits copies
  // into shared memory at the start of a call.
  const plan::Step* local_steps = nullptr;
  const plan::Port* local_ports = nullptr;
  BlockFailure* failures = nullptr;  // nblocks
  // Gradient queuing ([C-Cube] Sec. III-D, runtime/layer_readiness.hpp): steps done by each
  // program, rank-major (progress[rank * nchannels + channel]; null: no consumer reads them, and
  // the blocks store none), and each block's calls so far.
  std::uint64_t* progress = nullptr;
  std::uint64_t* calls = nullptr;  // nblocks
  // LowLatency plans: the signature (protocol::LowLatency::signature) that the trailer of every
  // message carries and every receiver expects.
  std::uint64_t ll_signature = 0;
  // A LowLatency plan whose connections have LL slots: run_block<..., true> runs it as such (a
  // kernel that runs plans of both protocols reads this; the others know it from their launch).
  std::uint32_t low_latency = 0;
  std::uint32_t nconnections = 0;
  std::uint32_t nblocks = 0;
  std::uint32_t nchannels = 1;
  std::int32_t nactive = 1;
};

using PlanTables = BasicPlanTables<sync::Scope::device>;

// The shared memory a block keeps its program's tables in (fill_block_cache): one array for every
// run_block a kernel calls (a function template's own __shared__ array would be one per
// instantiation, and a session kernel instantiates run_block for both protocols). The calls of a
// block run one after another, a barrier between them, so they share it.
__device__ inline std::byte* block_table_cache() {
  __shared__ alignas(16) std::byte cache[kBlockTableCacheBytes];
  return cache;
}
// The cache and the few hundred bytes of context, operands and flags beside it, within what the
// launch fit assumes a block takes (the driver reserves 1 KiB per block too).
static_assert(kBlockTableCacheBytes + 3 * 1024 <= kKernelSharedBytes);

// Block `block` runs its program of one call; false: it failed and raised both abort words.
// LowLatency: the plan is a LowLatency plan and the connections have LL slots, which this block
// runs as flagged lines (runtime/low_latency_step.hpp); otherwise it runs the plan as Simple.
//
// The program's context lives in shared memory, written once per call by the leader: every thread
// reads the few fields it needs from there (runtime/step_operands.hpp does the same for each
// step's operands), instead of holding the whole context in registers that the element loops need.
// So does the program itself where it fits (block_tables.hpp, fill_block_cache): its steps, ports,
// connection refs and this call's message bases, copied by every thread at the start of the call.
template <class T, ReduceOp Op, sync::Scope S, bool LowLatency = false>
__device__ bool run_block(const BasicPlanTables<S>& tables, unsigned block, const void* input,
                          void* output, AbortWords abort, std::uint64_t timeout_ns) {
  using Connection = sync::BasicConnectionRef<S>;
  using Context = runtime::ProgramContext<T, Connection>;
  const ProtocolBlockGroup<S, LowLatency> group;
  runtime::mark_kernel(group, runtime::KernelMark::entry);
  std::byte* const table_cache = block_table_cache();
  {
    const BlockProgram program = tables.programs[block];
    if (program.cached != 0)
      fill_block_cache(table_cache, program, tables.local_steps, tables.local_ports,
                       tables.connections,
                       tables.bases + static_cast<std::uint64_t>(block) * tables.nconnections,
                       tables.advances, group.first(), group.stride());
  }
  // Raw storage: a __shared__ variable cannot have a constructor.
  __shared__ alignas(Context) unsigned char context_storage[sizeof(Context)];
  auto* const shared_ctx = reinterpret_cast<Context*>(context_storage);
  // Where the leader stopped, if it did.
  __shared__ alignas(
      runtime::StepFailure) unsigned char failure_storage[sizeof(runtime::StepFailure)];
  auto* const failure = reinterpret_cast<runtime::StepFailure*>(failure_storage);
  // The word to raise on a failure, kept here rather than in a register through the program.
  __shared__ std::uint32_t* raise_word;
  if (group.leader()) {
    new (failure_storage) runtime::StepFailure;
    const BlockProgram program = tables.programs[block];
    Context& ctx = *new (context_storage) Context;
    ctx.nsteps = program.nsteps;
    if (program.cached != 0) {
      // Where fill_block_cache put them (the barrier below waits for the copy).
      const BlockCacheLayout l = block_cache_layout<sizeof(Connection)>(program);
      ctx.steps = reinterpret_cast<const plan::Step*>(table_cache + l.steps);
      ctx.ports = reinterpret_cast<const plan::Port*>(table_cache + l.ports);
      ctx.connections = reinterpret_cast<const Connection*>(table_cache + l.connections);
      ctx.base = reinterpret_cast<const std::uint64_t*>(table_cache + l.bases);
    } else {
      ctx.steps = tables.steps + program.first_step;
      ctx.ports = tables.ports;
      ctx.connections = tables.connections;
      ctx.base = tables.bases + static_cast<std::uint64_t>(block) * tables.nconnections;
    }
    ctx.input = static_cast<const T*>(input);
    ctx.output = static_cast<T*>(output);
    ctx.nactive = tables.nactive;
    ctx.rank = program.rank;
    ctx.channel = program.channel;
    ctx.abort = abort.watch;
    raise_word = abort.raise;
    ctx.low_latency = LowLatency;
    ctx.ll_signature = tables.ll_signature;
    // No progress words (no consumer reads them): the step loop stores none.
    ctx.progress = tables.progress == nullptr
                       ? nullptr
                       : tables.progress +
                             static_cast<std::uint64_t>(program.rank) * tables.nchannels +
                             program.channel;
    ctx.progress_base = runtime::progress_base_of_call(tables.calls[block]);
    // 0: no deadline; a timeout past the end of the clock never expires.
    const std::uint64_t now = sync::now_ns();
    ctx.deadline_ns = timeout_ns == 0     ? 0
                      : timeout_ns > ~now ? ~std::uint64_t{0}
                                          : now + timeout_ns;
  }
  group.sync();
  const Context& ctx = *shared_ctx;
  runtime::mark_kernel(group, runtime::KernelMark::context, ctx.nsteps);
  const bool ok = runtime::run_program<T, Op>(group, ctx, 0, failure);
  runtime::mark_kernel(group, runtime::KernelMark::program);
  group.sync();  // the leader's last posts read the bases
  // Read again rather than held in registers through the program's steps.
  const BlockProgram program = tables.programs[block];
  std::uint64_t* const base =
      tables.bases + static_cast<std::uint64_t>(block) * tables.nconnections;
  if (ok) {
    for (std::uint32_t i = threadIdx.x; i < program.nadvance; i += blockDim.x) {
      const BaseAdvance a = tables.advances[program.first_advance + i];
      base[a.connection] += a.messages;
    }
    if (group.leader()) ++tables.calls[block];
  } else if (group.leader()) {
    // A block's first failure stays: the calls queued behind a failed one stop at once on the
    // raised word, and their records would hide the one that names the cause.
    if (tables.failures[block].step.result == sync::WaitResult::Ok) {
      BlockFailure f;
      f.step = *failure;
      f.rank = program.rank;
      f.channel = program.channel;
      f.when_ns = sync::now_ns();
      tables.failures[block] = f;
    }
    // The peers' word first (they stop at their next check), then, after the record, the host's:
    // whoever acquires it reads this block's record.
    if (ctx.abort != raise_word)
      sync::AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(ctx.abort)).store_relaxed(1u);
    __threadfence_system();
    sync::AtomicWord<std::uint32_t>(raise_word).store_release(1u);
  }
  group.sync();  // the bases are advanced before the block's next call reads them
  runtime::mark_kernel(group, runtime::KernelMark::exit);
  return ok;
}

}  // namespace ccoll::transport::cuda
