// ccoll/runtime/layer_readiness.hpp: which layers of a fused gradient buffer already hold their
// final allreduced values while the allreduce is still running ([C-Cube] Sec. III-D, Figs. 8-9).
//
// [C-Cube]'s gradient queuing lets the next forward pass start on layer 1 as soon as its chunks
// are reduced, instead of after the whole allreduce: the broadcast bumps an enqueue semaphore per
// chunk, and a Layer-Chunk table maps each layer to the last chunk it needs. ccoll generalises it
// from the tree's in-order chunks to any plan: the interpreter publishes, per (rank, channel)
// program, how many steps are complete (ProgramContext::progress, one release store per step), and
// LayerChunkTable maps each layer to, per channel, the number of steps after which every output
// write overlapping the layer is done. A layer is ready when every channel's progress reached its
// entry; no per-chunk counters are needed, because steps of one program complete in order.
//
// Progress words only grow (as serial numbers: progress_reached): call k of a rank publishes
// progress_base_of_call(k) + steps done, so a value left by call k-1 can never make a layer of
// call k look ready. The check (layer_ready) and
// the wait (wait_layer_ready) are CCOLL_HD plain code over a flat table (LayerTableView), so a
// consumer kernel on another stream can call them against device-resident progress words; the
// host transports hand out a LayerReadiness handle per rank (Communicator::layer_readiness).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::runtime {

// A program has fewer than 2^32 steps (Step indices are 32-bit), so call k's progress values,
// k * 2^32 + done, all lie above call k-1's and below call k+1's.
inline constexpr unsigned kProgressCallShift = 32;

CCOLL_HD constexpr std::uint64_t progress_base_of_call(std::uint64_t call) {
  return call << kProgressCallShift;
}

// Has a progress word reached `target`? Call 2^32 of a plan wraps the base to 0, so the words are
// compared as serial numbers (RFC 1982): the difference read as signed. A checked channel runs in
// every call, so its word is never more than one call behind the consumer's target, far inside
// the 2^31 calls the signed difference can tell apart.
CCOLL_HD constexpr bool progress_reached(std::uint64_t word, std::uint64_t target) {
  return static_cast<std::int64_t>(word - target) >= 0;
}

// The Layer-Chunk table as plain memory: need[layer * nchannels + channel] steps of that channel's
// program must be complete (0: the channel writes nothing of the layer).
struct LayerTableView {
  const std::uint32_t* need = nullptr;
  std::uint32_t nlayers = 0;
  std::uint32_t nchannels = 0;
};

namespace detail {

// First channel from `channel` on whose progress (per channel, acquire loads) has not reached the
// layer's entry; nchannels if none.
CCOLL_HD inline std::uint32_t first_unready_channel(const LayerTableView& t,
                                                    const std::uint64_t* progress,
                                                    std::uint64_t call_base, std::uint32_t layer,
                                                    std::uint32_t channel) {
  const std::uint32_t* row = t.need + static_cast<std::uint64_t>(layer) * t.nchannels;
  for (; channel < t.nchannels; ++channel) {
    if (row[channel] == 0) continue;
    auto* word = const_cast<std::uint64_t*>(progress + channel);
    if (!progress_reached(sync::AtomicWord<std::uint64_t>(word).load_acquire(),
                          call_base + row[channel]))
      break;
  }
  return channel;
}

}  // namespace detail

// [C-Cube] Fig. 11's check for gradient queuing: does every element of `layer` hold its final value
// in the call whose progress base is call_base? Never blocks; when it returns true, the layer's
// output written by the producer is visible to the caller.
CCOLL_HD inline bool layer_ready(const LayerTableView& t, const std::uint64_t* progress,
                                 std::uint64_t call_base, std::uint32_t layer) {
  return detail::first_unready_channel(t, progress, call_base, layer, 0) == t.nchannels;
}

// [C-Cube]'s Layer Index Counter: the first layer from `from` on that is not ready (nlayers if
// all are). A consumer that runs layers in order advances it instead of checking each layer.
CCOLL_HD inline std::uint32_t first_unready_layer(const LayerTableView& t,
                                                  const std::uint64_t* progress,
                                                  std::uint64_t call_base, std::uint32_t from) {
  while (from < t.nlayers && layer_ready(t, progress, call_base, from)) ++from;
  return from;
}

