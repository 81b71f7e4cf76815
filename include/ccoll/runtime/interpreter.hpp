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
// The element loops are the hot path of every host benchmark: for the common steps (copy, one
// receive reduced into the input, one or two destinations) they are single passes over restrict
// pointers with a unit stride known at compile time on the host, which g++ and clang vectorise.
// Other shapes go through a tiled loop whose later passes hit the L1 cache. Groups of several
// threads take the block path instead: 16-byte packs, several in flight per thread, every operand
// folded in one pass (detail::block_pass). Steps that fold three or more 16-bit floats accumulate
// in float and round once on every group, so the host and a GPU compute the same bits.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/runtime/connection.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/sync/counter.hpp"

#if !CCOLL_DEVICE_PASS && (defined(__x86_64__) || defined(__i386__))
#include <emmintrin.h>
#define CCOLL_HAVE_STREAMING_STORES 1
#else
#define CCOLL_HAVE_STREAMING_STORES 0
#endif

// Full unrolling of the block path's loops over packs, so that its register arrays stay registers.
#if defined(__CUDACC__) || defined(__clang__)
#define CCOLL_PRAGMA_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define CCOLL_PRAGMA_UNROLL _Pragma("GCC unroll 16")
#else
#define CCOLL_PRAGMA_UNROLL
#endif

namespace ccoll::runtime {

// The most receive (and send) ports one step may have; a step with more is rejected when the plan
// is loaded (check_step_shapes), so the interpreter needs no allocation.
inline constexpr std::uint32_t kMaxStepPorts = 15;

// One host thread.
struct HostGroup {
  static constexpr bool kSingleThread = true;
  // CCOLL_HD: nvcc compiles the host executors too when a CUDA translation unit includes them.
  CCOLL_HD static constexpr std::uint64_t first() { return 0; }
  CCOLL_HD static constexpr std::uint64_t stride() { return 1; }
  CCOLL_HD static constexpr bool leader() { return true; }
  CCOLL_HD static constexpr void sync() {}
  CCOLL_HD static constexpr bool any(bool leader_value) { return leader_value; }
  CCOLL_HD static constexpr void fence_before_post() {}
};

// Groups of several threads place each message at the chunk's offset modulo 16 bytes inside its
// slot, so that slot and user buffers (16-byte aligned at element 0) are mutually aligned and the
// pack path applies; executors that run such groups give every slot this many spare bytes.
inline constexpr std::uint64_t kBlockSlotSlack = 16;

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
  // Optional: a word in which the leader publishes, with a release store after each step and its
  // posts, progress_base + (steps of this program done in this call). Another thread, block or
  // stream reads it to start on output that is already final before the call ends ([C-Cube] Sec.
  // III-D's enqueue semaphore; runtime/layer_readiness.hpp). The base grows from call to call, so
  // an earlier call's value never satisfies a wait for a later one.
  std::uint64_t* progress = nullptr;
  std::uint64_t progress_base = 0;
  // The plan's messages are LowLatency lines (every connection has an LL region; see
  // protocol/low_latency.hpp); false: Simple slots and tail counters.
  bool low_latency = false;
  // LowLatency: the deadline (sync::now_ns(); 0 = none) of the polls of lines inside a step, which
  // a group of several threads makes without the leader's check.
  std::uint64_t deadline_ns = 0;
  // LowLatency: the call's signature (protocol::LowLatency::signature), which the trailer of every
  // message sent carries and that of every message received must match.
  std::uint64_t ll_signature = 0;
};

