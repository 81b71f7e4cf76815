// ccoll/core/op.hpp: reduction operators, shared by every executor (host and device).
//
// avg is sum followed by a division by the number of contributing ranks, applied once, by the rank
// that completes an element's reduction (the plan marks that step "final"), so that every rank then
// receives the same bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/platform.hpp"

namespace ccoll {

enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                             ReduceOp::max, ReduceOp::avg};

constexpr std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::avg:
      return "avg";
  }
  return "?";
}

inline std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  for (ReduceOp op : kAllReduceOps)
    if (to_string(op) == s) return op;
  return std::nullopt;
}

// Every dtype/op pair is supported today; the check exists so that the API has one place to refuse
// a pair (e.g. a future bitwise op on floats) with a clear error.
constexpr bool is_supported(DataType, ReduceOp) {
  return true;
}

// Combine two elements. 16-bit floats compute in float and round once per combine.
template <ReduceOp Op, class T>
CCOLL_HD inline T combine(T a, T b) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(combine<Op, float>(static_cast<float>(a), static_cast<float>(b)));
  } else if constexpr (std::is_integral_v<T> && (Op != ReduceOp::min && Op != ReduceOp::max)) {
    // Integers wrap, as NCCL's and MPI's do: signed overflow (and int, to which narrow types
    // promote) would be undefined behaviour, so the arithmetic runs in the unsigned type of at
    // least int's width, whose conversion back is modular.
    using Wide = std::make_unsigned_t<decltype(a + b)>;
    if constexpr (Op == ReduceOp::prod)
      return static_cast<T>(static_cast<Wide>(a) * static_cast<Wide>(b));
    else
      return static_cast<T>(static_cast<Wide>(a) + static_cast<Wide>(b));
  } else if constexpr (Op == ReduceOp::sum || Op == ReduceOp::avg) {
    return static_cast<T>(a + b);
  } else if constexpr (Op == ReduceOp::prod) {
    return static_cast<T>(a * b);
  } else if constexpr (Op == ReduceOp::min) {
    return b < a ? b : a;
  } else {
    return a < b ? b : a;
  }
}

// Post-processing of a fully reduced element (only avg does anything).
template <ReduceOp Op, class T>
CCOLL_HD inline T finalize(T v, int contributors) {
  if constexpr (Op != ReduceOp::avg) {
    (void)contributors;
    return v;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v) / static_cast<float>(contributors));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v / static_cast<T>(contributors));
  } else if constexpr (std::is_signed_v<T>) {
    // In a type that holds every rank count: a narrow divisor wraps (u8 at 256 ranks divides by 0).
    return static_cast<T>(static_cast<std::int64_t>(v) / contributors);
  } else {
    return static_cast<T>(static_cast<std::uint64_t>(v) / static_cast<std::uint64_t>(contributors));
  }
}

template <class F>
decltype(auto) dispatch_reduce_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum:
      return f(std::integral_constant<ReduceOp, ReduceOp::sum>{});
    case ReduceOp::prod:
      return f(std::integral_constant<ReduceOp, ReduceOp::prod>{});
    case ReduceOp::min:
      return f(std::integral_constant<ReduceOp, ReduceOp::min>{});
    case ReduceOp::max:
      return f(std::integral_constant<ReduceOp, ReduceOp::max>{});
    case ReduceOp::avg:
      return f(std::integral_constant<ReduceOp, ReduceOp::avg>{});
  }
  return f(std::integral_constant<ReduceOp, ReduceOp::sum>{});
}

}  // namespace ccoll