// The wait form: blocks until `layer` is ready, *abort != 0 (Aborted) or now_ns() >= deadline_ns
// (Timeout; 0: no deadline), polling like sync::Counter::wait. A channel found complete stays
// complete (progress only grows), so each poll resumes at the first channel still missing.
CCOLL_HD inline sync::WaitResult wait_layer_ready(const LayerTableView& t,
                                                  const std::uint64_t* progress,
                                                  std::uint64_t call_base, std::uint32_t layer,
                                                  const std::uint32_t* abort,
                                                  std::uint64_t deadline_ns,
                                                  const sync::WaitPolicy& policy = {}) {
  sync::Backoff backoff(policy);
  std::uint32_t channel = 0;
  for (std::uint32_t polls = 0;; ++polls) {
    channel = detail::first_unready_channel(t, progress, call_base, layer, channel);
    if (channel == t.nchannels) return sync::WaitResult::Ok;
    if (backoff.past_spinning() || (polls & 15u) == 15u) {
      if (abort != nullptr &&
          sync::AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed() != 0)
        return sync::WaitResult::Aborted;
      if (deadline_ns != 0 && sync::now_ns() >= deadline_ns)
        return detail::first_unready_channel(t, progress, call_base, layer, channel) == t.nchannels
                   ? sync::WaitResult::Ok
                   : sync::WaitResult::Timeout;
    }
    backoff.pause();
  }
}

// The Layer-Chunk table of one rank of one plan. Layers are consecutive ranges of the allreduce's
// elements: layer l is [layer_end[l-1], layer_end[l]) (layer 0 starts at 0), and the last layer
// ends at the plan's count. Built on the host; view() (or flat()) is what a consumer reads.
class LayerChunkTable {
 public:
  LayerChunkTable(const plan::Plan& plan, int rank, std::span<const std::uint64_t> layer_end)
      : nlayers_(static_cast<std::uint32_t>(layer_end.size())),
        nchannels_(static_cast<std::uint32_t>(plan.channels.size())) {
    check_layers(plan, rank, layer_end);
    need_.assign(static_cast<std::size_t>(nlayers_) * nchannels_, 0);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> writes;  // [begin, end) of every write
    for (std::uint32_t c = 0; c < nchannels_; ++c) {
      const auto& steps = plan.channels[c].programs[static_cast<std::size_t>(rank)].steps;
      for (std::uint32_t i = 0; i < steps.size(); ++i) {
        const plan::Step& s = steps[i];
        if (!s.write_output || s.count == 0) continue;
        const std::uint64_t lo = s.offset, hi = s.offset + s.count;
        writes.emplace_back(lo, hi);
        // Layers overlapping [lo, hi): from the first ending after lo; the step index only grows,
        // so the entry ends as the last overlapping write's.
        auto l = static_cast<std::uint32_t>(
            std::upper_bound(layer_end.begin(), layer_end.end(), lo) - layer_end.begin());
        for (; l < nlayers_ && layer_begin(layer_end, l) < hi; ++l)
          if (layer_begin(layer_end, l) < layer_end[l])
            need_[static_cast<std::size_t>(l) * nchannels_ + c] = i + 1;
      }
    }
    check_coverage(plan, rank, std::move(writes));
  }

  std::uint32_t nlayers() const { return nlayers_; }
  std::uint32_t nchannels() const { return nchannels_; }
  // Steps of `channel`'s program that must be complete for `layer` (0: none of its writes).
  std::uint32_t steps_needed(std::uint32_t layer, std::uint32_t channel) const {
    return need_.at(static_cast<std::size_t>(layer) * nchannels_ + channel);
  }
  // The table, layer-major, to copy into device memory (then build a LayerTableView over it).
  std::span<const std::uint32_t> flat() const { return need_; }
  LayerTableView view() const { return LayerTableView{need_.data(), nlayers_, nchannels_}; }

 private:
  static std::uint64_t layer_begin(std::span<const std::uint64_t> layer_end, std::uint32_t l) {
    return l == 0 ? 0 : layer_end[l - 1];
  }

