// ccoll/runtime/symmetric_shards.hpp: the reduce-scatter and all-gather of ranks that read each
// other's buffers directly (registered windows, transport/shared_window.hpp), as
// runtime/symmetric_allreduce.hpp is the allreduce's: no byte is staged through a slot.
//
// SymmetricCall::count is the block: reduce-scatter's recvcount, all-gather's sendcount.
//   reduce-scatter: rank r folds block r of every rank's input, in rank order, into its output;
//   all-gather:     rank r copies rank q's input into block q of its output, for every q.
// The agreement before the call has seen every rank arrive, so every input is ready; the one
// barrier after it keeps a rank from returning, and changing its input, while a peer still reads
// it. Memory traffic per rank: reduce-scatter reads P blocks and writes one, the least a fold of P
// operands can; all-gather reads and writes its output once, one copy where a plan through slots
// makes two.
//
// The calls go direct when every rank's buffers lie at the same offsets of one window, or, in
// NCCL's in-place forms (all-gather: the input is block r of the output; reduce-scatter: the
// output is block r of the input), when every rank's larger buffer does (SymmetricCall::in_place).
// In place is safe: rank r writes only block r of its own buffer (reduce-scatter), which no peer
// reads, or blocks q != r of its output (all-gather), while peers read only block r of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ccoll/core/op.hpp"
#include "ccoll/runtime/symmetric_allreduce.hpp"

namespace ccoll::runtime {

// Runs the reduce-scatter on rank c.rank; barrier() returns once every rank has called it as often.
template <class T, ReduceOp Op, class Barrier>
void symmetric_reduce_scatter(const SymmetricCall<T>& c, Barrier&& barrier) {
  const std::uint64_t n = c.count;
  if (n > 0) {
    const std::uint64_t first = static_cast<std::uint64_t>(c.rank) * n;
    const T* srcs[kMaxSymmetricRanks];
    for (int q = 0; q < c.nranks; ++q) srcs[q] = c.send(q) + first;
    // In place, the output is block r of the rank's own input (the window is writable).
    T* out = c.in_place ? const_cast<T*>(srcs[c.rank]) : c.recv(c.rank);
    detail::fold_operands<T, Op>(out, srcs, static_cast<std::uint32_t>(c.nranks), n, c.nranks,
                                 c.stream);
  }
  barrier();
}

// Runs the all-gather on rank c.rank; barrier() as above.
template <class T, class Barrier>
void symmetric_all_gather(const SymmetricCall<T>& c, Barrier&& barrier) {
  const std::uint64_t n = c.count;
  const std::size_t bytes = n * sizeof(T);
  if (n > 0) {
    T* const own = c.recv(c.rank);
    for (int k = 0; k < c.nranks; ++k) {
      const int q = (c.rank + k) % c.nranks;  // ranks start on different peers
      T* dst = own + static_cast<std::uint64_t>(q) * n;
      // In place, rank q's input is block q of its output, and the rank's own is already there.
      const T* src = c.in_place ? c.recv(q) + static_cast<std::uint64_t>(q) * n : c.send(q);
      if (src == dst) continue;
      if (c.stream)
        detail::stream_copy(dst, src, bytes);
      else
        std::memcpy(dst, src, bytes);
    }
    if (c.stream) detail::stream_fence();
  }
  barrier();
}

}  // namespace ccoll::runtime
