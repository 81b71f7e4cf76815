// ccoll/gradient/coordinated_sync.hpp: GradientSync<C, Coordinated>, the GradientSync whose ranks
// agree at run time which gradients to all-reduce together and in which order (coordinated.hpp,
// engine/coordinated_rank.hpp), with the interface of the scheduled one (sync.hpp).
//
//   using AR = ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring>;
//   ccoll::gradient::GradientSync<AR, ccoll::gradient::Coordinated> sync(
//       config, tensors, {.fusion_threshold_bytes = 4 << 20}, {.op = ccoll::ReduceOp::avg});
//   auto& g = sync.attach(r, gradient_pointers);   // a thread per rank; attach(ptrs) on processes
//   for (;;) { for (int t : any_order) g.ready(t); g.wait(); }
//
// Construction is collective on process transports: K gradient channels and one control channel,
// each a communicator of its own (channels.hpp names their sessions ".grad<k>", the control one
// ".grad<K>"). On an MPI transport the channels' workers and the cycle thread call MPI at once:
// initialise MPI with MPI_THREAD_MULTIPLE (docs/gradients.md, "MPI").
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/gradient/coordinated.hpp"
#include "ccoll/gradient/engine/attached_ranks.hpp"
#include "ccoll/gradient/engine/channel_plan.hpp"
#include "ccoll/gradient/engine/channels.hpp"
#include "ccoll/gradient/engine/coordinated_rank.hpp"
#include "ccoll/gradient/engine/rank_engine.hpp"
#include "ccoll/gradient/engine/tensor_spec.hpp"
#include "ccoll/gradient/sync.hpp"

namespace ccoll::gradient {

template <engine::AllreduceLike C>
class GradientSync<C, Coordinated> {
 public:
  using Rank = engine::CoordinatedRank<C>;
  using topology_type = typename C::topology_type;

  GradientSync(const Config& config, std::vector<TensorSpec> tensors, Coordinated policy,
               SyncOptions options = {}) requires std::default_initializable<topology_type>
      : GradientSync(config, std::move(tensors), std::move(policy), options, topology_type{}) {}
  GradientSync(const Config& config, std::vector<TensorSpec> tensors, Coordinated policy,
               SyncOptions options, const topology_type& topology)
      : tensors_(checked(std::move(tensors), policy)),
        policy_(std::move(policy)),
        options_(options),
        channels_(config, channel_layout(policy_.max_concurrent, tensors_), topology),
        ranks_(channels_[0].nranks()) {
    for (std::size_t i = 0; i < tensors_.size(); ++i)
      names_.emplace(tensors_[i].name, static_cast<int>(i));
    for (const auto& [group, members] : policy_.groups)
      for (const auto& m : members) engine::tensor_id(names_, m, -1);
    prepare_plans();
  }
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Binds local rank `rank`'s gradient buffers (gradients[i]: tensor i) and starts its cycle thread
  // and workers; once per rank. Threads transports: thread r attaches rank r.
  Rank& attach(int rank, std::span<void* const> gradients) {
    return ranks_.attach(rank, channels_[0].local_ranks(), [&] {
      return std::make_unique<Rank>(channels_, channels_[policy_.max_concurrent], policy_, tensors_,
                                    names_, rank, gradients, options_.op);
    });
  }
  // Process transports, which host one rank: this process's.
  Rank& attach(std::span<void* const> gradients) {
    return attach(engine::AttachedRanks<Rank>::sole(channels_[0].local_ranks()), gradients);
  }
  Rank& rank(int r) { return ranks_.at(r); }

  int id(std::string_view name) const { return engine::tensor_id(names_, name, -1); }
  std::span<const TensorSpec> tensors() const { return tensors_; }
  const Coordinated& policy() const { return policy_; }
  // Gradient channels (the control channel is not counted).
  int nchannels() const { return policy_.max_concurrent; }
  C& channel(int k) { return channels_[k]; }
  C& control_channel() { return channels_[policy_.max_concurrent]; }
  int nranks() const { return channels_[0].nranks(); }
  const SyncOptions& options() const { return options_; }

 private:
  static std::vector<TensorSpec> checked(std::vector<TensorSpec> tensors, const Coordinated& p) {
    validate_tensors(tensors);
    for (const auto& t : tensors)
      if (t.name.find_first_of("\t\n") != std::string::npos)
        throw_invalid_argument(-1, "tensor name", "no tab or newline (the coordinator's wire form)",
                               "'" + t.name + "'");
    if (p.max_concurrent < 1)
      throw_invalid_argument(-1, "max_concurrent", ">= 1", std::to_string(p.max_concurrent));
    if (p.fusion_threshold_bytes == 0)
      throw_invalid_argument(-1, "fusion_threshold_bytes", "> 0", "0");
    return tensors;
  }
  // K gradient channels and a control channel; call sizes are not known in advance, so each keeps
  // Config::max_cached_plans plans.
  // Builds, on every gradient channel, the plan of each count it can run: each tensor's own and
  // every size class up to the largest fused allreduce, per data type. A plan is built locally
  // (no collective), so doing it here keeps its allocations out of the iterations.
  void prepare_plans() {
    if constexpr (requires(C & c) { c.plan(std::size_t{1}, DataType::f32); }) {
      std::uint64_t total = 0;
      for (const auto& t : tensors_) total += t.bytes();
      const std::uint64_t fused = std::min(total, policy_.fusion_threshold_bytes);
      for (int k = 0; k < policy_.max_concurrent; ++k) {
        std::vector<DataType> done;
        for (const auto& t : tensors_) {
          channels_[k].plan(t.count, t.dtype);
          if (std::find(done.begin(), done.end(), t.dtype) != done.end()) continue;
          done.push_back(t.dtype);
          const std::size_t most =
              Rank::size_class(static_cast<std::size_t>(fused / size_of(t.dtype)));
          for (std::size_t n = 1; n <= most; n = Rank::size_class(n + 1))
            channels_[k].plan(n, t.dtype);
        }
      }
    }
  }

  // A gradient channel runs each tensor's own count and the size classes of fused allreduces
  // (CoordinatedRank::size_class, 8 per power of two, per element size); keeping a plan for each
  // is what spares the steady state from building them.
  static engine::ChannelPlan channel_layout(int k, std::span<const TensorSpec> tensors) {
    std::size_t total = 0, sizes = 0;
    for (std::size_t elem : {1, 2, 4, 8}) {
      bool used = false;
      for (const auto& t : tensors) {
        used = used || size_of(t.dtype) == elem;
        total += size_of(t.dtype) == elem ? t.count : 0;
      }
      sizes += used ? 1 : 0;
    }
    const auto classes = static_cast<std::size_t>(8 * (std::bit_width(total) + 1));
    engine::ChannelPlan plan;
    plan.nchannels = k + 1;
    plan.distinct_calls.assign(static_cast<std::size_t>(k), tensors.size() + classes * sizes);
    plan.distinct_calls.push_back(0);
    return plan;
  }

  std::vector<TensorSpec> tensors_;
  Coordinated policy_;
  engine::NameIndex names_;
  SyncOptions options_;
  engine::ChannelSet<C> channels_;
  engine::AttachedRanks<Rank> ranks_;  // destroyed first: their threads use the channels
};

}  // namespace ccoll::gradient
