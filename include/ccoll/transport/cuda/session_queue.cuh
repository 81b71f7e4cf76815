// ccoll/transport/cuda/session_queue.cuh: the work queue of a persistent session kernel, shared by
// every CUDA transport's session (session.cuh for CudaVirtualRanks, p2p_session.cuh for CudaP2P).
//
// The protocol (the ring of slots and their tagged records, `completed`, the blocks' arrivals) is
// session_protocol.hpp's, plain code the fast suite runs on host threads. This header adds what
// needs CUDA: the queue's memory and the session's stream.
//
// Memory: a session's queue lives in memory its executor allocated when it was built
// (SessionQueueMemory, kMaxSessionDepth slots), so that opening and closing a session allocates
// and frees nothing. Freeing waits for the whole device (device_memory.cuh), where the session
// kernels of other ranks, or of this rank's next session, may be waiting for this thread.
//
// The host half (SessionQueue) adds to the ring the tickets' bounded waits: a wait notices a
// failed executor and a kernel that ended without completing (the latter a driver call, paced by
// SessionDriverPace). A transport's session adds what its records carry and its kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "ccoll/core/error.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/device_memory.cuh"
#include "ccoll/transport/cuda/session_protocol.hpp"

namespace ccoll::transport::cuda {

// The memory of one session queue at a time: kMaxSessionDepth slots of `stride` records (one per
// rank of the session kernel) and the control word in host-mapped memory, the arrival and
// completion words in device memory. An executor allocates one per session it may have open at
// once, when it is built.
class SessionQueueMemory {
 public:
  SessionQueueMemory() = default;
  // On the current device (`rank`: for errors).
  SessionQueueMemory(int rank, std::uint32_t stride)
      : host_(sizeof(SessionQueueControl) + sizeof(SessionRecord) * kMaxSessionDepth * stride),
        words_(sizeof(std::uint64_t) * (kMaxSessionDepth + 1)),
        rank_(rank),
        stride_(stride) {
    static_assert(sizeof(SessionQueueControl) % alignof(SessionRecord) == 0);
  }

  bool empty() const { return host_.size() == 0; }
  int rank() const { return rank_; }
  std::uint32_t stride() const { return stride_; }
  SessionQueueControl* control_host() const {
    return reinterpret_cast<SessionQueueControl*>(host_.host());
  }
  SessionRecord* records_host() const {
    return reinterpret_cast<SessionRecord*>(host_.host() + sizeof(SessionQueueControl));
  }
  SessionQueueView view(std::uint32_t depth) const {
    SessionQueueView v;
    v.control = reinterpret_cast<SessionQueueControl*>(host_.device());
    v.records = reinterpret_cast<SessionRecord*>(host_.device() + sizeof(SessionQueueControl));
    v.depth = depth;
    v.stride = stride_;
    v.arrivals = reinterpret_cast<std::uint64_t*>(words_.get());
    v.completed = v.arrivals + depth;
    return v;
  }
  std::byte* words() const { return words_.get(); }

 private:
  MappedHostMemory host_;
  DeviceMemory words_;
  int rank_ = -1;
  std::uint32_t stride_ = 1;
};

// The host half: the ring of items on a session's stream, tickets, and waits that notice a failed
// or ended kernel. CheckFailures: a callable that throws the executor's failure, if any.
class SessionQueue {
 public:
  SessionQueue() = default;
  // Starts a queue of `depth` (1..kMaxSessionDepth) items of `used` records (<= the memory's
  // stride) in `memory`, whose previous session, if any, has ended. Its device words are zeroed on
  // `stream`, before the session kernel that is launched there next: stream order, no wait.
  SessionQueue(const SessionQueueMemory& memory, std::uint32_t depth, std::uint32_t used,
               cudaStream_t stream)
      : stream_(stream), rank_(memory.rank()) {
    if (depth == 0 || depth > kMaxSessionDepth)
      throw_invalid_argument(rank_, "depth", "1.." + std::to_string(kMaxSessionDepth),
                             std::to_string(depth));
    if (memory.empty())
      throw Error(ErrorCode::InvalidArgument, rank_, "the executor has no session queue memory");
    if (used == 0 || used > memory.stride())
      throw_invalid_argument(rank_, "records per item", "1.." + std::to_string(memory.stride()),
                             std::to_string(used));
    ring_ = SessionRing(memory.records_host(), memory.control_host(), depth, memory.stride(), used);
    view_ = memory.view(depth);
    check(cudaMemsetAsync(memory.words(), 0, sizeof(std::uint64_t) * (depth + 1), stream_),
          "cudaMemsetAsync(session)", rank_);
  }