// Connections that can carry LowLatency messages (sync::BasicConnectionRef).
template <class C>
concept LowLatencyConnection = requires(const C& c, std::uint64_t m) {
  { c.ll_lines(m) } -> std::same_as<std::uint64_t*>;
  { c.has_low_latency() } -> std::same_as<bool>;
  { C::scope } -> std::convertible_to<sync::Scope>;
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

// 16-bit floats fold three or more operands in float and round once: a chain of per-combine
// roundings loses up to one unit in the last place per operand (2048 + 1 + 1 in f16 is 2048, not
// 2050), and one rounding is what both the host and the block paths can produce identically.
template <class T>
inline constexpr bool kWidensToFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// One element of a step: srcs folded left to right in Acc, finalised, rounded to T once.
template <class T, ReduceOp Op, bool Fin, class Acc>
CCOLL_HD CCOLL_FORCEINLINE T fold_element(const T* const* srcs, std::uint32_t nsrc, std::uint64_t i,
                                          int nactive) {
  Acc v = static_cast<Acc>(srcs[0][i]);
  for (std::uint32_t k = 1; k < nsrc; ++k) v = combine<Op>(v, static_cast<Acc>(srcs[k][i]));
  if constexpr (Fin) v = finalize<Op>(v, nactive);
  return static_cast<T>(v);
}

// Any number of sources and destinations, in tiles so that the passes after the first hit L1.
// Every member of the group handles the same elements in every pass, so no barrier is needed.
template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD void general_pass(const Group& g, T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                           std::uint32_t nsrc, std::uint64_t n, int nactive) {
  if constexpr (kWidensToFloat<T>) {
    if (nsrc >= 3) {
      // One pass reads every operand of an element before writing it, so the aliasing below
      // cannot arise.
      for (std::uint64_t i = g.first(); i < n; i += g.stride()) {
        const T v = fold_element<T, Op, Fin, float>(srcs, nsrc, i, nactive);
        for (std::uint32_t k = 0; k < ndst; ++k) dsts[k][i] = v;
      }
      return;
    }
  }
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

// ---- The block data path (groups of several threads) ----
//
// A GPU thread moving one element per load issues 4x (f32) to 16x (u8) more memory instructions
// than the 128-bit accesses the hardware serves in one go, and with a single load in flight per
// thread it cannot cover the latency of global memory. So members move 16-byte packs, kPackUnroll
// independent ones at a time, and fold every operand of a pack before writing it: one pass, in
// which member i handles packs i, i + stride, ... and no member reads what another wrote (so no
// barrier, and the in-place aliasing of general_pass cannot arise). The host model of a thread
// block in the tests runs the same code.

// 16 bytes of elements, loaded and stored as a whole.
template <class T>
struct alignas(16) Pack {
  static constexpr std::uint32_t kElems = 16 / sizeof(T);
  T v[kElems];
};
static_assert(sizeof(Pack<std::uint8_t>) == 16 && sizeof(Pack<double>) == 16);

// Packs in flight per member. The GPU kernels run within 64 registers per thread (their launch
// bounds, transport/cuda/launch_fit.hpp: two blocks of 512 threads per SM), and what the step loop
// keeps live around the element loop leaves it about 20 of them: two packs with their
// accumulators where an accumulator takes one 32-bit register per four bytes of pack (f32, f64,
// i32, i64), one where every element takes a register of its own (f16, bf16, u8). More spills
// registers to local memory (`nvcc -Xptxas -v`, scripts/kernel_resources).
inline constexpr std::uint32_t kPackUnroll = 2;
template <class T, class Acc>
inline constexpr std::uint32_t kPackUnrollFor = [] {
  constexpr std::uint32_t acc_regs = Pack<T>::kElems * ((sizeof(Acc) + 3) / 4);
  constexpr std::uint32_t u = 20 / (acc_regs + 4);
  return u < 1 ? 1 : u > kPackUnroll ? kPackUnroll : u;
}();

// How a step's n elements split into a scalar head (up to the first 16-byte boundary), whole
// packs, and a scalar tail. The pack path needs every pointer of the step at the same offset from
// a 16-byte boundary; when they differ, everything is head.
struct PackSplit {
  std::uint64_t head = 0;
  std::uint64_t packs = 0;
  std::uint64_t tail = 0;
};

template <class T>
CCOLL_HD inline PackSplit pack_split(T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                                     std::uint32_t nsrc, std::uint64_t n) {
  constexpr std::uintptr_t kMask = 15;
  const std::uintptr_t mis = reinterpret_cast<std::uintptr_t>(srcs[0]) & kMask;
  bool together = mis % sizeof(T) == 0;
  for (std::uint32_t k = 1; k < nsrc; ++k)
    together = together && (reinterpret_cast<std::uintptr_t>(srcs[k]) & kMask) == mis;
  for (std::uint32_t k = 0; k < ndst; ++k)
    together = together && (reinterpret_cast<std::uintptr_t>(dsts[k]) & kMask) == mis;
  PackSplit split;
  if (!together) {
    split.head = n;
    return split;
  }
  const std::uint64_t to_boundary = ((16 - mis) & kMask) / sizeof(T);
  split.head = to_boundary < n ? to_boundary : n;
  split.packs = (n - split.head) / Pack<T>::kElems;
  split.tail = n - split.head - split.packs * Pack<T>::kElems;
  return split;
}

// Packs p, p + stride, ..., p + (U - 1) * stride of every source folded into every destination;
// all loads of a source are issued before any of them is used. NS/ND > 0: compile-time counts.
template <class T, ReduceOp Op, bool Fin, class Acc, std::uint32_t NS, std::uint32_t ND,
          std::uint32_t U>
CCOLL_HD CCOLL_FORCEINLINE void fold_packs(T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                                           std::uint32_t nsrc, std::uint64_t p,
                                           std::uint64_t stride, int nactive) {
  constexpr std::uint32_t kE = Pack<T>::kElems;
  const std::uint32_t ns = NS > 0 ? NS : nsrc;
  const std::uint32_t nd = ND > 0 ? ND : ndst;
  Pack<T> x[U];
  Acc acc[U][kE];
  const auto* s0 = reinterpret_cast<const Pack<T>*>(srcs[0]);
  CCOLL_PRAGMA_UNROLL
  for (std::uint32_t u = 0; u < U; ++u) x[u] = s0[p + u * stride];
  CCOLL_PRAGMA_UNROLL
  for (std::uint32_t u = 0; u < U; ++u) {
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t e = 0; e < kE; ++e) acc[u][e] = static_cast<Acc>(x[u].v[e]);
  }
  for (std::uint32_t k = 1; k < ns; ++k) {
    const auto* sk = reinterpret_cast<const Pack<T>*>(srcs[k]);
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t u = 0; u < U; ++u) x[u] = sk[p + u * stride];
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t u = 0; u < U; ++u) {
      CCOLL_PRAGMA_UNROLL
      for (std::uint32_t e = 0; e < kE; ++e)
        acc[u][e] = combine<Op>(acc[u][e], static_cast<Acc>(x[u].v[e]));
    }
  }
  CCOLL_PRAGMA_UNROLL
  for (std::uint32_t u = 0; u < U; ++u) {
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t e = 0; e < kE; ++e) {
      if constexpr (Fin) acc[u][e] = finalize<Op>(acc[u][e], nactive);
      x[u].v[e] = static_cast<T>(acc[u][e]);
    }
  }
  for (std::uint32_t k = 0; k < nd; ++k) {
    auto* dk = reinterpret_cast<Pack<T>*>(dsts[k]);
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t u = 0; u < U; ++u) dk[p + u * stride] = x[u];
  }
}

