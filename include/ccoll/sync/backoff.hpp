// ccoll/sync/backoff.hpp: how a waiter spends its time, and the clock its deadlines use.
//
// Waits in ccoll must make progress when there are more ranks than cores (16 thread-ranks or 4
// process-ranks on a 2-core machine): a waiter that spins holds the core its peer needs. So a
// waiter spins briefly with the CPU's pause instruction (the peer is probably running on another
// core and about to post), then yields its time slice, then sleeps for intervals that grow to
// kMaxSleepUs. On a GPU the same object spins and then uses __nanosleep (sm_70+), so that polling
// blocks leave issue slots to the blocks doing the copies.
#pragma once

#include <cstdint>

#include "ccoll/config.hpp"

#if !CCOLL_DEVICE_PASS
#include <chrono>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#endif

// Tunables (compile-time, for experiments): polls spent spinning, then yielding, before sleeping.
#ifndef CCOLL_BACKOFF_SPINS
#define CCOLL_BACKOFF_SPINS 64
#endif
#ifndef CCOLL_BACKOFF_YIELDS
#define CCOLL_BACKOFF_YIELDS 16
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

class Backoff {
 public:
  // Spins before the first yield; yields before the first sleep; the longest sleep.
  static constexpr std::uint32_t kSpins = CCOLL_BACKOFF_SPINS;
  static constexpr std::uint32_t kYields = CCOLL_BACKOFF_YIELDS;
  static constexpr std::uint32_t kMaxSleepUs = 64;

  CCOLL_HD void reset() { rounds_ = 0; }

  // One unit of waiting; call it each time a poll found nothing to do.
  CCOLL_HD void pause() {
#if CCOLL_DEVICE_PASS
    if (rounds_ < kSpins) {
      ++rounds_;
      cpu_relax();
    } else {
      __nanosleep(1000);
    }
#else
    if (rounds_ < kSpins) {
      ++rounds_;
      cpu_relax();
    } else if (rounds_ < kSpins + kYields) {
      ++rounds_;
      std::this_thread::yield();
    } else {
      // 1, 2, 4, ... kMaxSleepUs microseconds.
      const std::uint32_t k = rounds_ - kSpins - kYields;
      const std::uint32_t us = k < 6 ? (1u << k) : kMaxSleepUs;
      if (k < 6) ++rounds_;
      std::this_thread::sleep_for(std::chrono::microseconds(us < kMaxSleepUs ? us : kMaxSleepUs));
    }
#endif
  }

  // True once the waiter has spun long enough that checking a clock is cheap in comparison.
  CCOLL_HD bool past_spinning() const {
    return rounds_ >= kSpins;
  }

 private:
  std::uint32_t rounds_ = 0;
};

}  // namespace ccoll::sync
