// ccoll/runtime/interpreter.hpp: the step interpreter, the one piece of code every executor runs.
//
// It executes the steps of one (rank, channel) program of a plan::Plan (see the semantics in
// plan/plan.hpp): value = src (+) recv_1 (+) ... ; finalize if final; write the output; copy to the
// send slots; then post `head` on the receive connections (their slots are free again) and `tail`
// on the send connections (the message is there). It is written once, as CCOLL_HD code over a
// "Group" of threads that execute a step together:
//   - HostGroup: one host thread (the host-threads and shared-memory executors);
//   - a CUDA thread block (transport/cuda/block_group.cuh), used by the persistent kernel,
// so the logic the GPU runs is the logic the CPU tests exercise. A Group provides first()/stride()
// (the elements a member handles), sync() (a barrier), leader() and any(v) (whether any member
// passed true, to every member).
//
// A plan runs in one of two protocols (protocol/protocol.hpp). Simple: the step's element loop
// reads and writes slots, and the leader posts the tail counters. LowLatency (ProgramContext::
// low_latency, on connections with an LL region) has no tail counter: one host thread runs the
// same element loop over packed messages and then stores their trailers (kPackedLowLatency); a
// group of several threads reads its messages straight from their flagged lines while it folds
// them and writes its sends as flagged lines, element by element (protocol/low_latency.hpp).
//
// Two forms: try_step() executes the program's next step only if all its messages have arrived
// and all its send slots are free ([C-Cube] Sec. IV-B's "check"), so one host thread can interleave
// the channels of its rank without deadlock; run_program() waits for each step ([C-Cube] Sec.
// IV-B's "wait") and is what a GPU block, which owns exactly one program, runs.
//
// The data paths have a header each, as NCCL keeps one primitives file per protocol:
//   - program_context.hpp: the Group, the ProgramContext of one program, the leader's posts;
//   - element_loop.hpp: a step's element loop, over host_loops.hpp (one thread: single passes
//     that g++ and clang vectorise, non-temporal stores) and block_loops.hpp (several threads:
//     16-byte packs, several in flight per thread, every operand folded in one pass);
//   - low_latency_step.hpp: a LowLatency step as flagged lines on a group of several threads;
//   - element_fold.hpp: the folding rule all of them share (16-bit floats: three or more operands
//     in float, rounded once), so the host and a GPU compute the same bits.
// This header is the step logic over them: readiness, execution, posts, progress.
#pragma once

#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/runtime/element_loop.hpp"
#include "ccoll/runtime/low_latency_step.hpp"
#include "ccoll/runtime/program_context.hpp"
#include "ccoll/runtime/step_marks.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/counter.hpp"
#include "ccoll/sync/poll.hpp"

namespace ccoll::runtime {

// Has message m of `count` elements arrived? LowLatency: its trailer carries its flag and this
// call's signature (acquire: a single-thread sender stores the trailer last, with release, so the
// rest of the message is there too).
template <class Group, class T, class C>
CCOLL_HD bool message_arrived(const ProgramContext<T, C>& ctx, const C& c, std::uint64_t m,
                              std::uint64_t count) {
  if constexpr (LowLatencyConnection<C>) {
    if (low_latency_steps<Group>(ctx)) {
      using LL = protocol::LowLatency;
      return LL::arrived<C::scope>(
          LL::trailer(c.ll_lines(m), kPackedLowLatency<Group>, count * sizeof(T)), ctx.ll_signature,
          LL::flag(m));
    }
  }
  return c.can_recv(m);
}

// Non-blocking: are all of step s's messages there and all its send slots free? (leader only)
template <class Group, class T, class C>
CCOLL_HD bool step_ready(const ProgramContext<T, C>& ctx, const plan::Step& s) {
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    const plan::Port& p = ctx.ports[s.recv_begin + k];
    if (!message_arrived<Group>(ctx, ctx.connections[p.connection], message_number(ctx, p),
                                s.count))
      return false;
  }
  for (std::uint32_t k = 0; k < s.send_count; ++k) {
    const plan::Port& p = ctx.ports[s.send_begin + k];
    if (!ctx.connections[p.connection].can_send(message_number(ctx, p))) return false;
  }
  return true;
}

