// The code behind `ccoll schedule` (tools/ccoll/cmd_schedule.cpp), in a header so that
// tests/cli_schedule_test.cpp can drive it: options, profile lookup, the planners, --evaluate, and
// the text / JSON / Chrome-trace outputs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/gradient/asc_wfbp.hpp"
#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/fusion_buffer.hpp"
#include "ccoll/gradient/mg_wfbp.hpp"
#include "ccoll/gradient/optimal.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/single_layer.hpp"
#include "ccoll/gradient/timeline.hpp"
#include "ccoll/gradient/wfbp.hpp"
#include "cli_common.hpp"

namespace ccoll::cli {

namespace grad = ccoll::gradient;

struct ScheduleOptions {
  std::string profile;  // FILE or the name of a shipped profile
  std::vector<std::string> policies;
  std::string evaluate;  // SCHEDULE.json to evaluate instead of planning
  std::string collective = "line";
  double a = 1.4e-3;    // line: allreduce startup (s); ring/dbtree: link latency alpha (s)
  double b = 1.7e-9;    // line: allreduce s/byte; ring/dbtree: link s/byte beta
  double gamma = 1.5;   // [ASC-WFBP] Eq. 9
  int workers = 32;     // ring/dbtree only
  int concurrency = 2;  // messages in flight for asc / optimal / --evaluate
  double time_limit_s = 1.0;
  std::size_t max_states = grad::OptimalOptions{}.max_states;  // optimal: memory budget
  double bucket_mb = 25, first_bucket_mb = 1;                  // DDP
  double fusion_mb = 64, cycle_ms = 5;                         // Horovod
  bool json = false;
  std::string trace;
};

// The largest --bucket-mb, --first-bucket-mb and --fusion-mb: 2^40 MiB is 2^60 bytes.
inline constexpr double kMaxMegabytes = 1099511627776.0;

inline const std::vector<std::string> kPolicyNames{"wfbp", "single",  "mg",     "mg-paper",
                                                   "asc",  "optimal", "bucket", "horovod"};
inline const char* kSchedulePolicies = "wfbp, single, mg, mg-paper, asc, optimal, bucket, horovod";

inline const char* kScheduleHelp =
    "usage: ccoll schedule --profile FILE|MODEL --policy P[,P...]|all\n"
    "                      [--a A --b B --gamma G] [--workers P --collective line|ring|dbtree]\n"
    "                      [--concurrency K] [--time-limit S] [--max-states N] [--json]\n"
    "                      [--trace FILE]\n"
    "       ccoll schedule --profile FILE|MODEL --evaluate SCHEDULE.json [--a ...] [--json]\n"
    "Plans which gradient tensors are fused into one allreduce and which allreduces run at once,\n"
    "and predicts the iteration time (forward + backward + exposed communication).\n"
    "  MODEL      a shipped profile: resnet50 resnet152 densenet161 densenet201 inceptionv4\n"
    "             googlenet bert_base (data/profiles; $CCOLL_PROFILE_DIR overrides)\n"
    "  policies   wfbp (one allreduce per tensor), single (one after the backward pass),\n"
    "             mg (MG-WFBP, exact optimal merging), mg-paper ([MG-WFBP]'s Theorem 1 rule),\n"
    "             asc (ASC-WFBP, [ASC-WFBP] Alg. 1), optimal (merging and simultaneity, with a\n"
    "             lower bound and a proof status), bucket (PyTorch DDP 25 MB buckets),\n"
    "             horovod (fusion buffer and cycle time); all: every policy, as a table\n"
    "  cost       line (default): an allreduce of m bytes takes a + b m ([ASC-WFBP] Eq. 3;\n"
    "             defaults a = 1.4e-3 s, b = 1.7e-9 s/B, gamma = 1.5: [ASC-WFBP] Sec. VI-B);\n"
    "             ring / dbtree: a, b are the link's alpha, beta and the allreduce of P\n"
    "             --workers follows [MG-WFBP] Table II (ring) or the pipelined double binary tree\n"
    "  --gamma    transfer stretch of two simultaneous allreduces ([ASC-WFBP] Eq. 9); k at once:\n"
    "             1 + (gamma - 1)(k - 1)\n"
    "  --concurrency K   allreduces in flight at most (asc, optimal, --evaluate; default 2)\n"
    "  --time-limit S    time budget of the optimal planner, kept inside its search (default\n"
    "             1 s; < 0: until proven or out of states)\n"
    "  --max-states N    memory budget of the optimal planner: search states held at once\n"
    "             (default 250000, at most about 128 MB; up to 100000000); past either budget it\n"
    "             returns its best schedule so far, not proven optimal\n"
    "  --bucket-mb, --first-bucket-mb (bucket: 25, 1); --fusion-mb, --cycle-ms (horovod: 64, 5)\n"
    "  --evaluate FILE   {\"layer_types\": [\"n\", \"m\", \"s\", ...] (index 0 = layer 1) or\n"
    "             \"nms...\", \"max_concurrent\": K}: evaluate that typing\n"
    "  --json     {policy, layer_types, messages [{layers, start_s, end_s}],\n"
    "             predicted_iteration_s, ...}; an array with several policies\n"
    "  --trace F  Chrome trace (compute lane, one lane per concurrent allreduce) of the last one\n";

inline ScheduleOptions parse_schedule_options(const std::vector<std::string>& args) {
  ScheduleOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(f + ": missing value");
      return args[++i];
    };
    auto positive = [&](double v) {
      if (!(v > 0)) throw UsageError(f + ": expected a positive number");
      return v;
    };
    // A size in MiB that converts to a byte count (below 2^64) without overflow.
    auto megabytes = [&](double v) {
      if (!(v > 0) || v > kMaxMegabytes)
        throw UsageError(f + ": expected a number of MiB above 0 and at most 2^40");
      return v;
    };
    if (f == "--profile") {
      o.profile = value();
    } else if (f == "--policy") {
      for (const auto& name : split_list(value(), f)) {
        if (name == "all") {
          o.policies.insert(o.policies.end(), kPolicyNames.begin(), kPolicyNames.end());
        } else if (std::find(kPolicyNames.begin(), kPolicyNames.end(), name) !=
                   kPolicyNames.end()) {
          o.policies.push_back(name);
        } else {
          throw UsageError("--policy: unknown policy \"" + name + "\" (expected " +
                           kSchedulePolicies + " or all)");
        }
      }
    } else if (f == "--evaluate") {
      o.evaluate = value();
    } else if (f == "--collective") {
      o.collective = value();
      if (o.collective != "line" && o.collective != "ring" && o.collective != "dbtree")
        throw UsageError("--collective: expected line, ring or dbtree, got \"" + o.collective +
                         "\"");
    } else if (f == "--a") {
      o.a = parse_number(f, value());
      if (o.a < 0) throw UsageError("--a: expected >= 0");
    } else if (f == "--b") {
      o.b = parse_number(f, value());
      if (o.b < 0) throw UsageError("--b: expected >= 0");
    } else if (f == "--gamma") {
      o.gamma = parse_number(f, value());
      if (o.gamma < 1) throw UsageError("--gamma: expected >= 1 ([ASC-WFBP] Eq. 9)");
    } else if (f == "--workers") {
      const double w = positive(parse_number(f, value()));
      if (w != std::floor(w) || w > 1e7) throw UsageError("--workers: expected an integer");
      o.workers = static_cast<int>(w);
    } else if (f == "--concurrency") {
      const double k = positive(parse_number(f, value()));
      if (k != std::floor(k) || k > 16) throw UsageError("--concurrency: expected 1..16");
      o.concurrency = static_cast<int>(k);
    } else if (f == "--time-limit") {
      o.time_limit_s = parse_number(f, value());
    } else if (f == "--max-states") {
      const double n = positive(parse_number(f, value()));
      if (n != std::floor(n) || n > 1e8)
        throw UsageError("--max-states: expected an integer from 1 to 100000000");
      o.max_states = static_cast<std::size_t>(n);
    } else if (f == "--bucket-mb") {
      o.bucket_mb = megabytes(parse_number(f, value()));
    } else if (f == "--first-bucket-mb") {
      o.first_bucket_mb = megabytes(parse_number(f, value()));
    } else if (f == "--fusion-mb") {
      o.fusion_mb = megabytes(parse_number(f, value()));
    } else if (f == "--cycle-ms") {
      o.cycle_ms = parse_number(f, value());
      if (!(o.cycle_ms >= 1e-6) || o.cycle_ms > 1e6)
        throw UsageError(f + ": expected a cycle from 1e-6 to 1e6 ms");
    } else if (f == "--json") {
      o.json = true;
    } else if (f == "--trace") {
      o.trace = value();
    } else {
      throw UsageError("unknown option \"" + f + "\" (see --help)");
    }
  }
  if (o.profile.empty()) throw UsageError("--profile: required (a file or a model name)");
  if (o.evaluate.empty() && o.policies.empty())
    throw UsageError("--policy: required unless --evaluate is given");
  if (!o.evaluate.empty() && !o.policies.empty())
    throw UsageError("--evaluate and --policy exclude each other");
  if (o.concurrency > 6 &&
      std::find(o.policies.begin(), o.policies.end(), "optimal") != o.policies.end())
    throw UsageError("--concurrency: the optimal policy takes 1..6 messages in flight, got " +
                     std::to_string(o.concurrency));
  return o;
}

