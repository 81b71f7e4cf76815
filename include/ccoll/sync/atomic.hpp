// ccoll/sync/atomic.hpp: the one atomic word type of ccoll's synchronisation, for host and device.
//
// Counters live in memory that several threads, processes or GPU blocks share (a heap area, a
// POSIX shared-memory segment, device memory). libcu++'s cuda::atomic_ref serves all of them from
// the same code, host and device; without the CUDA toolkit, host code uses std::atomic_ref (C++20).
// Only the operations a FIFO counter needs are exposed: acquire loads, release stores, a release
// fetch_add and a compare-exchange for the abort record.
//
// The scope is the narrowest set of threads that share the word: system (the default) for host
// threads, processes and GPUs that map each other's memory; device for the blocks of one kernel on
// one GPU (transport/cuda/virtual_ranks.cuh), whose release stores then need only a GPU-wide fence
// instead of a system-wide one. Host code ignores the scope: every host atomic is system-wide.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"

#if CCOLL_HAVE_LIBCUDACXX
#include <cuda/atomic>
#else
#include <atomic>
#endif

namespace ccoll::sync {

enum class Scope : std::uint8_t { device, system };

template <class T, Scope S = Scope::system>
class AtomicWord {
#if CCOLL_HAVE_LIBCUDACXX
  static constexpr auto kScope =
      S == Scope::device ? cuda::thread_scope_device : cuda::thread_scope_system;
  using Ref = cuda::atomic_ref<T, kScope>;
  static constexpr auto kRelaxed = cuda::memory_order_relaxed;
  static constexpr auto kAcquire = cuda::memory_order_acquire;
  static constexpr auto kRelease = cuda::memory_order_release;
  static constexpr auto kAcqRel = cuda::memory_order_acq_rel;
#else
  using Ref = std::atomic_ref<T>;
  static constexpr auto kRelaxed = std::memory_order_relaxed;
  static constexpr auto kAcquire = std::memory_order_acquire;
  static constexpr auto kRelease = std::memory_order_release;
  static constexpr auto kAcqRel = std::memory_order_acq_rel;
#endif

 public:
  CCOLL_HD explicit AtomicWord(T* word) : word_(word) {}

  CCOLL_HD T load_acquire() const {
    return Ref(*word_).load(kAcquire);
  }
  CCOLL_HD T load_relaxed() const {
    return Ref(*word_).load(kRelaxed);
  }
  CCOLL_HD void store_release(T v) const {
    Ref(*word_).store(v, kRelease);
  }
  CCOLL_HD void store_relaxed(T v) const {
    Ref(*word_).store(v, kRelaxed);
  }
  CCOLL_HD T fetch_add_release(T v) const {
    return Ref(*word_).fetch_add(v, kRelease);
  }
  CCOLL_HD T fetch_add_acq_rel(T v) const {
    return Ref(*word_).fetch_add(v, kAcqRel);
  }
  CCOLL_HD bool compare_exchange(T& expected, T desired) const {
    return Ref(*word_).compare_exchange_strong(expected, desired, kAcqRel, kAcquire);
  }

 private:
  T* word_;
};

}  // namespace ccoll::sync