  SessionQueueView view() const { return view_; }

  // Waits until the next item's slot is free (while `depth` items are outstanding).
  template <class CheckFailures>
  void next(CheckFailures&& check_failures) {
    const std::uint64_t freeing = ring_.ticket_freeing_next();
    if (freeing != 0) wait(freeing, check_failures);
  }
  // Throws if a record cannot hold `w` (an address or count above 2^48).
  void check_encodable(const SessionWork& w) const { check_session_encodable(w, rank_); }
  // Writes the next item's records (after next(); one per rank of the kernel, as many as the
  // queue's `used`), which publishes each to the blocks that read it; its ticket (1, 2, ...).
  // Refuses, writing nothing, what a record cannot hold: blocks of some ranks would otherwise run
  // a call the others never see.
  std::uint64_t post(std::span<const SessionWork> records) {
    if (records.size() != ring_.used())
      throw_invalid_argument(rank_, "records", std::to_string(ring_.used()),
                             std::to_string(records.size()));
    for (const SessionWork& w : records) check_encodable(w);
    for (std::uint32_t i = 0; i < ring_.used(); ++i) ring_.write(i, records[i]);
    return ring_.post();
  }

  // Has the item of `ticket` completed? Throws the executor's failure, or that the kernel ended
  // (a fault, say) before completing it, instead of letting a caller wait forever. The kernel's
  // state is a driver call (cudaStreamQuery), asked only once the queue has made no progress for a
  // while, and then seldom (SessionDriverPace): calls that complete one after another pay none.
  template <class CheckFailures>
  bool done(std::uint64_t ticket, CheckFailures&& check_failures) {
    if (ticket > ring_.posted())
      throw_invalid_argument(rank_, "ticket",
                             "<= " + std::to_string(ring_.posted()) + " (calls enqueued)",
                             std::to_string(ticket));
    if (ring_.has_completed(ticket)) return true;
    check_failures();
    if (!pace_.due(ring_.completed(), sync::now_ns())) return false;
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e != cudaErrorNotReady) {
      check(e, "the session kernel", rank_);
      if (ring_.has_completed(ticket)) return true;
      check_failures();
      throw Error(ErrorCode::System, rank_,
                  "the session kernel ended before call " + std::to_string(ticket) + " completed");
    }
    return false;
  }

  // Waits for `ticket` (a host spin with backoff: the kernel never returns to the host). Each
  // poll reads the completion word alone (host memory); the executor's failures and the kernel's
  // state (done()) only every kPollsPerCheck polls.
  template <class CheckFailures>
  void wait(std::uint64_t ticket, CheckFailures&& check_failures) {
    sync::Backoff backoff;
    for (std::uint32_t polls = 0;; ++polls) {
      if (polls % kPollsPerCheck == 0) {
        if (done(ticket, check_failures)) return;
      } else if (ring_.has_completed(ticket)) {
        return;
      }
      backoff.pause();
    }
  }
  static constexpr std::uint32_t kPollsPerCheck = 256;

  // Lets the posted items finish, posts the stop item and waits for the kernel: the session's own
  // stream, nothing else. The posted items are waited for as wait() does, so that a failure, or
  // a peer found gone, ends the close at once; on a failure the kernel has ended already, and
  // the wait throws it.
  template <class CheckFailures>
  void close(CheckFailures&& check_failures) {
    if (ring_.posted() != 0) wait(ring_.posted(), check_failures);
    next(check_failures);
    ring_.post_stop();
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(session)", rank_);
    check_failures();
  }

  std::uint64_t posted() const { return ring_.posted(); }
  std::uint64_t completed() const { return ring_.completed(); }
  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  int rank_ = -1;
  SessionRing ring_;
  SessionQueueView view_;
  SessionDriverPace pace_;
};

}  // namespace ccoll::transport::cuda
