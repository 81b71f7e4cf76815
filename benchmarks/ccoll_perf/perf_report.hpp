// ccoll_perf/perf_report.hpp: what a ccoll_perf run prints and writes: the rows of results and
// their figures, the table, the CSV and the JSON report.
//
// The table follows nccl-tests' all_reduce_perf, so that people who read nccl-tests output can
// read ours: size, count, type, redop, time, algbw, busbw, #wrong (busbw = algbw * 2(P-1)/P),
// then ccoll_perf's own columns (the memory or HBM bound, the peer and the ratio to it).
// docs/benchmark.md explains them. Everything here is a pure function of its arguments, so that
// tests/perf_cli_test.cpp checks the text without running a collective.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/traffic.hpp"
#include "device_backend.hpp"
#include "perf_options.hpp"

namespace ccoll_perf {

// "8 B", "16 KiB", "64 MiB" when exact, else bytes.
inline std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + kUnits[u];
}

// busbw = algbw * 2(P-1)/P: the per-rank link traffic of an optimal allreduce, so that the figure
// is comparable across P (nccl-tests' PERFORMANCE.md).
inline double bus_factor(int nranks) {
  return nranks <= 1 ? 0.0 : 2.0 * (nranks - 1) / static_cast<double>(nranks);
}
// The other collectives' factors: ccoll::plan::bus_factor (plan/collective.hpp).

// Upper bound on busbw from the memory bandwidth B (bytes/s, STREAM convention: bytes read plus
// bytes written) of a shared-memory host: every rank must read its N-byte input and write its
// N-byte output at least once, so t >= 2PN / B, algbw <= B / 2P and busbw <= B (P-1) / P^2.
// docs/benchmark.md derives it.
inline double memory_bound_busbw(double membw_bytes_per_s, int nranks) {
  if (nranks <= 1) return 0.0;
  return membw_bytes_per_s * (nranks - 1) / (static_cast<double>(nranks) * nranks);
}

// The HBM bound of a plan whose ranks all run on one GPU: the bytes its steps read and write
// (plan::memory_traffic) at the bandwidth a copy kernel draws (bytes read plus written per
// second), in seconds. docs/benchmark.md derives it.
inline double device_bound_time_s(const ccoll::plan::Plan& p, std::size_t elem_size,
                                  double copy_bytes_per_s) {
  if (copy_bytes_per_s <= 0) return 0.0;
  return static_cast<double>(ccoll::plan::memory_traffic(p, elem_size).total()) / copy_bytes_per_s;
}

// The bound of the minimum traffic of an allreduce of `bytes` per rank on one GPU: each of the
// `nranks` ranks reads its input once and writes its output once (2PN bytes), whatever the plan,
// at the copy kernel's bandwidth, in seconds. The plan's own bound (device_bound_time_s) counts its
// FIFO traffic too; the gap between the two is what the plan's algorithm costs.
inline double device_min_bound_time_s(int nranks, std::uint64_t bytes, double copy_bytes_per_s) {
  if (copy_bytes_per_s <= 0 || nranks < 1) return 0.0;
  return 2.0 * nranks * static_cast<double>(bytes) / copy_bytes_per_s;
}

// One line of results.
struct Row {
  ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce;
  std::string transport;  // threads, shm, mpi
  std::string algo;       // ring, dbtree, tree, tree-overlap, MPI_Allreduce
  int nranks = 0;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  ccoll::DataType dtype = ccoll::DataType::f32;
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  long wrong = -1;              // -1: not checked
  double bound_busbw_GBps = 0;  // memory-bandwidth bound (0: not measured)
  double peer_busbw_GBps = 0;   // the peer's busbw for the same size (0: no peer)
  long peer_wrong = -1;         // the peer's #wrong in the same rounds (-1: not checked / no peer)
  std::string paired_with;      // a peer row: the algorithm it alternated with
  // A GPU transport's bound (device_bound_time_s; 0: none); bound_busbw_GBps is then the busbw
  // that time would give, so that pct_of_bound = bound time / time.
  double bound_time_us = 0;
  // A GPU transport's bound of the minimum traffic (device_min_bound_time_s; 0: none).
  double min_bound_time_us = 0;
  // The peer's algbw, set when the peer ran on another rank count than ours (NCCL: one rank per
  // GPU, ccoll: P virtual ranks on one GPU): the ratio then compares algbw, i.e. the peer's time
  // over ours for the same message, since busbw's 2(P-1)/P would weigh the two differently.
  double peer_algbw_GBps = 0;
  // A GPU transport's launch (0 blocks: none): channels x blocks of `launch_threads` threads, on a
  // device that holds launch_sms x launch_blocks_per_sm of them at once.
  unsigned launch_channels = 0;
  unsigned long long launch_blocks = 0;
  unsigned launch_threads = 0;
  int launch_sms = 0;
  int launch_blocks_per_sm = 0;
};

