// ccoll/gradient/engine/engine_timeline.hpp: the timeline of a schedule as GradientSync runs it.
//
// timeline.hpp's evaluate() puts each message on whichever lane is free, as the planners assume.
// The engine pins each message to a channel fixed by the schedule alone (channel_plan.hpp), so a
// message of a run of simultaneous ones waits for its own channel's previous message even when
// another channel freed first. evaluate_on_channels() scores the same schedule with that rule, so
// that a prediction compares with what the engine can actually do; where the two evaluations
// differ, the difference is the price of the fixed assignment (docs/gradients.md, "Channels").
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/engine/channel_plan.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

// evaluate() with message k pinned to lane plan.messages[k].channel. `plan` must be the lowering
// of `s` (engine::lower, or GradientSync::channel_plan()).
inline Timeline evaluate_on_channels(const ModelProfile& p, const Schedule& s,
                                     const CommModel& model, const engine::ChannelPlan& plan) {
  validate(s, p.num_layers());
  if (plan.messages.size() != s.messages.size())
    throw_invalid_argument(-1, "plan.messages", std::to_string(s.messages.size()) + " messages",
                           std::to_string(plan.messages.size()));
  Timeline tl;
  tl.forward_s = p.forward_s;
  tl.ready_s = p.ready_times();
  tl.backward_end_s = tl.ready_s.front();
  CommSim sim(&model, s.max_concurrent, &tl.messages);
  for (std::size_t k = 0; k < s.messages.size(); ++k) {
    const Message& m = s.messages[k];
    const double ready = std::max(tl.ready_s[static_cast<std::size_t>(m.lo)], m.not_before_s);
    sim.issue(static_cast<int>(k), ready, static_cast<double>(message_bytes(p, m)), m.rule,
              plan.messages[k].channel);
  }
  tl.comm_end_s = sim.run_to_completion();
  tl.iteration_s = std::max(tl.backward_end_s, tl.comm_end_s);
  return tl;
}

}  // namespace ccoll::gradient
