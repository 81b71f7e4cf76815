// ccoll_perf/perf_data.hpp: the inputs ccoll_perf feeds every rank and the check of the outputs.
//
// The inputs are small integers (or +-1 and 2 for prod), so that the reduction is exact in every
// data type whatever order an algorithm combines them in; then a result either matches the
// reference bit for bit or is wrong (#wrong counts the elements). The reference is computed with
// the library's own combine<Op>/finalize<Op> in rank order. Only avg gets a tolerance of a few
// ulps: an executor may divide by P or multiply by 1/P, and 16-bit types round the quotient once
// more.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"

namespace ccoll_perf {

template <class T>
inline T from_integer(std::int64_t v) {
  if constexpr (std::is_same_v<T, ccoll::Half> || std::is_same_v<T, ccoll::BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);  // integer -> narrower unsigned wraps, which is defined
  }
}

template <class T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, ccoll::Half> || std::is_same_v<T, ccoll::BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// The input value of element i on rank r. prod gets +-1 and an occasional 2 so that products stay
// exact for up to 30 ranks; the others get -5..5 (sums stay exact in bf16 for up to 25 ranks and in
// half for up to 400). Each run of 11 ranks steps through the values with its own stride, so no two
// of the first 110 ranks have the same inputs: an all-gather or broadcast that delivered another
// rank's block would be counted wrong.
inline std::int64_t input_integer(ccoll::ReduceOp op, int rank, std::uint64_t i) {
  const auto r = static_cast<std::uint64_t>(rank);
  const std::uint64_t stride = 1 + (6 + r / 11) % 10;  // 7 for ranks 0..10; never 0 mod 11
  const std::uint64_t h = i * stride + r * 13;
  if (op == ccoll::ReduceOp::prod) {
    if (h % 5 == 0 && (i + static_cast<std::uint64_t>(rank)) % 3 == 0) return 2;
    return (h % 3 == 0) ? -1 : 1;
  }
  return static_cast<std::int64_t>(h % 11) - 5;
}

template <class T>
void fill_input(T* data, std::uint64_t count, ccoll::ReduceOp op, int rank) {
  for (std::uint64_t i = 0; i < count; ++i) data[i] = from_integer<T>(input_integer(op, rank, i));
}

// Fills `expected` with the allreduce of fill_input over the ranks in `contributors` (the active
// ranks of a plan: relays contribute nothing), in their order.
template <class T, ccoll::ReduceOp Op>
void fill_expected(T* expected, std::uint64_t count, const std::vector<int>& contributors) {
  const int n = static_cast<int>(contributors.size());
  for (std::uint64_t i = 0; i < count; ++i) {
    T v = from_integer<T>(input_integer(Op, contributors.front(), i));
    for (int k = 1; k < n; ++k)
      v = ccoll::combine<Op>(
          v, from_integer<T>(input_integer(Op, contributors[static_cast<std::size_t>(k)], i)));
    expected[i] = ccoll::finalize<Op>(v, n);
  }
}

// Relative tolerance for the comparison: zero where the result must be exact.
template <class T>
double check_tolerance(ccoll::ReduceOp op) {
  if (op != ccoll::ReduceOp::avg) return 0.0;
  if constexpr (std::is_same_v<T, ccoll::Half>) return 2e-3;
  if constexpr (std::is_same_v<T, ccoll::BFloat16>) return 1.6e-2;
  if constexpr (std::is_same_v<T, float>) return 1e-6;
  if constexpr (std::is_same_v<T, double>) return 1e-14;
  return 0.0;
}

template <class T>
long count_wrong(const T* got, const T* expected, std::uint64_t count, ccoll::ReduceOp op) {
  const double tol = check_tolerance<T>(op);
  long wrong = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const double g = to_double(got[i]);
    const double e = to_double(expected[i]);
    if (tol == 0.0) {
      wrong += (g == e) ? 0 : 1;
    } else {
      wrong += (std::fabs(g - e) <= tol * std::fmax(1.0, std::fabs(e))) ? 0 : 1;
    }
  }
  return wrong;
}

// Elements of `got` that differ from the input that element i came from: input element
// source(i).second of rank source(i).first (all-gather's blocks, broadcast's root). Exact: data
// that is only moved keeps its bits.
template <class T, class Source>
long count_wrong_moved(const T* got, std::uint64_t count, ccoll::ReduceOp op, Source&& source) {
  long wrong = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto [rank, index] = source(i);
    wrong +=
        to_double(got[i]) == to_double(from_integer<T>(input_integer(op, rank, index))) ? 0 : 1;
  }
  return wrong;
}

// Type-erased entry points (one dtype/op switch each).
inline void fill_input(void* data, std::uint64_t count, ccoll::DataType d, ccoll::ReduceOp op,
                       int rank) {
  ccoll::dispatch_data_type(d, [&](auto t) {
    using T = decltype(t);
    fill_input(static_cast<T*>(data), count, op, rank);
  });
}

inline void fill_expected(void* expected, std::uint64_t count, ccoll::DataType d,
                          ccoll::ReduceOp op, const std::vector<int>& contributors) {
  ccoll::dispatch_data_type(d, [&](auto t) {
    using T = decltype(t);
    ccoll::dispatch_reduce_op(op, [&](auto o) {
      fill_expected<T, decltype(o)::value>(static_cast<T*>(expected), count, contributors);
    });
  });
}

inline void fill_expected(void* expected, std::uint64_t count, ccoll::DataType d,
                          ccoll::ReduceOp op, int nranks) {
  std::vector<int> all(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) all[static_cast<std::size_t>(r)] = r;
  fill_expected(expected, count, d, op, all);
}

template <class Source>
long count_wrong_moved(const void* got, std::uint64_t count, ccoll::DataType d, ccoll::ReduceOp op,
                       Source&& source) {
  return ccoll::dispatch_data_type(d, [&](auto t) {
    using T = decltype(t);
    return count_wrong_moved(static_cast<const T*>(got), count, op, source);
  });
}

inline long count_wrong(const void* got, const void* expected, std::uint64_t count,
                        ccoll::DataType d, ccoll::ReduceOp op) {
  return ccoll::dispatch_data_type(d, [&](auto t) {
    using T = decltype(t);
    return count_wrong(static_cast<const T*>(got), static_cast<const T*>(expected), count, op);
  });
}

}  // namespace ccoll_perf
