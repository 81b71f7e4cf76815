// ccoll/runtime/element_fold.hpp: how every data path of the interpreter folds one element, so
// that the host loops, the block path and LowLatency lines compute the same bits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"

namespace ccoll::runtime::detail {

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

}  // namespace ccoll::runtime::detail