// A file path, or a shipped model name looked up in $CCOLL_PROFILE_DIR, the source tree's
// data/profiles and the installed share/ccoll/profiles.
inline grad::ModelProfile resolve_profile(const std::string& name) {
  namespace fs = std::filesystem;
  if (fs::exists(name)) return grad::load_profile(name);
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("CCOLL_PROFILE_DIR")) dirs.emplace_back(env);
#ifdef CCOLL_DATA_DIR
  dirs.emplace_back(fs::path(CCOLL_DATA_DIR) / "profiles");
#elif defined(CCOLL_SOURCE_DIR)
  dirs.emplace_back(fs::path(CCOLL_SOURCE_DIR) / "data" / "profiles");
#endif
#ifdef CCOLL_INSTALL_DATA_DIR
  dirs.emplace_back(fs::path(CCOLL_INSTALL_DATA_DIR) / "profiles");
#endif
  std::string tried;
  for (const auto& d : dirs) {
    const fs::path p = d / (name + ".json");
    if (fs::exists(p)) return grad::load_profile(p.string());
    tried += " " + p.string();
  }
  throw std::runtime_error("--profile: \"" + name + "\" is neither a file nor a shipped model" +
                           (tried.empty() ? std::string() : " (looked for" + tried + ")"));
}

inline grad::CommModel comm_model(const ScheduleOptions& o) {
  if (o.collective == "line") return grad::CommModel::from_line(o.a, o.b, o.gamma);
  return grad::CommModel::collective(grad::parse_collective(o.collective), o.workers,
                                     model::AlphaBeta{o.a, o.b}, o.gamma);
}

