// ccoll/sync/poll.hpp: the one polling loop behind every wait with an abort word and a deadline
// (FIFO counters, LowLatency lines and trailers), and the schedule a GPU waiter follows.
//
// A wait polls something cheap (a counter or a line in the peer's memory) and, now and then, two
// things that are not: the abort word and the clock. On the host the abort word is ordinary shared
// memory and the clock is read anyway to decide when to stop spinning, so both are checked every
// 16 polls while spinning and on every poll once the waiter yields or sleeps (sync/backoff.hpp).
// On a GPU the word a wait watches is a device-memory copy where every rank is on one GPU, and the
// host-mapped word itself where ranks span GPUs or processes, whose reads cross PCIe (about a
// microsecond, longer than a FIFO hop on the same GPU; transport/cuda/block_program.cuh,
// AbortWords). A device waiter reads it, and checks its deadline, once per
// DevicePollSchedule::kCheckNs of %globaltimer (sync/backoff.hpp), and sleeps only as that
// schedule says. An abort is then seen within about 16 us, and the hot path of a wait reads only
// its counter.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"

namespace ccoll::sync {

enum class WaitResult : std::uint8_t { Ok, Timeout, Aborted };

// Reads the abort word (always at system scope: the host may raise it).
CCOLL_HD inline bool abort_raised(const std::uint32_t* abort) {
  return abort != nullptr &&
         AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed() != 0;
}

// Polls ready() until it returns true (Ok), *abort != 0 (Aborted) or now_ns() >= deadline_ns
// (Timeout; 0: no deadline). A ready() that turns true by the deadline still counts: the last check
// polls once more. `policy`: how a host waiter spins, yields and sleeps (sync/backoff.hpp); the
// device follows DevicePollSchedule.
template <class Ready>
CCOLL_HD WaitResult poll_until(Ready&& ready, const std::uint32_t* abort, std::uint64_t deadline_ns,
                               const WaitPolicy& policy = WaitPolicy{}) {
  if (ready()) return WaitResult::Ok;
#if CCOLL_DEVICE_PASS
  (void)policy;
  DevicePollSchedule schedule;
  for (;;) {
    if (ready()) return WaitResult::Ok;
    const std::uint64_t now = now_ns();
    if (schedule.check_due(now)) {
      if (abort_raised(abort)) return WaitResult::Aborted;
      if (deadline_ns != 0 && now >= deadline_ns)
        return ready() ? WaitResult::Ok : WaitResult::Timeout;
    }
    const std::uint32_t sleep = schedule.sleep_ns(now);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if (sleep != 0) __nanosleep(sleep);
#else
    (void)sleep;
#endif
  }
#else
  Backoff backoff(policy);
  for (std::uint32_t polls = 0;; ++polls) {
    if (ready()) return WaitResult::Ok;
    // The clock and the abort word are read only every few polls while spinning, every poll once
    // the waiter yields or sleeps.
    if (backoff.past_spinning() || (polls & 15u) == 15u) {
      if (abort_raised(abort)) return WaitResult::Aborted;
      if (deadline_ns != 0 && now_ns() >= deadline_ns)
        return ready() ? WaitResult::Ok : WaitResult::Timeout;
    }
    backoff.pause();
  }
#endif
}

}  // namespace ccoll::sync
