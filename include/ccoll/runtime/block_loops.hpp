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

// Where a pass finds its operands' first whole packs. Fixed shapes (compile-time counts) hold the
// pointers themselves, indexed by unrolled constants, so they live in registers for the whole
// pass. Other shapes read each pointer from the step's operand table (runtime/step_operands.hpp:
// shared memory on a GPU) at every pack, since a run-time-indexed array would sit in local memory.
template <class P, std::uint32_t N>
struct PackPointers {
  P at[N];
  CCOLL_HD CCOLL_FORCEINLINE P operator[](std::uint32_t k) const { return at[k]; }
};

template <class T, class E>
struct PackTable {
  E* const* table;     // the step's operand pointers
  std::uint64_t head;  // elements before the first whole pack
  CCOLL_HD CCOLL_FORCEINLINE auto operator[](std::uint32_t k) const {
    using P = std::conditional_t<std::is_const_v<E>, const Pack<T>*, Pack<T>*>;
    return reinterpret_cast<P>(table[k] + head);
  }
};

// Packs p, p + stride, ..., p + (U - 1) * stride of every source folded into every destination;
// all loads of a source are issued before any of them is used. NS/ND > 0: compile-time counts.
template <class T, ReduceOp Op, bool Fin, class Acc, std::uint32_t NS, std::uint32_t ND,
          std::uint32_t U, class Dsts, class Srcs>
CCOLL_HD CCOLL_FORCEINLINE void fold_packs(const Dsts& dsts, std::uint32_t ndst, const Srcs& srcs,
                                           std::uint32_t nsrc, std::uint64_t p,
                                           std::uint32_t stride, int nactive) {
  constexpr std::uint32_t kE = Pack<T>::kElems;
  Pack<T> x[U];
  Acc acc[U][kE];
  {
    const Pack<T>* const s0 = srcs[0];
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t u = 0; u < U; ++u) x[u] = s0[p + u * stride];
  }
  CCOLL_PRAGMA_UNROLL
  for (std::uint32_t u = 0; u < U; ++u) {
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t e = 0; e < kE; ++e) acc[u][e] = static_cast<Acc>(x[u].v[e]);
  }
  const auto fold_source = [&](std::uint32_t k) {
    const Pack<T>* const sk = srcs[k];
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t u = 0; u < U; ++u) x[u] = sk[p + u * stride];
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t u = 0; u < U; ++u) {
      CCOLL_PRAGMA_UNROLL
      for (std::uint32_t e = 0; e < kE; ++e)
        acc[u][e] = combine<Op>(acc[u][e], static_cast<Acc>(x[u].v[e]));
    }
  };
  const auto store_destination = [&](std::uint32_t k) {
    Pack<T>* const dk = dsts[k];
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t u = 0; u < U; ++u) dk[p + u * stride] = x[u];
  };
  // Compile-time counts unroll completely, so that PackPointers' indices are constants.
  if constexpr (NS > 0) {
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t k = 1; k < NS; ++k) fold_source(k);
  } else {
    for (std::uint32_t k = 1; k < nsrc; ++k) fold_source(k);
  }
  CCOLL_PRAGMA_UNROLL
  for (std::uint32_t u = 0; u < U; ++u) {
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t e = 0; e < kE; ++e) {
      if constexpr (Fin) acc[u][e] = finalize<Op>(acc[u][e], nactive);
      x[u].v[e] = static_cast<T>(acc[u][e]);
    }
  }
  if constexpr (ND > 0) {
    CCOLL_PRAGMA_UNROLL
    for (std::uint32_t k = 0; k < ND; ++k) store_destination(k);
  } else {
    for (std::uint32_t k = 0; k < ndst; ++k) store_destination(k);
  }
}

// The pass over whole packs: member i takes packs i, i + stride, ..., kU of them at a time.
template <class T, ReduceOp Op, bool Fin, class Acc, std::uint32_t NS, std::uint32_t ND,
          class Group, class Dsts, class Srcs>
CCOLL_HD CCOLL_FORCEINLINE void pack_pass(const Group& g, const Dsts& dsts, std::uint32_t nd,
                                          const Srcs& srcs, std::uint32_t ns, std::uint64_t packs,
                                          int nactive) {
  const auto stride = static_cast<std::uint32_t>(g.stride());
  std::uint64_t p = g.first();
  constexpr std::uint32_t kU = kPackUnrollFor<T, Acc>;
  for (; p + (kU - 1) * stride < packs; p += kU * stride)
    fold_packs<T, Op, Fin, Acc, NS, ND, kU>(dsts, nd, srcs, ns, p, stride, nactive);
  for (; p < packs; p += stride)
    fold_packs<T, Op, Fin, Acc, NS, ND, 1>(dsts, nd, srcs, ns, p, stride, nactive);
}

