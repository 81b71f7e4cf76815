// ccoll/runtime/symmetric_rooted.hpp: the broadcast and reduce of ranks that read each other's
// buffers directly (registered windows, transport/shared_window.hpp), as
// runtime/symmetric_allreduce.hpp is the allreduce's: no byte is staged through a slot.
//
//   broadcast: every rank copies the root's input into its own output (the root too, out of
//              place); P - 1 readers of one buffer, where a chain or tree passes every byte
//              through a slot at each hop;
//   reduce:    rank r folds share r (runtime/symmetric_allreduce.hpp's shares) of every rank's
//              input, in rank order, into share r of the root's output. The fold is spread over
//              every rank's core, where a plan's root folds every message itself: each rank reads
//              N bytes and writes N/P, and the root's output is written once.
// The agreement before the call has seen every rank arrive, so every input is ready; the one
// barrier after it keeps a rank from returning, and changing its input, while a peer still reads
// it, and the root from returning before every share of its output is written.
//
// In place (the root's input is its output, and so at the same offset on every rank) is safe:
// broadcast's root then copies nothing and the others read it; reduce's rank r writes only share
// r of the root's buffer, which only rank r reads.
#pragma once

#include <cstddef>
#include <cstring>

#include "ccoll/core/op.hpp"
#include "ccoll/runtime/symmetric_allreduce.hpp"

namespace ccoll::runtime {

// Runs the broadcast from c.root on rank c.rank; barrier() returns once every rank has called it
// as often.
template <class T, class Barrier>
void symmetric_broadcast(const SymmetricCall<T>& c, Barrier&& barrier) {
  const T* src = c.send(c.root);
  T* dst = c.recv(c.rank);
  if (c.count > 0 && src != dst) {
    const std::size_t bytes = c.count * sizeof(T);
    if (c.stream) {
      detail::stream_copy(dst, src, bytes);
      detail::stream_fence();
    } else {
      std::memcpy(dst, src, bytes);
    }
  }
  barrier();
}

// Runs the reduce to c.root on rank c.rank; barrier() as above.
template <class T, ReduceOp Op, class Barrier>
void symmetric_reduce(const SymmetricCall<T>& c, Barrier&& barrier) {
  detail::fold_share<T, Op>(c, c.recv(c.root), c.stream);
  barrier();
}

}  // namespace ccoll::runtime
