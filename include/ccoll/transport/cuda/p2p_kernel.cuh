// ccoll/transport/cuda/p2p_kernel.cuh: the kernel one rank of transport::CudaP2P launches per call,
// one thread block per channel of that rank's program.
//
// Each block runs its (rank, channel) program as every CUDA executor does (block_program.cuh),
// over connections whose slots and counters live in the peers' GPU memory, reached over NVLink or
// PCIe (peer access, or a CUDA IPC mapping when the ranks are processes). The counters are
// therefore system-scope (sync::ConnectionRef): a post is a release store at system scope after
// BlockGroup's __threadfence_system, so a peer GPU, or a peer process on this GPU, that acquires
// the counter sees the slot bytes this block wrote before it.
//
// Before its program, a block agrees with its peers on the call (call_record.hpp): it publishes
// the call's arguments in the job's control page and compares them with the record of the same
// call of every peer its program exchanges messages with. The same block code runs one call per
// launch (p2p_kernel) or a queue of calls in one resident kernel (p2p_session_kernel, the queue of
// session_queue.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/cuda/block_program.cuh"
#include "ccoll/transport/cuda/call_record.hpp"
#include "ccoll/transport/cuda/launch_fit.hpp"
#include "ccoll/transport/cuda/session_queue.cuh"

