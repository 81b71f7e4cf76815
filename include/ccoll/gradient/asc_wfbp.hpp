// ccoll/gradient/asc_wfbp.hpp: WFBP with adaptive simultaneous communications ([ASC-WFBP] Alg. 1).
//
// Every layer gets a type: normal (n), merged into the layer below (m) or simultaneous (s: its
// allreduce starts as soon as its gradients are ready, next to the one in flight). Theorem 1
// ([ASC-WFBP] Eq. 40) decides, from layer L down to layer 2:
//   Q1: tau_c(l) + t_c(l) <= tau_b(l-1) + t_b(l-1)                      -> n
//   Q2: tau_b(l-1) + t_b(l-1) < tau_c(l) + a
//   Q3: ready(l) + t_c(l) + penalty(l+1, l) < tau_b(l-1) + t_b(l-1)
//   not Q1 and Q2 and not Q3                                            -> m, otherwise s,
// with tau_c, t_c from the paper's own cost accounting (CALCCOMMTIME, Alg. 1 lines 20-36: the
// penalty of Eq. 13 charged to the later message), and layer 1 always s (Alg. 1 line 18).
// Three places where the printed pseudo-code cannot be what is meant, and what we do instead:
//   - line 26 starts a normal layer's allreduce when its gradients are ready, ignoring the
//     message in flight; Def. 1 (and [MG-WFBP] Eq. 7) says it waits for it: we wait.
//   - line 8 compares with tau_b(l) + t_b(l-1); Eq. 21 has tau_b(l-1) + t_b(l-1): we use Eq. 21.
//   - Eq. 27 / line 12 start the simultaneous message at tau_c(l) + t_b(l); Eq. 17 starts it at
//     tau_b(l) + t_b(l) = ready(l): we use Eq. 17.
// Eq. 12's overlapped bytes are clamped to [0, m(l+1)] (the formula goes negative once layer
// l+1's message is done). The sweep is incremental (decisions never change upper layers): O(L).
// The resulting typing is then evaluated by timeline.hpp with two messages at most in flight (the
// paper's two-way simultaneity); tests and docs/schedules.md compare it with the exact optimum.
#pragma once

#include <algorithm>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

inline LayerTyping asc_wfbp_typing(const ModelProfile& p, const CommModel& c) {
  const int L = p.num_layers();
  if (L == 0) throw_invalid_argument(-1, "profile.layers", "at least one layer", "none");
  const std::vector<double> ready = p.ready_times();
  const double a = c.startup_s();
  // b of the line; for costs that are not lines, the marginal cost per byte of the whole model.
  const double total = static_cast<double>(p.total_bytes());
  const double b = total > 0 ? c.transfer_s(total) / total : 0.0;
  LayerTyping t(static_cast<std::size_t>(L), LayerType::normal);

  double carried = 0;           // bytes merged into the current layer from above
  double prev_start = 0;        // tau_c of the last issued message
  double prev_bytes = 0;        // its bytes (0 if none)
  double prev_end = -1e300;     // its end, by the paper's accounting
  double group_start = -1e300;  // tau_c inherited by a merged run (Alg. 1 line 31)
  for (int i = L - 1; i >= 1; --i) {
    const double m = static_cast<double>(p.layers[static_cast<std::size_t>(i)].bytes) + carried;
    const double ri = ready[static_cast<std::size_t>(i)];
    const double r_next = ready[static_cast<std::size_t>(i - 1)];
    // As a normal layer (its current type): waits for its gradients and the message in flight.
    const double tau_c = std::max({ri, prev_end, group_start});
    const double t_c = c.time(m);
    // Eq. 12-13: penalty of starting at ready(i) next to the previous message.
    double penalty = 0;
    if (prev_bytes > 0) {
      const double t_prev = c.time(prev_bytes);
      const double left = std::clamp(1.0 - (ri - prev_start) / t_prev, 0.0, 1.0);
      penalty = (c.gamma - 1.0) * b * prev_bytes * left;
    }
    const bool q1 = tau_c + t_c <= r_next;
    const bool q2 = r_next < tau_c + a;
    const bool q3 = ri + t_c + penalty < r_next;
    LayerType type = LayerType::normal;
    if (!q1) type = (q2 && !q3) ? LayerType::merged : LayerType::simultaneous;
    t[static_cast<std::size_t>(i)] = type;
    if (type == LayerType::merged) {
      carried = m;
      group_start = std::max(tau_c, r_next);
      continue;
    }
    carried = 0;
    group_start = -1e300;
    const double start = type == LayerType::normal ? tau_c : ri;
    const double dur = t_c + (type == LayerType::simultaneous ? penalty : 0.0);
    prev_start = start;
    prev_bytes = m;
    prev_end = std::max(prev_end, start + dur);
  }
  t[0] = LayerType::simultaneous;  // Alg. 1 line 18
  return t;
}

inline Schedule plan_asc_wfbp(const ModelProfile& p, const CommModel& c, int max_concurrent = 2) {
  return schedule_from_typing(asc_wfbp_typing(p, c), max_concurrent, "asc");
}

}  // namespace ccoll::gradient
