// ccoll/runtime/call_args.hpp: one rank's arguments to one collective call, checked locally.
//
// Every rank checks its own arguments first and publishes the outcome with them, valid or not
// (runtime/control_plane.hpp): then every rank can reach the same verdict from the same data and
// a bad argument on one rank makes every rank throw before any buffer is touched.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::runtime {

// Where one rank's buffers of a call lie in a registered window (transport/shared_window.hpp);
// window 0: in none.
struct WindowPlacement {
  std::uint32_t window = 0;  // the window's id + 1
  // A reduce-scatter or all-gather in NCCL's in-place form (the output is block r of the input,
  // or the input block r of the output): the smaller buffer's offset differs by rank, so only the
  // larger one's is kept, and the other's is 0.
  bool in_place = false;
  std::uint64_t send_offset = 0;
  std::uint64_t recv_offset = 0;
  bool operator==(const WindowPlacement&) const = default;
};

// Which collective a call runs and, for broadcast and reduce, from or to which rank.
struct CallShape {
  plan::Collective collective = plan::Collective::allreduce;
  int root = 0;
  bool operator==(const CallShape&) const = default;
};

// A shape as one word of a call descriptor (control planes compare these): the collective in the
// low 8 bits, the root above them.
inline std::uint32_t encode_shape(CallShape s) {
  return static_cast<std::uint32_t>(s.collective) | (static_cast<std::uint32_t>(s.root) << 8);
}
inline std::string describe_shape(std::uint32_t word) {
  const auto c = static_cast<plan::Collective>(word & 0xffu);
  std::string text(plan::collective_name(c));
  if (plan::has_root(c)) text += " with root " + std::to_string(word >> 8);
  return text;
}

struct CallArgs {
  std::uint64_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  CallShape shape;                               // every rank's must be the same
  ErrorCode error = ErrorCode::InvalidArgument;  // meaningful only when `reason` is not empty
  std::string reason;                            // the local error; empty: the arguments are fine
  std::uint32_t root_choice = 0;  // rank 0's per-call decision for every rank (slot stores)
  // Where the buffers lie in a registered window. When every rank's placement is the same window
  // and offsets, the call reads the peers' buffers directly (Agreement::symmetric).
  WindowPlacement placement;
  bool ok() const { return reason.empty(); }
};

// The most elements a call may name whose bytes (at the largest element size, 8) a 64-bit count
// holds: above it the byte count wraps, and a huge call would pass for a small one (a fast box's,
// say). `per`: the buffers it spans (a reduce-scatter's or all-gather's plan covers one per rank).
inline constexpr std::uint64_t max_call_count(std::uint64_t per = 1) {
  return ~std::uint64_t{0} / 8 / (per == 0 ? 1 : per);
}

// The local checks of one call; fills error and reason when an argument is bad.
inline CallArgs check_call_arguments(const void* send, const void* recv, std::size_t count,
                                     DataType dtype, ReduceOp op) {
  CallArgs a;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  if (count == 0) {
    a.reason = "argument 'count': expected > 0, got 0";
  } else if (count > max_call_count()) {
    a.reason = "argument 'count': " + std::to_string(count) + " elements overflow";
  } else if (send == nullptr) {
    a.reason = "argument 'sendbuff': expected a buffer, got nullptr";
  } else if (recv == nullptr) {
    a.reason = "argument 'recvbuff': expected a buffer, got nullptr";
  } else if (static_cast<unsigned>(dtype) > static_cast<unsigned>(DataType::u8) ||
             static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::avg)) {
    a.reason = "argument 'datatype'/'op': not a known value";
  } else if (!is_supported(dtype, op)) {
    a.error = ErrorCode::Unsupported;
    a.reason = "op " + std::string(to_string(op)) + " on " + std::string(to_string(dtype));
  } else if (send != recv) {
    const auto* s = static_cast<const std::byte*>(send);
    const auto* r = static_cast<const std::byte*>(recv);
    const std::size_t bytes = count * size_of(dtype);
    if (s < r + bytes && r < s + bytes)
      a.reason =
          "arguments 'sendbuff'/'recvbuff': expected identical or disjoint buffers, "
          "got partially overlapping ones";
  }
  return a;
}

// Where rank `rank`'s user buffers of a call lie in its plan's index space (plan/collective.hpp),
// for a call of `count` elements as the collective counts them (reduce-scatter: the output per
// rank; all-gather: the input per rank; NCCL's recvcount and sendcount).
struct CallLayout {
  std::uint64_t plan_count = 0;  // the plan's index space
  plan::BufferSpan input;        // empty: the rank passes no input (a relay, broadcast's non-roots)
  plan::BufferSpan output;       // empty: no output (a relay, reduce's non-roots)
};