struct Planned {
  grad::Schedule schedule;
  double planning_s = 0;
  std::optional<grad::OptimalResult> optimal;
};

inline Planned plan_policy(const ScheduleOptions& o, const std::string& policy,
                           const grad::ModelProfile& p, const grad::CommModel& c) {
  Planned out;
  const auto t0 = std::chrono::steady_clock::now();
  if (policy == "wfbp") {
    out.schedule = grad::plan_wfbp(p);
  } else if (policy == "single") {
    out.schedule = grad::plan_single_layer(p);
  } else if (policy == "mg") {
    out.schedule = grad::plan_mg_wfbp(p, c);
  } else if (policy == "mg-paper") {
    out.schedule = grad::plan_mg_wfbp_paper(p, c);
  } else if (policy == "asc") {
    out.schedule = grad::plan_asc_wfbp(p, c, o.concurrency);
  } else if (policy == "optimal") {
    grad::OptimalOptions opt;
    opt.max_concurrent = o.concurrency;
    opt.time_limit_s = o.time_limit_s;
    opt.max_states = o.max_states;
    out.optimal = grad::solve_optimal(p, c, opt);
    out.schedule = out.optimal->schedule;
  } else if (policy == "bucket") {
    out.schedule =
        grad::plan_ddp_buckets(p, {static_cast<std::uint64_t>(o.bucket_mb * 1048576),
                                   static_cast<std::uint64_t>(o.first_bucket_mb * 1048576)});
  } else {
    out.schedule = grad::plan_horovod_fusion(
        p, {static_cast<std::uint64_t>(o.fusion_mb * 1048576), o.cycle_ms * 1e-3});
  }
  out.planning_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

inline grad::Schedule schedule_from_file(const std::string& path, int num_layers,
                                         int default_concurrency) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--evaluate: cannot read \"" + path + "\"");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("--evaluate: \"" + path + "\" is not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("layer_types"))
    throw std::runtime_error("--evaluate: \"" + path + "\" has no \"layer_types\"");
  std::string typing;
  const auto& t = j.at("layer_types");
  if (t.is_string()) {
    typing = t.get<std::string>();
  } else if (t.is_array()) {
    for (const auto& x : t) {
      if (!x.is_string() || x.get<std::string>().size() != 1)
        throw std::runtime_error("--evaluate: layer_types entries must be \"n\", \"m\" or \"s\"");
      typing += x.get<std::string>();
    }
  } else {
    throw std::runtime_error("--evaluate: layer_types must be an array or a string");
  }
  if (static_cast<int>(typing.size()) != num_layers)
    throw std::runtime_error("--evaluate: layer_types has " + std::to_string(typing.size()) +
                             " entries, the profile " + std::to_string(num_layers) + " layers");
  const int k = j.value("max_concurrent", default_concurrency);
  return grad::schedule_from_typing(grad::parse_typing(typing), k, j.value("policy", "evaluated"));
}

