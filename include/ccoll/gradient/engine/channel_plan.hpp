// ccoll/gradient/engine/channel_plan.hpp: a gradient Schedule lowered onto channels and calls.
//
// The timeline model (timeline.hpp) says when a message may start; the engine also has to say
// where it runs and what it calls. Every rank derives this lowering from the schedule and the
// tensor list alone, never from timing, because channel k of one rank meets channel k of every
// other rank: the k-th message a channel runs must be the same message on every rank, or ranks
// would reduce different tensors with each other.
//
// Channel of a message. An after_previous message starts only when nothing is in flight, so it
// takes channel 0 and every channel is free behind it. The immediate messages that follow it take
// channels 1, 2, ..., K - 1, 0, 1, ... in issue order (K = max_concurrent), so the one that starts
// next to the after_previous message (the [ASC-WFBP] Def. 3 case) gets its own channel. A run of
// immediate messages before any after_previous one starts at channel 0. Where the model would put
// a message on whichever lane freed first (a later message of a run finishing before an earlier
// one), this message waits for its own channel's previous message instead: the price of an
// assignment that needs no agreement between ranks (docs/gradients.md).
//
// Calls of a message. A message is a run of consecutive layers; an allreduce has one dtype, so a
// message is cut into parts, maximal runs of tensors of equal dtype, each one call, run one after
// the other on the message's channel in ascending layer order. A part's elements are laid out in
// ascending layer order on every rank, whether it is all-reduced in place in the user's memory
// (its tensors are one contiguous range in that order) or through a fusion buffer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/gradient/engine/tensor_spec.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient::engine {

// One allreduce call: tensors first..last (layer indices), all of one dtype.
struct Part {
  int first = 0;
  int last = 0;
  DataType dtype = DataType::f32;
  std::size_t count = 0;    // elements, summed over the tensors
  std::uint64_t bytes = 0;  // count * size_of(dtype)
};

struct PlannedMessage {
  int lo = 0, hi = 0;  // layers, as in the schedule
  StartRule rule = StartRule::after_previous;
  int channel = 0;
  std::uint32_t first_part = 0, end_part = 0;  // parts[first_part, end_part)
};

struct ChannelPlan {
  std::vector<PlannedMessage> messages;  // issue order
  std::vector<Part> parts;               // grouped by message, in issue order
  std::vector<int> message_of_layer;     // layer index -> message index
  int max_concurrent = 1;                // the schedule's K
  int nchannels = 1;                     // channels used: at most K
  // Per channel: the distinct (count, element size) pairs its calls use. Each is one cached plan
  // of that channel's communicator, which must hold them all to allocate nothing after the first
  // iteration.
  std::vector<std::size_t> distinct_calls;
};

inline ChannelPlan lower(std::span<const TensorSpec> tensors, const Schedule& schedule) {
  validate_tensors(tensors);
  validate(schedule, static_cast<int>(tensors.size()));
  ChannelPlan plan;
  plan.max_concurrent = schedule.max_concurrent;
  plan.message_of_layer.assign(tensors.size(), -1);
  int next_lane = 0;
  int top_channel = 0;
  for (std::size_t k = 0; k < schedule.messages.size(); ++k) {
    const Message& m = schedule.messages[k];
    PlannedMessage pm;
    pm.lo = m.lo;
    pm.hi = m.hi;
    pm.rule = m.rule;
    if (m.rule == StartRule::after_previous) {
      pm.channel = 0;
      next_lane = 1;
    } else {
      pm.channel = next_lane % schedule.max_concurrent;
      ++next_lane;
    }
    top_channel = std::max(top_channel, pm.channel);
    pm.first_part = static_cast<std::uint32_t>(plan.parts.size());
    for (int i = m.lo; i <= m.hi; ++i) {
      const TensorSpec& t = tensors[static_cast<std::size_t>(i)];
      plan.message_of_layer[static_cast<std::size_t>(i)] = static_cast<int>(k);
      if (i == m.lo || plan.parts.back().dtype != t.dtype) plan.parts.push_back({i, i, t.dtype});
      Part& part = plan.parts.back();
      part.last = i;
      part.count += t.count;
      part.bytes += t.bytes();
    }
    pm.end_part = static_cast<std::uint32_t>(plan.parts.size());
    plan.messages.push_back(pm);
  }
  plan.nchannels = top_channel + 1;
  std::vector<std::set<std::pair<std::size_t, std::size_t>>> calls(
      static_cast<std::size_t>(plan.nchannels));
  for (const PlannedMessage& pm : plan.messages)
    for (std::uint32_t p = pm.first_part; p < pm.end_part; ++p)
      calls[static_cast<std::size_t>(pm.channel)].insert(
          {plan.parts[p].count, size_of(plan.parts[p].dtype)});
  for (const auto& c : calls) plan.distinct_calls.push_back(c.size());
  return plan;
}

}  // namespace ccoll::gradient::engine
