// ccoll/sync/futex.hpp: blocking on a word of shared memory until another process changes it.
//
// A waiter that polls (spin, yield, sleep; sync/backoff.hpp) keeps its core looking busy while it
// spins or yields, and a sleeping one wakes up to 50 us late (the kernel's timer slack). When ranks
// outnumber cores, a waiter that blocks in the kernel instead frees its core at once: the scheduler
// can run a rank that has work there, pulling it from the other core if need be, and the poster's
// wake makes the waiter runnable as soon as the word changes. Linux's futex does both on a word of
// a shared mapping (not FUTEX_PRIVATE: the waiter and the poster may be different processes). A
// futex wake is a system call, so a poster should only issue it when a waiter announced itself
// (docs/sync.md, "More ranks than cores", measures what each kind of wait costs).
//
// Host only. Elsewhere than on Linux, futex_wait sleeps for a short while and futex_wake does
// nothing: a waiter must treat every return as "look again", which it has to do anyway (a futex
// wait may also return spuriously).
#pragma once

#include <atomic>
#include <cstdint>

#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#else
#include <chrono>
#include <thread>
#endif

namespace ccoll::sync {

// Sleeps while *word == expected, for at most timeout_ns (0: returns at once). Returns when the
// word differs, a wake arrived, the time is up or a signal came; the caller re-reads the word.
inline void futex_wait(std::uint32_t* word, std::uint32_t expected, std::uint64_t timeout_ns) {
#if defined(__linux__)
  constexpr std::uint64_t kNsPerS = 1'000'000'000;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout_ns / kNsPerS);
  ts.tv_nsec = static_cast<long>(timeout_ns % kNsPerS);
  // EAGAIN (the word already changed), EINTR and ETIMEDOUT all mean "look again".
  (void)::syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
#else
  (void)word;
  (void)expected;
  std::this_thread::sleep_for(std::chrono::nanoseconds(timeout_ns < 50'000 ? timeout_ns : 50'000));
#endif
}

// Wakes every waiter blocked on word (processes included). Returns how many were woken (0 where
// futexes do not exist).
inline int futex_wake(std::uint32_t* word) {
#if defined(__linux__)
  constexpr int kAll = 0x7fffffff;
  return static_cast<int>(::syscall(SYS_futex, word, FUTEX_WAKE, kAll, nullptr, nullptr, 0));
#else
  (void)word;
  return 0;
#endif
}

// A monotonic 32-bit counter with one poster and any number of blocking waiters, in two words of
// shared memory that the caller provides (`value` and `waiters`, zeroed before first use; on a line
// of their own, like every ccoll counter). The poster pays the wake's system call only while a
// waiter is registered. No wake-up is lost: the waiter registers, then re-reads the value before
// blocking, and the poster stores the value, then reads the registration; both pairs are
// sequentially consistent, so either the waiter sees the new value or the poster sees the waiter
// (and a wake that comes before the waiter blocks makes the kernel's compare fail, so it returns
// at once). Every wait is bounded by a deadline and an abort word, as Counter::wait is.
class BlockingWord {
 public:
  BlockingWord(std::uint32_t* value, std::uint32_t* waiters) : value_(value), waiters_(waiters) {}

  std::uint32_t value() const { return AtomicWord<std::uint32_t>(value_).load_acquire(); }

  // Publishes v (and everything written before it) and wakes the registered waiters.
  void post_value(std::uint32_t v) const {
    std::atomic_ref<std::uint32_t>(*value_).store(v, std::memory_order_seq_cst);
    if (std::atomic_ref<std::uint32_t>(*waiters_).load(std::memory_order_seq_cst) != 0)
      (void)futex_wake(value_);
  }

  // Waits until value() >= target (compared modulo 2^32 as a signed distance, so the count may
  // wrap), *abort != 0 or now_ns() >= deadline_ns (0: none). Polls for `spin_ns` first (0 when
  // ranks outnumber cores), then blocks in slices of at most `slice_ns`, so that the abort word
  // and the deadline are looked at even if no wake comes (an abort raised by a crashed process
  // wakes nobody).
  WaitResult wait(std::uint32_t target, const std::uint32_t* abort, std::uint64_t deadline_ns,
                  std::uint64_t spin_ns = 0, std::uint64_t slice_ns = kSliceNs) const {
    const std::uint64_t start = now_ns();
    for (std::uint32_t polls = 0;; ++polls) {
      if (reached(value(), target)) return WaitResult::Ok;
      if (now_ns() - start >= spin_ns) break;
      if ((polls & 15u) == 15u && stopped(abort, deadline_ns)) return last_look(target, abort);
      cpu_relax();
    }
    for (;;) {
      std::atomic_ref<std::uint32_t> reg(*waiters_);
      reg.fetch_add(1, std::memory_order_seq_cst);
      const std::uint32_t seen =
          std::atomic_ref<std::uint32_t>(*value_).load(std::memory_order_seq_cst);
      if (!reached(seen, target)) {
        std::uint64_t slice = slice_ns;
        if (deadline_ns != 0) {
          const std::uint64_t now = now_ns();
          slice = now >= deadline_ns ? 0 : (deadline_ns - now < slice ? deadline_ns - now : slice);
        }
        if (slice > 0) futex_wait(value_, seen, slice);
      }
      reg.fetch_sub(1, std::memory_order_seq_cst);
      if (reached(value(), target)) return WaitResult::Ok;
      if (stopped(abort, deadline_ns)) return last_look(target, abort);
    }
  }

  // How long one blocking wait may last before the abort word and the deadline are read again.
  static constexpr std::uint64_t kSliceNs = 1'000'000;

 private:
  static bool reached(std::uint32_t v, std::uint32_t target) {
    return static_cast<std::int32_t>(v - target) >= 0;
  }
  static bool stopped(const std::uint32_t* abort, std::uint64_t deadline_ns) {
    if (abort != nullptr &&
        AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed() != 0)
      return true;
    return deadline_ns != 0 && now_ns() >= deadline_ns;
  }
  WaitResult last_look(std::uint32_t target, const std::uint32_t* abort) const {
    if (reached(value(), target)) return WaitResult::Ok;
    if (abort != nullptr &&
        AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed() != 0)
      return WaitResult::Aborted;
    return WaitResult::Timeout;
  }

  std::uint32_t* value_;
  std::uint32_t* waiters_;
};

}  // namespace ccoll::sync
