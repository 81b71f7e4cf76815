// ccoll/gradient/engine/coordinated_rank.hpp: one rank's gradient engine under the Coordinated
// policy: readiness in, agreed fused allreduces out ([Horovod-cache] Alg. 1-2).
//
// Three kinds of thread per rank. The training loop's thread marks tensors ready (and waits). A
// cycle thread owns this rank's coord::Coordinator: it submits the tensors marked ready since the
// last cycle and runs a cycle, which is collective over the ranks (a control allreduce on a
// communicator of its own, coord/allreduce_control_plane.hpp), so every rank gets the same fused
// responses in the same order; it hands the i-th of them, counted over the engine's life, to
// channel i mod K. One worker per channel runs its fused allreduces in that order: in place when
// the tensors lie contiguous in the user's memory in the response's order, else packed into the
// channel's fusion buffer. Every rank runs the same sequence on every channel, so the k-th call on
// channel c is the same fused allreduce everywhere, as with a Schedule (rank_engine.hpp).
//
// When cycles run: while this rank has tensors submitted and not yet decided, and at once after a
// ready(); a cycle that decided nothing waits Coordinated::cycle_time for a local ready() before
// the next. A rank with nothing undecided runs no cycle, and the others' next cycle waits for it
// in the control allreduce: a tensor some rank marks ready is decided once every rank has marked
// it, so ranks may mark their tensors in any order, differently every iteration, and the set of
// tensors an iteration all-reduces may change (a tensor first marked in iteration 5 takes the
// coordinator path once, then hits the response cache).
//
// Termination: every control and data call ends within Config::timeout (a rank that never marks a
// tensor the others marked makes their next cycle throw Timeout). A failed cycle or call fails the
// engine: nothing further starts, and ready() and wait() rethrow the first error once no call of
// this rank is in flight.
//
// Allocation: none once every tensor's response is in the response cache (after the first
// iteration, for a fixed tensor set). The coordinator recycles its request objects, each with room
// for the longest name (Coordinator::reserve), and returns a cycle's fused responses as ranges of
// its own list; jobs are ranges of a per-lane ring of tensor ids sized for every tensor at once
// (a tensor is in at most one job: ready() twice in an iteration is refused, and wait() ends an
// iteration only when its jobs are done); each lane's fusion buffer is allocated at attach().
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ccoll/coord/allreduce_control_plane.hpp"
#include "ccoll/coord/coordinator.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/gradient/coordinated.hpp"
#include "ccoll/gradient/engine/channels.hpp"
#include "ccoll/gradient/engine/rank_engine.hpp"
#include "ccoll/gradient/engine/tensor_spec.hpp"

namespace ccoll::gradient::engine {

// What the cycles of one rank did, summed since it attached (the same on every rank: every input
// of a cycle's decision is agreed).
struct CoordinationStats {
  std::uint64_t cycles = 0;
  std::uint64_t coordinator_cycles = 0;  // cycles that took the coordinator path (a cache miss)
  std::uint64_t cached_responses = 0;    // tensors decided from the response cache
  std::uint64_t new_responses = 0;       // tensors decided on the coordinator path
  std::uint64_t fused_allreduces = 0;    // fused responses run (each one or more calls)
  std::uint64_t control_bytes = 0;       // this rank's control payload, over all cycles
};

template <AllreduceLike C>
class CoordinatedRank {
 public:
  using handle_type = decltype(std::declval<C&>().rank(0));

