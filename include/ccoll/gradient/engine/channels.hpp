// ccoll/gradient/engine/channels.hpp: the communicators that let gradient allreduces overlap.
//
// One allreduce communicator runs one call at a time per rank (its FIFOs and program counters are
// per call), so messages that the schedule lets run at once need one communicator each: channel k
// is a communicator of its own, built from the user's Config and topology, and each rank drives it
// from one thread of its own. It is anything shaped like ccoll::Allreduce (AllreduceLike, the
// concept below), which is also what lets the tests substitute an instrumented one.
//
// Each channel of a process transport needs a rendezvous name of its own (two communicators of one
// session would claim the same ranks): the session the transport resolves, suffixed ".grad<k>".
// Each channel's plan cache holds every call size that channel runs, so that a schedule with more
// distinct sizes than Config::max_cached_plans does not rebuild plans every iteration.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/gradient/engine/channel_plan.hpp"

namespace ccoll::gradient::engine {

template <class C>
concept AllreduceLike = std::constructible_from<C, const Config&, typename C::topology_type> &&
    requires(C& c, const C& cc, int r, const void* send, void* recv, std::size_t count,
             DataType dtype, ReduceOp op) {
  typename C::transport_type;
  c.rank(r).run(send, recv, count, dtype, op);
  { cc.local_ranks() } -> std::convertible_to<std::span<const int>>;
  { cc.nranks() } -> std::convertible_to<int>;
  { cc.config() } -> std::convertible_to<const Config&>;
};

// The Config of channel k.
template <class Transport>
Config channel_config(const Config& base, int k, std::size_t distinct_calls) {
  Config c = base;
  if constexpr (requires {
                  { Transport::resolve(base) } -> std::convertible_to<Config>;
                }) {
    Config resolved;
    bool ok = true;
    try {
      resolved = Transport::resolve(base);
    } catch (const Error&) {
      ok = false;  // the communicator's own construction reports it, with its context
    }
    if (ok && !resolved.session.empty()) {
      c.session = resolved.session;
      c.session += ".grad";
      c.session += std::to_string(k);
    }
  }
  c.max_cached_plans = static_cast<std::uint32_t>(
      std::max<std::size_t>(c.max_cached_plans, std::max<std::size_t>(distinct_calls, 1)));
  return c;
}

template <AllreduceLike C>
class ChannelSet {
 public:
  using topology_type = typename C::topology_type;

  // A collective construction on process transports: every rank constructs its channels in the
  // same order.
  ChannelSet(const Config& base, const ChannelPlan& plan, const topology_type& topology) {
    channels_.reserve(static_cast<std::size_t>(plan.nchannels));
    for (int k = 0; k < plan.nchannels; ++k)
      channels_.push_back(
          std::make_unique<C>(channel_config<typename C::transport_type>(
                                  base, k, plan.distinct_calls[static_cast<std::size_t>(k)]),
                              topology));
  }

  int size() const { return static_cast<int>(channels_.size()); }
  C& operator[](int k) { return *channels_[static_cast<std::size_t>(k)]; }
  const C& operator[](int k) const { return *channels_[static_cast<std::size_t>(k)]; }

 private:
  std::vector<std::unique_ptr<C>> channels_;  // a communicator is neither copyable nor movable
};

}  // namespace ccoll::gradient::engine
