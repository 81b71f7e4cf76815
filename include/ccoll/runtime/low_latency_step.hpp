// ccoll/runtime/low_latency_step.hpp: a step of a LowLatency plan on a group of several threads,
// which reads its messages straight from their flagged lines while it folds them and writes its
// sends as flagged lines, element by element (protocol/low_latency.hpp). One host thread packs its
// LowLatency messages instead and runs the Simple element loop over them (runtime/interpreter.hpp,
// kPackedLowLatency).
#pragma once

#include <cstdint>
#include <cstring>

#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/runtime/element_fold.hpp"
#include "ccoll/runtime/program_context.hpp"
#include "ccoll/runtime/step_marks.hpp"
#include "ccoll/runtime/step_operands.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/poll.hpp"

namespace ccoll::runtime {

namespace detail {

// LowLatency moves units: the fewest whole elements that fill whole 4-byte line payloads.
template <class T>
struct LlUnit {
  static constexpr std::uint32_t kLines = sizeof(T) > 4 ? sizeof(T) / 4 : 1;
  static constexpr std::uint32_t kElems = sizeof(T) >= 4 ? 1 : 4 / sizeof(T);
  static_assert(kLines * 4 == kElems * sizeof(T));
};

// A LowLatency step on the members of g: member i handles units i, i + stride, ...; for each it
// polls the unit's lines of every received message, folds them with the local operand in the
// order of Step::src_position (in Acc, as element_loop does, so both protocols compute the same
// bits), writes the output and stores the result as lines into every send. Every pointer comes
// from `ops`, which the leader resolved (resolve_low_latency_operands). Returns false if a line
// did not come before deadline_ns (0: none) or an abort, after recording which received message
// it was in ops.gave_up.
template <class T, ReduceOp Op, bool Fin, class Acc, class Group, class C>
CCOLL_HD bool ll_pass(const Group& g, const ProgramContext<T, C>& ctx, LowLatencyOperands<T>& ops,
                      std::uint64_t deadline_ns) {
  using LL = protocol::LowLatency;
  using U = LlUnit<T>;
  constexpr sync::Scope kScope = C::scope;
  const std::uint64_t n = ops.count;
  // The trailers, by the leader. Other members write lines of the same message in parallel, so
  // no release orders them: receivers poll every line they read.
  const auto store_trailers = [&] {
    if (g.leader())
      for (std::uint32_t k = 0; k < ops.nsend; ++k)
        LL::store_trailer<kScope>(LL::trailer(ops.send[k], false, n * sizeof(T)), ctx.ll_signature,
                                  ops.send_flag[k], false);
  };
  if (n == 0) {  // an empty message is its trailer
    store_trailers();
    return true;
  }
  const T* const local = ops.local;
  T* const out = ops.output;
  const std::uint32_t local_at = ops.local_at;
  const std::uint32_t nsrc = ops.nrecv + (local != nullptr ? 1u : 0u);
  const std::uint32_t nsend = ops.nsend;
  const std::uint64_t units = (n + U::kElems - 1) / U::kElems;
  for (std::uint64_t u = g.first(); u < units; u += g.stride()) {
    const std::uint64_t e0 = u * U::kElems;
    const std::uint32_t ne = n - e0 < U::kElems ? static_cast<std::uint32_t>(n - e0) : U::kElems;
    Acc acc[U::kElems] = {};
    for (std::uint32_t j = 0, r = 0; j < nsrc; ++j) {
      T v[U::kElems] = {};
      if (j == local_at) {
        for (std::uint32_t e = 0; e < U::kElems; ++e)
          if (e < ne) v[e] = local[e0 + e];
      } else {
        std::uint32_t w[U::kLines];
        const std::uint64_t* const lines = ops.recv[r] + u * U::kLines;
        const std::uint32_t flag = ops.recv_flag[r];
        for (std::uint32_t q = 0; q < U::kLines; ++q) {
          const sync::WaitResult res =
              LL::wait<kScope>(lines + q, flag, &w[q], false, ctx.abort, deadline_ns);
          if (res != sync::WaitResult::Ok) {
            sync::AtomicWord<std::uint32_t>(&ops.gave_up).store_relaxed(r);
            return false;
          }
        }
        std::memcpy(v, w, sizeof w);
        ++r;
      }
      for (std::uint32_t e = 0; e < U::kElems; ++e)
        acc[e] = j == 0 ? static_cast<Acc>(v[e]) : combine<Op>(acc[e], static_cast<Acc>(v[e]));
    }
    // Loops over every element of the unit, guarded by ne, and whole-array copies: bounds known
    // at compile time keep the unit in registers on a GPU, where a loop to ne would index it in
    // local memory. Elements past ne stay zero, as a short message's last line is padded.
    T res[U::kElems] = {};
    for (std::uint32_t e = 0; e < U::kElems; ++e) {
      if (e >= ne) continue;
      Acc a = acc[e];
      if constexpr (Fin) a = finalize<Op>(a, ctx.nactive);
      res[e] = static_cast<T>(a);
    }
    if (out != nullptr)
      for (std::uint32_t e = 0; e < U::kElems; ++e)
        if (e < ne) out[e0 + e] = res[e];
    if (nsend > 0) {
      std::uint32_t w[U::kLines];
      static_assert(sizeof w == sizeof res);
      std::memcpy(w, res, sizeof w);
      for (std::uint32_t k = 0; k < nsend; ++k) {
        std::uint64_t* const lines = ops.send[k] + u * U::kLines;
        const std::uint32_t flag = ops.send_flag[k];
        for (std::uint32_t q = 0; q < U::kLines; ++q)
          LL::store<kScope>(lines + q, w[q], flag, false);
      }
    }
  }
  store_trailers();
  return true;
}

}  // namespace detail

// The leader resolves step s's LowLatency operands into `ops`, once its messages are known to be
// there, before the barrier that starts the step (as resolve_operands does for Simple steps).
template <ReduceOp Op, class T, class C>
CCOLL_HD void resolve_low_latency_operands(const ProgramContext<T, C>& ctx, const plan::Step& s,
                                           LowLatencyOperands<T>& ops) {
  using LL = protocol::LowLatency;
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    const plan::Port& p = ctx.ports[s.recv_begin + k];
    const std::uint64_t m = message_number(ctx, p);
    ops.recv[k] = ctx.connections[p.connection].ll_lines(m);
    ops.recv_flag[k] = LL::flag(m);
  }
  for (std::uint32_t k = 0; k < s.send_count; ++k) {
    const plan::Port& p = ctx.ports[s.send_begin + k];
    const std::uint64_t m = message_number(ctx, p);
    ops.send[k] = ctx.connections[p.connection].ll_lines(m);
    ops.send_flag[k] = LL::flag(m);
  }
  ops.local = s.src == plan::Source::Input    ? ctx.input + s.offset
              : s.src == plan::Source::Output ? ctx.output + s.offset
                                              : nullptr;
  ops.output = s.write_output ? ctx.output + s.offset : nullptr;
  ops.count = s.count;
  ops.nrecv = s.recv_count;
  ops.nsend = s.send_count;
  ops.local_at = ops.local == nullptr
                     ? kMaxStepPorts + 1
                     : (s.src_position < s.recv_count ? s.src_position : s.recv_count);
  ops.gave_up = kMaxStepPorts;
  ops.finalize = s.final && Op == ReduceOp::avg;
}

