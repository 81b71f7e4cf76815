// ccoll/gradient/sync.hpp: ccoll::gradient::GradientSync, the object a data-parallel training loop
// all-reduces its gradients with, following a gradient-level schedule (docs/gradients.md).
//
// The planners of this directory choose, for a model's layers, which gradients to fuse into one
// allreduce and which allreduces may run at once; timeline.hpp predicts what that costs.
// GradientSync executes such a Schedule on real buffers: the loop registers its gradient tensors
// once (one per layer, layer 1 at the input side, as in the profile the schedule was planned for),
// marks each one ready as the backward pass produces it, and waits; then every gradient holds the
// reduction (sum, or average with ReduceOp::avg) over all ranks.
//
//   using AR = ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring>;
//   ccoll::gradient::Schedule policy = ccoll::gradient::plan_mg_wfbp(profile, comm_model);
//   ccoll::gradient::GradientSync<AR> sync(config, tensors, policy, {.op = ccoll::ReduceOp::avg});
//   // rank r (a thread here; a process on a process transport, with attach(gradients)):
//   auto& g = sync.attach(r, gradient_pointers);          // once
//   for (;;) {                                            // every iteration
//     for (int l = L - 1; l >= 0; --l) { backward(l); g.ready(l); }
//     g.wait();                                           // or wait(l) per layer, then wait()
//   }
//
// Construction is collective on process transports (one communicator per channel, each a
// rendezvous). The schedule fixes the order of the allreduces, so ranks may mark their tensors
// ready in different orders without any agreement protocol (engine/rank_engine.hpp says why);
// GradientSync<C, Coordinated> (coordinated_sync.hpp) agrees on the order at run time. Misuse is a
// ccoll::Error (InvalidArgument): an unknown tensor, a tensor marked ready twice in one iteration,
// a wait that could never return because a tensor it needs was not marked ready.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/gradient/engine/attached_ranks.hpp"
#include "ccoll/gradient/engine/channel_plan.hpp"
#include "ccoll/gradient/engine/channels.hpp"
#include "ccoll/gradient/engine/rank_engine.hpp"
#include "ccoll/gradient/engine/tensor_spec.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

struct SyncOptions {
  ReduceOp op = ReduceOp::sum;  // avg: the mean over ranks (divided once, on one rank, exactly)
};

// Policy: Schedule (this class: the order fixed in advance) or Coordinated (coordinated_sync.hpp:
// the order agreed at run time).
template <engine::AllreduceLike C, class Policy = Schedule>
class GradientSync {
  static_assert(std::same_as<Policy, Schedule>,
                "GradientSync<C, Coordinated> is in ccoll/gradient/coordinated_sync.hpp");

 public:
  using Rank = engine::RankEngine<C>;
  using topology_type = typename C::topology_type;

  GradientSync(const Config& config, std::vector<TensorSpec> tensors, Schedule schedule,
               SyncOptions options = {}) requires std::default_initializable<topology_type>
      : GradientSync(config, std::move(tensors), std::move(schedule), options, topology_type{}) {}
  GradientSync(const Config& config, std::vector<TensorSpec> tensors, Schedule schedule,
               SyncOptions options, const topology_type& topology)
      : tensors_(std::move(tensors)),
        schedule_(std::move(schedule)),
        plan_(engine::lower(tensors_, schedule_)),
        options_(options),
        channels_(config, plan_, topology),
        ranks_(channels_[0].nranks()) {
    for (std::size_t i = 0; i < tensors_.size(); ++i)
      names_.emplace(tensors_[i].name, static_cast<int>(i));
  }
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Binds local rank `rank`'s gradient buffers (gradients[i]: tensor i) and starts its workers;
  // once per rank. Threads transports: thread r attaches rank r.
  Rank& attach(int rank, std::span<void* const> gradients) {
    return ranks_.attach(rank, channels_[0].local_ranks(), [&] {
      return std::make_unique<Rank>(channels_, plan_, tensors_, names_, rank, gradients,
                                    options_.op);
    });
  }
  // Process transports, which host one rank: this process's.
  Rank& attach(std::span<void* const> gradients) {
    return attach(engine::AttachedRanks<Rank>::sole(channels_[0].local_ranks()), gradients);
  }
  // An attached rank.
  Rank& rank(int r) { return ranks_.at(r); }

  int id(std::string_view name) const { return engine::tensor_id(names_, name, -1); }
  std::span<const TensorSpec> tensors() const { return tensors_; }
  const Schedule& schedule() const { return schedule_; }
  const engine::ChannelPlan& channel_plan() const { return plan_; }
  int nchannels() const { return channels_.size(); }
  C& channel(int k) { return channels_[k]; }
  int nranks() const { return channels_[0].nranks(); }
  const SyncOptions& options() const { return options_; }

 private:
  std::vector<TensorSpec> tensors_;
  Schedule schedule_;
  engine::ChannelPlan plan_;
  engine::NameIndex names_;
  SyncOptions options_;
  engine::ChannelSet<C> channels_;
  engine::AttachedRanks<Rank> ranks_;  // destroyed first: their workers use the channels
};

}  // namespace ccoll::gradient
