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
// (the elements a member handles), sync() (a barrier), leader() and any(v) (the leader's v,
// broadcast to all members).
//
// Two forms: try_step() executes the program's next step only if all its messages have arrived
// and all its send slots are free ([C-Cube] Sec. IV-B's "check"), so one host thread can interleave
// the channels of its rank without deadlock; run_program() waits for each step ([C-Cube] Sec.
// IV-B's "wait") and is what a GPU block, which owns exactly one program, runs.
//
// The element loops are the hot path of every host benchmark: for the common steps (copy, one
// receive reduced into the input, one or two destinations) they are single passes over restrict
// pointers with a unit stride known at compile time on the host, which g++ and clang vectorise.
// Other shapes go through a tiled loop whose later passes hit the L1 cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/connection.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/sync/counter.hpp"

#if !CCOLL_DEVICE_PASS && (defined(__x86_64__) || defined(__i386__))
#include <emmintrin.h>
#define CCOLL_HAVE_STREAMING_STORES 1
#else
#define CCOLL_HAVE_STREAMING_STORES 0
#endif

namespace ccoll::runtime {

// The most receive (and send) ports one step may have; a step with more is rejected when the plan
// is loaded (check_step_shapes), so the interpreter needs no allocation.
inline constexpr std::uint32_t kMaxStepPorts = 15;

// One host thread.
struct HostGroup {
  static constexpr bool kSingleThread = true;
  static constexpr std::uint64_t first() { return 0; }
  static constexpr std::uint64_t stride() { return 1; }
  static constexpr bool leader() { return true; }
  static constexpr void sync() {}
  static constexpr bool any(bool leader_value) { return leader_value; }
  static constexpr void fence_before_post() {}
};

// Everything one (rank, channel) program needs, as plain pointers (host or device memory).
template <class T, Connection C = sync::ConnectionRef>
struct ProgramContext {
  using connection_type = C;
  const plan::Step* steps = nullptr;
  std::uint32_t nsteps = 0;
  const plan::Port* ports = nullptr;
  const C* connections = nullptr;       // indexed by plan connection index
  const std::uint64_t* base = nullptr;  // per plan connection: its messages in earlier calls
  const T* input = nullptr;
  T* output = nullptr;
  int nactive = 1;  // avg divides by this
  int rank = 0;
  std::uint32_t channel = 0;
  const std::uint32_t* abort = nullptr;  // non-zero: give up (another rank failed)
  // Host only: write the output with non-temporal stores. For buffers larger than the caches this
  // saves the read-for-ownership of every output line (a third of a ring step's memory traffic);
  // for small ones it would only evict data that is about to be reused.
  bool stream_output = false;
  // Host only: write the send slots with non-temporal stores too. The message then reaches its
  // reader through memory instead of through the writer's cache: on hosts where taking a line back
  // from another core's cache is slow (the writer must invalidate the copy its reader left there),
  // that is faster, at the price of memory traffic (core/config.hpp, Config::stream_slots).
  bool stream_slots = false;
};

// Why a program stopped before its end.
struct StepFailure {
  sync::WaitResult result = sync::WaitResult::Ok;
  std::uint32_t step = 0;
  std::int32_t peer = -1;
  bool waiting_for_slot = false;  // true: a free send slot (head); false: a message (tail)
};

namespace detail {

template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD CCOLL_FORCEINLINE void copy_pass(const Group& g, T* __restrict__ d,
                                          const T* __restrict__ a, std::uint64_t n, int nactive) {
  if constexpr (Group::kSingleThread && !Fin) {
    if (d != a) std::memcpy(d, a, n * sizeof(T));
    (void)g;
    (void)nactive;
  } else {
    for (std::uint64_t i = g.first(); i < n; i += g.stride()) {
      T v = a[i];
      if constexpr (Fin) v = finalize<Op>(v, nactive);
      d[i] = v;
    }
  }
}

template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD CCOLL_FORCEINLINE void copy2_pass(const Group& g, T* __restrict__ d0, T* __restrict__ d1,
                                           const T* __restrict__ a, std::uint64_t n, int nactive) {
  if constexpr (Group::kSingleThread && !Fin) {
    copy_pass<T, Op, false>(g, d0, a, n, nactive);
    copy_pass<T, Op, false>(g, d1, a, n, nactive);
  } else {
    for (std::uint64_t i = g.first(); i < n; i += g.stride()) {
      T v = a[i];
      if constexpr (Fin) v = finalize<Op>(v, nactive);
      d0[i] = v;
      d1[i] = v;
    }
  }
}

template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD CCOLL_FORCEINLINE void reduce_pass(const Group& g, T* __restrict__ d,
                                            const T* __restrict__ a, const T* __restrict__ b,
                                            std::uint64_t n, int nactive) {
  for (std::uint64_t i = g.first(); i < n; i += g.stride()) {
    T v = combine<Op>(a[i], b[i]);
    if constexpr (Fin) v = finalize<Op>(v, nactive);
    d[i] = v;
  }
}

template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD CCOLL_FORCEINLINE void reduce2_pass(const Group& g, T* __restrict__ d0, T* __restrict__ d1,
                                             const T* __restrict__ a, const T* __restrict__ b,
                                             std::uint64_t n, int nactive) {
  for (std::uint64_t i = g.first(); i < n; i += g.stride()) {
    T v = combine<Op>(a[i], b[i]);
    if constexpr (Fin) v = finalize<Op>(v, nactive);
    d0[i] = v;
    d1[i] = v;
  }
}

// Any number of sources and destinations, in tiles so that the passes after the first hit L1.
// Every member of the group handles the same elements in every pass, so no barrier is needed.
template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD void general_pass(const Group& g, T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                           std::uint32_t nsrc, std::uint64_t n, int nactive) {
  constexpr std::uint64_t kTile = 2048;
  T* const d0 = dsts[0];
  // In place, the own input is the destination; folded after the first two operands
  // (Step::src_position >= 2) it must be read before the first pass overwrites it, so such a step
  // folds all operands of an element at once.
  bool aliased = false;
  for (std::uint32_t k = 2; k < nsrc; ++k) aliased = aliased || srcs[k] == d0;
  for (std::uint64_t lo = 0; lo < n; lo += kTile) {
    const std::uint64_t m = n - lo < kTile ? n - lo : kTile;
    if (aliased) {
      for (std::uint64_t i = g.first(); i < m; i += g.stride()) {
        T v = srcs[0][lo + i];
        for (std::uint32_t k = 1; k < nsrc; ++k) v = combine<Op>(v, srcs[k][lo + i]);
        d0[lo + i] = v;
      }
    } else if (nsrc == 1) {
      copy_pass<T, Op, false>(g, d0 + lo, srcs[0] + lo, m, nactive);
    } else {
      reduce_pass<T, Op, false>(g, d0 + lo, srcs[0] + lo, srcs[1] + lo, m, nactive);
    }
    for (std::uint32_t k = 2; k < nsrc && !aliased; ++k) {
      const T* s = srcs[k] + lo;
      T* d = d0 + lo;
      for (std::uint64_t i = g.first(); i < m; i += g.stride()) d[i] = combine<Op>(d[i], s[i]);
    }
    if constexpr (Fin) {
      T* d = d0 + lo;
      for (std::uint64_t i = g.first(); i < m; i += g.stride()) d[i] = finalize<Op>(d[i], nactive);
    }
    for (std::uint32_t k = 1; k < ndst; ++k) {
      // d0's tile was written by this same member, so reading it back needs no barrier.
      T* d = dsts[k] + lo;
      const T* s = d0 + lo;
      for (std::uint64_t i = g.first(); i < m; i += g.stride()) d[i] = s[i];
    }
  }
}

template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD void element_loop(const Group& g, T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                           std::uint32_t nsrc, std::uint64_t n, int nactive) {
  if (nsrc == 1 && ndst == 1) {
    copy_pass<T, Op, Fin>(g, dsts[0], srcs[0], n, nactive);
  } else if (nsrc == 1 && ndst == 2) {
    copy2_pass<T, Op, Fin>(g, dsts[0], dsts[1], srcs[0], n, nactive);
  } else if (nsrc == 2 && ndst == 1) {
    reduce_pass<T, Op, Fin>(g, dsts[0], srcs[0], srcs[1], n, nactive);
  } else if (nsrc == 2 && ndst == 2) {
    reduce2_pass<T, Op, Fin>(g, dsts[0], dsts[1], srcs[0], srcs[1], n, nactive);
  } else {
    general_pass<T, Op, Fin>(g, dsts, ndst, srcs, nsrc, n, nactive);
  }
}

// Host only: copies `bytes` to dst with non-temporal stores where dst is 16-byte aligned (the
// caller issues the store fence before publishing anything).
inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
#if CCOLL_HAVE_STREAMING_STORES
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
  if (head >= bytes) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

inline void stream_fence() {
#if CCOLL_HAVE_STREAMING_STORES
  _mm_sfence();
#endif
}

// Host only: like element_loop, but the destinations flagged in `streamed` (bit k: dsts[k]) are
// written with non-temporal stores. Tiles of kTileBytes are computed into the first destination
// that is not streamed (it stays cached for its reader) or into a stack buffer, then streamed to
// the others; a plain copy streams straight from its source.
template <class T, ReduceOp Op, bool Fin>
void element_loop_streaming(T* const* dsts, std::uint32_t ndst, std::uint32_t streamed,
                            const T* const* srcs, std::uint32_t nsrc, std::uint64_t n,
                            int nactive) {
  constexpr std::size_t kTileBytes = 8192;
  constexpr std::uint64_t kTile = kTileBytes / sizeof(T);
  alignas(64) unsigned char stage_buffer[kTileBytes];
  const HostGroup g;
  if (nsrc == 1 && !Fin) {  // a copy: no need to stage
    for (std::uint32_t k = 0; k < ndst; ++k) {
      if (dsts[k] == srcs[0]) continue;
      if ((streamed >> k) & 1u)
        stream_copy(dsts[k], srcs[0], n * sizeof(T));
      else
        std::memcpy(dsts[k], srcs[0], n * sizeof(T));
    }
    return;
  }
  const T* tile_srcs[kMaxStepPorts + 1];
  T* tile_dsts[kMaxStepPorts + 1];
  for (std::uint64_t lo = 0; lo < n; lo += kTile) {
    const std::uint64_t m = n - lo < kTile ? n - lo : kTile;
    for (std::uint32_t k = 0; k < nsrc; ++k) tile_srcs[k] = srcs[k] + lo;
    std::uint32_t nd = 0;
    for (std::uint32_t k = 0; k < ndst; ++k)
      if (((streamed >> k) & 1u) == 0) tile_dsts[nd++] = dsts[k] + lo;
    T* stage = nd > 0 ? tile_dsts[0] : reinterpret_cast<T*>(stage_buffer);
    if (nd == 0) tile_dsts[nd++] = stage;
    element_loop<T, Op, Fin>(g, tile_dsts, nd, tile_srcs, nsrc, m, nactive);
    for (std::uint32_t k = 0; k < ndst; ++k)
      if ((streamed >> k) & 1u) stream_copy(dsts[k] + lo, stage, m * sizeof(T));
  }
}

}  // namespace detail

// The absolute message number a port's message has in this call.
template <class T, class C>
CCOLL_HD inline std::uint64_t message_number(const ProgramContext<T, C>& ctx, const plan::Port& p) {
  return ctx.base[p.connection] + p.seq;
}

// Non-blocking: are all of step s's messages there and all its send slots free? (leader only)
template <class T, class C>
CCOLL_HD bool step_ready(const ProgramContext<T, C>& ctx, const plan::Step& s) {
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    const plan::Port& p = ctx.ports[s.recv_begin + k];
    if (!ctx.connections[p.connection].can_recv(message_number(ctx, p))) return false;
  }
  for (std::uint32_t k = 0; k < s.send_count; ++k) {
    const plan::Port& p = ctx.ports[s.send_begin + k];
    if (!ctx.connections[p.connection].can_send(message_number(ctx, p))) return false;
  }
  return true;
}

