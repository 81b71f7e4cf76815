// ccoll/runtime/call_args.hpp: one rank's arguments to one collective call, checked locally.
//
// Every rank checks its own arguments first and publishes the outcome with them, valid or not
// (runtime/control_plane.hpp): then every rank can reach the same verdict from the same data and
// a bad argument on one rank makes every rank throw before any buffer is touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"

namespace ccoll::runtime {

// Where one rank's buffers of a call lie in a registered window (transport/shared_window.hpp);
// window 0: in none.
struct WindowPlacement {
  std::uint32_t window = 0;  // the window's id + 1
  std::uint64_t send_offset = 0;
  std::uint64_t recv_offset = 0;
  bool operator==(const WindowPlacement&) const = default;
};

struct CallArgs {
  std::uint64_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  ErrorCode error = ErrorCode::InvalidArgument;  // meaningful only when `reason` is not empty
  std::string reason;                            // the local error; empty: the arguments are fine
  std::uint32_t root_choice = 0;  // rank 0's per-call decision for every rank (slot stores)
  // Where the buffers lie in a registered window. When every rank's placement is the same window
  // and offsets, the call reads the peers' buffers directly (Agreement::symmetric).
  WindowPlacement placement;
  bool ok() const { return reason.empty(); }
};

// The local checks of one call; fills error and reason when an argument is bad.
inline CallArgs check_call_arguments(const void* send, const void* recv, std::size_t count,
                                     DataType dtype, ReduceOp op) {
  CallArgs a;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  if (count == 0) {
    a.reason = "argument 'count': expected > 0, got 0";
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

}  // namespace ccoll::runtime
