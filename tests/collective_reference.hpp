// Reference results for the collectives beside allreduce (ccoll/collective.hpp), shared by the
// tests of every transport: one rank's buffers for one call (NCCL's arguments, in place or not,
// with guard elements around every buffer the call may write), the call, and a bitwise check of
// what the rank must hold afterwards (plan/collective.hpp's semantics). Inputs are small integers
// (allreduce_reference.hpp's values), so every order of reduction gives the same bits.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "allreduce_reference.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"
#include "sweep.hpp"

namespace ccoll::testing {

// Elements around each buffer a call may write that it must leave as they were.
inline constexpr std::uint64_t kGuard = 5;

template <class T>
T guard_value() {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(-77.0f);
  else
    return static_cast<T>(97);
}

// One call of collective `c` on `rank` of `p` (every rank active): `count` as the collective
// counts it (reduce-scatter: recvcount; all-gather: sendcount). `call(send, recv)` makes the call
// with the buffers this function prepared (a non-root's unused buffer: nullptr in place, a buffer
// that must stay untouched otherwise). Returns "" or
// what was wrong on this rank. With an `arena` (a registered window, say) the buffers lie in it,
// at the same offsets on every rank: the buffer the call uses first at 0 (the output, the one
// buffer in place, a reduce leaf's input in place), the other on the next 64-byte boundary.
template <class T, ReduceOp Op>
std::string check_collective_call(plan::Collective c, int p, int rank, std::uint64_t count,
                                  bool in_place, int root,
                                  const std::function<void(const void*, void*)>& call,
                                  std::span<std::byte> arena = {}) {
  const auto up = static_cast<std::uint64_t>(p);
  const auto ur = static_cast<std::uint64_t>(rank);
  const bool is_root = rank == root;
  auto reduced = [&](std::uint64_t i) {
    T acc = value<T>(Op, 0, p, i);
    for (int r = 1; r < p; ++r) acc = combine<Op>(acc, value<T>(Op, r, p, i));
    return finalize<Op>(acc, p);
  };
  // One buffer holds input and output in place; `expected` is what its checked part must hold.
  std::uint64_t in_n = count, out_n = count, out_at = kGuard, in_at = kGuard;
  switch (c) {
    case plan::Collective::reduce_scatter:
      in_n = count * up;
      if (in_place) out_at = kGuard + ur * count;
      break;
    case plan::Collective::all_gather:
      out_n = count * up;
      if (in_place) in_at = kGuard + ur * count;
      break;
    default:
      break;
  }
  const bool has_input = !(c == plan::Collective::broadcast && !is_root);
  const bool has_output = !(c == plan::Collective::reduce && !is_root);
  std::vector<T> out_buf(out_n + 2 * kGuard, guard_value<T>());
  std::vector<T> in_buf(in_n + 2 * kGuard, guard_value<T>());
  const bool shared = in_place && has_input && has_output;
  if (shared) {
    // The one buffer is the larger of the two (with its guards).
    if (in_n > out_n) out_buf = in_buf;
  }
  T* in = (shared ? out_buf.data() : in_buf.data()) + in_at;
  T* out = out_buf.data() + out_at;
  // The input's first index in the collective's index space (all-gather: the rank's block).
  const std::uint64_t in_index = c == plan::Collective::all_gather ? ur * count : 0;
  if (has_input)
    for (std::uint64_t i = 0; i < in_n; ++i) in[i] = value<T>(Op, rank, p, in_index + i);
  const std::vector<T> out_before = out_buf;
  T* call_in = in;
  T* call_out = out;
  // In the arena, the buffer the call is given first (the output, the one buffer in place, or a
  // reduce leaf's input in place, where it passes no output) at 0, the other after it: in place,
  // the root's one buffer and a leaf's input then lie at the same offset.
  const bool input_first = in_place && !shared && has_input;
  std::vector<T>& first = input_first ? in_buf : out_buf;
  std::vector<T>& second = input_first ? out_buf : in_buf;
  const std::size_t second_offset = (first.size() * sizeof(T) + 63) / 64 * 64;
  if (!arena.empty()) {
    if (second_offset + second.size() * sizeof(T) > arena.size())
      return "the arena of " + std::to_string(arena.size()) + " bytes is too small";
    std::memcpy(arena.data(), first.data(), first.size() * sizeof(T));
    std::memcpy(arena.data() + second_offset, second.data(), second.size() * sizeof(T));
    T* at_first = reinterpret_cast<T*>(arena.data());
    T* at_second = reinterpret_cast<T*>(arena.data() + second_offset);
    call_out = (input_first ? at_second : at_first) + out_at;
    call_in = (shared ? at_first : input_first ? at_first : at_second) + in_at;
  }
  // Out of place, a non-root gets a buffer it does not use too, which must stay untouched.
  call(has_input || !in_place ? call_in : nullptr, has_output || !in_place ? call_out : nullptr);
  if (!arena.empty()) {
    std::memcpy(first.data(), arena.data(), first.size() * sizeof(T));
    std::memcpy(second.data(), arena.data() + second_offset, second.size() * sizeof(T));
  }

  auto expected = [&](std::uint64_t j) -> T {
    switch (c) {
      case plan::Collective::reduce_scatter:
        return reduced(ur * count + j);
      case plan::Collective::all_gather:
        return value<T>(Op, static_cast<int>(j / count), p, j);
      case plan::Collective::broadcast:
        return value<T>(Op, root, p, j);
      default:
        return reduced(j);
    }
  };
  const std::string where = std::string(plan::collective_name(c)) + " P=" + std::to_string(p) +
                            " rank=" + std::to_string(rank) + " count=" + std::to_string(count) +
                            " dtype=" + std::string(to_string(data_type_of<T>())) +
                            " op=" + std::string(to_string(Op)) + (in_place ? " in place" : "") +
                            " root=" + std::to_string(root);
  for (std::uint64_t j = 0; j < out_buf.size(); ++j) {
    const bool in_output = has_output && j >= out_at && j < out_at + out_n;
    // In place, the input's elements outside the output may be anything afterwards (NCCL leaves
    // them unspecified); everything else outside the output must be untouched.
    const bool input_only = shared && j >= in_at && j < in_at + in_n && !in_output;
    if (input_only) continue;
    const T want = in_output ? expected(j - out_at) : out_before[j];
    if (std::bit_cast<Bytes<T>>(want) != std::bit_cast<Bytes<T>>(out_buf[j]))
      return where + ": element " + std::to_string(j) + " of the output buffer is wrong" +
             (in_output ? "" : " (outside the output: written)");
  }
  if (!shared)
    for (std::uint64_t j = 0; j < in_buf.size(); ++j) {
      const bool inside = has_input && j >= in_at && j < in_at + in_n;
      const T want = inside ? value<T>(Op, rank, p, in_index + j - in_at) : guard_value<T>();
      if (std::bit_cast<Bytes<T>>(want) != std::bit_cast<Bytes<T>>(in_buf[j]))
        return where + ": the input buffer was written at element " + std::to_string(j);
    }
  return "";
}

// One call through the collective's own signature (ccoll/collective.hpp).
template <class Coll>
void call_collective(typename Coll::Rank h, const void* s, void* r, std::uint64_t n, DataType d,
                     ReduceOp op, int root) {
  constexpr plan::Collective C = Coll::collective;
  if constexpr (C == plan::Collective::reduce_scatter)
    h.run(s, r, n, d, op);
  else if constexpr (C == plan::Collective::all_gather)
    h.run(s, r, n, d);
  else if constexpr (C == plan::Collective::broadcast)
    h.run(s, r, n, d, root);
  else
    h.run(s, r, n, d, op, root);
}

// Rank `h`'s part of a list of cases that every rank of `coll` runs in the same order: every
// dtype (or f32 and bf16), every op the collective takes, in place and not, roots 0, P-1 and P/2,
// every count. Returns "" or the first wrong case; a rank that finds one runs the other cases
// still, so that its peers finish and report rather than wait for it until their timeout (an
// exception after that is added to the report).
template <class Coll>
std::string check_collective_cases(Coll& coll, typename Coll::Rank h, int p,
                                   const std::vector<std::uint64_t>& counts, bool every_dtype) {
  (void)coll;
  constexpr plan::Collective C = Coll::collective;
  std::vector<int> roots{0};
  if (plan::has_root(C))
    for (int r : {p - 1, p / 2})
      if (r != 0 && roots.back() != r) roots.push_back(r);
  Sweep sweep;  // every rank takes the same cases
  std::string first_wrong;
  for (DataType d : kAllDataTypes) {
    if (!every_dtype && d != DataType::f32 && d != DataType::bf16) continue;
    for (ReduceOp op : kAllReduceOps) {
      if ((!plan::reduces(C) && op != ReduceOp::sum) || !is_supported(d, op)) continue;
      for (bool in_place : {false, true})
        for (int root : roots)
          for (std::uint64_t n : counts) {
            if (!sweep.take()) continue;
            std::string wrong;
            try {
              dispatch_data_type(d, [&](auto t) {
                using T = decltype(t);
                dispatch_reduce_op(op, [&](auto o) {
                  wrong = check_collective_call<T, decltype(o)::value>(
                      C, p, h.id(), n, in_place, root, [&](const void* s, void* r) {
                        call_collective<Coll>(h, s, r, n, d, op, root);
                      });
                });
              });
            } catch (const std::exception& e) {
              if (first_wrong.empty()) throw;
              return first_wrong + "; then a call threw: " + e.what();
            }
            if (!wrong.empty() && first_wrong.empty()) first_wrong = std::move(wrong);
          }
    }
  }
  return first_wrong;
}

}  // namespace ccoll::testing
