// ccoll/gradient/single_layer.hpp: single-layer communication (SyncEASGD, You et al.).
//
// All gradients are fused into one message sent after the whole backward pass ([MG-WFBP] Sec. 2.4,
// Eq. 9): the fewest startups, no overlap with computation. In typing form: every layer but layer 1
// is merged into the one below it.
#pragma once

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

inline Schedule plan_single_layer(const ModelProfile& p) {
  if (p.layers.empty()) throw_invalid_argument(-1, "profile.layers", "at least one layer", "none");
  LayerTyping t(p.layers.size(), LayerType::merged);
  t[0] = LayerType::normal;
  return schedule_from_typing(t, 1, "single");
}

}  // namespace ccoll::gradient