  void check_layers(const plan::Plan& plan, int rank, std::span<const std::uint64_t> layer_end) {
    if (rank < 0 || rank >= plan.nranks)
      throw_invalid_argument(rank, "rank", "0.." + std::to_string(plan.nranks - 1),
                             std::to_string(rank));
    if (!plan.active.empty() && !plan.active[static_cast<std::size_t>(rank)])
      throw Error(ErrorCode::InvalidArgument, rank,
                  "layer readiness: rank " + std::to_string(rank) +
                      " is a relay of this plan (it receives no output)");
    if (layer_end.empty() || layer_end.size() >= (std::uint64_t{1} << 32))
      throw_invalid_argument(rank, "layer_end", "1 to 2^32-1 layer boundaries",
                             std::to_string(layer_end.size()));
    for (std::size_t l = 1; l < layer_end.size(); ++l)
      if (layer_end[l] < layer_end[l - 1])
        throw_invalid_argument(rank, "layer_end", "non-decreasing boundaries",
                               "layer_end[" + std::to_string(l) +
                                   "] = " + std::to_string(layer_end[l]) + " < layer_end[" +
                                   std::to_string(l - 1) +
                                   "] = " + std::to_string(layer_end[l - 1]));
    if (layer_end.back() != plan.count)
      throw_invalid_argument(rank, "layer_end",
                             "the last layer to end at the count, " + std::to_string(plan.count),
                             std::to_string(layer_end.back()));
  }

  // A layer is only as ready as the writes that produce it: an element no step of this rank
  // writes would be reported ready while still holding whatever was there before the call.
  static void check_coverage(const plan::Plan& plan, int rank,
                             std::vector<std::pair<std::uint64_t, std::uint64_t>> writes) {
    std::sort(writes.begin(), writes.end());
    std::uint64_t covered = 0;  // [0, covered) is written
    for (const auto& [lo, hi] : writes) {
      if (lo > covered) break;
      covered = std::max(covered, hi);
    }
    if (covered < plan.count)
      throw Error(ErrorCode::InvalidArgument, rank,
                  "layer readiness: plan '" + plan.algorithm + "' never writes element " +
                      std::to_string(covered) + " of the output of rank " + std::to_string(rank) +
                      " (count " + std::to_string(plan.count) + ")");
  }

  std::uint32_t nlayers_;
  std::uint32_t nchannels_;
  std::vector<std::uint32_t> need_;
};

// One rank's readiness on a host transport: its Layer-Chunk table for one (count, element size)
// and the rank's progress words, which the rank's thread advances while a consumer thread waits.
// Call k is the rank's k-th call on the communicator (1-based, the number its errors name); it
// must be a call of the count and element size the table was built for. A call that fails before
// its steps (mismatched arguments) publishes nothing, so its waiters are released only by a later
// call: a consumer must not wait on a call its rank saw throw.
class LayerReadiness {
 public:
  LayerReadiness(LayerChunkTable table, const std::uint64_t* progress, const std::uint32_t* abort,
                 sync::WaitPolicy policy)
      : table_(std::move(table)), progress_(progress), abort_(abort), policy_(policy) {}

  const LayerChunkTable& table() const { return table_; }
  std::uint32_t nlayers() const { return table_.nlayers(); }

  // The check: is `layer` of call `call` final in this rank's output buffer?
  bool ready(std::uint64_t call, std::uint32_t layer) const {
    check_layer(layer);
    return layer_ready(table_.view(), progress_, progress_base_of_call(call), layer);
  }
  // The first layer from `from` on not yet final in call `call` (nlayers() if all are).
  std::uint32_t first_unready(std::uint64_t call, std::uint32_t from = 0) const {
    return first_unready_layer(table_.view(), progress_, progress_base_of_call(call), from);
  }
  // The wait: Ok once the layer is final, Timeout at deadline_ns (sync::now_ns() clock; 0: none),
  // Aborted when the communicator is aborted.
  sync::WaitResult wait(std::uint64_t call, std::uint32_t layer,
                        std::uint64_t deadline_ns = 0) const {
    check_layer(layer);
    return wait_layer_ready(table_.view(), progress_, progress_base_of_call(call), layer, abort_,
                            deadline_ns, policy_);
  }

 private:
  void check_layer(std::uint32_t layer) const {
    if (layer >= table_.nlayers())
      throw_invalid_argument(-1, "layer", "< " + std::to_string(table_.nlayers()),
                             std::to_string(layer));
  }

  LayerChunkTable table_;
  const std::uint64_t* progress_;
  const std::uint32_t* abort_;
  sync::WaitPolicy policy_;
};

}  // namespace ccoll::runtime
