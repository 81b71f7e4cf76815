// ccoll/sync/poll.hpp: the one polling loop behind every wait with an abort word and a deadline
// (FIFO counters, LowLatency lines and trailers), and the schedule a GPU waiter follows.
//
// A wait polls something cheap (a counter or a line in the peer's memory) and, now and then, two
// things that are not: the abort word and the clock. On the host the abort word is ordinary shared
// memory and the clock is read anyway to decide when to stop spinning, so both are checked every
// 16 polls while spinning and on every poll once the waiter yields or sleeps (sync/backoff.hpp).
// A device waiter reads its abort word, and checks its deadline, once per
// DevicePollSchedule::kCheckNs of %globaltimer (sync/backoff.hpp), and sleeps only as that
// schedule says. An abort is then seen within about 16 us, and the hot path of a wait reads only
// its counter.
//
// The word a GPU's waits watch is in device memory. A host-mapped word, which the host and ranks
// on other GPUs or in other processes raise, costs a PCIe read (about a microsecond, longer than
// a FIFO hop on one GPU), and hundreds of waiting blocks reading it every 16 us queue that many
// reads and stall each wait for its own. Where every rank is on one GPU, the host raises the
// device copy itself (transport/cuda/virtual_ranks.cuh). Where ranks span GPUs or processes, the
// device copy relays the host-mapped word (RelayedAbortWord, one per rank): at most one of the
// rank's waiters reads the host-mapped word per kRelayNs, the one that claims the read, and copies
// a raised word into the device copy that every other waiter reads. An abort raised elsewhere is
// then seen within about kRelayNs + 2 kCheckNs (48 us): the read falls due, a waiter's check
// claims it, and the other waiters' next checks see the copy. Only waits that go through
// abort_raised (poll_until and the step's verdict) may be given a relayed word: a reader that
// compares the word with 0 would take its idle value for a raised one.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"

namespace ccoll::sync {

enum class WaitResult : std::uint8_t { Ok, Timeout, Aborted };

// A device-memory abort word that relays a host-mapped one. Its word idles at kRelayIdle rather
// than 0: abort_raised() reads one word, as for a plain abort word, and only on kRelayIdle looks
// at the relay. Any other non-zero value is raised (a failing block stores 1, as into any abort
// word). The struct is the word's storage: a relayed word is passed as &relayed.word wherever an
// abort word goes (standard layout, the word first).
struct RelayedAbortWord {
  static constexpr std::uint32_t kRelayIdle = 0x8000'0000u;
  static constexpr std::uint64_t kRelayNs = 16'000;  // host-mapped reads, at most this often

  std::uint32_t word = kRelayIdle;
  std::uint32_t reserved = 0;
  std::uint64_t next_read_ns = 0;       // the clock from which the next read may be claimed
  const std::uint32_t* host = nullptr;  // the host-mapped word it relays
  std::uint64_t host_reads = 0;         // reads of `host` so far (diagnostics and tests)
};

// The relay's check: the waiter that claims the read due at `now` (a compare-exchange on
// next_read_ns, so one of the waiters that find it due) reads the host-mapped word and raises the
// device word if it is raised. True: the host-mapped word was found raised. Out of line: only
// relayed words take it, and the polling loops keep their registers.
CCOLL_HD CCOLL_NOINLINE inline bool relay_abort(RelayedAbortWord* r, std::uint64_t now) {
  const AtomicWord<std::uint64_t> next(&r->next_read_ns);
  std::uint64_t due = next.load_relaxed();
  if (now < due || !next.compare_exchange(due, now + RelayedAbortWord::kRelayNs)) return false;
  AtomicWord<std::uint64_t>(&r->host_reads).fetch_add_release(1);
  if (AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(r->host)).load_relaxed() == 0)
    return false;
  AtomicWord<std::uint32_t>(&r->word).store_relaxed(1u);
  return true;
}

// Reads the abort word (always at system scope: the host may raise it); a relayed word
// (RelayedAbortWord) also reads its host-mapped word when that read is due at `now`.
CCOLL_HD inline bool abort_raised(const std::uint32_t* abort, std::uint64_t now) {
  if (abort == nullptr) return false;
  const std::uint32_t v =
      AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed();
  if (v != RelayedAbortWord::kRelayIdle) return v != 0;
  return relay_abort(reinterpret_cast<RelayedAbortWord*>(const_cast<std::uint32_t*>(abort)), now);
}

CCOLL_HD inline bool abort_raised(const std::uint32_t* abort) {
  if (abort == nullptr) return false;
  const std::uint32_t v =
      AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed();
  if (v != RelayedAbortWord::kRelayIdle) return v != 0;
  return abort_raised(abort, now_ns());
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
      // What the waiter waits for may have come with the abort: a wait that is satisfied says
      // so (a peer's last descriptor, say, read before its disagreement is reported).
      if (abort_raised(abort, now)) return ready() ? WaitResult::Ok : WaitResult::Aborted;
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
      if (abort_raised(abort)) return ready() ? WaitResult::Ok : WaitResult::Aborted;
      if (deadline_ns != 0 && now_ns() >= deadline_ns)
        return ready() ? WaitResult::Ok : WaitResult::Timeout;
    }
    backoff.pause();
  }
#endif
}

}  // namespace ccoll::sync