namespace ccoll::transport::cuda {

using P2PPlanTables = BasicPlanTables<sync::Scope::system>;

// One rank's plan in device memory: its tables and, per block, the peers its program exchanges
// messages with (peers[peer_begin[b] .. peer_begin[b + 1]]).
struct P2PPlan {
  P2PPlanTables tables;
  const std::int32_t* peers = nullptr;
  const std::uint32_t* peer_begin = nullptr;  // nblocks + 1
};

// The job's call records (host-mapped control page). records == nullptr: no agreement check.
struct P2PAgreement {
  CallRecord* records = nullptr;       // kCallRecordRing per (rank, channel), rank-major
  CallMismatch* mismatches = nullptr;  // this rank's row, one per channel
  std::uint32_t nchannels = 0;         // the control page's channels per rank
};

// One call: the rank's call number (its calls so far, every kind counted) and its arguments.
struct P2PCall {
  std::uint64_t number = 0;
  CallArguments args;
  const void* input = nullptr;
  void* output = nullptr;
};

// The kernel's parameters: this rank's plan (device memory, failures host-mapped), the job's
// agreement records and abort word (host-mapped, shared by every rank), the word the steps' waits
// watch, and the call.
struct P2PKernelArgs {
  P2PPlan plan;
  P2PAgreement agreement;
  std::uint32_t* abort = nullptr;  // host-mapped: the job's abort word, which a failure raises
  // Device memory of this rank's GPU: a sync::RelayedAbortWord that relays `abort` (one read of
  // the host-mapped word per rank per 16 us, not one per waiting block).
  std::uint32_t* abort_watch = nullptr;
  std::uint64_t timeout_ns = 0;
  P2PCall call;
};

namespace detail {

// Leader only: records why the block stops before its program and raises the abort word. A
// block's first failure stays (as run_block's does): a call queued behind a failed one stops at
// once on the raised word, and its Aborted record would hide the one that names the cause.
__device__ inline void fail_agreement(const P2PPlanTables& t, unsigned block,
                                      const BlockProgram& program, sync::WaitResult result,
                                      std::int32_t peer, std::uint32_t* abort) {
  if (t.failures[block].step.result == sync::WaitResult::Ok) {
    BlockFailure f;
    f.step.result = result;
    f.step.step = kAgreementStep;
    f.step.peer = peer;
    f.rank = program.rank;
    f.channel = program.channel;
    f.when_ns = sync::now_ns();
    t.failures[block] = f;
  }
  __threadfence_system();  // the record before the word
  sync::AtomicWord<std::uint32_t>(abort).store_release(1u);
}

}  // namespace detail

// Block `block` publishes its call and compares it with its peers' (call_record.hpp): true when
// they agree (or a record was already overwritten); false when it failed and raised the abort word:
// a mismatch, a peer that did not publish the call within timeout_ns, or the abort word.
__device__ inline bool agree_on_call(const P2PPlan& plan, const P2PAgreement& a, unsigned block,
                                     const P2PCall& call, std::uint32_t* abort,
                                     std::uint64_t timeout_ns) {
  if (a.records == nullptr) return true;
  __shared__ bool agreed;
  if (threadIdx.x == 0) {
    const BlockProgram program = plan.tables.programs[block];
    const std::uint32_t begin = plan.peer_begin[block];
    const AgreementOutcome o = agree_on_call_records(
        a.records, a.nchannels, program.rank, program.channel, plan.peers + begin,
        plan.peer_begin[block + 1] - begin, call.number, call.args, abort, timeout_ns);
    agreed = o.result == Agreement::agreed;
    if (o.result == Agreement::differs) {
      CallMismatch m;
      m.seq = call.number + 1;
      m.rank = program.rank;
      m.peer = o.peer;
      m.mine = call.args;
      m.theirs = o.theirs;
      a.mismatches[program.channel] = m;
    }
    if (!agreed)
      detail::fail_agreement(
          plan.tables, block, program,
          o.result == Agreement::timeout ? sync::WaitResult::Timeout : sync::WaitResult::Aborted,
          o.peer, abort);
  }
  __syncthreads();
  return agreed;
}

// Launch bounds: at most 64 registers per thread, so that two blocks of 512 threads fit an SM
// (launch_fit.hpp; scripts/kernel_resources checks that nothing spills). LowLatency: the kernel of
// LowLatency plans (block_program.cuh), without the Simple element loop.
template <class T, ReduceOp Op, bool LowLatency = false>
__global__ void __launch_bounds__(kMaxThreadsPerBlock, kMinBlocksPerSm)
    p2p_kernel(const P2PKernelArgs args) {
  if (!agree_on_call(args.plan, args.agreement, blockIdx.x, args.call, args.abort, args.timeout_ns))
    return;
  run_block<T, Op, sync::Scope::system, LowLatency>(
      args.plan.tables, blockIdx.x, args.call.input, args.call.output,
      AbortWords{args.abort, args.abort_watch}, args.timeout_ns);
}

// ---------------------------------------------------------------------------------------------
// The persistent session of one rank (p2p_session.cuh): one kernel runs a queue of calls.

// A queued call is one record (session_protocol.hpp's SessionWork): the rank's P2PPlan (device
// memory; nullptr: the session ends), its buffers and the count. Its number follows from the
// item's: while a session is open its rank makes no other call.
struct P2PSessionArgs {
  SessionQueueView queue;
  P2PAgreement agreement;
  std::uint32_t* abort = nullptr;        // host-mapped: the job's abort word
  std::uint32_t* abort_watch = nullptr;  // what the calls' step waits watch (P2PKernelArgs)
  std::uint64_t timeout_ns = 0;
  std::uint64_t first_call = 0;    // the rank's calls before the session: item j is call first + j
  DataType dtype = DataType::f32;  // the kernel's T, as the calls' records name it
};

// Each block runs the items in order. Blocks of different channels may be on different items:
// a block touches only its own connections, counters and bases, the same ones whatever the plan
// (every plan of the communicator uses a connection from the same block: ConnectionBlocks in
// p2p_options.hpp), so no block waits for another between items (unlike the virtual ranks' session,
// whose plans share one slot pool). A block past the item's plan has nothing to do in it but to
// arrive. No launch bounds: unbounded it takes 62 to 64 registers for f32 sum and bf16 avg without
// spilling (scripts/kernel_resources), and dtypes with wider accumulators may take more, where a
// bound would make them spill. Its launches fit their threads per block to what ptxas gave it
// (launch_fit.hpp).
// A session's LowLatency calls, out of line: inlined beside the Simple path, the LowLatency path
// takes the f32 kernel from 62 to 66 registers (one 512-thread block per SM instead of two).
template <class T, ReduceOp Op>
__device__ __noinline__ bool run_low_latency_block(const P2PPlanTables& tables, unsigned block,
                                                   const void* input, void* output,
                                                   AbortWords abort, std::uint64_t timeout_ns) {
  return run_block<T, Op, sync::Scope::system, true>(tables, block, input, output, abort,
                                                     timeout_ns);
}

template <class T, ReduceOp Op>
__global__ void p2p_session_kernel(const P2PSessionArgs args) {
  // Raw storage: a __shared__ variable cannot have a constructor.
  __shared__ alignas(SessionWork) unsigned char storage[sizeof(SessionWork)];
  auto* item = reinterpret_cast<SessionWork*>(storage);
  __shared__ bool stop;
  for (std::uint64_t j = 0;; ++j) {
    if (threadIdx.x == 0) {
      SessionWork w;
      stop = session_wait_record(args.queue, j, 0, args.abort, w) != sync::WaitResult::Ok;
      if (!stop) {
        *item = w;
        stop = w.plan == nullptr;
      }
    }
    __syncthreads();
    if (stop) return;
    const SessionWork mine = *item;  // registers: the leader overwrites the shared copy next item
    __syncthreads();
    const P2PPlan& plan = *static_cast<const P2PPlan*>(mine.plan);
    if (blockIdx.x < plan.tables.nblocks) {
      P2PCall call;
      call.number = args.first_call + j;
      call.args.count = mine.count;
      call.args.dtype = args.dtype;
      call.args.op = Op;
      call.input = mine.input;
      call.output = mine.output;
      if (!agree_on_call(plan, args.agreement, blockIdx.x, call, args.abort, args.timeout_ns))
        return;
      // Each call in its plan's protocol: the kernel has both data paths.
      const bool ok = plan.tables.low_latency != 0
                          ? run_low_latency_block<T, Op>(
                                plan.tables, blockIdx.x, call.input, call.output,
                                AbortWords{args.abort, args.abort_watch}, args.timeout_ns)
                          : run_block<T, Op, sync::Scope::system, false>(
                                plan.tables, blockIdx.x, call.input, call.output,
                                AbortWords{args.abort, args.abort_watch}, args.timeout_ns);
      if (!ok) return;
    }
    // The leader's verdict through the barrier itself, not the shared `stop`: the leader rewrites
    // that at the next item's top, perhaps before every thread has read it.
    const bool cut = threadIdx.x == 0 && !session_item_done(args.queue, j, gridDim.x, args.abort);
    if (__syncthreads_or(cut ? 1 : 0) != 0) return;
  }
}

}  // namespace ccoll::transport::cuda