// Elements [lo, hi) one at a time, member i taking lo + i, lo + i + stride, ... A call on the GPU:
// the scalar head and tail are short, and inlined at each of their dozen sites they would spill
// the registers of the pack loops around them.
template <class T, ReduceOp Op, bool Fin, class Acc, std::uint32_t NS, std::uint32_t ND,
          class Group>
CCOLL_HD CCOLL_DEVICE_NOINLINE void fold_scalars(const Group& g, T* const* dsts, std::uint32_t ndst,
                                                 const T* const* srcs, std::uint32_t nsrc,
                                                 std::uint64_t lo, std::uint64_t hi, int nactive) {
  const std::uint32_t ns = NS > 0 ? NS : nsrc;
  const std::uint32_t nd = ND > 0 ? ND : ndst;
  for (std::uint64_t i = lo + g.first(); i < hi; i += g.stride()) {
    const T v = fold_element<T, Op, Fin, Acc>(srcs, ns, i, nactive);
    for (std::uint32_t k = 0; k < nd; ++k) dsts[k][i] = v;
  }
}

template <class T, ReduceOp Op, bool Fin, class Acc, std::uint32_t NS, std::uint32_t ND,
          class Group>
CCOLL_HD void block_pass(const Group& g, T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                         std::uint32_t nsrc, std::uint64_t n, int nactive) {
  const std::uint32_t ns = NS > 0 ? NS : nsrc;
  const std::uint32_t nd = ND > 0 ? ND : ndst;
  const PackSplit split = pack_split(dsts, nd, srcs, ns, n);
  // A group may watch the split (the host model of a block in the tests checks that packs ran).
  if constexpr (requires { g.on_pack_split(split); }) g.on_pack_split(split);
  fold_scalars<T, Op, Fin, Acc, NS, ND>(g, dsts, nd, srcs, ns, 0, split.head, nactive);
  if (split.packs > 0) {
    // Pointers to the first whole pack (at most kMaxStepPorts + 1 of each).
    const T* psrcs[kMaxStepPorts + 1];
    T* pdsts[kMaxStepPorts + 1];
    for (std::uint32_t k = 0; k < ns; ++k) psrcs[k] = srcs[k] + split.head;
    for (std::uint32_t k = 0; k < nd; ++k) pdsts[k] = dsts[k] + split.head;
    const std::uint64_t stride = g.stride();
    std::uint64_t p = g.first();
    constexpr std::uint32_t kU = kPackUnrollFor<T, Acc>;
    for (; p + (kU - 1) * stride < split.packs; p += kU * stride)
      fold_packs<T, Op, Fin, Acc, NS, ND, kU>(pdsts, nd, psrcs, ns, p, stride, nactive);
    for (; p < split.packs; p += stride)
      fold_packs<T, Op, Fin, Acc, NS, ND, 1>(pdsts, nd, psrcs, ns, p, stride, nactive);
  }
  const std::uint64_t body = split.head + split.packs * Pack<T>::kElems;
  fold_scalars<T, Op, Fin, Acc, NS, ND>(g, dsts, nd, srcs, ns, body, n, nactive);
}

