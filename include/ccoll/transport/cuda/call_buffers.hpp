// ccoll/transport/cuda/call_buffers.hpp: one call's buffers of every virtual rank, checked and
// mapped onto the plan's index space on the host, for the kernel of CudaVirtualRanks
// (virtual_ranks.cuh) and its sessions; and the shape of a call of either CUDA executor.
//
// The kernel's interpreter addresses every buffer by plan index, as the host executors' does: a
// reduce-scatter's output, block r of the plan's space, is passed as the address of index 0
// (runtime::index_bases). Plain C++ (no CUDA type), so that the fast suite checks the mapping
// against the host interpreter on host memory.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/runtime/call_args.hpp"

namespace ccoll::transport::cuda {

// The most plan ranks (relays included) one kernel serves: their buffer pointers are kernel
// parameters, 2 KiB of the 4 KiB every GPU accepts.
inline constexpr int kMaxVirtualRanks = 128;

// One rank's buffers as addresses of index 0 of the plan's space, side by side so that a block
// reads both with one 16-byte access.
struct alignas(16) RankBuffers {
  const void* input = nullptr;
  void* output = nullptr;
};

// One call's buffers, rank by rank (relays, a broadcast's non-roots' input, a reduce's non-roots'
// output: unused).
struct CallBuffers {
  RankBuffers rank[kMaxVirtualRanks] = {};
};

// The shape of a call on an executor of `collective`'s plans: the one given, which must name that
// collective, or that collective, which must then have no root (a broadcast or reduce names it);
// the root of a collective without one is 0, whatever was given.
inline runtime::CallShape call_shape(const std::optional<runtime::CallShape>& shape,
                                     plan::Collective collective) {
  if (shape && shape->collective != collective)
    throw Error(ErrorCode::InvalidArgument, -1,
                "a " + std::string(plan::collective_name(shape->collective)) +
                    " call on an executor of " + std::string(plan::collective_name(collective)) +
                    " plans");
  if (shape)
    return runtime::CallShape{shape->collective, plan::has_root(collective) ? shape->root : 0};
  if (plan::has_root(collective))
    throw Error(ErrorCode::InvalidArgument, -1,
                "a " + std::string(plan::collective_name(collective)) +
                    " needs a root: pass runtime::CallShape{collective, root}");
  return runtime::CallShape{collective, 0};
}

// One call of `shape` by every rank, checked as the host transports check their arguments (an
// error names the rank): sends[r] and recvs[r] are rank r's buffers with NCCL's arguments
// (`count` per rank for reduce-scatter and all-gather), `active` the plan's contributing ranks
// (empty: all). Returns the buffers mapped onto the plan's index space.
inline CallBuffers checked_buffers(int nranks, std::span<const void* const> sends,
                                   std::span<void* const> recvs, std::size_t count, DataType dtype,
                                   ReduceOp op, const runtime::CallShape& shape = {},
                                   const std::vector<bool>& active = {}) {
  if (sends.size() != static_cast<std::size_t>(nranks) || recvs.size() != sends.size())
    throw_invalid_argument(-1, "sends/recvs",
                           std::to_string(nranks) + " buffers each (one per rank)",
                           std::to_string(sends.size()) + " and " + std::to_string(recvs.size()));
  if (nranks > kMaxVirtualRanks)
    throw Error(ErrorCode::Unsupported, -1,
                std::to_string(nranks) + " ranks; virtual ranks serve at most " +
                    std::to_string(kMaxVirtualRanks));
  const std::vector<bool> all(static_cast<std::size_t>(nranks), true);
  const std::vector<bool>& contributing = active.empty() ? all : active;
  CallBuffers b;
  for (int r = 0; r < nranks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const runtime::CallArgs a =
        runtime::check_call_arguments(sends[i], recvs[i], count, dtype, op, shape, r, contributing);
    if (!a.ok()) throw Error(a.error, r, a.reason);
    const runtime::CallLayout l = runtime::call_layout(shape, count, r, contributing);
    const runtime::IndexBases at = runtime::index_bases(l, sends[i], recvs[i], size_of(dtype));
    b.rank[r].input = at.input;
    b.rank[r].output = at.output;
  }
  return b;
}

}  // namespace ccoll::transport::cuda