  // channels[0..K-1] carry the gradients, `control` the coordination (a communicator used by
  // nothing else).
  CoordinatedRank(ChannelSet<C>& channels, C& control, const Coordinated& policy,
                  std::span<const TensorSpec> tensors, const NameIndex& names, int rank,
                  std::span<void* const> gradients, ReduceOp op)
      : tensors_(tensors),
        names_(names),
        rank_(rank),
        op_(op),
        cycle_time_(policy.cycle_time),
        nlanes_(policy.max_concurrent),
        control_(control.rank(rank), rank, control.nranks()),
        coordinator_(control_, {.cache_capacity = policy.cache_capacity,
                                .cache_enabled = policy.cache_enabled,
                                .fusion_threshold_bytes = policy.fusion_threshold_bytes}),
        lanes_(std::make_unique<Lane[]>(static_cast<std::size_t>(nlanes_))) {
    if (gradients.size() != tensors.size())
      throw_invalid_argument(rank, "gradients", std::to_string(tensors.size()) + " buffers",
                             std::to_string(gradients.size()));
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      if (gradients[i] == nullptr)
        throw_invalid_argument(rank, "gradients[" + std::to_string(i) + "]", "a buffer", "null");
      data_.push_back(static_cast<std::byte*>(gradients[i]));
    }
    for (const auto& [group, members] : policy.groups) coordinator_.define_group(group, members);
    ready_.assign(tensors.size(), 0);
    done_.assign(tensors.size(), 0);
    incoming_.reserve(tensors.size());
    std::size_t longest = 0;
    for (const auto& t : tensors) longest = std::max(longest, t.name.size());
    coordinator_.reserve(tensors.size(), longest);
    decided_.reserve(tensors.size());
    decided_ids_.reserve(tensors.size());
    const std::size_t staging = staging_bytes(tensors, policy);
    for (int c = 0; c < nlanes_; ++c) {
      Lane& lane = lanes_[static_cast<std::size_t>(c)];
      lane.handle.emplace_back(channels[c].rank(rank));
      lane.jobs.resize(std::max<std::size_t>(tensors.size(), 1));
      lane.ids.resize(std::max<std::size_t>(tensors.size(), 1));
      lane.staging.resize(staging);
    }
    for (int c = 0; c < nlanes_; ++c)
      lanes_[static_cast<std::size_t>(c)].thread = std::thread([this, c] { work(c); });
    cycler_ = std::thread([this] { cycle_loop(); });
  }
  ~CoordinatedRank() { stop(); }
  CoordinatedRank(const CoordinatedRank&) = delete;
  CoordinatedRank& operator=(const CoordinatedRank&) = delete;

  // Tensor `tensor`'s gradient is final for this iteration: the engine may read and overwrite it
  // from now on, until the wait that covers it returns.
  void ready(int tensor) {
    std::unique_lock lock(mu_);
    if (error_) {
      // The caller may free its buffers once this throws: no call of this rank may still use them.
      done_cv_.wait(lock, [&] { return failed_idle(); });
      std::rethrow_exception(error_);
    }
    check_tensor(tensor, "tensor");
    const auto t = static_cast<std::size_t>(tensor);
    if (ready_[t])
      throw Error(ErrorCode::InvalidArgument, rank_,
                  detail::cat({"tensor '", tensors_[t].name, "' (id ", std::to_string(tensor),
                               ") was marked ready twice in iteration ",
                               std::to_string(iterations_), "; wait() ends an iteration"}));
    ready_[t] = 1;
    ++ready_count_;
    incoming_.push_back(tensor);
    cycle_cv_.notify_one();
  }
  void ready(std::string_view name) { ready(id(name)); }

