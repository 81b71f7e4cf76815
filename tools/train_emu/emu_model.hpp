// tools/train_emu/emu_model.hpp: the pure logic of ccoll_train_emu, the training-loop emulator
// (docs/gradients.md, "The training-loop emulator"): scaling a shipped profile to this machine,
// fitting the communication model from the allreduces measured in the same run, building every
// policy's schedule, predicting its iteration time, and summarising measurements.
//
// The emulator compares a measured iteration with the timeline model's prediction of the same
// schedule, so everything the prediction uses must be measured in the run itself: the compute
// times (a compute-only pass on this machine), a and b (one allreduce at a time, over sizes) and
// gamma (K allreduces at once), fitted with model/fit.hpp as `ccoll fit` does. Kept free of
// processes and clocks so that tests/train_emu_test.cpp can check it directly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/gradient/asc_wfbp.hpp"
#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/engine/channel_plan.hpp"
#include "ccoll/gradient/engine/engine_timeline.hpp"
#include "ccoll/gradient/fusion_buffer.hpp"
#include "ccoll/gradient/mg_wfbp.hpp"
#include "ccoll/gradient/optimal.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/single_layer.hpp"
#include "ccoll/gradient/timeline.hpp"
#include "ccoll/gradient/wfbp.hpp"
#include "ccoll/model/fit.hpp"

namespace ccoll::train_emu {

namespace g = ccoll::gradient;

// A profile measured on a GPU at full size would take seconds per iteration on a CPU emulation;
// compute times and gradient sizes are scaled separately, so that the ratio of communication to
// computation (what decides which schedule wins) can be set to the paper's regime.
struct Scale {
  double compute = 0.1;          // x every forward and backward time
  double bytes = 1.0 / 16;       // x every gradient's bytes
  std::uint64_t elem_bytes = 4;  // a scaled gradient is a positive multiple of this (f32)
};

inline g::ModelProfile scale_profile(const g::ModelProfile& p, const Scale& s) {
  if (!(s.compute > 0) || !(s.bytes > 0) || s.elem_bytes == 0)
    throw std::invalid_argument("scale: compute and bytes factors must be > 0");
  g::ModelProfile out = p;
  out.forward_s = p.forward_s * s.compute;
  for (auto& l : out.layers) {
    l.backward_s *= s.compute;
    const double elems =
        std::round(static_cast<double>(l.bytes) * s.bytes / static_cast<double>(s.elem_bytes));
    l.bytes = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(elems)) * s.elem_bytes;
  }
  return out;
}

// A profile with the same tensors and the compute times measured on this machine: forward, and
// per layer the median duration of its backward step.
inline g::ModelProfile with_compute(const g::ModelProfile& p, double forward_s,
                                    const std::vector<double>& backward_s) {
  if (backward_s.size() != p.layers.size())
    throw std::invalid_argument("with_compute: one backward time per layer");
  g::ModelProfile out = p;
  out.forward_s = forward_s;
  for (std::size_t i = 0; i < backward_s.size(); ++i) out.layers[i].backward_s = backward_s[i];
  return out;
}

// Median and spread of repeated measurements (nearest-rank percentiles).
struct Spread {
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0;
  std::size_t n = 0;
};

inline Spread spread(std::vector<double> v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
  };
  s.min = v.front();
  s.max = v.back();
  s.p10 = at(0.1);
  s.p90 = at(0.9);
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

// Allreduce sizes to time for the fit: geometric from `lo` to `hi` bytes (both included), each a
// multiple of `elem` bytes. The range is that of the messages the policies send, so that the line
// is fitted where it is used.
inline std::vector<std::uint64_t> sweep_bytes(std::uint64_t lo, std::uint64_t hi, double factor,
                                              std::uint64_t elem = 4) {
  if (!(factor > 1)) throw std::invalid_argument("sweep factor must be > 1");
  lo = std::max(lo, elem);
  hi = std::max(hi, lo);
  std::vector<std::uint64_t> out;
  for (double b = static_cast<double>(lo); b < static_cast<double>(hi); b *= factor) {
    const std::uint64_t r = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(b) / elem) * elem;
    if (out.empty() || r > out.back()) out.push_back(r);
  }
  const std::uint64_t top = std::max<std::uint64_t>(1, hi / elem) * elem;
  if (out.empty() || top > out.back()) out.push_back(top);
  return out;
}

// a, b and gamma from samples measured on the transport being emulated: model::fit_alpha_beta on
// the samples of one allreduce at a time, model::fit_gamma on those of several at once. Least
// squares over sizes spread geometrically is steered by the largest ones, and where the time per
// byte changes with size (on a shared-memory host it does around the cache sizes) the line can
// cross zero below them. A negative startup would make small messages free in the model, so the
// model is given at least the time the smallest allreduce was measured to take.
struct CommFit {
  model::LinearFit line;
  double gamma = 1;
  double a_floor_s = 0;                    // the smallest size's time alone
  std::size_t single = 0, concurrent = 0;  // samples of each kind

  double a_s() const { return std::max(line.line.alpha_s, a_floor_s); }
  g::CommModel model() const {
    return g::CommModel::from_line(a_s(), line.line.beta_s_per_byte, gamma);
  }
};

inline CommFit fit_comm(const std::vector<model::Sample>& samples) {
  CommFit f;
  std::vector<model::Sample> one;
  double smallest = std::numeric_limits<double>::infinity();
  for (const auto& s : samples) {
    if (s.concurrent <= 1) {
      one.push_back(s);
      if (s.bytes < smallest) {
        smallest = s.bytes;
        f.a_floor_s = s.time_s;
      }
    } else {
      ++f.concurrent;
    }
  }
  f.single = one.size();
  f.line = model::fit_alpha_beta(one);
  f.gamma = f.concurrent > 0 ? model::fit_gamma(f.line.line, samples) : 1.0;
  return f;
}

