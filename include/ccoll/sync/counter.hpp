// ccoll/sync/counter.hpp: monotonic counters with post, wait and check ([C-Cube] Fig. 11).
//
// [C-Cube] builds its semaphores from a lock (atomicCAS + threadfence) around a count: post
// increments it, wait blocks until it is non-zero and decrements it, check only reads it. ccoll
// keeps the three operations but drops the lock: every counter has exactly one writer (a FIFO's
// tail is written only by its sender, its head only by its receiver) and only grows, so
//   - post is a release store (or a release fetch_add where several posts may race),
//   - wait(target) is "acquire-load until value >= target": nothing is consumed, so a waiter
//     never needs to write the counter and no lock is needed,
//   - check(target) is one acquire load, for callers that interleave several waits themselves
//     ([C-Cube] uses it for gradient queuing; ccoll's host executors use it to run several
//     channels of a rank on one thread).
// Counters never reset: a collective call adds its message count to a per-connection base, so a
// stale post from an earlier call can never satisfy a later wait.
//
// A wait can fail: it gives up at a deadline (Timeout) or when a shared abort word becomes
// non-zero because another rank failed (Aborted). It never hangs silently.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/poll.hpp"

namespace ccoll::sync {

// S: the scope of the threads that post and wait (sync/atomic.hpp). The abort word is always read
// at system scope: the host may raise it.
template <Scope S = Scope::system>
class BasicCounter {
 public:
  CCOLL_HD explicit BasicCounter(std::uint64_t* word) : word_(word) {}

  CCOLL_HD std::uint64_t* word() const { return word_; }
  CCOLL_HD std::uint64_t value() const {
    return AtomicWord<std::uint64_t, S>(word_).load_acquire();
  }

  // Single writer: publishes `value` and everything written before it.
  CCOLL_HD void post_value(std::uint64_t v) const {
    AtomicWord<std::uint64_t, S>(word_).store_release(v);
  }
  // Single writer, after a fence that already orders everything `v` publishes (a GPU block's
  // barrier and its leader's fence, transport/cuda/block_group.cuh): the fence and this relaxed
  // store form the release, so a step that posts several counters pays one fence, not one each
  // (on a GPU every release store is a fence of its own).
  CCOLL_HD void post_value_after_fence(std::uint64_t v) const {
    AtomicWord<std::uint64_t, S>(word_).store_relaxed(v);
  }
  // Several writers: adds n.
  CCOLL_HD void post(std::uint64_t n = 1) const {
    AtomicWord<std::uint64_t, S>(word_).fetch_add_release(n);
  }
  // Non-blocking: has the counter reached target? (acquire: data posted before it is visible)
  CCOLL_HD bool check(std::uint64_t target) const { return value() >= target; }

  // Blocks until the counter reaches target, *abort != 0, or now_ns() >= deadline_ns (0: none).
  // `policy`: how long a host waiter spins and yields before sleeping (sync/backoff.hpp).
  CCOLL_HD WaitResult wait(std::uint64_t target, const std::uint32_t* abort,
                           std::uint64_t deadline_ns,
                           const WaitPolicy& policy = WaitPolicy{}) const {
    return poll_until([&] { return check(target); }, abort, deadline_ns, policy);
  }

 private:
  std::uint64_t* word_;
};

using Counter = BasicCounter<Scope::system>;

}  // namespace ccoll::sync
