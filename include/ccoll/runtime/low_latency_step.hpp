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

// Step s in LowLatency: member i handles units i, i + stride, ...; for each it polls the unit's
// lines of every received message, folds them with the local operand in the order of Step::
// src_position (in Acc, as element_loop does, so both protocols compute the same bits), writes
// the output and stores the result as lines into every send. Returns false if a line did not
// come before deadline_ns (0: none) or an abort.
template <class T, ReduceOp Op, bool Fin, class Acc, class Group, class C>
CCOLL_HD bool ll_pass(const Group& g, const ProgramContext<T, C>& ctx, const plan::Step& s,
                      const T* local, std::uint64_t deadline_ns) {
  using LL = protocol::LowLatency;
  using U = LlUnit<T>;
  constexpr sync::Scope kScope = C::scope;
  const std::uint64_t* rl[kMaxStepPorts];
  std::uint32_t rf[kMaxStepPorts];
  std::uint64_t* sl[kMaxStepPorts];
  std::uint32_t sf[kMaxStepPorts];
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    const plan::Port& p = ctx.ports[s.recv_begin + k];
    const std::uint64_t m = ctx.base[p.connection] + p.seq;
    rl[k] = ctx.connections[p.connection].ll_lines(m);
    rf[k] = LL::flag(m);
  }
  for (std::uint32_t k = 0; k < s.send_count; ++k) {
    const plan::Port& p = ctx.ports[s.send_begin + k];
    const std::uint64_t m = ctx.base[p.connection] + p.seq;
    sl[k] = ctx.connections[p.connection].ll_lines(m);
    sf[k] = LL::flag(m);
  }
  const std::uint64_t n = s.count;
  // The trailers, by the leader. Other members write lines of the same message in parallel, so
  // no release orders them: receivers poll every line they read.
  const auto store_trailers = [&] {
    if (g.leader())
      for (std::uint32_t k = 0; k < s.send_count; ++k)
        LL::store_trailer<kScope>(LL::trailer(sl[k], false, n * sizeof(T)), ctx.ll_signature, sf[k],
                                  false);
  };
  if (n == 0) {  // an empty message is its trailer
    store_trailers();
    return true;
  }
  T* out = s.write_output ? ctx.output + s.offset : nullptr;
  const std::uint32_t local_at =
      local == nullptr ? kMaxStepPorts + 1
                       : (s.src_position < s.recv_count ? s.src_position : s.recv_count);
  const std::uint32_t nsrc = s.recv_count + (local != nullptr ? 1u : 0u);
  const std::uint64_t units = (n + U::kElems - 1) / U::kElems;
  for (std::uint64_t u = g.first(); u < units; u += g.stride()) {
    const std::uint64_t e0 = u * U::kElems;
    const std::uint32_t ne = n - e0 < U::kElems ? static_cast<std::uint32_t>(n - e0) : U::kElems;
    Acc acc[U::kElems] = {};
    for (std::uint32_t j = 0, r = 0; j < nsrc; ++j) {
      T v[U::kElems] = {};
      if (j == local_at) {
        for (std::uint32_t e = 0; e < ne; ++e) v[e] = local[e0 + e];
      } else {
        std::uint32_t w[U::kLines];
        for (std::uint32_t q = 0; q < U::kLines; ++q) {
          const sync::WaitResult res = LL::wait<kScope>(rl[r] + u * U::kLines + q, rf[r], &w[q],
                                                        false, ctx.abort, deadline_ns);
          if (res != sync::WaitResult::Ok) return false;
        }
        std::memcpy(v, w, sizeof w);
        ++r;
      }
      for (std::uint32_t e = 0; e < U::kElems; ++e)
        acc[e] = j == 0 ? static_cast<Acc>(v[e]) : combine<Op>(acc[e], static_cast<Acc>(v[e]));
    }
    T res[U::kElems] = {};
    for (std::uint32_t e = 0; e < ne; ++e) {
      Acc a = acc[e];
      if constexpr (Fin) a = finalize<Op>(a, ctx.nactive);
      res[e] = static_cast<T>(a);
    }
    if (out != nullptr)
      for (std::uint32_t e = 0; e < ne; ++e) out[e0 + e] = res[e];
    if (s.send_count > 0) {
      std::uint32_t w[U::kLines] = {};
      std::memcpy(w, res, ne * sizeof(T));
      for (std::uint32_t k = 0; k < s.send_count; ++k)
        for (std::uint32_t q = 0; q < U::kLines; ++q)
          LL::store<kScope>(sl[k] + u * U::kLines + q, w[q], sf[k], false);
    }
  }
  store_trailers();
  return true;
}

}  // namespace detail

// Step s in LowLatency as flagged lines (all members of g call it); false if it gave up waiting
// for a line past deadline_ns (0: none) or on an abort.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool execute_step_ll(const Group& g, const ProgramContext<T, C>& ctx, const plan::Step& s,
                              std::uint64_t deadline_ns) {
  static_assert(!kPackedLowLatency<Group>,
                "one-thread groups pack their LowLatency messages (execute_step)");
  const T* local = s.src == plan::Source::Input    ? ctx.input + s.offset
                   : s.src == plan::Source::Output ? ctx.output + s.offset
                                                   : nullptr;
  const std::uint32_t nsrc = s.recv_count + (local != nullptr ? 1u : 0u);
  const bool fin = s.final && Op == ReduceOp::avg;
  bool ok = true;
  if (detail::kWidensToFloat<T> && nsrc >= 3) {
    ok = fin ? detail::ll_pass<T, Op, true, float>(g, ctx, s, local, deadline_ns)
             : detail::ll_pass<T, Op, false, float>(g, ctx, s, local, deadline_ns);
  } else {
    ok = fin ? detail::ll_pass<T, Op, true, T>(g, ctx, s, local, deadline_ns)
             : detail::ll_pass<T, Op, false, T>(g, ctx, s, local, deadline_ns);
  }
  g.sync();  // every member's reads of the received lines are done
  // A member that gave up did so at the deadline or on an abort, which the leader sees too.
  bool failed = false;
  if (g.leader())
    failed =
        !ok ||
        (ctx.abort != nullptr &&
         sync::AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(ctx.abort)).load_relaxed() !=
             0) ||
        (deadline_ns != 0 && sync::now_ns() >= deadline_ns);
  if (g.any(failed)) return false;
  if (g.leader()) {
    g.fence_before_post();
    for (std::uint32_t k = 0; k < s.recv_count; ++k) {
      const plan::Port& p = ctx.ports[s.recv_begin + k];
      post_received<Group>(ctx.connections[p.connection], message_number(ctx, p));
    }
  }
  return true;
}

}  // namespace ccoll::runtime