// Has all of message m arrived? As message_arrived, and for flagged LowLatency lines, whose
// trailer is not written after the other lines, every data line too (for error reports).
template <class Group, class T, class C>
CCOLL_HD bool message_complete(const ProgramContext<T, C>& ctx, const C& c, std::uint64_t m,
                               std::uint64_t count) {
  if (!message_arrived<Group>(ctx, c, m, count)) return false;
  if constexpr (kFlaggedLowLatency<Group, C>) {
    if (low_latency_steps<Group>(ctx)) {
      using LL = protocol::LowLatency;
      const std::uint64_t* const lines = c.ll_lines(m);
      std::uint32_t data = 0;
      for (std::uint64_t i = 0; i < LL::data_lines(count * sizeof(T)); ++i)
        if (!LL::load<C::scope>(lines + i, LL::flag(m), &data, false)) return false;
    }
  }
  return true;
}

// The first port step s is still blocked on, for error reports (Group: the group that runs it).
template <class Group, class T, class C>
CCOLL_HD StepFailure blocked_port(const ProgramContext<T, C>& ctx, std::uint32_t step_index,
                                  sync::WaitResult why) {
  const plan::Step& s = ctx.steps[step_index];
  StepFailure f;
  f.result = why;
  f.step = step_index;
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    const plan::Port& p = ctx.ports[s.recv_begin + k];
    const C& c = ctx.connections[p.connection];
    if (!message_complete<Group>(ctx, c, message_number(ctx, p), s.count)) {
      f.peer = c.from;
      f.waiting_for_slot = false;
      return f;
    }
  }
  for (std::uint32_t k = 0; k < s.send_count; ++k) {
    const plan::Port& p = ctx.ports[s.send_begin + k];
    const C& c = ctx.connections[p.connection];
    if (!c.can_send(message_number(ctx, p))) {
      f.peer = c.to;
      f.waiting_for_slot = true;
      return f;
    }
  }
  return f;
}

// Whether steps of this program run as packed payload (Simple slots, or one thread's packed
// LowLatency messages, kPackedLowLatency) rather than as flagged lines (execute_step_ll).
template <class Group, class T, class C>
CCOLL_HD CCOLL_FORCEINLINE bool runs_payload(const ProgramContext<T, C>& ctx) {
  if constexpr (!kPackedLowLatency<Group>) return !low_latency_steps<Group>(ctx);
  return true;
}

template <class Group, class T, class C>
CCOLL_HD CCOLL_FORCEINLINE bool packed_low_latency(const ProgramContext<T, C>& ctx) {
  if constexpr (kPackedLowLatency<Group>) return low_latency_steps<Group>(ctx);
  return false;
}

// The call's operator: Op, or the context's where Op is kOpAtRunTime.
template <ReduceOp Op, class T, class C>
CCOLL_HD CCOLL_FORCEINLINE ReduceOp call_op(const ProgramContext<T, C>& ctx) {
  if constexpr (Op == kOpAtRunTime) {
    return ctx.op;
  } else {
    (void)ctx;
    return Op;
  }
}

// The leader resolves step s's operands into `ops` (runtime/step_operands.hpp), once its messages
// are known to be there, before the barrier that starts the step: the operand order of the fold
// (the local operand at src_position among the received ones), then the output and the sends.
//
// Simple and packed LowLatency messages (kPackedLowLatency) are both contiguous payload, read and
// written in place; they differ in where the payload lies (the slot, or the LL slot after the
// trailer) and in how the leader announces a message (the tail counter, or the trailer).
template <class Group, ReduceOp Op, class T, class C>
CCOLL_HD void resolve_operands(const ProgramContext<T, C>& ctx, const plan::Step& s,
                               StepOperands<T>& ops) {
  const bool packed = packed_low_latency<Group>(ctx);
  const auto payload = [&](const plan::Port& p) -> std::byte* {
    const C& c = ctx.connections[p.connection];
    const std::uint64_t m = message_number(ctx, p);
    if constexpr (LowLatencyConnection<C>) {
      if (packed)
        return reinterpret_cast<std::byte*>(c.ll_lines(m)) +
               protocol::LowLatency::kPackedPayloadOffset;
    }
    (void)packed;
    return c.slot(m);
  };
  std::uint32_t nsrc = 0, ndst = 0;
  const T* local = s.src == plan::Source::Input    ? ctx.input + s.offset
                   : s.src == plan::Source::Output ? ctx.output + s.offset
                                                   : nullptr;
  // Both ends of a message have the same chunk offset (plan::verify checks it), so they agree on
  // the shift (kBlockSlotSlack).
  std::uint64_t shift = 0;
  if constexpr (!Group::kSingleThread) shift = (s.offset * sizeof(T)) & (kBlockSlotSlack - 1);
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    if (local != nullptr && k == s.src_position) ops.srcs[nsrc++] = local;
    ops.srcs[nsrc++] = reinterpret_cast<const T*>(payload(ctx.ports[s.recv_begin + k]) + shift);
  }
  if (local != nullptr && s.src_position >= s.recv_count) ops.srcs[nsrc++] = local;
  if (s.write_output) ops.dsts[ndst++] = ctx.output + s.offset;
  for (std::uint32_t k = 0; k < s.send_count; ++k)
    ops.dsts[ndst++] = reinterpret_cast<T*>(payload(ctx.ports[s.send_begin + k]) + shift);
  ops.nsrc = nsrc;
  ops.ndst = ndst;
  ops.count = s.count;
  ops.finalize = s.final && call_op<Op>(ctx) == ReduceOp::avg;
}