// Our figure over the peer's (0: no peer): algbw when peer_algbw_GBps is set, else busbw.
inline double ratio_to_peer(const Row& r) {
  if (r.peer_algbw_GBps > 0) return r.algbw_GBps / r.peer_algbw_GBps;
  return r.peer_busbw_GBps > 0 ? r.busbw_GBps / r.peer_busbw_GBps : 0.0;
}

// Sets r's device bound from its bound time.
inline void set_device_bound(Row& r, double bound_time_s) {
  if (bound_time_s <= 0) return;
  r.bound_time_us = bound_time_s * 1e6;
  r.bound_busbw_GBps = static_cast<double>(r.bytes) / bound_time_s / 1e9 * bus_factor(r.nranks);
}

// Fills algbw/busbw from bytes, time and nranks.
inline Row make_row(std::string transport, std::string algo, int nranks, std::uint64_t bytes,
                    std::uint64_t count, ccoll::DataType d, ccoll::ReduceOp op, double time_s,
                    long wrong,
                    ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce) {
  Row r;
  r.collective = collective;
  r.transport = std::move(transport);
  r.algo = std::move(algo);
  r.nranks = nranks;
  r.bytes = bytes;
  r.count = count;
  r.dtype = d;
  r.op = op;
  r.time_us = time_s * 1e6;
  r.algbw_GBps = time_s > 0 ? static_cast<double>(bytes) / time_s / 1e9 : 0.0;
  r.busbw_GBps = r.algbw_GBps * ccoll::plan::bus_factor(collective, nranks);
  r.wrong = wrong;
  return r;
}

namespace detail {
inline std::string printf_string(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}
}  // namespace detail

// nccl-tests' layout plus optional columns: busbw as % of the memory bound and, with a peer, the
// peer's busbw (headed "<peer> busbw") and our ratio to it. On a GPU transport (`device`) the
// bound columns are the plan's HBM bound time and its % of the measured time, and the peer's
// figure is its algbw (Row::peer_algbw_GBps).
inline std::string format_table_header(bool with_bound, bool with_peer,
                                       std::string_view peer = "mpi", bool device = false) {
  std::string h = "#       size         count      type   redop     time   algbw   busbw  #wrong";
  std::string u = "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)        ";
  if (with_bound && device) {
    h += "    bound  %bound      min    %min";
    u += "     (us)             (us)        ";
  } else if (with_bound) {
    h += "  %mbound";
    u += "         ";
  }
  if (with_peer) {
    const std::string label = std::string(peer) + (device ? " algbw" : " busbw");
    h += detail::printf_string("  %10s   ratio", label.c_str());
    u += "      (GB/s)        ";
  }
  return h + "\n" + u + "\n";
}

inline std::string format_row(const Row& r, bool with_bound, bool with_peer, bool device = false) {
  std::string s = detail::printf_string(
      "%12llu  %12llu  %8s  %6s  %7.*f  %6.2f  %6.2f  %6s",
      static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.count),
      std::string(ccoll::to_string(r.dtype)).c_str(), std::string(ccoll::to_string(r.op)).c_str(),
      r.time_us < 10000 ? 2 : 0, r.time_us, r.algbw_GBps, r.busbw_GBps,
      r.wrong < 0 ? "N/A" : std::to_string(r.wrong).c_str());
  if (with_bound && device) {
    for (const double bound : {r.bound_time_us, r.min_bound_time_us})
      s += bound > 0 && r.time_us > 0
               ? detail::printf_string("  %7.*f  %5.1f%%", bound < 10000 ? 2 : 0, bound,
                                       100.0 * bound / r.time_us)
               : std::string("      N/A     N/A");
  } else if (with_bound) {
    s += r.bound_busbw_GBps > 0
             ? detail::printf_string("  %6.1f%%", 100.0 * r.busbw_GBps / r.bound_busbw_GBps)
             : std::string("      N/A");
  }
  if (with_peer) {
    // Ratios of 100 and more (a peer far behind) lose their decimals, to keep the column's width.
    const double ratio = ratio_to_peer(r);
    const double figure = r.peer_algbw_GBps > 0 ? r.peer_algbw_GBps : r.peer_busbw_GBps;
    s += ratio > 0 ? detail::printf_string(ratio < 99.995 ? "  %10.2f  %5.2fx" : "  %10.2f  %5.0fx",
                                           figure, ratio)
                   : std::string("         N/A     N/A");
  }
  return s + "\n";
}