// The block path's dispatch: the common shapes with compile-time operand counts, the others with
// run-time ones (and float accumulation where general_pass uses it, so results match the host).
template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD void block_element_loop(const Group& g, T* const* dsts, std::uint32_t ndst,
                                 const T* const* srcs, std::uint32_t nsrc, std::uint64_t n,
                                 int nactive) {
  if (nsrc == 1 && ndst == 1) {
    if (!Fin && dsts[0] == srcs[0]) return;  // an in-place local copy moves nothing
    block_pass<T, Op, Fin, T, 1, 1>(g, dsts, ndst, srcs, nsrc, n, nactive);
  } else if (nsrc == 1 && ndst == 2) {
    block_pass<T, Op, Fin, T, 1, 2>(g, dsts, ndst, srcs, nsrc, n, nactive);
  } else if (nsrc == 2 && ndst == 1) {
    block_pass<T, Op, Fin, T, 2, 1>(g, dsts, ndst, srcs, nsrc, n, nactive);
  } else if (nsrc == 2 && ndst == 2) {
    block_pass<T, Op, Fin, T, 2, 2>(g, dsts, ndst, srcs, nsrc, n, nactive);
  } else {
    if constexpr (kWidensToFloat<T>) {
      if (nsrc >= 3) {
        block_pass<T, Op, Fin, float, 0, 0>(g, dsts, ndst, srcs, nsrc, n, nactive);
        return;
      }
    }
    block_pass<T, Op, Fin, T, 0, 0>(g, dsts, ndst, srcs, nsrc, n, nactive);
  }
}

