// ccoll/gradient/engine/rank_engine.hpp: one rank's gradient engine: readiness in, allreduces out.
//
// The training loop of one rank marks each gradient ready as its backward step produces it; the
// engine starts a message once all its tensors are ready and its start rule allows
// (timeline.hpp): after_previous when nothing is in flight, immediate when fewer than K messages
// are, always in issue order and on the message's channel (channel_plan.hpp) once that channel's
// previous message is done. The decision runs in whichever thread changed the state (the caller
// of ready(), or a worker that just finished), under one mutex; it is a few comparisons, so a
// separate progress thread would only add a wake-up to every message.
//
// Each channel has one worker thread per rank that runs the calls of the messages handed to it;
// the user's thread never blocks on communication until it waits. A message that is one tensor, or
// whose tensors are one contiguous ascending range of the user's memory, is all-reduced in place;
// any other is packed into the channel's fusion buffer (sized when the rank attaches, for the
// largest part that needs one), all-reduced there and unpacked. After the first iteration nothing
// is allocated: the per-iteration state is reset in place and the communicators hold a plan for
// every size they run.
//
// Why ranks need no agreement: every rank starts the same messages in the same (issue) order on
// the same channels, whatever the order its own tensors became ready, so the k-th call on channel
// c is the same message everywhere. Running what is ready on every rank *now*, out of schedule
// order, and learning the tensor set at run time need an agreement per cycle: that is
// coordinated_rank.hpp; here the schedule fixes both.
//
// Termination: wait() refuses (InvalidArgument) when some tensor it would need was not marked
// ready, since it could never return; otherwise every message it waits for starts, and each call
// ends within the communicator's Config::timeout (a peer that never arrives makes it throw
// Timeout, and the others Aborted). A failed call fails the engine: no further message starts,
// and ready() and wait() rethrow the first error (once nothing is in flight, so the user's buffers
// are no longer touched). A failed engine stays failed: its communicators are aborted.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/gradient/engine/channel_plan.hpp"
#include "ccoll/gradient/engine/channels.hpp"
#include "ccoll/gradient/engine/tensor_spec.hpp"

namespace ccoll::gradient::engine {

using NameIndex = std::map<std::string, int, std::less<>>;

// The id of a registered tensor (InvalidArgument, naming `rank`, for an unknown name).
inline int tensor_id(const NameIndex& names, std::string_view name, int rank) {
  const auto it = names.find(name);
  if (it == names.end()) {
    std::string got("'");
    got += name;
    got += "'";
    throw_invalid_argument(rank, "tensor name", "a registered tensor", got);
  }
  return it->second;
}

template <AllreduceLike C>
class RankEngine {
 public:
  using handle_type = decltype(std::declval<C&>().rank(0));

