// tools/train_emu/emu_trace.hpp: one emulated iteration as a Chrome trace (chrome://tracing,
// Perfetto; docs/formats.md), laid out like the model's own trace (gradient/timeline.hpp's
// write_chrome_trace) so the two can be opened side by side: one process per rank, thread 0 its
// compute (forward, then one slice per layer's backward), thread 1 + c its channel c (one slice
// per allreduce call, named by the layers of its message).
#pragma once

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/gradient/profile.hpp"

namespace ccoll::train_emu {

struct Span {
  std::string name;
  int rank = 0;
  int lane = 0;                   // 0: compute; 1 + c: channel c
  double start_s = 0, end_s = 0;  // any common clock (steady_clock across processes)
  nlohmann::json args = nlohmann::json::object();
};

// Times are shifted so that the earliest span starts at 0.
inline nlohmann::json chrome_trace(const std::vector<Span>& spans, nlohmann::json other = {}) {
  double t0 = std::numeric_limits<double>::infinity();
  for (const Span& s : spans) t0 = std::min(t0, s.start_s);
  if (spans.empty()) t0 = 0;
  nlohmann::json ev = nlohmann::json::array();
  std::map<std::pair<int, int>, bool> lanes;
  for (const Span& s : spans) lanes[{s.rank, s.lane}] = true;
  std::map<int, bool> ranks;
  for (const auto& [key, unused] : lanes) {
    (void)unused;
    const auto [rank, lane] = key;
    if (!ranks[rank]) {
      ranks[rank] = true;
      ev.push_back(
          {{"name", "process_name"},
           {"ph", "M"},
           {"pid", rank},
           {"args", {{"name", ccoll::gradient::detail::cat({"rank ", std::to_string(rank)})}}}});
    }
    ev.push_back({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", rank},
                  {"tid", lane},
                  {"args",
                   {{"name", lane == 0 ? std::string("compute")
                                       : ccoll::gradient::detail::cat(
                                             {"channel ", std::to_string(lane - 1)})}}}});
  }
  for (const Span& s : spans)
    ev.push_back({{"name", s.name},
                  {"cat", s.lane == 0 ? "compute" : "comm"},
                  {"ph", "X"},
                  {"pid", s.rank},
                  {"tid", s.lane},
                  {"ts", (s.start_s - t0) * 1e6},
                  {"dur", std::max(0.0, s.end_s - s.start_s) * 1e6},
                  {"args", s.args}});
  nlohmann::json doc{{"traceEvents", std::move(ev)}, {"displayTimeUnit", "ms"}};
  if (!other.is_null()) doc["otherData"] = std::move(other);
  return doc;
}

}  // namespace ccoll::train_emu
