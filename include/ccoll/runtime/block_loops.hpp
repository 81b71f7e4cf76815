// ccoll/runtime/block_loops.hpp: the element loops of a group of several threads (a CUDA thread
// block, or its host model in the tests): 16-byte packs, several in flight per thread, every
// operand folded in one pass.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/runtime/element_fold.hpp"
#include "ccoll/runtime/program_context.hpp"

// Full unrolling of the block path's loops over packs, so that its register arrays stay registers.
#if defined(__CUDACC__) || defined(__clang__)
#define CCOLL_PRAGMA_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define CCOLL_PRAGMA_UNROLL _Pragma("GCC unroll 16")
#else
#define CCOLL_PRAGMA_UNROLL
#endif

namespace ccoll::runtime::detail {

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

}  // namespace ccoll::runtime::detail
