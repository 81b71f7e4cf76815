// ccoll/transport/cuda/failure_record.hpp: where a GPU block stopped, and which stopped block is
// the root cause of a failed job.
//
// A block that gives up (Config::timeout on the GPU clock, or the abort word) writes a BlockFailure
// and then raises the abort word, and every other block stops at its next poll with a failure of
// its own. So one missing peer leaves many records: its neighbours time out waiting for it, and
// their neighbours wait for them. The root cause is a block that waited for a peer with no failure
// of its own: that peer never came (or is stuck outside the plan). Timeouts come before aborts,
// then the earliest.
//
// Plain host code over the records the blocks wrote: the fast suite tests it
// (tests/cuda_protocol_test.cpp), and both CUDA executors name their failures with it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::transport::cuda {

// How long a block waits before it gives up, in nanoseconds of %globaltimer: Config::timeout,
// saturated far beyond any real wait.
inline std::uint64_t timeout_ns(std::chrono::milliseconds timeout) {
  const auto ms = static_cast<std::uint64_t>(timeout.count());
  constexpr std::uint64_t kMaxMs = ~std::uint64_t{0} / 2'000'000ull;
  return (ms > kMaxMs ? kMaxMs : ms) * 1'000'000ull;
}

// Where a block stopped; result Ok: it did not fail.
struct BlockFailure {
  runtime::StepFailure step;
  std::int32_t rank = -1;
  std::uint32_t channel = 0;
  std::uint64_t when_ns = 0;  // %globaltimer when it gave up
};

// The step a BlockFailure names when the block stopped before its program, agreeing with its
// peers on the call (call_record.hpp).
inline constexpr std::uint32_t kAgreementStep = ~std::uint32_t{0};

struct RootCause {
  // The block to name; null: no block timed out (the host's abort() raised the word).
  const BlockFailure* cause = nullptr;
  // True when a block waiting for a peer without a failure of its own was found, or no block
  // timed out at all. False: every waited-for peer failed too (its record may not have landed
  // yet; `cause` is then the earliest timeout).
  bool conclusive = false;
  std::size_t stopped = 0;  // blocks that failed
};

// The root cause among `n` records (any order; entries with result Ok are ignored). A block's peer
// is the block of the same channel of rank step.peer. A block waiting for a peer that did not fail
// is stuck on that peer whether it reached its deadline or saw the abort word first: every block
// of a call starts its deadline at about the same time, so which of them times out first and
// which sees the word is a race of microseconds. Timeouts are preferred, then the earliest.
// Without any timeout the host's abort() raised the word: no block is the cause.
inline RootCause find_root_cause(const BlockFailure* records, std::size_t n) {
  auto failed = [&](std::int32_t rank, std::uint32_t channel) {
    for (std::size_t i = 0; i < n; ++i)
      if (records[i].step.result != sync::WaitResult::Ok && records[i].rank == rank &&
          records[i].channel == channel)
        return true;
    return false;
  };
  RootCause out;
  const BlockFailure* first = nullptr;  // the earliest timeout
  const BlockFailure* root = nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    const BlockFailure& b = records[i];
    if (b.step.result == sync::WaitResult::Ok) continue;
    ++out.stopped;
    const bool timeout = b.step.result == sync::WaitResult::Timeout;
    if (timeout && (first == nullptr || b.when_ns < first->when_ns)) first = &b;
    if (failed(b.step.peer, b.channel)) continue;
    const bool root_timeout = root != nullptr && root->step.result == sync::WaitResult::Timeout;
    if (root == nullptr || (timeout && !root_timeout) ||
        (timeout == root_timeout && b.when_ns < root->when_ns))
      root = &b;
  }
  if (first == nullptr) {
    out.conclusive = true;
    return out;
  }
  out.cause = root != nullptr ? root : first;
  out.conclusive = root != nullptr;
  return out;
}

// The root cause among the records of several plans (one vector per plan, as cuda-virtual keeps
// them per cached plan): the calls queued behind a failed call stop at once on the raised word,
// and may have run other plans, whose blocks' peers are not the failed plan's. So the cause is
// sought among the records of the plan that holds the earliest timeout alone; `stopped` counts
// the stopped blocks of every plan. No timeout anywhere: no cause (the host's abort()).
inline RootCause find_root_cause_among_plans(const std::vector<std::vector<BlockFailure>>& plans) {
  const std::vector<BlockFailure>* failed_plan = nullptr;
  std::uint64_t earliest = ~std::uint64_t{0};
  std::size_t stopped = 0;
  for (const auto& records : plans)
    for (const BlockFailure& b : records) {
      if (b.step.result == sync::WaitResult::Ok) continue;
      ++stopped;
      if (b.step.result == sync::WaitResult::Timeout &&
          (failed_plan == nullptr || b.when_ns < earliest)) {
        earliest = b.when_ns;
        failed_plan = &records;
      }
    }
  RootCause out;
  if (failed_plan != nullptr)
    out = find_root_cause(failed_plan->data(), failed_plan->size());
  else
    out.conclusive = true;
  out.stopped = stopped;
  return out;
}

// "rank 0, channel 1, step 3: waiting for a message from rank 2" (or "before its first step:
// waiting for rank 2 to start the same call").
inline std::string describe_stop(const BlockFailure& f) {
  std::string s = "rank " + std::to_string(f.rank) + ", channel " + std::to_string(f.channel);
  if (f.step.step == kAgreementStep)
    return s + ", before its first step: waiting for rank " + std::to_string(f.step.peer) +
           " to start the same call";
  return s + ", step " + std::to_string(f.step.step) + ": waiting for " +
         (f.step.waiting_for_slot ? "a free slot at rank " : "a message from rank ") +
         std::to_string(f.step.peer);
}

}  // namespace ccoll::transport::cuda
