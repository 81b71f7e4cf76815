// ccoll/transport/cuda/session_queue.cuh: the work queue of a persistent session kernel, shared by
// every CUDA transport's session (session.cuh for CudaVirtualRanks, p2p_session.cuh for CudaP2P).
//
// A session kernel stays resident and takes its calls from a ring of `depth` work items in
// host-mapped memory. The host writes item j and publishes it with one release store of `posted`;
// every block runs it as soon as it sees it; the last block to finish item j publishes
// `completed = j + 1`, in order (only after item j - 1 was published). So a call costs the host a
// few hundred bytes of stores and the device one poll of host memory, instead of a kernel launch.
// Back-pressure: the host writes item j + depth only once item j has completed, so the kernel's
// per-item arrival words can be reused without a reset race.
//
// The host half (SessionQueue<Item>) is the ring, the tickets and the bounded waits; the device
// half (session_wait_posted, session_item_done) is the part of the kernel's loop that does not
// depend on what an item holds. A transport's session adds its item type and its kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "ccoll/core/error.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/device_memory.cuh"

namespace ccoll::transport::cuda {

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

#if defined(__CUDACC__)
// The block leader's wait for item j to be posted; false: the abort word was raised. No deadline:
// a session may wait for its next call as long as it likes.
template <class Item>
__device__ inline bool session_wait_posted(const SessionQueueView<Item>& q, std::uint64_t j,
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
// (item j - 1 was cut short, so j never completes).
template <class Item>
__device__ inline bool session_item_done(const SessionQueueView<Item>& q, std::uint64_t j,
                                         unsigned nblocks, std::uint32_t* abort) {
  __threadfence_system();  // the block's outputs before its arrival
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
  __threadfence_system();
  completed.store_release(j + 1);
  sync::AtomicWord<std::uint64_t>(&q.control->completed).store_release(j + 1);
  return true;
}
#endif

// The host half: the ring of items, tickets, and waits that notice a failed or ended kernel.
// CheckFailures: a callable that throws the executor's failure, if any.
template <class Item>
class SessionQueue {
 public:
  SessionQueue() = default;
  SessionQueue(std::uint32_t depth, cudaStream_t stream, int rank = -1)
      : stream_(stream), depth_(depth), rank_(rank) {
    if (depth_ == 0) throw_invalid_argument(rank, "depth", ">= 1", "0");
    items_ = MappedHostMemory(sizeof(Item) * depth_);
    control_ = MappedHostMemory(sizeof(SessionQueueControl));
    words_ = DeviceMemory(sizeof(std::uint64_t) * (depth_ + 1));
    // On the session's stream: the kernel launched there next must see the zeros.
    check(cudaMemsetAsync(words_.get(), 0, words_.size(), stream_), "cudaMemsetAsync(session)",
          rank_);
  }

  SessionQueueView<Item> view() const {
    SessionQueueView<Item> v;
    v.items = reinterpret_cast<Item*>(items_.device());
    v.depth = depth_;
    v.control = reinterpret_cast<SessionQueueControl*>(control_.device());
    v.arrivals = reinterpret_cast<std::uint64_t*>(words_.get());
    v.completed = v.arrivals + depth_;
    return v;
  }

  // The item the next post publishes, once its slot is free (waits while `depth` are
  // outstanding).
  template <class CheckFailures>
  Item& next(CheckFailures&& check_failures) {
    if (posted_ >= depth_) wait(posted_ - depth_ + 1, check_failures);
    return reinterpret_cast<Item*>(items_.host())[posted_ % depth_];
  }
  // Publishes the item next() returned; its ticket (1, 2, ...).
  std::uint64_t post() {
    ++posted_;
    sync::AtomicWord<std::uint64_t>(&control()->posted).store_release(posted_);
    return posted_;
  }

  // Has the item of `ticket` completed? Throws the executor's failure, or that the kernel ended
  // (a fault, say) before completing it, instead of letting a caller wait forever.
  template <class CheckFailures>
  bool done(std::uint64_t ticket, CheckFailures&& check_failures) {
    if (ticket > posted_)
      throw_invalid_argument(rank_, "ticket", "<= " + std::to_string(posted_) + " (calls enqueued)",
                             std::to_string(ticket));
    if (completed() >= ticket) return true;
    check_failures();
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e != cudaErrorNotReady) {
      check(e, "the session kernel", rank_);
      if (completed() >= ticket) return true;
      check_failures();
      throw Error(ErrorCode::System, rank_,
                  "the session kernel ended before call " + std::to_string(ticket) + " completed");
    }
    return false;
  }

  // Waits for `ticket` (a host spin with backoff: the kernel never returns to the host).
  template <class CheckFailures>
  void wait(std::uint64_t ticket, CheckFailures&& check_failures) {
    sync::Backoff backoff;
    while (!done(ticket, check_failures)) backoff.pause();
  }

  // Lets the posted items finish, posts `stop` (the item that ends the kernel) and waits for the
  // kernel. On a failure the kernel has ended already, and the wait throws it.
  template <class CheckFailures>
  void close(const Item& stop, CheckFailures&& check_failures) {
    next(check_failures) = stop;
    sync::AtomicWord<std::uint64_t>(&control()->posted).store_release(posted_ + 1);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(session)", rank_);
    check_failures();
  }

  std::uint64_t posted() const { return posted_; }
  std::uint64_t completed() const {
    return sync::AtomicWord<std::uint64_t>(&control()->completed).load_acquire();
  }
  cudaStream_t stream() const { return stream_; }

 private:
  SessionQueueControl* control() const {
    return reinterpret_cast<SessionQueueControl*>(control_.host());
  }

  cudaStream_t stream_ = nullptr;
  std::uint32_t depth_ = 1;
  int rank_ = -1;
  MappedHostMemory items_;
  MappedHostMemory control_;
  DeviceMemory words_;
  std::uint64_t posted_ = 0;
};

}  // namespace ccoll::transport::cuda