// `active`: the plan's active ranks (relays have no buffers).
inline CallLayout call_layout(CallShape shape, std::uint64_t count, int rank,
                              const std::vector<bool>& active) {
  CallLayout l;
  std::uint64_t nactive = 0;
  std::uint64_t block = 0;
  for (std::size_t q = 0; q < active.size(); ++q) {
    if (static_cast<int>(q) == rank) block = nactive;
    nactive += active[q] ? 1 : 0;
  }
  l.plan_count = plan::has_blocks(shape.collective) ? count * nactive : count;
  const auto r = static_cast<std::size_t>(rank);
  if (r >= active.size() || !active[r]) return l;
  const bool is_root = rank == shape.root;
  l.input = plan::input_span(shape.collective, l.plan_count, block, count, is_root);
  l.output = plan::output_span(shape.collective, l.plan_count, block, count, is_root);
  return l;
}

// Where a rank's buffers put index 0 of the plan's space: every executor's interpreter addresses a
// buffer by plan index (runtime/program_context.hpp), and only the indices of the buffer itself
// are ever accessed (the verifier's span check). A null buffer stays null.
struct IndexBases {
  const void* input = nullptr;
  void* output = nullptr;
};
inline IndexBases index_bases(const CallLayout& l, const void* send, void* recv,
                              std::size_t elem_size) {
  IndexBases b;
  if (send != nullptr)
    b.input = static_cast<const std::byte*>(send) -
              static_cast<std::ptrdiff_t>(l.input.begin * elem_size);
  if (recv != nullptr)
    b.output =
        static_cast<std::byte*>(recv) - static_cast<std::ptrdiff_t>(l.output.begin * elem_size);
  return b;
}

// The local checks of a call of any collective by `rank` of `nranks` whose plan's active ranks are
// `active`: NCCL's arguments (ncclReduceScatter's recvcount, ncclAllGather's sendcount, a root for
// broadcast and reduce, whose non-roots' sendbuff (broadcast) or recvbuff (reduce) is not used and
// may be null) and NCCL's in-place forms: the input and the output may alias only where the same
// element sits at the same index (reduce-scatter: recvbuff = sendbuff + rank * recvcount;
// all-gather: sendbuff = recvbuff + rank * sendcount; the others: sendbuff = recvbuff).
inline CallArgs check_call_arguments(const void* send, const void* recv, std::size_t count,
                                     DataType dtype, ReduceOp op, CallShape shape, int rank,
                                     const std::vector<bool>& active) {
  if (shape.collective == plan::Collective::allreduce) {
    CallArgs a = check_call_arguments(send, recv, count, dtype, op);
    a.shape = shape;
    return a;
  }
  CallArgs a;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.shape = shape;
  const int nranks = static_cast<int>(active.size());
  const bool reduction = plan::reduces(shape.collective);
  if (count == 0) {
    a.reason = "argument 'count': expected > 0, got 0";
    return a;
  }
  if (plan::has_blocks(shape.collective) && count > max_call_count(active.size())) {
    a.reason = "argument 'count': " + std::to_string(count) + " elements per rank overflow";
    return a;
  }
  if (count > max_call_count()) {
    a.reason = "argument 'count': " + std::to_string(count) + " elements overflow";
    return a;
  }
  if (plan::has_root(shape.collective) &&
      (shape.root < 0 || shape.root >= nranks || !active[static_cast<std::size_t>(shape.root)])) {
    a.reason = "argument 'root': expected an active rank in [0, " + std::to_string(nranks) +
               "), got " + std::to_string(shape.root);
    return a;
  }
  if (static_cast<unsigned>(dtype) > static_cast<unsigned>(DataType::u8) ||
      static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::avg)) {
    a.reason = "argument 'datatype'/'op': not a known value";
    return a;
  }
  if (reduction && !is_supported(dtype, op)) {
    a.error = ErrorCode::Unsupported;
    a.reason = "op " + std::string(to_string(op)) + " on " + std::string(to_string(dtype));
    return a;
  }
  const CallLayout l = call_layout(shape, count, rank, active);
  const std::size_t es = size_of(dtype);
  const std::uint64_t in_elems = l.input.end - l.input.begin;
  const std::uint64_t out_elems = l.output.end - l.output.begin;
  if (in_elems != 0 && send == nullptr) {
    a.reason = "argument 'sendbuff': expected a buffer, got nullptr";
  } else if (out_elems != 0 && recv == nullptr) {
    a.reason = "argument 'recvbuff': expected a buffer, got nullptr";
  } else if (in_elems != 0 && out_elems != 0) {
    // Both buffers as addresses of index 0 of the plan's space: equal bases are NCCL's in place.
    const auto s = reinterpret_cast<std::uintptr_t>(send);
    const auto r = reinterpret_cast<std::uintptr_t>(recv);
    const bool in_place = s - l.input.begin * es == r - l.output.begin * es;
    const bool disjoint = s + in_elems * es <= r || r + out_elems * es <= s;
    if (!in_place && !disjoint)
      a.reason = "arguments 'sendbuff'/'recvbuff' overlap (in place needs " +
                 std::string(shape.collective == plan::Collective::reduce_scatter
                                 ? "recvbuff = sendbuff + rank * recvcount)"
                             : shape.collective == plan::Collective::all_gather
                                 ? "sendbuff = recvbuff + rank * sendcount)"
                                 : "sendbuff = recvbuff)");
  }
  return a;
}

}  // namespace ccoll::runtime
