// ccoll/gradient/mg_wfbp.hpp: merged-gradient WFBP ([MG-WFBP] Sec. 4), exact, and the paper's own
// rule.
//
// [MG-WFBP] Sec. 3 asks for the layer typing (each layer normal, or merged into the layer below it)
// that minimises the iteration time when one allreduce runs at a time (Eq. 24). Its Theorem 1
// answers with a sweep from layer L down: merge layer l into l - 1 iff
//   tau_b(l-1) + t_b(l-1) < tau_c(l) + a                (Eq. 35/38; quoted as [ASC-WFBP] Eq. 5),
// i.e. iff merging ends the communication of layer l - 1 earlier *assuming layer l - 1 is then sent
// alone*. That assumption is where the proof fails: the best choice for layer l depends on whether
// l - 1 is itself merged further down, so the rule is a one-step look-ahead, not an optimum. A
// three-layer counterexample (a = 3, b = 1 per byte; layers 1..3 of 5, 1, 4 bytes with backward
// times 5, 1, 3; forward 0): the rule merges 3 into 2 (message {3,2} 4..12, then {1} 12..20,
// iteration 20), while sending 3 alone (3..10) and merging 2 into 1 ({2,1} 10..19) gives 19.
// tests/schedule_ test.cpp keeps this case; docs/schedules.md measures how often and by how much
// the rule loses.
//
// plan_mg_wfbp solves Eq. 24 exactly. A message is a run of consecutive layers; it can start once
// its lowest layer is ready and the previous message has ended, and its end is non-decreasing in
// that previous end. So E(k), the earliest end of a message whose lowest layer is k over all ways
// to cut the layers above, obeys E(k) = min_{b > k} max(E(b), ready(k)) + t_AR(bytes k..b-1), with
// E(L) = -inf: an O(L^2) dynamic programme, for any cost t_AR non-decreasing in the bytes (the
// double binary tree's sqrt form included). plan_mg_wfbp_paper keeps Theorem 1's rule, O(L), for
// the reproductions and the comparison.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

// The exact optimum over the 2^(L-1) merge patterns, one allreduce at a time.
inline LayerTyping mg_wfbp_typing(const ModelProfile& p, const CommModel& c) {
  const int L = p.num_layers();
  if (L == 0) throw_invalid_argument(-1, "profile.layers", "at least one layer", "none");
  const std::vector<double> ready = p.ready_times();
  std::vector<double> prefix(static_cast<std::size_t>(L) + 1, 0.0);
  for (int i = 0; i < L; ++i)
    prefix[static_cast<std::size_t>(i) + 1] =
        prefix[static_cast<std::size_t>(i)] +
        static_cast<double>(p.layers[static_cast<std::size_t>(i)].bytes);
  const double inf = std::numeric_limits<double>::infinity();
  // end[b]: earliest end of the communication of layers >= b, given that a message ends there.
  std::vector<double> end(static_cast<std::size_t>(L) + 1, inf);
  std::vector<int> from(static_cast<std::size_t>(L) + 1, -1);
  end[static_cast<std::size_t>(L)] = -inf;
  for (int b = L; b >= 1; --b) {
    const double e = end[static_cast<std::size_t>(b)];
    for (int k = b - 1; k >= 0; --k) {
      const double t =
          std::max(e, ready[static_cast<std::size_t>(k)]) +
          c.time(prefix[static_cast<std::size_t>(b)] - prefix[static_cast<std::size_t>(k)]);
      if (t < end[static_cast<std::size_t>(k)]) {
        end[static_cast<std::size_t>(k)] = t;
        from[static_cast<std::size_t>(k)] = b;
      }
    }
  }
  LayerTyping types(static_cast<std::size_t>(L), LayerType::merged);
  for (int k = 0; k < L; k = from[static_cast<std::size_t>(k)])
    types[static_cast<std::size_t>(k)] = LayerType::normal;
  return types;
}

inline Schedule plan_mg_wfbp(const ModelProfile& p, const CommModel& c) {
  return schedule_from_typing(mg_wfbp_typing(p, c), 1, "mg");
}

// [MG-WFBP] Theorem 1 / Alg. 1 as printed: merge l into l - 1 iff that ends the message of
// l - 1 earlier when l - 1 is sent alone. Compared as end times, which is Eq. 38 for a line and
// stays meaningful for costs that are not lines. One sweep: decisions never change upper layers.
inline LayerTyping mg_wfbp_paper_typing(const ModelProfile& p, const CommModel& c) {
  const int L = p.num_layers();
  if (L == 0) throw_invalid_argument(-1, "profile.layers", "at least one layer", "none");
  const std::vector<double> ready = p.ready_times();
  LayerTyping t(static_cast<std::size_t>(L), LayerType::normal);
  auto bytes = [&](int i) {
    return static_cast<double>(p.layers[static_cast<std::size_t>(i)].bytes);
  };
  double start = ready[static_cast<std::size_t>(L - 1)];  // tau_c of the open message
  double group = bytes(L - 1);                            // its bytes
  for (int i = L - 1; i >= 1; --i) {
    const double r = ready[static_cast<std::size_t>(i - 1)];
    const double merged_end = std::max(start, r) + c.time(group + bytes(i - 1));
    const double split_end = std::max(start + c.time(group), r) + c.time(bytes(i - 1));
    if (merged_end < split_end) {
      t[static_cast<std::size_t>(i)] = LayerType::merged;
      start = std::max(start, r);
      group += bytes(i - 1);
    } else {
      start = std::max(start + c.time(group), r);
      group = bytes(i - 1);
    }
  }
  return t;
}

inline Schedule plan_mg_wfbp_paper(const ModelProfile& p, const CommModel& c) {
  return schedule_from_typing(mg_wfbp_paper_typing(p, c), 1, "mg-paper");
}

}  // namespace ccoll::gradient