// The policies GradientSync runs (docs/gradients.md, "The policies"), in the order reported.
inline const std::vector<std::string>& all_policies() {
  static const std::vector<std::string> names{"wfbp", "single", "bucket",  "horovod",
                                              "mg",   "asc",    "optimal", "coordinated"};
  return names;
}

struct PolicyOptions {
  int max_concurrent = 2;             // K of asc and optimal
  double optimal_time_limit_s = 2.0;  // solve_optimal's budget
  // Baselines' byte and time constants, scaled like the profile so that they cut the scaled
  // model where they cut the real one (a 25 MiB bucket of ResNet-152 stays the same layers).
  g::DdpBuckets ddp;
  g::HorovodFusion horovod;
};

inline PolicyOptions scaled_policy_options(const Scale& s, int max_concurrent) {
  PolicyOptions o;
  o.max_concurrent = max_concurrent;
  const auto scale_bytes = [&](std::uint64_t b) {
    return std::max<std::uint64_t>(s.elem_bytes, static_cast<std::uint64_t>(b * s.bytes));
  };
  o.ddp.bucket_cap_bytes = scale_bytes(o.ddp.bucket_cap_bytes);
  o.ddp.first_bucket_cap_bytes = scale_bytes(o.ddp.first_bucket_cap_bytes);
  o.horovod.threshold_bytes = scale_bytes(o.horovod.threshold_bytes);
  o.horovod.cycle_time_s *= s.compute;
  return o;
}

// The schedule of `name` for profile p under model c. Horovod's fusion groups come from its cycle
// ticks, but the ticks themselves are dropped: GradientSync has no polling loop and starts a
// message as soon as its gradients are ready, so the prediction must not wait for them either.
inline g::Schedule make_policy(const std::string& name, const g::ModelProfile& p,
                               const g::CommModel& c, const PolicyOptions& o) {
  g::Schedule s;
  if (name == "wfbp") {
    s = g::plan_wfbp(p);
  } else if (name == "single") {
    s = g::plan_single_layer(p);
  } else if (name == "bucket") {
    s = g::plan_ddp_buckets(p, o.ddp);
  } else if (name == "horovod" || name == "coordinated") {
    // coordinated: GradientSync<C, Coordinated> decides its fusion at run time; the model's
    // account of it is Horovod's cycle fusion with the same threshold and cycle time.
    s = g::plan_horovod_fusion(p, o.horovod);
  } else if (name == "mg") {
    s = g::plan_mg_wfbp(p, c);
  } else if (name == "asc") {
    s = g::plan_asc_wfbp(p, c, o.max_concurrent);
  } else if (name == "optimal") {
    g::OptimalOptions opt;
    opt.max_concurrent = o.max_concurrent;
    opt.time_limit_s = o.optimal_time_limit_s;
    s = g::solve_optimal(p, c, opt).schedule;
  } else {
    throw std::invalid_argument(
        "unknown policy '" + name +
        "' (wfbp, single, bucket, horovod, mg, asc, optimal, coordinated, all)");
  }
  for (auto& m : s.messages) m.not_before_s = 0;
  s.policy = name;
  return s;
}

// A schedule as text (its layer typing and K), so that rank 0 can hand the schedules it planned
// to the other ranks: solve_optimal runs under a time budget, so ranks planning on their own
// could disagree.
inline std::string encode_schedule(const g::Schedule& s, int num_layers) {
  return std::to_string(s.max_concurrent) + ":" +
         g::typing_string(g::typing_from_schedule(s, num_layers));
}

inline g::Schedule decode_schedule(const std::string& text, const std::string& policy) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw std::invalid_argument("bad schedule text");
  return g::schedule_from_typing(g::parse_typing(text.substr(colon + 1)),
                                 std::stoi(text.substr(0, colon)), policy);
}

// The model's prediction of one schedule: with messages on the first free lane (what the
// planners assume) and pinned to GradientSync's channels (what the engine can do).
struct Prediction {
  double free_lanes_s = 0;
  double pinned_s = 0;
  g::Timeline pinned;
};

inline Prediction predict(const g::ModelProfile& p, const g::Schedule& s, const g::CommModel& c,
                          const g::engine::ChannelPlan& plan) {
  Prediction out;
  out.free_lanes_s = g::evaluate(p, s, c).iteration_s;
  out.pinned = g::evaluate_on_channels(p, s, c, plan);
  out.pinned_s = out.pinned.iteration_s;
  return out;
}

// Signed error of a measurement against a prediction, in % of the prediction.
inline double error_pct(double measured, double predicted) {
  return predicted > 0 ? 100.0 * (measured - predicted) / predicted
                       : std::numeric_limits<double>::infinity();
}

inline nlohmann::json to_json(const Spread& s) {
  return {{"median_s", s.median}, {"p10_s", s.p10}, {"p90_s", s.p90},
          {"min_s", s.min},       {"max_s", s.max}, {"n", s.n}};
}

// Policies ranked by a key (fastest first), ties by name: for comparing the model's ranking with
// the measured one.
template <class Key>
std::vector<std::string> ranking(std::vector<std::string> names, Key key) {
  std::stable_sort(names.begin(), names.end(),
                   [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
  return names;
}

}  // namespace ccoll::train_emu