  // Returns when every gradient marked ready in this iteration is all-reduced, and ends the
  // iteration. The tensors not marked ready are left alone (the tensor set may change between
  // iterations, identically on every rank).
  void wait() {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return done_count_ == ready_count_ || failed_idle(); });
    if (error_) std::rethrow_exception(error_);
    std::fill(ready_.begin(), ready_.end(), std::uint8_t{0});
    std::fill(done_.begin(), done_.end(), std::uint8_t{0});
    ready_count_ = 0;
    done_count_ = 0;
    ++iterations_;
  }

  // Returns when tensor `layer`'s gradient is all-reduced (gradient queuing); it must have been
  // marked ready in this iteration. Does not end the iteration.
  void wait(int layer) {
    std::unique_lock lock(mu_);
    check_tensor(layer, "layer");
    const auto t = static_cast<std::size_t>(layer);
    if (!error_ && !ready_[t])
      throw Error(ErrorCode::InvalidArgument, rank_,
                  detail::cat({"wait(", std::to_string(layer), ") before tensor '",
                               tensors_[t].name, "' was marked ready in iteration ",
                               std::to_string(iterations_), ": it could never return"}));
    done_cv_.wait(lock, [&] { return done_[t] != 0 || failed_idle(); });
    if (done_[t] == 0) std::rethrow_exception(error_);
  }

  // Which tensors are ready together changes every iteration, and with it the element count of a
  // fused allreduce; a communicator builds (and allocates) a plan per distinct count. So a fused
  // allreduce of several tensors runs at the next size class, m * 2^e elements with m in [8, 16)
  // (at most 1/8 more), padded in its lane's fusion buffer: few distinct counts, all of them
  // cached after the first iterations. A lone tensor's count is its own and repeats as it is.
  static std::size_t size_class(std::size_t count) {
    if (count <= 16) return count;
    const int shift = std::bit_width(count) - 4;  // count < 16 << shift
    const std::size_t step = std::size_t{1} << shift;
    return (count + step - 1) / step * step;
  }

  int id(std::string_view name) const { return tensor_id(names_, name, rank_); }
  int rank() const { return rank_; }
  std::uint64_t iterations() const {
    std::lock_guard lock(mu_);
    return iterations_;
  }
  CoordinationStats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }
  // Fused allreduces that went through a fusion buffer on this rank.
  std::uint64_t staged_allreduces() const {
    std::lock_guard lock(mu_);
    return staged_;
  }
  // The most fused allreduces this rank has had handed to its workers and not finished at once.
  int max_in_flight() const {
    std::lock_guard lock(mu_);
    return max_in_flight_;
  }

 private:
  // One fused response, as this rank runs it: its tensors are ids[first..first+ntensors) of its
  // lane's ring (modulo the ring's size), in the response's (buffer) order.
  struct Job {
    DataType dtype = DataType::f32;
    std::size_t count = 0;
    std::uint64_t bytes = 0;
    std::size_t first = 0;
    std::size_t ntensors = 0;
  };
  // Fixed-size rings, each with room for every tensor: jobs[head..head+njobs) are queued or
  // running, the front one running; their tensor ids are ids[ids_head..ids_head+nids).
  struct Lane {
    std::condition_variable cv;
    std::vector<Job> jobs;
    std::size_t head = 0, njobs = 0;
    std::vector<int> ids;
    std::size_t ids_head = 0, nids = 0;
    bool busy = false;                // the front job is running
    std::vector<handle_type> handle;  // one; a vector because a handle need not be assignable
    std::vector<std::byte> staging;   // the largest fused allreduce that can be staged
    std::thread thread;
    int tensor(const Job& j, std::size_t k) const { return ids[(j.first + k) % ids.size()]; }
  };

  void check_tensor(int t, std::string_view what) const {
    if (t < 0 || static_cast<std::size_t>(t) >= tensors_.size())
      throw_invalid_argument(rank_, what, detail::cat({"0..", std::to_string(tensors_.size() - 1)}),
                             std::to_string(t));
  }

  bool failed_idle() const { return error_ && in_flight_ == 0; }

  // The most bytes a staged fused allreduce can have: the fusion threshold, or a group above it
  // (never split); never more than all tensors together. A lone tensor runs in place.
  static std::size_t staging_bytes(std::span<const TensorSpec> tensors, const Coordinated& policy) {
    std::uint64_t total = 0, largest = policy.fusion_threshold_bytes;
    for (const auto& t : tensors) total += t.bytes();
    for (const auto& [group, members] : policy.groups) {
      std::uint64_t bytes = 0;
      for (const auto& t : tensors)
        for (const auto& m : members) bytes += t.name == m ? t.bytes() : 0;
      largest = std::max(largest, bytes);
    }
    const auto bytes = static_cast<std::size_t>(std::min(total, largest));
    return bytes + bytes / 8 + 16 * sizeof(double);  // room for size_class() padding
  }

  void fail(std::exception_ptr e) {  // holds mu_
    if (!error_) error_ = std::move(e);
    for (int c = 0; c < nlanes_; ++c) {
      Lane& lane = lanes_[static_cast<std::size_t>(c)];
      // A running job stays until its worker returns (in_flight_ counts it until then).
      const std::size_t keep = lane.busy ? 1 : 0;
      in_flight_ -= static_cast<int>(lane.njobs - keep);
      lane.njobs = keep;
      lane.nids = keep ? lane.jobs[lane.head].ntensors : 0;
    }
    done_cv_.notify_all();
  }

  void cycle_loop() {
    std::vector<int> batch;
    batch.reserve(tensors_.size());
    std::size_t undecided = 0;
    bool fruitless = false;
    std::unique_lock lock(mu_);
    for (;;) {
      const auto news = [&] { return stop_ || error_ || !incoming_.empty(); };
      if (undecided == 0)
        cycle_cv_.wait(lock, news);
      else if (fruitless)
        cycle_cv_.wait_for(lock, cycle_time_, news);
      if (stop_ || error_) return;
      batch.swap(incoming_);
      lock.unlock();
      decided_.clear();
      decided_ids_.clear();
      std::exception_ptr error;
      try {
        for (int t : batch) {
          const TensorSpec& s = tensors_[static_cast<std::size_t>(t)];
          coordinator_.submit(s.name, s.dtype, s.count, op_);
        }
        undecided += batch.size();
        batch.clear();
        const auto fused = coordinator_.cycle();
        const auto responses = coordinator_.responses();
        for (const coord::FusedRange& f : fused) {
          Job job{f.dtype, 0, f.bytes, decided_ids_.size(), f.end - f.begin};
          for (std::size_t i = f.begin; i < f.end; ++i) {
            decided_ids_.push_back(tensor_id(names_, responses[i].name, rank_));
            job.count += static_cast<std::size_t>(responses[i].count);
          }
          undecided -= job.ntensors;
          decided_.push_back(job);
        }
        fruitless = decided_.empty();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      // The engine may have failed (or be stopping) while the cycle ran: its decisions are not
      // run then, since the user may already have been told of the failure and freed its buffers.
      if (error || error_ || stop_) {
        if (error) fail(error);
        return;
      }
      const coord::CycleStats& cs = coordinator_.last_cycle();
      ++stats_.cycles;
      stats_.coordinator_cycles += cs.coordinator_path ? 1 : 0;
      stats_.cached_responses += cs.cached_responses;
      stats_.new_responses += cs.new_responses;
      stats_.fused_allreduces += decided_.size();
      stats_.control_bytes += cs.control_bytes();
      for (Job job : decided_) {
        Lane& lane = lanes_[static_cast<std::size_t>(next_lane_)];
        next_lane_ = (next_lane_ + 1) % nlanes_;
        const std::size_t from = job.first;
        job.first = (lane.ids_head + lane.nids) % lane.ids.size();
        for (std::size_t k = 0; k < job.ntensors; ++k)
          lane.ids[(job.first + k) % lane.ids.size()] = decided_ids_[from + k];
        lane.nids += job.ntensors;
        lane.jobs[(lane.head + lane.njobs) % lane.jobs.size()] = job;
        ++lane.njobs;
        ++in_flight_;
        max_in_flight_ = std::max(max_in_flight_, in_flight_);
        lane.cv.notify_one();
      }
    }
  }

  void work(int c) {
    Lane& lane = lanes_[static_cast<std::size_t>(c)];
    std::unique_lock lock(mu_);
    for (;;) {
      lane.cv.wait(lock, [&] { return stop_ || lane.njobs != 0; });
      if (stop_) return;
      if (error_) {  // a failed engine starts nothing (fail() dropped what was queued by then)
        in_flight_ -= static_cast<int>(lane.njobs);
        lane.njobs = 0;
        lane.nids = 0;
        done_cv_.notify_all();
        continue;
      }
      const Job job = lane.jobs[lane.head];
      lane.busy = true;
      const bool staged =
          job.ntensors > 1 && (!contiguous(lane, job) || size_class(job.count) != job.count);
      if (staged) ++staged_;
      lock.unlock();
      std::exception_ptr error;
      try {
        run(lane, job, staged);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      lane.busy = false;
      lane.head = (lane.head + 1) % lane.jobs.size();
      --lane.njobs;
      lane.ids_head = (lane.ids_head + job.ntensors) % lane.ids.size();
      lane.nids -= job.ntensors;
      --in_flight_;
      if (error) {
        fail(error);
        continue;
      }
      for (std::size_t k = 0; k < job.ntensors; ++k)
        done_[static_cast<std::size_t>(lane.tensor(job, k))] = 1;
      done_count_ += job.ntensors;
      done_cv_.notify_all();
    }
  }

  bool contiguous(const Lane& lane, const Job& job) const {
    for (std::size_t k = 1; k < job.ntensors; ++k) {
      const auto a = static_cast<std::size_t>(lane.tensor(job, k - 1));
      if (data_[a] + tensors_[a].bytes() != data_[static_cast<std::size_t>(lane.tensor(job, k))])
        return false;
    }
    return true;
  }

  void run(Lane& lane, const Job& job, bool staged) {
    handle_type& handle = lane.handle.front();
    if (!staged) {
      std::byte* d = data_[static_cast<std::size_t>(lane.tensor(job, 0))];
      handle.run(d, d, job.count, job.dtype, op_);
      return;
    }
    std::byte* buf = lane.staging.data();
    std::size_t off = 0;
    for (std::size_t k = 0; k < job.ntensors; ++k) {
      const auto t = static_cast<std::size_t>(lane.tensor(job, k));
      const auto n = static_cast<std::size_t>(tensors_[t].bytes());
      std::memcpy(buf + off, data_[t], n);
      off += n;
    }
    // The padding is reduced with the rest and dropped; zeros keep it free of NaNs and traps.
    const std::size_t padded = size_class(job.count);
    std::memset(buf + off, 0, (padded - job.count) * size_of(job.dtype));
    handle.run(buf, buf, padded, job.dtype, op_);
    off = 0;
    for (std::size_t k = 0; k < job.ntensors; ++k) {
      const auto t = static_cast<std::size_t>(lane.tensor(job, k));
      const auto n = static_cast<std::size_t>(tensors_[t].bytes());
      std::memcpy(data_[t], buf + off, n);
      off += n;
    }
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cycle_cv_.notify_all();
      for (int c = 0; c < nlanes_; ++c) lanes_[static_cast<std::size_t>(c)].cv.notify_all();
    }
    if (cycler_.joinable()) cycler_.join();
    for (int c = 0; c < nlanes_; ++c)
      if (lanes_[static_cast<std::size_t>(c)].thread.joinable())
        lanes_[static_cast<std::size_t>(c)].thread.join();
  }

  std::span<const TensorSpec> tensors_;
  const NameIndex& names_;
  int rank_;
  ReduceOp op_;
  std::chrono::microseconds cycle_time_;
  int nlanes_;
  std::vector<std::byte*> data_;  // per tensor: the user's buffer
  // Used by the cycle thread only (and constructed before it starts).
  coord::AllreduceControlPlane<handle_type> control_;
  coord::Coordinator coordinator_;
  std::vector<Job> decided_;      // a cycle's jobs; `first` indexes decided_ids_
  std::vector<int> decided_ids_;  // their tensors

  mutable std::mutex mu_;
  std::condition_variable cycle_cv_;  // a ready(), or stop
  std::condition_variable done_cv_;   // a fused allreduce finished, or the engine failed
  std::unique_ptr<Lane[]> lanes_;
  int next_lane_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<int> incoming_;  // marked ready, not yet submitted to the coordinator
  CoordinationStats stats_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::uint64_t staged_ = 0;
  // One iteration's state, reset by wait().
  std::vector<std::uint8_t> ready_;  // per tensor
  std::vector<std::uint8_t> done_;   // per tensor: its fused allreduce finished
  std::size_t ready_count_ = 0;
  std::size_t done_count_ = 0;
  std::uint64_t iterations_ = 0;
  std::thread cycler_;  // last: started once everything above exists
};

}  // namespace ccoll::gradient::engine