// `ccoll schedule`: returns the exit status; output to `out`, errors to `err`.
inline int run_schedule(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  if (wants_help(args)) {
    out << kScheduleHelp;
    return 0;
  }
  return run_reporting("schedule", err, [&] {
    const ScheduleOptions o = parse_schedule_options(args);
    if (!o.trace.empty()) check_output_file("--trace", o.trace);  // before the work, not after
    const grad::ModelProfile p = resolve_profile(o.profile);
    const grad::CommModel c = comm_model(o);
    std::vector<Planned> runs;
    if (!o.evaluate.empty()) {
      Planned e;
      e.schedule = schedule_from_file(o.evaluate, p.num_layers(), o.concurrency);
      runs.push_back(std::move(e));
    } else {
      for (const auto& pol : o.policies) runs.push_back(plan_policy(o, pol, p, c));
    }
    nlohmann::json all = nlohmann::json::array();
    char line[256];
    if (!o.json) {
      std::snprintf(line, sizeof line,
                    "# model %s: %d layers, %.1f MB of gradients, forward %.4f s, backward %.4f s\n"
                    "# cost: %s\n",
                    p.name.c_str(), p.num_layers(), static_cast<double>(p.total_bytes()) / 1e6,
                    p.forward_s, p.backward_s(), c.describe().c_str());
      out << line;
      out << "#   policy   iteration(s)  exposed comm(s)  messages  concurrent  planning(ms)  "
             "notes\n";
    }
    for (const Planned& r : runs) {
      const grad::Timeline tl = grad::evaluate(p, r.schedule, c);
      if (o.json) {
        nlohmann::json j = grad::to_json(p, r.schedule, tl);
        j["planning_s"] = r.planning_s;
        j["cost_model"] = c.describe();
        if (r.optimal) {
          j["lower_bound_s"] = r.optimal->lower_bound_s;
          j["proven_optimal"] = r.optimal->proven_optimal;
          j["proof"] = r.optimal->proof;
          j["gap"] = r.optimal->gap();
          j["stopped_by"] = r.optimal->stopped_by;
          j["peak_states"] = r.optimal->peak_states;
        }
        all.push_back(std::move(j));
      } else {
        std::string notes;
        if (r.optimal) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "%s; lower bound %.6f s (gap %.2f%%)",
                        r.optimal->proven_optimal
                            ? ("proven optimal by " + r.optimal->proof).c_str()
                        : r.optimal->stopped_by == "states" ? "not proven within --max-states"
                                                            : "not proven within the time limit",
                        r.optimal->lower_bound_s, 100 * r.optimal->gap());
          notes = buf;
        }
        std::snprintf(line, sizeof line, "%10s %14.6f %16.6f %9zu %11d %13.3f  %s\n",
                      r.schedule.policy.c_str(), tl.iteration_s, tl.exposed_comm_s(),
                      r.schedule.messages.size(), r.schedule.max_concurrent, r.planning_s * 1e3,
                      notes.c_str());
        out << line;
      }
    }
    if (o.json) out << (all.size() == 1 ? all[0] : all).dump(2) << "\n";
    if (!o.trace.empty()) {
      std::ofstream f(o.trace);
      if (!f) throw std::runtime_error("--trace: cannot write \"" + o.trace + "\"");
      const Planned& last = runs.back();
      grad::write_chrome_trace(f, p, last.schedule, grad::evaluate(p, last.schedule, c));
    }
    return 0;
  });
}

}  // namespace ccoll::cli