template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD void element_loop(const Group& g, T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                           std::uint32_t nsrc, std::uint64_t n, int nactive) {
  if constexpr (!Group::kSingleThread) {
    block_element_loop<T, Op, Fin>(g, dsts, ndst, srcs, nsrc, n, nactive);
  } else if (nsrc == 1 && ndst == 1) {
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

// How a group writes and reads LowLatency messages (protocol/low_latency.hpp): one thread orders
// its whole message by the release of the trailer, so it packs the payload (no flag per line);
// several threads write lines in parallel, each line carrying its own flag. Every rank of a
// communicator runs the same group, so the two ends of a connection agree.
template <class Group>
inline constexpr bool kPackedLowLatency = Group::kSingleThread;

// Has message m of `count` elements arrived? LowLatency: its trailer carries its flag and this
// call's signature (acquire: a single-thread sender stores the trailer last, with release, so the
// rest of the message is there too).
template <class Group, class T, class C>
CCOLL_HD bool message_arrived(const ProgramContext<T, C>& ctx, const C& c, std::uint64_t m,
                              std::uint64_t count) {
  if constexpr (LowLatencyConnection<C>) {
    if (ctx.low_latency) {
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
    if (!message_arrived<Group>(ctx, c, message_number(ctx, p), s.count)) {
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
// come before the deadline or an abort.
template <class T, ReduceOp Op, bool Fin, class Acc, class Group, class C>
CCOLL_HD bool ll_pass(const Group& g, const ProgramContext<T, C>& ctx, const plan::Step& s,
                      const T* local) {
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
                                                        false, ctx.abort, ctx.deadline_ns);
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
// for a line.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool execute_step_ll(const Group& g, const ProgramContext<T, C>& ctx,
                              const plan::Step& s) {
  static_assert(!kPackedLowLatency<Group>,
                "one-thread groups pack their LowLatency messages (execute_step)");
  const T* local = s.src == plan::Source::Input    ? ctx.input + s.offset
                   : s.src == plan::Source::Output ? ctx.output + s.offset
                                                   : nullptr;
  const std::uint32_t nsrc = s.recv_count + (local != nullptr ? 1u : 0u);
  const bool fin = s.final && Op == ReduceOp::avg;
  bool ok = true;
  if (detail::kWidensToFloat<T> && nsrc >= 3) {
    ok = fin ? detail::ll_pass<T, Op, true, float>(g, ctx, s, local)
             : detail::ll_pass<T, Op, false, float>(g, ctx, s, local);
  } else {
    ok = fin ? detail::ll_pass<T, Op, true, T>(g, ctx, s, local)
             : detail::ll_pass<T, Op, false, T>(g, ctx, s, local);
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
        (ctx.deadline_ns != 0 && sync::now_ns() >= ctx.deadline_ns);
  if (g.any(failed)) return false;
  if (g.leader()) {
    g.fence_before_post();
    for (std::uint32_t k = 0; k < s.recv_count; ++k) {
      const plan::Port& p = ctx.ports[s.recv_begin + k];
      ctx.connections[p.connection].post_received(message_number(ctx, p));
    }
  }
  return true;
}

// Executes step s, whose messages are known to be there (all members of g call it). Returns false
// only for a LowLatency step that gave up waiting for a line (deadline or abort).
//
// Simple and packed LowLatency messages (kPackedLowLatency) are both contiguous payload, read and
// written in place; they differ in where the payload lies (the slot, or the LL slot after the
// trailer) and in how the leader announces a message (the tail counter, or the trailer).
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool execute_step(const Group& g, const ProgramContext<T, C>& ctx, const plan::Step& s) {
  bool packed = false;
  if constexpr (LowLatencyConnection<C>) {
    if (ctx.low_latency) {
      if constexpr (!kPackedLowLatency<Group>) return execute_step_ll<T, Op>(g, ctx, s);
      packed = true;
    }
  }
  const auto payload = [&](const plan::Port& p) -> std::byte* {
    const C& c = ctx.connections[p.connection];
    const std::uint64_t m = message_number(ctx, p);
    if constexpr (LowLatencyConnection<C>) {
      if (packed)
        return reinterpret_cast<std::byte*>(c.ll_lines(m)) +
               protocol::LowLatency::kPackedPayloadOffset;
    }
    return c.slot(m);
  };
  const T* srcs[kMaxStepPorts + 1];
  T* dsts[kMaxStepPorts + 1];
  std::uint32_t nsrc = 0, ndst = 0;
  const T* local = s.src == plan::Source::Input    ? ctx.input + s.offset
                   : s.src == plan::Source::Output ? ctx.output + s.offset
                                                   : nullptr;
  // Both ends of a message have the same chunk offset (plan::verify checks it), so they agree on
  // the shift (kBlockSlotSlack).
  std::uint64_t shift = 0;
  if constexpr (!Group::kSingleThread) shift = (s.offset * sizeof(T)) & (kBlockSlotSlack - 1);
  for (std::uint32_t k = 0; k < s.recv_count; ++k) {
    if (local != nullptr && k == s.src_position) srcs[nsrc++] = local;
    srcs[nsrc++] = reinterpret_cast<const T*>(payload(ctx.ports[s.recv_begin + k]) + shift);
  }
  if (local != nullptr && s.src_position >= s.recv_count) srcs[nsrc++] = local;
  if (s.write_output) dsts[ndst++] = ctx.output + s.offset;
  for (std::uint32_t k = 0; k < s.send_count; ++k)
    dsts[ndst++] = reinterpret_cast<T*>(payload(ctx.ports[s.send_begin + k]) + shift);
  if (nsrc > 0 && ndst > 0 && s.count > 0) {
    const bool fin = s.final && Op == ReduceOp::avg;
    bool done = false;
#if !CCOLL_DEVICE_PASS  // non-temporal stores are a host feature (HostGroup only)
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
#endif
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
      // A message-passing connection moves only the bytes written; memory connections need not.
      if constexpr (requires { c.post_sent(std::uint64_t{}, std::uint64_t{}); })
        c.post_sent(m, s.count * sizeof(T));
      else
        c.post_sent(m);
    }
  }
  return true;
}

// After execute_step: `done` steps of the program are complete. The leader's release store
// follows the step's barrier and its own posts, so a reader that acquires the value also sees the
// output the step wrote. Its scope is the connections': readers of a program's progress run where
// its peers do (a consumer kernel on the same GPU for virtual ranks, so a GPU-wide release);
// system scope for connections that do not say.
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
  if (ctx.progress != nullptr && g.leader())
    sync::BasicCounter<kProgressScope<C>>(ctx.progress).post_value(ctx.progress_base + done);
}

// [C-Cube] Sec. IV-B's "check" form: executes step `pc` and advances it if the step is ready;
// returns whether it did. Never blocks.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool try_step(const Group& g, const ProgramContext<T, C>& ctx, std::uint32_t& pc) {
  if (pc >= ctx.nsteps) return false;
  const plan::Step& s = ctx.steps[pc];
  const bool ready = g.any(g.leader() ? step_ready<Group>(ctx, s) : false);
  if (!ready) return false;
  // A LowLatency step fails only at the deadline or on an abort, which the caller then reports.
  if (!execute_step<T, Op>(g, ctx, s)) return false;
  ++pc;
  publish_progress(g, ctx, pc);
  return true;
}

// [C-Cube] Sec. IV-B's "wait" form: runs the whole program, waiting for each step. Returns true
// when it completed; otherwise *failure says which step and peer it gave up on.
template <class T, ReduceOp Op, class Group, class C>
CCOLL_HD bool run_program(const Group& g, const ProgramContext<T, C>& context,
                          std::uint64_t deadline_ns, StepFailure* failure) {
  ProgramContext<T, C> ctx = context;  // the polls inside LowLatency steps share the deadline
  if (ctx.deadline_ns == 0) ctx.deadline_ns = deadline_ns;
  for (std::uint32_t pc = 0; pc < ctx.nsteps; ++pc) {
    const plan::Step& s = ctx.steps[pc];
    sync::WaitResult r = sync::WaitResult::Ok;
    if (g.leader()) {
      for (std::uint32_t k = 0; k < s.recv_count && r == sync::WaitResult::Ok; ++k) {
        const plan::Port& p = ctx.ports[s.recv_begin + k];
        const C& c = ctx.connections[p.connection];
        const std::uint64_t m = message_number(ctx, p);
        bool polled = false;
        if constexpr (LowLatencyConnection<C>) {
          if (ctx.low_latency) {
            using LL = protocol::LowLatency;
            r = LL::wait_arrival<C::scope>(
                LL::trailer(c.ll_lines(m), kPackedLowLatency<Group>, s.count * sizeof(T)),
                ctx.ll_signature, LL::flag(m), ctx.abort, deadline_ns);
            polled = true;
          }
        }
        if (!polled) r = c.wait_recv(m, ctx.abort, deadline_ns);
      }
      for (std::uint32_t k = 0; k < s.send_count && r == sync::WaitResult::Ok; ++k) {
        const plan::Port& p = ctx.ports[s.send_begin + k];
        r = ctx.connections[p.connection].wait_send(message_number(ctx, p), ctx.abort, deadline_ns);
      }
      if (r != sync::WaitResult::Ok && failure != nullptr)
        *failure = blocked_port<Group>(ctx, pc, r);
    }
    if (g.any(r != sync::WaitResult::Ok)) return false;
    if (!execute_step<T, Op>(g, ctx, s)) {
      if (failure != nullptr && g.leader()) {
        const bool aborted =
            ctx.abort != nullptr &&
            sync::AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(ctx.abort)).load_relaxed() !=
                0;
        *failure = blocked_port<Group>(
            ctx, pc, aborted ? sync::WaitResult::Aborted : sync::WaitResult::Timeout);
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
