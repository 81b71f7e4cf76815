// ccoll/transport/cuda/session_protocol.hpp: the protocol of a persistent session's work queue,
// host half and device half, as plain __host__ __device__ code over plain memory.
//
// A session kernel stays resident and takes its calls from a ring of `depth` slots in host-mapped
// memory. The host writes item j into slot j % depth and publishes it with one release store of
// the slot's own ticket, j + 1. Each block's leader spins on that one word (sync::poll_until: no
// sleep for the first 50 us; on a GPU the abort word is read once per 16 us, not per poll), then
// reads what it needs of the item, which starts on the ticket's line; it polls no separate
// counter. Every block runs the
// item as soon as it sees it; the last block to finish item j publishes `completed = j + 1`, in
// order (only after item j - 1 was published). Back-pressure: the host writes item j + depth only
// once item j has completed, so a slot's ticket only grows and the kernel's per-item arrival words
// can be reused without a reset race. The host posts a stop item (whatever the transport's item
// type says ends the kernel) to end it.
//
// Nothing here calls CUDA: session_queue.cuh adds the memory, the stream and the kernel's end,
// and the fast suite runs this protocol on host threads (tests/cuda_protocol_test.cpp).
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/poll.hpp"

#if !CCOLL_DEVICE_PASS
#include <atomic>
#endif

namespace ccoll::transport::cuda {

// The most items a session's ring holds: the executors allocate every session's queue when they
// are built (session_queue.cuh, SessionQueueMemory), so its size is fixed then.
inline constexpr std::uint32_t kMaxSessionDepth = 64;

// The word the kernel publishes to the host while a session runs (host-mapped).
struct SessionQueueControl {
  alignas(128) std::uint64_t completed = 0;  // items every block has finished
};

// One slot of the ring (host-mapped): an item and the ticket that publishes it, read together.
template <class Item>
struct alignas(64) SessionSlot {
  std::uint64_t ticket = 0;  // j + 1 once item j is in the slot (0: none this session)
  Item item;
};

// What the kernel needs of the queue (all pointers as the device sees them).
template <class Item>
struct SessionQueueView {
  SessionSlot<Item>* slots = nullptr;  // host-mapped ring of `depth` slots
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

// The block leader's wait for item j: the item, or nullptr when the abort word was raised. It
// polls the slot's ticket alone; the acquire that sees j + 1 makes the item's fields visible. No
// deadline: a session may wait for its next call as long as it likes.
template <class Item>
CCOLL_HD inline const Item* session_wait_item(const SessionQueueView<Item>& q, std::uint64_t j,
                                              const std::uint32_t* abort) {
  SessionSlot<Item>& slot = q.slots[j % q.depth];
  sync::AtomicWord<std::uint64_t> ticket(&slot.ticket);
  const sync::WaitResult r =
      sync::poll_until([&] { return ticket.load_acquire() == j + 1; }, abort, 0);
  return r == sync::WaitResult::Ok ? &slot.item : nullptr;
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
  if (sync::poll_until([&] { return completed.load_acquire() >= j; }, abort, 0) !=
      sync::WaitResult::Ok)
    return false;
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
  // `slots` (depth of them) and `control` as the host sees them. Starts a new sequence: the
  // tickets and the completion word are zeroed (a previous session's ticket could otherwise pass
  // for this one's), so no kernel may be using them.
  SessionRing(SessionSlot<Item>* slots, SessionQueueControl* control, std::uint32_t depth)
      : slots_(slots), control_(control), depth_(depth == 0 ? 1 : depth) {
    for (std::uint32_t i = 0; i < depth_; ++i)
      sync::AtomicWord<std::uint64_t>(&slots_[i].ticket).store_relaxed(0);
    sync::AtomicWord<std::uint64_t>(&control_->completed).store_release(0);
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
  // The item the next post publishes; the caller has waited for ticket_freeing_next().
  Item& next_slot() const { return slots_[posted_ % depth_].item; }
  // Publishes the item written into next_slot() (a release store of its slot's ticket); its
  // ticket.
  std::uint64_t post() {
    publish();
    return ++posted_;
  }
  // Writes `stop` into next_slot() and publishes it (ticket posted() + 1, not counted in posted()):
  // the kernel ends when it reaches it, after every posted item.
  void post_stop(const Item& stop) {
    next_slot() = stop;
    publish();
  }

 private:
  void publish() {
    sync::AtomicWord<std::uint64_t>(&slots_[posted_ % depth_].ticket).store_release(posted_ + 1);
  }

  SessionSlot<Item>* slots_ = nullptr;
  SessionQueueControl* control_ = nullptr;
  std::uint32_t depth_ = 1;
  std::uint64_t posted_ = 0;
};

}  // namespace ccoll::transport::cuda
