// ccoll/sim/chrome_trace.hpp: a simulated run as a Chrome trace (chrome://tracing, Perfetto).
//
// Process "ranks" has one lane per (rank, channel) with a slice per step (its kind, chunk and
// bytes); process "links" has one counter track per link with its throughput in GB/s over time.
// Needs SimOptions::record_trace. Written by hand (no JSON library) so that the simulator stays
// dependency-free.
#pragma once

#include <cstdio>
#include <map>
#include <ostream>
#include <set>
#include <string>

#include "ccoll/sim/network.hpp"
#include "ccoll/sim/simulator.hpp"

namespace ccoll::sim {

namespace detail {
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}
inline std::string json_us(double seconds) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6f", seconds * 1e6);
  return buf;
}
}  // namespace detail

// Links are named as in res.links (those that carried bytes).
inline void write_chrome_trace(std::ostream& os, const SimResult& res, std::uint32_t nchannels) {
  using detail::json_string;
  using detail::json_us;
  os << "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  bool first = true;
  const auto sep = [&] {
    os << (first ? "  " : ",\n  ");
    first = false;
  };
  sep();
  os << R"({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "ranks"}})";
  sep();
  os << R"({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "links"}})";
  std::set<std::uint64_t> lanes;
  for (const auto& s : res.spans) {
    const std::uint64_t tid = static_cast<std::uint64_t>(s.rank) * nchannels + s.channel;
    if (lanes.insert(tid).second) {
      sep();
      os << R"({"ph": "M", "name": "thread_name", "pid": 0, "tid": )" << tid
         << R"(, "args": {"name": )"
         << json_string("rank " + std::to_string(s.rank) + " ch " + std::to_string(s.channel))
         << "}}";
    }
    sep();
    os << R"({"ph": "X", "pid": 0, "tid": )" << tid << ", \"name\": " << json_string(s.kind)
       << ", \"ts\": " << json_us(s.start_s) << ", \"dur\": " << json_us(s.end_s - s.start_s)
       << R"(, "args": {"step": )" << s.step << ", \"bytes\": " << s.bytes << "}}";
  }
  std::map<int, std::string> names;
  for (const auto& u : res.links) names[u.link] = u.name;
  for (const auto& r : res.link_rates) {
    const auto it = names.find(r.link);
    const std::string name = it != names.end() ? it->second : "link " + std::to_string(r.link);
    sep();
    os << R"({"ph": "C", "pid": 1, "name": )" << json_string(name)
       << ", \"ts\": " << json_us(r.time_s) << R"(, "args": {"GBps": )" << r.rate_Bps / 1e9 << "}}";
  }
  os << "\n]}\n";
}

}  // namespace ccoll::sim