// The leader resolves step s's operands for the data path it runs on: flagged LowLatency lines
// (kFlaggedLowLatency) into the group's LowLatencyOperands, otherwise payload into `ops`.
template <class Group, ReduceOp Op, class T, class C>
CCOLL_HD CCOLL_FORCEINLINE void resolve_step(const Group& g, const ProgramContext<T, C>& ctx,
                                             const plan::Step& s, StepOperands<T>& ops) {
  if constexpr (kFlaggedLowLatency<Group, C>) {
    if (!runs_payload<Group>(ctx)) {
      resolve_low_latency_operands<Op>(ctx, s, low_latency_operands<T>(g));
      return;
    }
  }
  (void)g;
  resolve_operands<Group, Op>(ctx, s, ops);
}

// The element loops of step s on `ops` (the operator Op, not kOpAtRunTime).
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD CCOLL_FORCEINLINE void run_element_loops(const Group& g, const ProgramContext<T, C>& ctx,
                                                  const plan::Step& s, const StepOperands<T>& ops) {
  (void)s;
  bool done = false;
#if !CCOLL_DEVICE_PASS  // non-temporal stores are a host feature (HostGroup only)
  if constexpr (Group::kSingleThread) {
    // Bit k: dsts[k] gets non-temporal stores (the output comes first when written).
    std::uint32_t streamed = 0;
    const std::uint32_t first_send = s.write_output ? 1u : 0u;
    if (ctx.stream_output && s.write_output) streamed |= 1u;
    if (ctx.stream_slots)
      for (std::uint32_t k = first_send; k < ops.ndst; ++k) streamed |= 1u << k;
    if (streamed != 0) {
      if (ops.finalize)
        detail::element_loop_streaming<T, Op, true>(ops.dsts, ops.ndst, streamed, ops.srcs,
                                                    ops.nsrc, ops.count, ctx.nactive);
      else
        detail::element_loop_streaming<T, Op, false>(ops.dsts, ops.ndst, streamed, ops.srcs,
                                                     ops.nsrc, ops.count, ctx.nactive);
      detail::stream_fence();
      done = true;
    }
  }
#endif
  if (!done) {
    if constexpr (Op == ReduceOp::avg) {
      if (ops.finalize) {
        detail::element_loop<T, Op, true>(g, ops.dsts, ops.ndst, ops.srcs, ops.nsrc, ops.count,
                                          ctx.nactive);
        done = true;
      }
    }
    if (!done)
      detail::element_loop<T, Op, false>(g, ops.dsts, ops.ndst, ops.srcs, ops.nsrc, ops.count,
                                         ctx.nactive);
  }
}

// run_element_loops out of line, for an interpreter instantiated with kOpAtRunTime: its switch
// over the operators then holds five calls rather than five copies of the loops, and the steps
// around it stay as small as in an interpreter of one operator.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD CCOLL_NOINLINE void run_element_loops_of(const Group& g, const ProgramContext<T, C>& ctx,
                                                  const plan::Step& s, const StepOperands<T>& ops) {
  run_element_loops<T, Op>(g, ctx, s, ops);
}