// The first port step s is still blocked on, for error reports.
template <class T, class C>
CCOLL_HD StepFailure blocked_port(const ProgramContext<T, C>& ctx, std::uint32_t step_index,
                                  sync::WaitResult why) {
  const plan::Step& s = ctx.steps[step_index];
  StepFailure f;
  f.result = why;
  f.step = step_index;
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    const plan::Port& p = ctx.ports[s.recv_begin + k];
    const C& c = ctx.connections[p.connection];
    if (!c.can_recv(message_number(ctx, p))) {
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

// Executes step s, whose messages are known to be there (all members of g call it).
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD void execute_step(const Group& g, const ProgramContext<T, C>& ctx, const plan::Step& s) {
  const T* srcs[kMaxStepPorts + 1];
  T* dsts[kMaxStepPorts + 1];
  std::uint32_t nsrc = 0, ndst = 0;
  const T* local = s.src == plan::Source::Input    ? ctx.input + s.offset
                   : s.src == plan::Source::Output ? ctx.output + s.offset
                                                   : nullptr;
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    if (local != nullptr && k == s.src_position) srcs[nsrc++] = local;
    const plan::Port& p = ctx.ports[s.recv_begin + k];
    srcs[nsrc++] =
        reinterpret_cast<const T*>(ctx.connections[p.connection].slot(message_number(ctx, p)));
  }
  if (local != nullptr && s.src_position >= s.recv_count) srcs[nsrc++] = local;
  if (s.write_output) dsts[ndst++] = ctx.output + s.offset;
  for (std::uint32_t k = 0; k < s.send_count; ++k) {
    const plan::Port& p = ctx.ports[s.send_begin + k];
    dsts[ndst++] = reinterpret_cast<T*>(ctx.connections[p.connection].slot(message_number(ctx, p)));
  }
  if (nsrc > 0 && ndst > 0 && s.count > 0) {
    const bool fin = s.final && Op == ReduceOp::avg;
    bool done = false;
    if constexpr (Group::kSingleThread) {
      // Bit k: dsts[k] gets non-temporal stores (the output comes first when written).
      std::uint32_t streamed = 0;
      const std::uint32_t first_send = s.write_output ? 1u : 0u;
      if (ctx.stream_output && s.write_output) streamed |= 1u;
      if (ctx.stream_slots)
        for (std::uint32_t k = first_send; k < ndst; ++k) streamed |= 1u << k;
      if (streamed != 0) {
        if (fin)
          detail::element_loop_streaming<T, Op, true>(dsts, ndst, streamed, srcs, nsrc, s.count,
                                                      ctx.nactive);
        else
          detail::element_loop_streaming<T, Op, false>(dsts, ndst, streamed, srcs, nsrc, s.count,
                                                       ctx.nactive);
        detail::stream_fence();
        done = true;
      }
    }
    if (!done) {
      if (fin)
        detail::element_loop<T, Op, true>(g, dsts, ndst, srcs, nsrc, s.count, ctx.nactive);
      else
        detail::element_loop<T, Op, false>(g, dsts, ndst, srcs, nsrc, s.count, ctx.nactive);
    }
  }
  g.sync();  // every member's writes and reads of the slots are done
  if (g.leader()) {
    g.fence_before_post();
    for (std::uint32_t k = 0; k < s.recv_count; ++k) {
      const plan::Port& p = ctx.ports[s.recv_begin + k];
      ctx.connections[p.connection].post_received(message_number(ctx, p));
    }
    for (std::uint32_t k = 0; k < s.send_count; ++k) {
      const plan::Port& p = ctx.ports[s.send_begin + k];
      const C& c = ctx.connections[p.connection];
      // A message-passing connection moves only the bytes written; memory connections need not.
      if constexpr (requires { c.post_sent(std::uint64_t{}, std::uint64_t{}); })
        c.post_sent(message_number(ctx, p), s.count * sizeof(T));
      else
        c.post_sent(message_number(ctx, p));
    }
  }
}

// [C-Cube] Sec. IV-B's "check" form: executes step `pc` and advances it if the step is ready;
// returns whether it did. Never blocks.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool try_step(const Group& g, const ProgramContext<T, C>& ctx, std::uint32_t& pc) {
  if (pc >= ctx.nsteps) return false;
  const plan::Step& s = ctx.steps[pc];
  const bool ready = g.any(g.leader() ? step_ready(ctx, s) : false);
  if (!ready) return false;
  execute_step<T, Op>(g, ctx, s);
  ++pc;
  return true;
}