inline std::string csv_header() {
  return "transport,algo,nranks,size_bytes,count,type,op,time_us,algbw_GBps,busbw_GBps,wrong,"
         "bound_busbw_GBps,pct_of_bound,peer_busbw_GBps,ratio_to_peer,paired_with,collective\n";
}

inline std::string csv_row(const Row& r) {
  std::ostringstream os;
  os.precision(6);
  os << r.transport << ',' << r.algo << ',' << r.nranks << ',' << r.bytes << ',' << r.count << ','
     << ccoll::to_string(r.dtype) << ',' << ccoll::to_string(r.op) << ',' << r.time_us << ','
     << r.algbw_GBps << ',' << r.busbw_GBps << ',' << r.wrong << ',' << r.bound_busbw_GBps << ',';
  if (r.bound_busbw_GBps > 0) os << 100.0 * r.busbw_GBps / r.bound_busbw_GBps;
  os << ',' << r.peer_busbw_GBps << ',';
  if (ratio_to_peer(r) > 0) os << ratio_to_peer(r);
  os << ',' << r.paired_with << ',' << ccoll::plan::collective_name(r.collective) << '\n';
  return os.str();
}

// The machine and the memory bandwidths measured in the same run.
struct MachineInfo {
  std::string cpu_model;
  int cores = 0;
  std::string hostname;
  std::string date_utc;
  std::string load_average;
};

struct MemoryBandwidth {
  int threads = 0;
  double copy_GBps = 0;     // memcpy, read+write bytes per second
  double scale_GBps = 0;    // a[i] = s*b[i]
  double triad_GBps = 0;    // a[i] = b[i] + s*c[i]
  double copy_nt_GBps = 0;  // a[i] = b[i] with non-temporal stores (no read-for-ownership)
  // The bandwidth the bound uses: the best of the kernels with the allreduce's 1:1 read:write mix
  // (docs/benchmark.md: an allreduce may write its output with either kind of store).
  double best_1to1_GBps() const {
    double b = copy_GBps > scale_GBps ? copy_GBps : scale_GBps;
    return copy_nt_GBps > b ? copy_nt_GBps : b;
  }
};

struct Report {
  std::string command;
  MachineInfo machine;
  std::vector<MemoryBandwidth> membw;
  double bound_membw_GBps = 0;        // B used for the bound
  std::optional<GpuCalibration> gpu;  // a GPU transport's calibration (-m 1)
  Options options;
  std::vector<Row> rows;
};