// Step s in LowLatency as flagged lines (all members of g call it), its operands resolved into
// `ops` by the leader; false if it gave up waiting for a line past deadline_ns (0: none) or on an
// abort. Members other than the leader read only `ops`, never the plan.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool execute_step_ll(const Group& g, const ProgramContext<T, C>& ctx, const plan::Step& s,
                              LowLatencyOperands<T>& ops, std::uint64_t deadline_ns) {
  static_assert(!kPackedLowLatency<Group>,
                "one-thread groups pack their LowLatency messages (execute_step)");
  static_assert(Op != kOpAtRunTime, "a group of several threads takes its operator as Op");
  const std::uint32_t nsrc = ops.nrecv + (ops.local != nullptr ? 1u : 0u);
  bool ok = true;
  if (detail::kWidensToFloat<T> && nsrc >= 3) {
    ok = ops.finalize ? detail::ll_pass<T, Op, true, float>(g, ctx, ops, deadline_ns)
                      : detail::ll_pass<T, Op, false, float>(g, ctx, ops, deadline_ns);
  } else {
    ok = ops.finalize ? detail::ll_pass<T, Op, true, T>(g, ctx, ops, deadline_ns)
                      : detail::ll_pass<T, Op, false, T>(g, ctx, ops, deadline_ns);
  }
  // Every member's reads of the received lines are done, and whether any member gave up (at the
  // deadline or on an abort), from each member's own verdict: the leader reads neither the abort
  // word, which may be host memory, nor the clock.
  if (g.any(!ok)) return false;
  mark_phase(g, StepPhase::computed);
  if (g.leader()) {
    g.fence_before_post();
    mark_phase(g, StepPhase::fenced);
    for (std::uint32_t k = 0; k < s.recv_count; ++k) {
      const plan::Port& p = ctx.ports[s.recv_begin + k];
      post_received<Group>(ctx.connections[p.connection], message_number(ctx, p));
    }
  }
  mark_phase(g, StepPhase::posted);
  return true;
}

}  // namespace ccoll::runtime