// Executes step s, whose messages are known to be there and whose operands the leader resolved
// into `ops` before the barrier that started it (all members of g call it). Returns false only for
// a LowLatency step that gave up waiting for a line (past line_deadline_ns, 0: none, or on an
// abort). Members other than the leader read nothing of the plan: only `ops`, or the group's
// LowLatencyOperands for a LowLatency step of several threads (execute_step_ll).
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool execute_step(const Group& g, const ProgramContext<T, C>& ctx, const plan::Step& s,
                           const StepOperands<T>& ops, std::uint64_t line_deadline_ns) {
  if constexpr (kFlaggedLowLatency<Group, C>) {
    if (low_latency_steps<Group>(ctx))
      return execute_step_ll<T, Op>(g, ctx, s, low_latency_operands<T>(g), line_deadline_ns);
  }
  (void)line_deadline_ns;
  if (ops.nsrc > 0 && ops.ndst > 0 && ops.count > 0) {
    if constexpr (Op == kOpAtRunTime) {
      switch (ctx.op) {
        case ReduceOp::sum:
          run_element_loops_of<T, ReduceOp::sum>(g, ctx, s, ops);
          break;
        case ReduceOp::prod:
          run_element_loops_of<T, ReduceOp::prod>(g, ctx, s, ops);
          break;
        case ReduceOp::min:
          run_element_loops_of<T, ReduceOp::min>(g, ctx, s, ops);
          break;
        case ReduceOp::max:
          run_element_loops_of<T, ReduceOp::max>(g, ctx, s, ops);
          break;
        case ReduceOp::avg:
          run_element_loops_of<T, ReduceOp::avg>(g, ctx, s, ops);
          break;
      }
    } else {
      run_element_loops<T, Op>(g, ctx, s, ops);
    }
  }
  g.sync();  // every member's writes and reads of the slots are done
  mark_phase(g, StepPhase::computed);
  if (g.leader()) {
    const bool packed = packed_low_latency<Group>(ctx);
    g.fence_before_post();
    mark_phase(g, StepPhase::fenced);
    for (std::uint32_t k = 0; k < s.recv_count; ++k) {
      const plan::Port& p = ctx.ports[s.recv_begin + k];
      post_received<Group>(ctx.connections[p.connection], message_number(ctx, p));
    }
    for (std::uint32_t k = 0; k < s.send_count; ++k) {
      const plan::Port& p = ctx.ports[s.send_begin + k];
      const C& c = ctx.connections[p.connection];
      const std::uint64_t m = message_number(ctx, p);
      if constexpr (LowLatencyConnection<C>) {
        if (packed) {
          // The trailer last, with release: a receiver that acquires it sees the payload.
          using LL = protocol::LowLatency;
          LL::store_trailer<C::scope>(LL::trailer(c.ll_lines(m), true, s.count * sizeof(T)),
                                      ctx.ll_signature, LL::flag(m), true);
          continue;
        }
      }
      (void)packed;
      post_sent<Group>(c, m, s.count * sizeof(T));
    }
  }
  mark_phase(g, StepPhase::posted);
  return true;
}

// After execute_step: `done` steps of the program are complete. The leader's store follows the
// step's barrier and fence (a relaxed store after a fence that orders it, kFenceOrdersPosts; a
// release store otherwise), so a reader that acquires the value also sees the output the step
// wrote. Its scope is the connections': readers of a program's progress run where its peers do (a
// consumer kernel on the same GPU for virtual ranks, so a GPU-wide release); system scope for
// connections that do not say. ctx.progress == nullptr (no readiness table attached): nothing is
// stored.
template <class C>
inline constexpr sync::Scope kProgressScope = [] {
  if constexpr (requires { C::scope; })
    return sync::Scope{C::scope};
  else
    return sync::Scope::system;
}();

template <class T, class Group, class C>
CCOLL_HD CCOLL_FORCEINLINE void publish_progress(const Group& g, const ProgramContext<T, C>& ctx,
                                                 std::uint32_t done) {
  if (ctx.progress == nullptr || !g.leader()) return;
  const sync::BasicCounter<kProgressScope<C>> progress(ctx.progress);
  if constexpr (kFenceOrdersPosts<Group>)
    progress.post_value_after_fence(ctx.progress_base + done);
  else
    progress.post_value(ctx.progress_base + done);
}

// [C-Cube] Sec. IV-B's "check" form: executes step `pc` and advances it if the step is ready;
// returns whether it did. Never blocks.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool try_step(const Group& g, const ProgramContext<T, C>& ctx, std::uint32_t& pc) {
  if (pc >= ctx.nsteps) return false;
  const plan::Step& s = ctx.steps[pc];
  StepOperands<T> own;
  StepOperands<T>& ops = step_operands<T>(g, own);
  bool ready = false;
  if (g.leader()) {
    ready = step_ready<Group>(ctx, s);
    if (ready) resolve_step<Group, Op>(g, ctx, s, ops);
  }
  if (!g.any(ready)) return false;
  // A LowLatency step fails only at the deadline or on an abort, which the caller then reports.
  if (!execute_step<T, Op>(g, ctx, s, ops, ctx.deadline_ns)) return false;
  ++pc;
  publish_progress(g, ctx, pc);
  return true;
}