// The report as JSON (nlohmann-json; fields in this order; a number that is not finite is null).
inline nlohmann::ordered_json to_json_value(const Report& rep) {
  using json = nlohmann::ordered_json;
  const Options& o = rep.options;
  json j;
  j["command"] = rep.command;
  j["machine"] = {{"cpu", rep.machine.cpu_model},
                  {"cores", rep.machine.cores},
                  {"hostname", rep.machine.hostname},
                  {"date_utc", rep.machine.date_utc},
                  {"load_average", rep.machine.load_average}};
  j["memory_bandwidth"] = json::array();
  for (const auto& m : rep.membw) {
    j["memory_bandwidth"].push_back({{"threads", m.threads},
                                     {"copy_GBps", m.copy_GBps},
                                     {"scale_GBps", m.scale_GBps},
                                     {"triad_GBps", m.triad_GBps},
                                     {"copy_nt_GBps", m.copy_nt_GBps}});
  }
  j["bound_membw_GBps"] = rep.bound_membw_GBps;
  if (rep.gpu) {
    const GpuCalibration& g = *rep.gpu;
    j["gpu_calibration"] = {{"device", g.device},
                            {"array_bytes", g.array_bytes},
                            {"reps", g.reps},
                            {"memcpy_GBps", g.memcpy_GBps},
                            {"copy_kernel_GBps", g.copy_kernel_GBps},
                            {"add_kernel_GBps", g.add_kernel_GBps},
                            {"launch_us", g.launch_us},
                            {"cooperative_launch_us", g.cooperative_launch_us}};
  }
  json& opts = j["options"];
  opts["transport"] = o.transport;
  opts["collective"] = std::string(ccoll::plan::collective_name(o.collective));
  if (ccoll::plan::has_root(o.collective)) opts["root"] = o.root;
  opts["iters"] = o.iters;
  opts["warmup"] = o.warmup;
  opts["rounds"] = o.rounds;
  opts["check"] = o.check;
  opts["slot_bytes"] = o.slot_bytes;
  opts["nslots"] = o.nslots;
  opts["nchannels"] = o.nchannels;
  opts["nchunks"] = o.nchunks;
  opts["stream_slot_bytes"] = o.stream_slot_bytes ? json(*o.stream_slot_bytes) : json(nullptr);
  opts["slot_stores"] = o.slot_stores == Options::SlotStores::automatic  ? "auto"
                        : o.slot_stores == Options::SlotStores::streamed ? "streamed"
                                                                         : "cached";
  opts["timeout_ms"] = o.timeout_ms ? json(*o.timeout_ms) : json(nullptr);
  // -a auto without --tuning: the library's table for the transport (algo/gpu_tuning.hpp on GPUs).
  opts["tuning"] = !o.tuning_path.empty()   ? json(o.tuning_path)
                   : is_device(o.transport) ? json("gpu_tuning_table")
                                            : json(nullptr);
  opts["tune"] = o.tune_path.empty() ? json(nullptr) : json(o.tune_path);
  opts["tune_passes"] =
      o.tune_path.empty() || !o.tune_passes ? json(nullptr) : json(*o.tune_passes);
  opts["interleave"] = o.interleave;
  opts["protocol"] = o.protocol.empty() ? json(nullptr) : json(o.protocol);
  opts["window"] = o.window;
  opts["in_band_agreement_bytes"] =
      o.in_band_agreement_bytes ? json(*o.in_band_agreement_bytes) : json(nullptr);
  opts["eager_rooted_bytes"] = o.eager_rooted_bytes ? json(*o.eager_rooted_bytes) : json(nullptr);
  opts["datatype"] = std::string(ccoll::to_string(o.dtype));
  opts["op"] = std::string(ccoll::to_string(o.op));
  opts["topology"] = o.topology.empty() ? json(nullptr) : json(o.topology);
  opts["split"] = o.split;
  j["results"] = json::array();
  for (const Row& r : rep.rows) {
    json row = {{"collective", std::string(ccoll::plan::collective_name(r.collective))},
                {"transport", r.transport},
                {"algo", r.algo},
                {"nranks", r.nranks},
                {"size", r.bytes},
                {"count", r.count},
                {"type", std::string(ccoll::to_string(r.dtype))},
                {"op", std::string(ccoll::to_string(r.op))},
                {"time_us", r.time_us},
                {"algbw_GBps", r.algbw_GBps},
                {"busbw_GBps", r.busbw_GBps},
                {"wrong", r.wrong}};
    if (r.bound_busbw_GBps > 0) {
      row["bound_busbw_GBps"] = r.bound_busbw_GBps;
      row["pct_of_bound"] = 100.0 * r.busbw_GBps / r.bound_busbw_GBps;
    }
    if (r.bound_time_us > 0) row["bound_time_us"] = r.bound_time_us;
    if (r.min_bound_time_us > 0 && r.time_us > 0) {
      row["min_bound_time_us"] = r.min_bound_time_us;
      row["pct_of_min_bound"] = 100.0 * r.min_bound_time_us / r.time_us;
    }
    if (ratio_to_peer(r) > 0) {
      row["peer_busbw_GBps"] = r.peer_busbw_GBps;
      row["ratio_to_peer"] = ratio_to_peer(r);
      if (r.peer_algbw_GBps > 0) {
        row["peer_algbw_GBps"] = r.peer_algbw_GBps;
        row["ratio_of"] = "algbw";
      }
      row["peer_wrong"] = r.peer_wrong;
    }
    if (!r.paired_with.empty()) row["paired_with"] = r.paired_with;
    if (r.launch_blocks > 0)
      row["launch"] = {{"channels", r.launch_channels},
                       {"blocks", r.launch_blocks},
                       {"threads", r.launch_threads},
                       {"sms", r.launch_sms},
                       {"blocks_per_sm", r.launch_blocks_per_sm}};
    j["results"].push_back(std::move(row));
  }
  return j;
}