// The scalar head [0, head) and tail [body, n) one element at a time, member i taking the i-th
// element of each, then every stride-th. One call on the GPU, after the packs: the edges are short,
// and inlined at each of their dozen sites they would spill the registers of the pack loops around
// them, as would values that the pack loops need kept across a call before them.
template <class T, ReduceOp Op, bool Fin, class Acc, std::uint32_t NS, std::uint32_t ND,
          class Group>
CCOLL_HD CCOLL_DEVICE_NOINLINE void fold_edges(const Group& g, T* const* dsts, std::uint32_t ndst,
                                               const T* const* srcs, std::uint32_t nsrc,
                                               std::uint64_t head, std::uint64_t body,
                                               std::uint64_t n, int nactive) {
  const std::uint32_t ns = NS > 0 ? NS : nsrc;
  const std::uint32_t nd = ND > 0 ? ND : ndst;
  const auto fold = [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo + g.first(); i < hi; i += g.stride()) {
      const T v = fold_element<T, Op, Fin, Acc>(srcs, ns, i, nactive);
      for (std::uint32_t k = 0; k < nd; ++k) dsts[k][i] = v;
    }
  };
  fold(0, head);
  fold(body, n);
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
  if (split.packs > 0) {
    if constexpr (NS > 0 && ND > 0) {
      PackPointers<const Pack<T>*, NS> psrcs;
      PackPointers<Pack<T>*, ND> pdsts;
      CCOLL_PRAGMA_UNROLL
      for (std::uint32_t k = 0; k < NS; ++k)
        psrcs.at[k] = reinterpret_cast<const Pack<T>*>(srcs[k] + split.head);
      CCOLL_PRAGMA_UNROLL
      for (std::uint32_t k = 0; k < ND; ++k)
        pdsts.at[k] = reinterpret_cast<Pack<T>*>(dsts[k] + split.head);
      pack_pass<T, Op, Fin, Acc, NS, ND>(g, pdsts, nd, psrcs, ns, split.packs, nactive);
    } else {
      pack_pass<T, Op, Fin, Acc, NS, ND>(g, PackTable<T, T>{dsts, split.head}, nd,
                                         PackTable<T, const T>{srcs, split.head}, ns, split.packs,
                                         nactive);
    }
  }
  const std::uint64_t body = split.head + split.packs * Pack<T>::kElems;
  if (split.head > 0 || body < n)
    fold_edges<T, Op, Fin, Acc, NS, ND>(g, dsts, nd, srcs, ns, split.head, body, n, nactive);
}

// The block path's dispatch: the shapes of ring, tree and double binary tree steps with
// compile-time operand counts (pointers in registers), the others with run-time ones. 16-bit
// floats fold three or more operands in float, as general_pass does, so results match the host.
template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD void block_element_loop(const Group& g, T* const* dsts, std::uint32_t ndst,
                                 const T* const* srcs, std::uint32_t nsrc, std::uint64_t n,
                                 int nactive) {
  using Wide = std::conditional_t<kWidensToFloat<T>, float, T>;  // 3 or more operands
  const std::uint32_t shape = nsrc * 16 + ndst;
  switch (shape) {
    case 1 * 16 + 1:                           // a copy: ring, tree and direct
      if (!Fin && dsts[0] == srcs[0]) return;  // an in-place local copy moves nothing
      block_pass<T, Op, Fin, T, 1, 1>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    case 1 * 16 + 2:  // ring's all-gather steps: output and the next rank
      block_pass<T, Op, Fin, T, 1, 2>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    case 1 * 16 + 3:  // a tree's broadcast to two children
      block_pass<T, Op, Fin, T, 1, 3>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    case 2 * 16 + 1:  // ring's reduce-scatter steps
      block_pass<T, Op, Fin, T, 2, 1>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    case 2 * 16 + 2:
      block_pass<T, Op, Fin, T, 2, 2>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    case 3 * 16 + 1:  // a tree's reduce from two children
      block_pass<T, Op, Fin, Wide, 3, 1>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    case 3 * 16 + 3:  // a tree's root: reduce, then broadcast
      block_pass<T, Op, Fin, Wide, 3, 3>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    default:
      break;
  }
  if constexpr (kWidensToFloat<T>) {
    if (nsrc >= 3) {
      block_pass<T, Op, Fin, float, 0, 0>(g, dsts, ndst, srcs, nsrc, n, nactive);
      return;
    }
  }
  block_pass<T, Op, Fin, T, 0, 0>(g, dsts, ndst, srcs, nsrc, n, nactive);
}

}  // namespace ccoll::runtime::detail
