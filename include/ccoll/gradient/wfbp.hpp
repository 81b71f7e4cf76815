// ccoll/gradient/wfbp.hpp: wait-free backpropagation, one allreduce per layer.
//
// Each layer's gradient is all-reduced as soon as it is ready and the previous allreduce has
// finished ([MG-WFBP] Sec. 2.3, Eq. 6-8; [ASC-WFBP] Fig. 1(b)): every layer is a normal layer and
// one message runs at a time.
#pragma once

#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

inline Schedule plan_wfbp(const ModelProfile& p) {
  return schedule_from_typing(LayerTyping(p.layers.size(), LayerType::normal), 1, "wfbp");
}

}  // namespace ccoll::gradient