inline std::string to_json(const Report& rep) {
  return to_json_value(rep).dump(2) + "\n";
}

// What a run's JSON report (to_json) keeps of the measurements: the machine, the memory
// bandwidths and their bound, and the rows (a figure that was not finite, null, reads as 0); not
// the options or a GPU's calibration. Throws on a document that is not such a report.
struct ReportData {
  MachineInfo machine;
  std::vector<MemoryBandwidth> membw;
  double bound_membw_GBps = 0;
  std::vector<Row> rows;
};

inline ReportData report_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  const auto number = [](const nlohmann::json& row, const char* key) {
    const auto it = row.find(key);
    return it == row.end() || !it->is_number() ? 0.0 : it->get<double>();
  };
  ReportData data;
  const nlohmann::json& m = j.at("machine");
  data.machine.cpu_model = m.at("cpu").get<std::string>();
  data.machine.cores = m.at("cores").get<int>();
  data.machine.hostname = m.at("hostname").get<std::string>();
  data.machine.date_utc = m.at("date_utc").get<std::string>();
  data.machine.load_average = m.at("load_average").get<std::string>();
  for (const nlohmann::json& b : j.at("memory_bandwidth")) {
    MemoryBandwidth mb;
    mb.threads = b.at("threads").get<int>();
    mb.copy_GBps = number(b, "copy_GBps");
    mb.scale_GBps = number(b, "scale_GBps");
    mb.triad_GBps = number(b, "triad_GBps");
    mb.copy_nt_GBps = number(b, "copy_nt_GBps");
    data.membw.push_back(mb);
  }
  data.bound_membw_GBps = number(j, "bound_membw_GBps");
  std::vector<Row>& rows = data.rows;
  for (const nlohmann::json& row : j.at("results")) {
    Row r;
    const auto c = parse_collective(row.at("collective").get<std::string>());
    const auto t = ccoll::parse_data_type(row.at("type").get<std::string>());
    const auto op = ccoll::parse_reduce_op(row.at("op").get<std::string>());
    if (!c || !t || !op)
      throw std::runtime_error("a result row with an unknown collective, type or op");
    r.collective = *c;
    r.dtype = *t;
    r.op = *op;
    r.transport = row.at("transport").get<std::string>();
    r.algo = row.at("algo").get<std::string>();
    r.nranks = row.at("nranks").get<int>();
    r.bytes = row.at("size").get<std::uint64_t>();
    r.count = row.at("count").get<std::uint64_t>();
    r.time_us = number(row, "time_us");
    r.algbw_GBps = number(row, "algbw_GBps");
    r.busbw_GBps = number(row, "busbw_GBps");
    r.wrong = row.at("wrong").get<long>();
    r.bound_busbw_GBps = number(row, "bound_busbw_GBps");
    r.bound_time_us = number(row, "bound_time_us");
    r.min_bound_time_us = number(row, "min_bound_time_us");
    r.peer_busbw_GBps = number(row, "peer_busbw_GBps");
    r.peer_algbw_GBps = number(row, "peer_algbw_GBps");
    if (const auto it = row.find("peer_wrong"); it != row.end()) r.peer_wrong = it->get<long>();
    if (const auto it = row.find("paired_with"); it != row.end())
      r.paired_with = it->get<std::string>();
    if (const auto it = row.find("launch"); it != row.end()) {
      r.launch_channels = it->at("channels").get<unsigned>();
      r.launch_blocks = it->at("blocks").get<unsigned long long>();
      r.launch_threads = it->at("threads").get<unsigned>();
      r.launch_sms = it->at("sms").get<int>();
      r.launch_blocks_per_sm = it->at("blocks_per_sm").get<int>();
    }
    rows.push_back(std::move(r));
  }
  return data;
}

// Joins argv into one shell-readable line for the header and the JSON.
inline std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    const bool quote = a.empty() || a.find_first_of(" \t\"'$\\") != std::string::npos;
    if (!quote) {
      s += a;
      continue;
    }
    s += '\'';
    for (char c : a) {
      if (c == '\'') {
        s += "'\\''";
      } else {
        s += c;
      }
    }
    s += '\'';
  }
  return s;
}

}  // namespace ccoll_perf