// [C-Cube] Sec. IV-B's "wait" form: runs the whole program, waiting for each step. Returns true
// when it completed; otherwise *failure says which step and peer it gave up on.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool run_program(const Group& g, const ProgramContext<T, C>& ctx,
                          std::uint64_t deadline_ns, StepFailure* failure) {
  for (std::uint32_t pc = 0; pc < ctx.nsteps; ++pc) {
    const plan::Step& s = ctx.steps[pc];
    sync::WaitResult r = sync::WaitResult::Ok;
    if (g.leader()) {
      for (std::uint32_t k = 0; k < s.recv_count && r == sync::WaitResult::Ok; ++k) {
        const plan::Port& p = ctx.ports[s.recv_begin + k];
        r = ctx.connections[p.connection].wait_recv(message_number(ctx, p), ctx.abort, deadline_ns);
      }
      for (std::uint32_t k = 0; k < s.send_count && r == sync::WaitResult::Ok; ++k) {
        const plan::Port& p = ctx.ports[s.send_begin + k];
        r = ctx.connections[p.connection].wait_send(message_number(ctx, p), ctx.abort, deadline_ns);
      }
      if (r != sync::WaitResult::Ok && failure != nullptr) *failure = blocked_port(ctx, pc, r);
    }
    if (g.any(r != sync::WaitResult::Ok)) return false;
    execute_step<T, Op>(g, ctx, s);
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
