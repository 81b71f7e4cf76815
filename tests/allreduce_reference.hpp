// Reference results for allreduce tests: per-rank input values chosen so that every dtype and op
// has an exact result (small integers; products of 2s and 3s), and a check of every dtype x op x
// in-place x count against the reference, bitwise. Used by the process transports' tests.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"

namespace ccoll::testing {

// The object representation of a T, for bitwise comparison.
template <class T>
using Bytes = std::array<unsigned char, sizeof(T)>;

template <class T>
T value(ReduceOp op, int rank, int p, std::uint64_t i) {
  int v;
  if (op == ReduceOp::prod) {
    const auto up = static_cast<std::uint64_t>(p), ur = static_cast<std::uint64_t>(rank);
    v = ur == i % up ? 2 : ur == (i + 1) % up ? 3 : 1;
  } else {
    v = static_cast<int>((static_cast<std::uint64_t>(rank) * 5 + i * 3) % 13) + 1;
  }
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Runs every dtype x op on `ar` for the given counts; returns "" or what was wrong. With a
// `window` (a registered window, the same on every rank), input and output live in it: the input
// at its start and the output in its second half.
template <class AR>
std::string check_all(AR& ar, const std::vector<std::uint64_t>& counts, bool every_dtype,
                      std::span<std::byte> window = {}) {
  const int p = ar.nranks(), rank = ar.rank();
  std::string wrong;
  for (DataType d : kAllDataTypes) {
    if (!every_dtype && d != DataType::f32 && d != DataType::bf16) continue;
    for (ReduceOp op : kAllReduceOps)
      for (bool in_place : {false, true})
        for (std::uint64_t n : counts) {
          dispatch_data_type(d, [&](auto t) {
            using T = decltype(t);
            dispatch_reduce_op(op, [&](auto o) {
              constexpr ReduceOp kOp = decltype(o)::value;
              std::vector<T> in_vec, out_vec;
              T* in = nullptr;
              T* out = nullptr;
              if (window.empty()) {
                in_vec.resize(n);
                out_vec.resize(n);
                in = in_vec.data();
                out = out_vec.data();
              } else {
                if (n * sizeof(T) > window.size() / 2) {
                  wrong = "n=" + std::to_string(n) + " does not fit the window";
                  return;
                }
                in = reinterpret_cast<T*>(window.data());
                out = reinterpret_cast<T*>(window.data() + window.size() / 2);
              }
              for (std::uint64_t i = 0; i < n; ++i) in[i] = value<T>(op, rank, p, i);
              if (in_place) std::copy(in, in + n, out);
              ar.run(in_place ? out : in, out, n, d, op);
              for (std::uint64_t i = 0; i < n && wrong.empty(); ++i) {
                T ref = value<T>(op, 0, p, i);
                for (int r = 1; r < p; ++r) ref = combine<kOp>(ref, value<T>(op, r, p, i));
                ref = finalize<kOp>(ref, p);
                if (std::bit_cast<Bytes<T>>(ref) != std::bit_cast<Bytes<T>>(out[i]))
                  wrong = "rank " + std::to_string(rank) + " " + std::string(to_string(d)) + " " +
                          std::string(to_string(op)) + " n=" + std::to_string(n) + " element " +
                          std::to_string(i);
              }
            });
          });
        }
  }
  return wrong;
}

}  // namespace ccoll::testing
