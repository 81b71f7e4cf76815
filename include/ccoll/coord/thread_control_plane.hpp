// ccoll/coord/thread_control_plane.hpp: an in-process ControlPlane for ranks that are threads
// of one process (tests, benchmarks, single-process simulations of P ranks).
//
// One ThreadControlGroup is shared by the P threads; each thread talks through its own
// ThreadControlPlane endpoint. Every collective is two barrier phases (deposit, then read) over one
// mutex: simple and obviously correct, not fast. A barrier that passes its deadline fails the whole
// group, so every other rank's pending or next call throws instead of hanging.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "ccoll/coord/control_plane.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::coord {

class ThreadControlGroup {
 public:
  explicit ThreadControlGroup(int nranks,
                              std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : nranks_(nranks),
        timeout_(timeout),
        words_(static_cast<std::size_t>(nranks)),
        payloads_(static_cast<std::size_t>(nranks)) {
    if (nranks <= 0) throw_invalid_argument(-1, "nranks", "> 0", std::to_string(nranks));
  }
  int nranks() const noexcept { return nranks_; }

 private:
  friend class ThreadControlPlane;

  // Generation barrier with a deadline.
  void barrier(int rank, const char* what) {
    std::unique_lock lock(mutex_);
    if (failed_) throw Error(ErrorCode::Aborted, rank, std::string(what) + ": another rank failed");
    const std::uint64_t gen = generation_;
    if (++arrived_ == nranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    const bool done = cv_.wait_for(lock, timeout_, [&] { return generation_ != gen || failed_; });
    if (generation_ != gen) return;
    if (!done) {
      failed_ = true;
      cv_.notify_all();
      std::ostringstream os;
      os << what << ": waited " << timeout_.count() << " ms for " << (nranks_ - arrived_)
         << " other rank(s)";
      throw Error(ErrorCode::Timeout, rank, os.str());
    }
    throw Error(ErrorCode::Aborted, rank, std::string(what) + ": another rank failed");
  }

  int nranks_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool failed_ = false;
  std::vector<std::vector<std::uint64_t>> words_;
  std::vector<std::string> payloads_;
};

class ThreadControlPlane final : public ControlPlane {
 public:
  ThreadControlPlane(ThreadControlGroup& group, int rank) : group_(group), rank_(rank) {
    if (rank < 0 || rank >= group.nranks())
      throw_invalid_argument(rank, "rank", "in [0, nranks)", std::to_string(rank));
  }
  int rank() const override { return rank_; }
  int nranks() const override { return group_.nranks(); }

  void allreduce_and(std::span<std::uint64_t> words) override { reduce(words, true); }
  void allreduce_or(std::span<std::uint64_t> words) override { reduce(words, false); }

  std::vector<std::string> gather_to_root(const std::string& payload) override {
    slot_payload() = payload;
    group_.barrier(rank_, "control gather");
    std::vector<std::string> out;
    if (rank_ == 0) out = group_.payloads_;
    group_.barrier(rank_, "control gather");
    return out;
  }

  std::string broadcast_from_root(const std::string& payload) override {
    if (rank_ == 0) slot_payload() = payload;
    group_.barrier(rank_, "control broadcast");
    std::string out = group_.payloads_[0];
    group_.barrier(rank_, "control broadcast");
    return out;
  }

 private:
  // A rank's own slot is written only between the previous collective's last barrier and this
  // one's first, when nobody reads it: the barriers' mutex orders the accesses.
  std::string& slot_payload() { return group_.payloads_[static_cast<std::size_t>(rank_)]; }

  void reduce(std::span<std::uint64_t> words, bool is_and) {
    group_.words_[static_cast<std::size_t>(rank_)].assign(words.begin(), words.end());
    group_.barrier(rank_, "control allreduce");
    // Every rank reads the deposited vectors (no one writes until the second barrier).
    for (int r = 0; r < group_.nranks(); ++r) {
      const auto& other = group_.words_[static_cast<std::size_t>(r)];
      if (other.size() != words.size()) {
        std::ostringstream os;
        os << "control allreduce of " << words.size() << " words, rank " << r << " gave "
           << other.size();
        group_.barrier(rank_, "control allreduce");
        throw Error(ErrorCode::Mismatch, rank_, os.str());
      }
      for (std::size_t i = 0; i < words.size(); ++i)
        words[i] = is_and ? (words[i] & other[i]) : (words[i] | other[i]);
    }
    group_.barrier(rank_, "control allreduce");
  }

  ThreadControlGroup& group_;
  int rank_;
};

}  // namespace ccoll::coord
