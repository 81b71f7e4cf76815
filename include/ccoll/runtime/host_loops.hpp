// ccoll/runtime/host_loops.hpp: the element loops of one host thread, the hot path of every host
// benchmark.
//
// For the common steps (copy, one receive reduced into the input, one or two destinations) they
// are single passes over restrict pointers with a unit stride known at compile time on the host,
// which g++ and clang vectorise. Other shapes go through a tiled loop whose later passes hit the L1
// cache. Steps that fold three or more 16-bit floats accumulate in float and round once
// (element_fold.hpp), as the block path does.
#pragma once

#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/runtime/element_fold.hpp"

namespace ccoll::runtime::detail {

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

}  // namespace ccoll::runtime::detail
