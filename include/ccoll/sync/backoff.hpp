// ccoll/sync/backoff.hpp: how a waiter spends its time, and the clock its deadlines use.
//
// Waits in ccoll must make progress when there are more ranks than cores (e.g. 16 thread-ranks or 4
// process-ranks on 2 cores): a waiter that spins holds the core its peer needs. So a host
// waiter spins with the CPU's pause instruction for a while (WaitPolicy::spin_ns: the peer is
// probably running on another core and about to post; none at all when ranks outnumber cores),
// then yields its time slice (WaitPolicy::yield_ns), then sleeps for intervals that grow to
// kMaxSleepUs. On a GPU the same object follows DevicePollSchedule: it spins for tens of
// microseconds, then uses __nanosleep (sm_70+), so that polling blocks leave issue slots to the
// blocks doing the copies.
#pragma once

#include <time.h>  // coarse_now_ns: host code, parsed in nvcc's device pass too

#include <chrono>  // deadline_after: host code, parsed in nvcc's device pass too
#include <cstdint>
#include <limits>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"

#if !CCOLL_DEVICE_PASS
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#endif

namespace ccoll::sync {

// Nanoseconds on a monotonic clock: steady_clock on the host, %globaltimer on the device. Deadlines
// are absolute values of this clock (0 = none).
CCOLL_HD inline std::uint64_t now_ns() {
#if CCOLL_DEVICE_PASS
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
#endif
}

// The now_ns() clock as of the scheduler's last tick: behind now_ns() by at most one tick (1-10
// ms), never ahead, and several times cheaper to read on hosts whose clock source is slow to read
// (a VM's, say: 3.5 ns against 21 ns measured). For the start of a deadline that is much longer
// than a tick: the deadline then comes at most a tick early.
inline std::uint64_t coarse_now_ns() {
#if defined(__linux__)
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // libstdc++'s steady_clock is CLOCK_MONOTONIC
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
#else
  return now_ns();
#endif
}

// `timeout` after the clock reading `now`, saturating: a timeout too large to represent
// (milliseconds::max(), say) never expires instead of wrapping into the past. Host only: device
// code receives its deadlines as clock values.
inline std::uint64_t deadline_after(std::uint64_t now, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return now;
  constexpr std::uint64_t kNsPerMs = 1000000;
  const auto ms = static_cast<std::uint64_t>(timeout.count());
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - now;
  return ms >= limit / kNsPerMs ? std::numeric_limits<std::uint64_t>::max() : now + ms * kNsPerMs;
}

inline std::uint64_t deadline_after(std::chrono::milliseconds timeout) {
  return deadline_after(now_ns(), timeout);
}

CCOLL_HD inline void cpu_relax() {
#if CCOLL_DEVICE_PASS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  __nanosleep(32);
#endif
#elif defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a host waiter spins and yields before it starts sleeping, measured from its first
// unsuccessful poll. Time, not poll counts: a pause instruction takes 10 to 150 cycles depending on
// the CPU, and a yield costs a fraction of a microsecond when the core has nothing else to run but
// a whole time slice when it has.
struct WaitPolicy {
  // Spinning pays off when the peer is running on another core and about to post. When ranks
  // outnumber cores the peer may be waiting for this very core, so spinning only delays it.
  std::uint64_t spin_ns = 20'000;
  // Yielding hands the core to a peer that shares it (oversubscription) at the price of one system
  // call per poll. A sleep costs far more than it says: Linux adds a timer slack of 50 us to every
  // sleep of a normal thread, which would stall a pipeline whose steps take a few microseconds, so
  // a waiter sleeps only once the wait has lasted long enough to be a late peer, not a busy one.
  std::uint64_t yield_ns = 1'000'000;
  // Where the waits under this policy keep the spin they learned (nullptr: spin_ns, always). Ranks
  // no more than the cores may still share one: an affinity mask, a container's CPU limit, or the
  // scheduler placing two ranks on one core for a while. A waiter then spins its whole spin_ns
  // every time before its peer can run (20 us per message, measured with two ranks on one core:
  // 22 us per 8-byte broadcast against 0.21 on two), so waits learn (learned_spin): a wait that
  // ended right after a yield that handed the core to someone else halves the spin, down to
  // kMinLearnedSpinNs; one that ended while spinning, or after a yield that found no one to hand
  // the core to, doubles it back towards spin_ns. One word per communicator, read and written
  // relaxed: a hint.
  std::uint64_t* learned_spin_ns = nullptr;

  // The policy for `ranks` ranks sharing `cores` cores (ranks > cores: no spinning).
  static constexpr WaitPolicy for_ranks(unsigned ranks, unsigned cores) {
    WaitPolicy p;
    if (cores > 0 && ranks > cores) p.spin_ns = 0;
    return p;
  }
};

// The schedule of a GPU waiter, as plain arithmetic on %globaltimer values (so the host tests it
// with made-up clocks):
//   - no sleep in the first kSpinNs of a wait: a peer block that is about to post is a microsecond
//     or less away (a FIFO hop on one GPU), and a sleep of even 1 us doubles such a hop;
//   - then sleeps that grow from kFirstSleepNs to kMaxSleepNs, so that a waiter whose peer is late
//     leaves issue slots to the blocks doing the copies;
//   - the abort word and the deadline checked once per kCheckNs (sync/poll.hpp): where the word is
//     host-mapped each read crosses PCIe, and even where it is in device memory a check per poll
//     would double the poll's cost.
struct DevicePollSchedule {
  static constexpr std::uint64_t kSpinNs = 50'000;   // no sleep before this much waiting
  static constexpr std::uint64_t kCheckNs = 16'000;  // abort word and deadline, at most this often
  static constexpr std::uint32_t kFirstSleepNs = 64;
  static constexpr std::uint32_t kMaxSleepNs = 1'000;

  std::uint64_t start_ns = 0;  // the first unsuccessful poll (0: none yet)
  std::uint64_t last_check_ns = 0;

  // Starts the schedule at the first unsuccessful poll; later calls do nothing.
  CCOLL_HD void start(std::uint64_t now) {
    if (start_ns != 0) return;
    start_ns = now == 0 ? 1 : now;
    last_check_ns = start_ns;
  }

  // Called after each unsuccessful poll with the clock's value: true when the waiter should now
  // read the abort word and compare the clock with its deadline, every kCheckNs from the start.
  CCOLL_HD bool check_due(std::uint64_t now) {
    if (start_ns == 0) {
      start(now);
      return false;
    }
    if (now - last_check_ns < kCheckNs) return false;
    last_check_ns = now;
    return true;
  }

  // How long to sleep after an unsuccessful poll at `now` (0: spin on): nothing during the first
  // kSpinNs, then kFirstSleepNs doubling with every further kSpinNs of waiting, up to kMaxSleepNs.
  CCOLL_HD std::uint32_t sleep_ns(std::uint64_t now) const {
    if (start_ns == 0 || now - start_ns < kSpinNs) return 0;
    const std::uint64_t periods = (now - start_ns - kSpinNs) / kSpinNs;
    std::uint64_t ns = kFirstSleepNs;
    for (std::uint64_t k = 0; k < periods && ns < kMaxSleepNs; ++k) ns *= 2;
    return static_cast<std::uint32_t>(ns < kMaxSleepNs ? ns : kMaxSleepNs);
  }
};

// The least spin a policy's waits learn (WaitPolicy::learned_spin_ns): about one clock read's worth
// of pauses (Backoff::kSpinsPerClockRead), so that a peer on another core that answers at once is
// still caught spinning, and the learned spin can grow back from it.
inline constexpr std::uint64_t kMinLearnedSpinNs = 1'000;
// A yield that returns after this long ran someone else on the core meanwhile (one that finds no
// one to run returns in about 0.25 us on the development VM).
inline constexpr std::uint64_t kHandedOverNs = 3'000;

// How a wait ended, as far as its spin is concerned.
enum class WaitEnd : std::uint8_t {
  unpaused,     // at once: it says nothing
  spinning,     // while spinning
  yielding,     // after a yield that found no one else to run
  handed_over,  // right after a yield that ran someone else on the core: the peer, most likely
  sleeping,     // after sleeping: a late peer, not a busy one; it says nothing
};

// The spin the next waits under `policy` take after a wait that spun `spin_ns` and ended as `end`
// (WaitPolicy::learned_spin_ns): half (down to kMinLearnedSpinNs) after a hand-over, double (from
// at least 2 kMinLearnedSpinNs, up to policy.spin_ns) after spinning or yielding, `spin_ns` after
// a wait that says nothing. Halving, not dropping to the least at once: a yield also looks long
// when the hypervisor or a kernel thread took the core for a moment (on the 2-vCPU development
// VM, one wait in a few hundred between two threads on two cores), and one such wait should
// cost the next waits little; two ranks that do share a core reach the least within five waits.
CCOLL_HD constexpr std::uint64_t learned_spin(const WaitPolicy& policy, std::uint64_t spin_ns,
                                              WaitEnd end) {
  if (end == WaitEnd::unpaused || end == WaitEnd::sleeping) return spin_ns;
  if (end == WaitEnd::handed_over)
    return spin_ns / 2 > kMinLearnedSpinNs ? spin_ns / 2 : kMinLearnedSpinNs;
  std::uint64_t next = spin_ns * 2;
  if (next < 2 * kMinLearnedSpinNs) next = 2 * kMinLearnedSpinNs;
  return next < policy.spin_ns ? next : policy.spin_ns;
}

class Backoff {
 public:
  static constexpr std::uint32_t kMaxSleepUs = 64;
  static constexpr std::uint32_t kSpinsPerClockRead = 16;

  CCOLL_HD Backoff() {}
  CCOLL_HD explicit Backoff(const WaitPolicy& policy) : policy_(policy) {}
  // A wait's end: what it learned goes to the policy's word.
  CCOLL_HD ~Backoff() {
#if !CCOLL_DEVICE_PASS
    learn();
#endif
  }
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  // Starts another wait (the previous one ended: what it learned is kept).
  CCOLL_HD void reset() {
#if !CCOLL_DEVICE_PASS
    learn();
#endif
    spin_known_ = false;
    rounds_ = 0;
    phase_ = 0;
    start_ns_ = 0;
    spins_ = 0;
    handed_over_ = false;
    device_ = DevicePollSchedule{};
  }

  // One unit of waiting; call it each time a poll found nothing to do.
  CCOLL_HD void pause() {
#if CCOLL_DEVICE_PASS
    const std::uint64_t now = now_ns();
    last_ns_ = now;
    device_.start(now);
    const std::uint32_t sleep = device_.sleep_ns(now);
    if (sleep == 0) return;
    phase_ = 2;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(sleep);
#endif
#else
    // While spinning, the clock is read only every kSpinsPerClockRead pauses, the first time
    // included: a clock read can cost as much as several polls (a VM's clock source), it only
    // decides when to stop spinning, and most waits of a busy peer end within a few pauses. A
    // policy without spinning (more ranks than cores) reads it at once, to yield at once.
    // The learned spin is read at the first pause: most waits end before one.
    if (!spin_known_) {
      spin_ns_ = spin_to_take();
      spin_known_ = true;
    }
    if (phase_ == 0 && spin_ns_ != 0 && (++spins_ % kSpinsPerClockRead) != 0) {
      cpu_relax();
      return;
    }
    const std::uint64_t now = now_ns();
    last_ns_ = now;
    if (start_ns_ == 0) start_ns_ = now;
    const std::uint64_t waited = now - start_ns_;
    if (waited < spin_ns_) {
      phase_ = 0;
      cpu_relax();
    } else if (waited < spin_ns_ + policy_.yield_ns) {
      phase_ = 1;
      std::this_thread::yield();
      // Only the last yield before the poll that succeeds counts: the peer posted while it ran
      // someone else here. A long yield that the wait outlasted ran someone else, not the peer.
      if (policy_.learned_spin_ns != nullptr && policy_.spin_ns != 0) {
        last_ns_ = now_ns();
        handed_over_ = last_ns_ - now >= kHandedOverNs;
      }
    } else {
      // 1, 2, 4, ... kMaxSleepUs microseconds (plus the kernel's timer slack).
      phase_ = 2;
      const std::uint32_t k = rounds_;
      const std::uint32_t us = k < 6 ? (1u << k) : kMaxSleepUs;
      if (k < 6) ++rounds_;
      std::this_thread::sleep_for(std::chrono::microseconds(us < kMaxSleepUs ? us : kMaxSleepUs));
    }
#endif
  }

  // The clock as the last pause read it (0: no pause has read it since construction): a waiter
  // checks its deadline against this instead of reading the clock on every poll.
  CCOLL_HD std::uint64_t last_ns() const {
    return last_ns_;
  }

  // True once the waiter has stopped spinning (yielding or sleeping): a clock read is then cheap
  // compared with a poll.
  CCOLL_HD bool past_spinning() const {
    return phase_ > 0;
  }
  // True once the waiter sleeps between polls.
  CCOLL_HD bool sleeping() const {
    return phase_ > 1;
  }
  // How long this wait spins before it yields.
  CCOLL_HD std::uint64_t spin_ns() const {
#if !CCOLL_DEVICE_PASS
    if (!spin_known_) return spin_to_take();
#endif
    return spin_ns_;
  }
  // How the wait would end if its poll succeeded now.
  CCOLL_HD WaitEnd ended() const {
    if (spins_ == 0 && start_ns_ == 0) return WaitEnd::unpaused;
    if (phase_ == 0) return WaitEnd::spinning;
    if (phase_ > 1) return WaitEnd::sleeping;
    return handed_over_ ? WaitEnd::handed_over : WaitEnd::yielding;
  }

 private:
#if !CCOLL_DEVICE_PASS
  std::uint64_t spin_to_take() const {
    if (policy_.learned_spin_ns == nullptr) return policy_.spin_ns;
    const std::uint64_t v = AtomicWord<std::uint64_t>(policy_.learned_spin_ns).load_relaxed();
    return v < policy_.spin_ns ? v : policy_.spin_ns;
  }
  // What the wait that is ending says about spinning (WaitPolicy::learned_spin_ns).
  void learn() const {
    if (policy_.learned_spin_ns == nullptr || policy_.spin_ns == 0) return;
    const WaitEnd end = ended();
    if (end == WaitEnd::unpaused || end == WaitEnd::sleeping) return;
    const std::uint64_t next = learned_spin(policy_, spin_ns_, end);
    const AtomicWord<std::uint64_t> word(policy_.learned_spin_ns);
    if (word.load_relaxed() != next) word.store_relaxed(next);
  }
#endif

  WaitPolicy policy_{};
  std::uint64_t spin_ns_ = WaitPolicy{}.spin_ns;
  bool spin_known_ = false;   // spin_ns_ read from the policy for this wait
  bool handed_over_ = false;  // the last yield of this wait ran someone else on the core
  std::uint32_t rounds_ = 0;
  std::uint32_t phase_ = 0;  // 0: spinning, 1: yielding, 2: sleeping
  std::uint64_t start_ns_ = 0;
  std::uint64_t last_ns_ = 0;
  std::uint32_t spins_ = 0;
  DevicePollSchedule device_{};
};

}  // namespace ccoll::sync