  // gradients[i]: this rank's buffer of tensor i (tensors[i].count elements of its dtype).
  RankEngine(ChannelSet<C>& channels, const ChannelPlan& plan, std::span<const TensorSpec> tensors,
             const NameIndex& names, int rank, std::span<void* const> gradients, ReduceOp op)
      : plan_(plan),
        tensors_(tensors),
        names_(names),
        rank_(rank),
        op_(op),
        lanes_(std::make_unique<Lane[]>(static_cast<std::size_t>(channels.size()))),
        nlanes_(channels.size()) {
    if (gradients.size() != tensors.size())
      throw_invalid_argument(
          rank, "gradients",
          detail::cat({std::to_string(tensors.size()), " buffers (one per registered tensor)"}),
          std::to_string(gradients.size()));
    data_.reserve(gradients.size());
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      if (gradients[i] == nullptr)
        throw_invalid_argument(rank, detail::cat({"gradients[", std::to_string(i), "]"}),
                               detail::cat({"the buffer of tensor '", tensors[i].name, "'"}),
                               "nullptr");
      data_.push_back(static_cast<std::byte*>(gradients[i]));
    }
    check_disjoint();
    place_parts();
    for (int c = 0; c < nlanes_; ++c) handles_.push_back(channels[c].rank(rank));
    missing_.resize(plan_.messages.size());
    finished_.resize(plan_.messages.size());
    ready_.resize(tensors_.size());
    reset();
    try {
      for (int c = 0; c < nlanes_; ++c)
        lanes_[static_cast<std::size_t>(c)].thread = std::thread([this, c] { work(c); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~RankEngine() { stop(); }
  RankEngine(const RankEngine&) = delete;
  RankEngine& operator=(const RankEngine&) = delete;

  // Tensor `tensor`'s gradient is final for this iteration: the engine may read and overwrite it
  // from now on, until the wait that covers it returns.
  void ready(int tensor) {
    std::unique_lock lock(mu_);
    if (error_) {
      // The caller may free its buffers once this throws: no call of this rank may still use them.
      done_.wait(lock, [&] { return failed_idle(); });
      std::rethrow_exception(error_);
    }
    check_tensor(tensor, "tensor");
    const auto t = static_cast<std::size_t>(tensor);
    if (ready_[t]) {
      std::string what("tensor '");
      what += tensors_[t].name;
      what += "' (id ";
      what += std::to_string(tensor);
      what += ") was marked ready twice in iteration ";
      what += std::to_string(iterations_);
      what += "; wait() ends an iteration";
      throw Error(ErrorCode::InvalidArgument, rank_, what);
    }
    ready_[t] = 1;
    ++ready_count_;
    if (--missing_[static_cast<std::size_t>(plan_.message_of_layer[t])] == 0) try_start();
  }
  void ready(std::string_view name) { ready(id(name)); }

  // Returns when every gradient of this iteration is all-reduced, and ends the iteration.
  // Requires every tensor marked ready in it.
  void wait() {
    std::unique_lock lock(mu_);
    if (!error_ && ready_count_ < tensors_.size()) {
      std::size_t first = 0;
      while (ready_[first]) ++first;
      std::string what("wait() with ");
      what += std::to_string(tensors_.size() - ready_count_);
      what += " tensor(s) not marked ready in iteration ";
      what += std::to_string(iterations_);
      what += " (the first: '";
      what += tensors_[first].name;
      what += "'); it could never return";
      throw Error(ErrorCode::InvalidArgument, rank_, what);
    }
    done_.wait(lock, [&] { return finished_count_ == plan_.messages.size() || failed_idle(); });
    if (error_) std::rethrow_exception(error_);
    reset();
    ++iterations_;
  }

  // Returns when layer `layer`'s gradient is all-reduced (gradient queuing, [C-Cube] Sec. III-D:
  // the next forward pass may use layer 1 while higher layers are still in flight). Does not end
  // the iteration. Requires every tensor of its message and of the messages issued before it marked
  // ready, since those start first.
  void wait(int layer) {
    std::unique_lock lock(mu_);
    check_tensor(layer, "layer");
    const auto m =
        static_cast<std::size_t>(plan_.message_of_layer[static_cast<std::size_t>(layer)]);
    if (!error_) {
      for (std::size_t j = 0; j <= m; ++j) {
        if (missing_[j] == 0) continue;
        int t = plan_.messages[j].lo;
        while (ready_[static_cast<std::size_t>(t)]) ++t;
        std::string what("wait(");
        what += std::to_string(layer);
        what += ") before tensor '";
        what += tensors_[static_cast<std::size_t>(t)].name;
        what += "' was marked ready in iteration ";
        what += std::to_string(iterations_);
        what += ": its message is issued no later than layer ";
        what += std::to_string(layer);
        what += "'s, so it could never return";
        throw Error(ErrorCode::InvalidArgument, rank_, what);
      }
    }
    // If the engine fails before this message succeeds, the error comes once no call is in
    // flight, as the caller may then free its buffers.
    done_.wait(lock, [&] { return finished_[m] == kSucceeded || failed_idle(); });
    if (finished_[m] != kSucceeded) std::rethrow_exception(error_);
  }

  // The id of a registered tensor (InvalidArgument for an unknown name).
  int id(std::string_view name) const { return tensor_id(names_, name, rank_); }

  int rank() const { return rank_; }
  // Iterations completed (wait() returned).
  std::uint64_t iterations() const {
    std::lock_guard lock(mu_);
    return iterations_;
  }
  // Parts that go through a fusion buffer on this rank, and the bytes of those buffers.
  std::size_t staged_parts() const {
    return static_cast<std::size_t>(std::count(direct_.begin(), direct_.end(), nullptr));
  }
  std::uint64_t staging_bytes() const {
    std::uint64_t b = 0;
    for (std::uint64_t s : staging_size_) b += s;
    return b;
  }
  // The most messages this rank has had handed to its workers at once, since it attached.
  int max_in_flight() const {
    std::lock_guard lock(mu_);
    return max_in_flight_;
  }

 private:
  static constexpr std::uint8_t kSucceeded = 1, kFailed = 2;

  struct Lane {
    std::condition_variable cv;
    int message = -1;  // handed to this lane's worker and not finished; -1: idle
    std::thread thread;
  };

  void check_tensor(int t, std::string_view what) const {
    if (t < 0 || static_cast<std::size_t>(t) >= tensors_.size())
      throw_invalid_argument(rank_, what, detail::cat({"0..", std::to_string(tensors_.size() - 1)}),
                             std::to_string(t));
  }

  // Two registered tensors sharing memory would each overwrite the other's reduction.
  void check_disjoint() const {
    std::vector<std::pair<const std::byte*, std::size_t>> spans;
    for (std::size_t i = 0; i < data_.size(); ++i) spans.emplace_back(data_[i], i);
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) {
      const std::size_t a = spans[k - 1].second;
      if (spans[k - 1].first + tensors_[a].bytes() > spans[k].first)
        throw_invalid_argument(rank_, "gradients", "disjoint buffers",
                               detail::cat({"tensors '", tensors_[a].name, "' and '",
                                            tensors_[spans[k].second].name, "' overlap"}));
    }
  }

  // Which parts run in place, and how large each channel's fusion buffer must be for the rest.
  void place_parts() {
    direct_.assign(plan_.parts.size(), nullptr);
    staging_size_.assign(static_cast<std::size_t>(nlanes_), 0);
    for (const PlannedMessage& pm : plan_.messages) {
      for (std::uint32_t p = pm.first_part; p < pm.end_part; ++p) {
        const Part& part = plan_.parts[p];
        bool contiguous = true;
        for (int t = part.first; t < part.last && contiguous; ++t)
          contiguous =
              data_[static_cast<std::size_t>(t)] + tensors_[static_cast<std::size_t>(t)].bytes() ==
              data_[static_cast<std::size_t>(t) + 1];
        if (contiguous) {
          direct_[p] = data_[static_cast<std::size_t>(part.first)];
        } else {
          auto& size = staging_size_[static_cast<std::size_t>(pm.channel)];
          size = std::max(size, part.bytes);
        }
      }
    }
    for (std::uint64_t s : staging_size_)
      staging_.push_back(s > 0 ? std::make_unique<std::byte[]>(static_cast<std::size_t>(s))
                               : nullptr);
  }

  void reset() {
    std::fill(ready_.begin(), ready_.end(), std::uint8_t{0});
    std::fill(finished_.begin(), finished_.end(), std::uint8_t{0});
    for (std::size_t m = 0; m < plan_.messages.size(); ++m)
      missing_[m] = plan_.messages[m].hi - plan_.messages[m].lo + 1;
    ready_count_ = 0;
    finished_count_ = 0;
    next_ = 0;
  }

  bool failed_idle() const { return error_ && in_flight_ == 0; }

  // Hands every message that may start now to its channel's worker, in issue order. Holds mu_.
  void try_start() {
    while (next_ < plan_.messages.size() && !error_) {
      const PlannedMessage& pm = plan_.messages[next_];
      if (missing_[next_] > 0) return;
      if (pm.rule == StartRule::after_previous ? in_flight_ > 0
                                               : in_flight_ >= plan_.max_concurrent)
        return;
      Lane& lane = lanes_[static_cast<std::size_t>(pm.channel)];
      if (lane.message >= 0) return;
      lane.message = static_cast<int>(next_);
      ++next_;
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
      lane.cv.notify_one();
    }
  }

  void work(int c) {
    Lane& lane = lanes_[static_cast<std::size_t>(c)];
    std::unique_lock lock(mu_);
    for (;;) {
      lane.cv.wait(lock, [&] { return lane.message >= 0 || stop_; });
      if (stop_) return;
      const auto m = static_cast<std::size_t>(lane.message);
      lock.unlock();
      std::exception_ptr error;
      try {
        run_message(c, plan_.messages[m]);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      lane.message = -1;
      --in_flight_;
      ++finished_count_;
      finished_[m] = error ? kFailed : kSucceeded;
      if (error && !error_) error_ = error;
      try_start();
      done_.notify_all();
    }
  }

  void run_message(int c, const PlannedMessage& pm) {
    auto& handle = handles_[static_cast<std::size_t>(c)];
    for (std::uint32_t p = pm.first_part; p < pm.end_part; ++p) {
      const Part& part = plan_.parts[p];
      if (std::byte* d = direct_[p]) {
        handle.run(d, d, part.count, part.dtype, op_);
        continue;
      }
      std::byte* buf = staging_[static_cast<std::size_t>(c)].get();
      std::size_t off = 0;
      for (int t = part.first; t <= part.last; ++t) {
        const auto n = static_cast<std::size_t>(tensors_[static_cast<std::size_t>(t)].bytes());
        std::memcpy(buf + off, data_[static_cast<std::size_t>(t)], n);
        off += n;
      }
      handle.run(buf, buf, part.count, part.dtype, op_);
      off = 0;
      for (int t = part.first; t <= part.last; ++t) {
        const auto n = static_cast<std::size_t>(tensors_[static_cast<std::size_t>(t)].bytes());
        std::memcpy(data_[static_cast<std::size_t>(t)], buf + off, n);
        off += n;
      }
    }
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      for (int c = 0; c < nlanes_; ++c) lanes_[static_cast<std::size_t>(c)].cv.notify_all();
    }
    for (int c = 0; c < nlanes_; ++c)
      if (lanes_[static_cast<std::size_t>(c)].thread.joinable())
        lanes_[static_cast<std::size_t>(c)].thread.join();
  }

  const ChannelPlan& plan_;
  std::span<const TensorSpec> tensors_;
  const NameIndex& names_;
  int rank_;
  ReduceOp op_;
  std::vector<std::byte*> data_;             // per tensor: the user's buffer
  std::vector<std::byte*> direct_;           // per part: in place at this address; nullptr: staged
  std::vector<std::uint64_t> staging_size_;  // per channel
  std::vector<std::unique_ptr<std::byte[]>> staging_;  // per channel: the fusion buffer
  std::vector<handle_type> handles_;                   // per channel: this rank's handle

  mutable std::mutex mu_;
  std::condition_variable done_;  // a message finished
  std::unique_ptr<Lane[]> lanes_;
  int nlanes_;
  bool stop_ = false;
  std::exception_ptr error_;  // the first failed call's error
  // One iteration's state, reset by wait().
  std::vector<std::uint8_t> ready_;     // per tensor
  std::vector<int> missing_;            // per message: tensors not ready yet
  std::vector<std::uint8_t> finished_;  // per message: 0, kSucceeded or kFailed
  std::size_t ready_count_ = 0;
  std::size_t finished_count_ = 0;
  std::size_t next_ = 0;  // the next message to start, in issue order
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::uint64_t iterations_ = 0;
};

}  // namespace ccoll::gradient::engine
