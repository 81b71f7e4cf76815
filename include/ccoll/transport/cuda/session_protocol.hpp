// ccoll/transport/cuda/session_protocol.hpp: the protocol of a persistent session's work queue,
// host half and device half, as plain __host__ __device__ code over plain memory.
//
// A session kernel stays resident and takes its calls from a ring of `depth` work items in
// host-mapped memory. The host writes item j and publishes it with one release store of `posted`;
// every block runs it as soon as it sees it; the last block to finish item j publishes
// `completed = j + 1`, in order (only after item j - 1 was published). Back-pressure: the host
// writes item j + depth only once item j has completed, so the kernel's per-item arrival words can
// be reused without a reset race. The host posts a stop item (whatever the transport's item type
// says ends the kernel) to end it.
//
// Nothing here calls CUDA: session_queue.cuh adds the memory, the stream and the kernel's end,
// and the fast suite runs this protocol on host threads (tests/cuda_protocol_test.cpp).
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"

#if !CCOLL_DEVICE_PASS
#include <atomic>
#endif

namespace ccoll::transport::cuda {

// The most items a session's ring holds: the executors allocate every session's queue when they
// are built (session_queue.cuh, SessionQueueMemory), so its size is fixed then.
inline constexpr std::uint32_t kMaxSessionDepth = 64;

// The words the host and the kernel share while a session runs (host-mapped), each on its own
// line: the host writes `posted`, the kernel `completed`.
struct SessionQueueControl {
  alignas(128) std::uint64_t posted = 0;     // items the host has written
  alignas(128) std::uint64_t completed = 0;  // items every block has finished
};

// What the kernel needs of the queue (all pointers as the device sees them).
template <class Item>
struct SessionQueueView {
  Item* items = nullptr;  // host-mapped ring of `depth` items
  std::uint32_t depth = 1;
  SessionQueueControl* control = nullptr;  // host-mapped
  std::uint64_t* arrivals = nullptr;       // device memory, depth words: blocks done with item j
  std::uint64_t* completed = nullptr;      // device memory: the device's copy of control->completed
};

// A block's writes (its outputs) before its arrival is seen: at system scope by the host and by
// peer GPUs; at device scope by the blocks of one GPU, whose last block then fences at system scope
// before it publishes the item's completion (cumulativity carries the others' writes).
template <sync::Scope S = sync::Scope::system>
CCOLL_HD inline void session_fence() {
#if CCOLL_DEVICE_PASS
  if constexpr (S == sync::Scope::device)
    __threadfence();
  else
    __threadfence_system();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// The block leader's wait for item j to be posted; false: the abort word was raised. No deadline:
// a session may wait for its next call as long as it likes.
template <class Item>
CCOLL_HD inline bool session_wait_posted(const SessionQueueView<Item>& q, std::uint64_t j,
                                         std::uint32_t* abort) {
  sync::AtomicWord<std::uint64_t> posted(&q.control->posted);
  sync::AtomicWord<std::uint32_t> aborted(abort);
  sync::Backoff backoff;
  while (posted.load_acquire() <= j) {
    if (aborted.load_relaxed() != 0) return false;
    backoff.pause();
  }
  return true;
}

// The block leader's arrival after item j, its outputs written: the last of `nblocks` to arrive
// publishes completion of j once j - 1 is published. False: the abort word was raised meanwhile
// (item j - 1 was cut short, so j never completes). ArrivalScope: who must see a block's outputs
// when it arrives (session_fence); the completion is always published at system scope.
template <class Item, sync::Scope ArrivalScope = sync::Scope::system>
CCOLL_HD inline bool session_item_done(const SessionQueueView<Item>& q, std::uint64_t j,
                                       unsigned nblocks, std::uint32_t* abort) {
  session_fence<ArrivalScope>();  // the block's outputs before its arrival
  sync::AtomicWord<std::uint64_t, sync::Scope::device> arrived(&q.arrivals[j % q.depth]);
  if (arrived.fetch_add_acq_rel(1) + 1 != nblocks) return true;
  // The last block of item j: every block's outputs are written. The word is free again: the host
  // posts item j + depth only after it has seen item j complete.
  arrived.store_relaxed(0);
  sync::AtomicWord<std::uint64_t, sync::Scope::device> completed(q.completed);
  sync::AtomicWord<std::uint32_t> aborted(abort);
  sync::Backoff in_order;
  while (completed.load_acquire() < j) {
    if (aborted.load_relaxed() != 0) return false;
    in_order.pause();
  }
  session_fence();
  completed.store_release(j + 1);
  sync::AtomicWord<std::uint64_t>(&q.control->completed).store_release(j + 1);
  return true;
}

// The host half of the ring: which slot the next item goes to, when that slot is free, the
// publication of an item and of the stop item, and the completion of a ticket. Tickets are 1, 2,
// ...: ticket t is item t - 1.
template <class Item>
class SessionRing {
 public:
  SessionRing() = default;
  // `items` (depth of them) and `control` as the host sees them. Starts a new sequence: the
  // control words are zeroed, so no kernel may be using them.
  SessionRing(Item* items, SessionQueueControl* control, std::uint32_t depth)
      : items_(items), control_(control), depth_(depth == 0 ? 1 : depth) {
    sync::AtomicWord<std::uint64_t>(&control_->completed).store_relaxed(0);
    sync::AtomicWord<std::uint64_t>(&control_->posted).store_release(0);
  }

  std::uint32_t depth() const { return depth_; }
  std::uint64_t posted() const { return posted_; }
  std::uint64_t completed() const {
    return sync::AtomicWord<std::uint64_t>(&control_->completed).load_acquire();
  }
  bool has_completed(std::uint64_t ticket) const { return completed() >= ticket; }

  // The ticket that must complete before the next item's slot is free (0: it is free now): the
  // kernel may still be reading the item `depth` posts back, and its arrival word.
  std::uint64_t ticket_freeing_next() const { return posted_ >= depth_ ? posted_ - depth_ + 1 : 0; }
  // The slot of the next item; the caller has waited for ticket_freeing_next().
  Item& next_slot() const { return items_[posted_ % depth_]; }
  // Publishes the item written into next_slot(); its ticket.
  std::uint64_t post() {
    ++posted_;
    sync::AtomicWord<std::uint64_t>(&control_->posted).store_release(posted_);
    return posted_;
  }
  // Writes `stop` into next_slot() and publishes it, without a ticket: the kernel ends when it
  // reaches it, after every posted item.
  void post_stop(const Item& stop) {
    next_slot() = stop;
    sync::AtomicWord<std::uint64_t>(&control_->posted).store_release(posted_ + 1);
  }

 private:
  Item* items_ = nullptr;
  SessionQueueControl* control_ = nullptr;
  std::uint32_t depth_ = 1;
  std::uint64_t posted_ = 0;
};

}  // namespace ccoll::transport::cuda
