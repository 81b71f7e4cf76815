// ccoll/runtime/slot_store_tuner.hpp: picks, per message size (power of two of a call's bytes),
// how the host executors write FIFO slots: ordinary (cached) stores or non-temporal (streamed)
// stores.
//
// A message written with ordinary stores reaches its reader through the caches: no memory traffic,
// but the writer must take every line back from the reader that read the previous message in that
// slot, and how fast a core does that depends on where the two cores sit. On the 2-core development
// VM it changes while a job runs, as the hypervisor moves the virtual CPUs: with both on one CCD,
// cached slots are about 1.2x faster than streamed ones at 16-64 MiB; with the two on different
// CCDs, a writer reclaims lines at 2 GB/s and streamed slots (written to memory, read from memory,
// twice the memory traffic) are 3-4x faster (docs/results/shm-vs-mpi.md). No static rule wins both,
// so rank 0 measures: for each size (power of two of the bytes) it times the first calls in both
// modes, runs the faster, and re-times the other mode now and then (every 16 calls, backing off to
// every 256 while the choice keeps winning clearly). It publishes the mode with its per-call
// arguments, so every rank writes its slots the same way in every call (runtime/communicator.hpp);
// the other ranks' writers follow rank 0's choice, whose call time is everyone's call time up to
// skew.
//
// The first call of a bucket (plan building, first touch of the slots) is not timed. The times of
// calls of different sizes in one power of two are recorded scaled to per-byte times
// (runtime/communicator.hpp).
#pragma once

#include <cstdint>

namespace ccoll::runtime {

class SlotStoreTuner {
 public:
  enum Mode : std::uint32_t { Cached = 0, Streamed = 1 };

  static constexpr std::uint32_t kExploreCalls = 4;  // after the untimed first call: C, S, C, S
  static constexpr std::uint32_t kMinInterval = 16;  // calls between two probes of the other mode
  static constexpr std::uint32_t kMaxInterval = 256;
  // The other mode must be this much faster (its time below current * kSwitchRatio) to be chosen.
  static constexpr double kSwitchRatio = 0.95;

  // The mode of the next call.
  Mode next() const {
    if (calls_ == 0) return Streamed;  // untimed warm-up call
    if (calls_ <= kExploreCalls) return calls_ % 2 == 1 ? Cached : Streamed;
    return calls_ == next_probe_ ? other(current_) : current_;
  }

  // Records the call that next() chose `mode` for, which took `ns` nanoseconds.
  void record(Mode mode, std::uint64_t ns) {
    const std::uint64_t c = calls_++;
    if (c == 0) return;
    if (c <= kExploreCalls) {  // keep the faster of each mode's samples
      if (best_[mode] == 0 || ns < best_[mode]) best_[mode] = ns;
      if (c == kExploreCalls) {
        current_ = faster(Streamed, Cached);  // a tie keeps streaming, the safer default
        interval_ = kMinInterval;
        next_probe_ = calls_ + interval_;
      }
      return;
    }
    if (mode != current_) {  // a probe of the other mode
      best_[mode] = ns;
      const Mode was = current_;
      current_ = faster(current_, mode);
      const bool clear = static_cast<double>(best_[other(current_)]) * kSwitchRatio >
                         static_cast<double>(best_[current_]);
      // A choice that keeps winning clearly is probed less and less often.
      interval_ = current_ == was && clear
                      ? (interval_ * 2 < kMaxInterval ? interval_ * 2 : kMaxInterval)
                      : kMinInterval;
      next_probe_ = calls_ + interval_;
      return;
    }
    // The current mode: follow its time (a changing machine changes it), smoothed over ~4 calls.
    best_[mode] = best_[mode] == 0 ? ns : (3 * best_[mode] + ns) / 4;
  }

  Mode current() const { return current_; }
  std::uint64_t calls() const { return calls_; }
  std::uint32_t probe_interval() const { return interval_; }
  // The latest time estimate of a mode, ns (0: none yet).
  std::uint64_t estimate(Mode m) const { return best_[m]; }

 private:
  static Mode other(Mode m) { return m == Cached ? Streamed : Cached; }
  // `challenger` replaces `incumbent` only if clearly faster.
  Mode faster(Mode incumbent, Mode challenger) const {
    if (best_[challenger] == 0) return incumbent;
    if (best_[incumbent] == 0) return challenger;
    return static_cast<double>(best_[challenger]) <
                   static_cast<double>(best_[incumbent]) * kSwitchRatio
               ? challenger
               : incumbent;
  }

  std::uint64_t calls_ = 0;
  std::uint64_t best_[2] = {0, 0};
  Mode current_ = Streamed;
  std::uint32_t interval_ = kMinInterval;
  std::uint64_t next_probe_ = 0;
};

}  // namespace ccoll::runtime