// [C-Cube] Sec. IV-B's "wait" form: runs the whole program, waiting for each step until the
// context's deadline, or deadline_ns where it has none (sync::now_ns(); 0: none). Returns true when
// it completed; otherwise *failure says which step and peer it gave up on. The context is only
// read, so a CUDA block may keep it in shared memory (transport/cuda/block_program.cuh), where it
// holds no register through the element loops.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool run_program(const Group& g, const ProgramContext<T, C>& ctx,
                          std::uint64_t deadline_ns, StepFailure* failure) {
  // Read at each use: ctx may be in shared memory, and the value in a register across the loop
  // would cost the element loops one.
  const auto deadline = [&] { return ctx.deadline_ns != 0 ? ctx.deadline_ns : deadline_ns; };
  StepOperands<T> own;
  StepOperands<T>& ops = step_operands<T>(g, own);
  for (std::uint32_t pc = 0; pc < ctx.nsteps; ++pc) {
    const plan::Step& s = ctx.steps[pc];
    sync::WaitResult r = sync::WaitResult::Ok;
    mark_step_begin(g, pc);
    if (g.leader()) {
      const std::uint64_t wait_until = deadline();
      for (std::uint32_t k = 0; k < s.recv_count && r == sync::WaitResult::Ok; ++k) {
        const plan::Port& p = ctx.ports[s.recv_begin + k];
        const C& c = ctx.connections[p.connection];
        const std::uint64_t m = message_number(ctx, p);
        bool polled = false;
        if constexpr (LowLatencyConnection<C>) {
          if (low_latency_steps<Group>(ctx)) {
            polled = true;
            // Flagged lines: the members poll every line they fold, so a wait for the trailer
            // here would only put a round trip before the step's barrier. Only an empty message
            // is its trailer alone. (The trailer's signature then goes unchecked: groups of
            // several threads run on GPUs, whose executors compare the calls' arguments
            // otherwise, in one kernel or through cuda-p2p's call records.)
            if (kPackedLowLatency<Group> || s.count == 0) {
              using LL = protocol::LowLatency;
              r = LL::wait_arrival<C::scope>(
                  LL::trailer(c.ll_lines(m), kPackedLowLatency<Group>, s.count * sizeof(T)),
                  ctx.ll_signature, LL::flag(m), ctx.abort, wait_until);
            }
          }
        }
        if (!polled) r = c.wait_recv(m, ctx.abort, wait_until);
      }
      for (std::uint32_t k = 0; k < s.send_count && r == sync::WaitResult::Ok; ++k) {
        const plan::Port& p = ctx.ports[s.send_begin + k];
        r = ctx.connections[p.connection].wait_send(message_number(ctx, p), ctx.abort, wait_until);
      }
      if (r != sync::WaitResult::Ok && failure != nullptr)
        *failure = blocked_port<Group>(ctx, pc, r);
      mark_phase(g, StepPhase::ready);
      if (r == sync::WaitResult::Ok) resolve_step<Group, Op>(g, ctx, s, ops);
    }
    if (g.any(r != sync::WaitResult::Ok)) return false;
    mark_phase(g, StepPhase::started);
    if (!execute_step<T, Op>(g, ctx, s, ops, deadline())) {
      if (failure != nullptr && g.leader()) {
        const bool aborted = sync::abort_raised(ctx.abort);
        const sync::WaitResult why =
            aborted ? sync::WaitResult::Aborted : sync::WaitResult::Timeout;
        *failure = blocked_port<Group>(ctx, pc, why);
        // A LowLatency step of several threads: the message a member gave up on, even if its
        // lines have all landed since.
        if constexpr (kFlaggedLowLatency<Group, C>) {
          if (!runs_payload<Group>(ctx)) {
            const std::uint32_t k =
                sync::AtomicWord<std::uint32_t>(&low_latency_operands<T>(g).gave_up).load_relaxed();
            if (k < s.recv_count) {
              failure->peer = ctx.connections[ctx.ports[s.recv_begin + k].connection].from;
              failure->waiting_for_slot = false;
            }
          }
        }
      }
      return false;
    }
    publish_progress(g, ctx, pc + 1);
  }
  return true;
}

// Rejects steps the interpreter cannot run without allocating; returns the offending step's
// index in `bad_step` (or nsteps) and false.
inline bool check_step_shapes(const plan::Plan& plan, std::uint64_t* bad_steps_total = nullptr) {
  std::uint64_t bad = 0;
  for (const auto& ch : plan.channels)
    for (const auto& prog : ch.programs)
      for (const auto& s : prog.steps)
        if (s.recv_count > kMaxStepPorts || s.send_count > kMaxStepPorts) ++bad;
  if (bad_steps_total != nullptr) *bad_steps_total = bad;
  return bad == 0;
}

}  // namespace ccoll::runtime
