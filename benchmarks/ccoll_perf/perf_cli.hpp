// ccoll_perf/perf_cli.hpp: ccoll_perf's command line, size sweep and output formats.
//
// Everything here is a pure function of its arguments (no clocks, no threads, no MPI), so that
// tests/perf_cli_test.cpp can check the parser, the sweep and the table/CSV/JSON text without
// running a collective. The flags and the table follow nccl-tests' all_reduce_perf, so that people
// who read nccl-tests output can read ours: size, count, type, redop, time, algbw, busbw, #wrong
// (busbw = algbw * 2(P-1)/P).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"

namespace ccoll_perf {

enum class Transport { threads, shm };
enum class Algo { ring, dbtree, tree, tree_overlap, direct };
inline constexpr Algo kAllAlgos[] = {Algo::ring, Algo::dbtree, Algo::tree, Algo::tree_overlap,
                                     Algo::direct};

constexpr std::string_view to_string(Transport t) {
  return t == Transport::threads ? "threads" : "shm";
}

constexpr std::string_view to_string(Algo a) {
  switch (a) {
    case Algo::ring:
      return "ring";
    case Algo::dbtree:
      return "dbtree";
    case Algo::tree:
      return "tree";
    case Algo::tree_overlap:
      return "tree-overlap";
    case Algo::direct:
      return "direct";
  }
  return "?";
}

// A bad flag or value; the message names the flag.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Options {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 64ull << 20;
  double step_factor = 2.0;
  int iters = 20;
  int warmup = 5;
  int rounds = 1;  // timed blocks per size, best kept (with --peer mpi: alternating with MPI)
  bool check = true;
  int nranks = 4;  // threads: threads; shm: processes (ignored under mpirun: world size)
  bool nranks_given = false;
  std::vector<Algo> algos{Algo::ring, Algo::dbtree, Algo::tree, Algo::tree_overlap, Algo::direct};
  ccoll::DataType dtype = ccoll::DataType::f32;
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
  Transport transport = Transport::threads;
  bool peer_mpi = false;
  bool membw = true;  // measure the memory bandwidth and print busbw as % of the bound
  // ccoll::Config knobs (0 = the library's default / automatic choice).
  std::uint64_t slot_bytes = 0;
  std::uint32_t nslots = 0;
  std::uint32_t nchannels = 0;
  std::uint32_t nchunks = 0;
  // ccoll::Config::stream_slot_bytes; unset: the library's default (0 is a value: never).
  std::optional<std::uint64_t> stream_slot_bytes;
  // ccoll::Config::tune_slot_stores: auto (tune), or always stream / never stream from
  // stream_slot_bytes up.
  enum class SlotStores { automatic, streamed, cached } slot_stores = SlotStores::automatic;
  std::string json_path;
  std::string csv_path;
  bool help = false;
};

// "64", "8K", "16M", "1G", "2KB", "4MiB" (binary multiples, as nccl-tests).
inline std::optional<std::uint64_t> parse_size(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (value > (~0ull) / 10) return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (i == 0) return std::nullopt;
  std::string_view suffix = s.substr(i);
  int shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 'b':
      case 'B':
        shift = 0;
        break;
      default:
        return std::nullopt;
    }
    if (shift != 0) suffix.remove_prefix(1);
    if (suffix == "iB" || suffix == "ib") suffix = "";
    if (suffix == "B" || suffix == "b") suffix = "";
    if (!suffix.empty()) return std::nullopt;
  }
  if (shift != 0 && value > ((~0ull) >> shift)) return std::nullopt;
  return value << shift;
}

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

inline std::vector<Algo> parse_algos(std::string_view s) {
  std::vector<Algo> out;
  for (bool more = true; more;) {
    const std::size_t comma = s.find(',');
    const std::string_view name = s.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) s = s.substr(comma + 1);
    if (name == "all") {
      for (Algo a : kAllAlgos) out.push_back(a);
      continue;
    }
    if (name == "none") continue;  // only the peer (--peer mpi)
    bool found = false;
    for (Algo a : kAllAlgos) {
      if (to_string(a) == name || (a == Algo::tree_overlap && name == "tree_overlap")) {
        out.push_back(a);
        found = true;
      }
    }
    if (!found) {
      throw UsageError(
          "-a/--algo: expected ring, dbtree, tree, tree-overlap, direct, all or none, got '" +
          std::string(name) + "'");
    }
  }
  // Keep the first occurrence of each, in the order given.
  std::vector<Algo> unique;
  for (Algo a : out) {
    bool seen = false;
    for (Algo b : unique) seen = seen || a == b;
    if (!seen) unique.push_back(a);
  }
  return unique;
}

inline std::string usage_text() {
  return R"(Usage: ccoll_perf [options]
  -b, --minbytes SIZE     smallest message (bytes; K/M/G suffixes), default 8
  -e, --maxbytes SIZE     largest message, default 64M
  -f, --stepfactor F      multiply the size by F each step, default 2
  -n, --iters N           timed iterations per size, default 20
  -w, --warmup_iters N    untimed iterations per size, default 5
  -r, --rounds R          timed blocks of -n calls per size, the best is reported; with --peer
                          mpi the blocks alternate with MPI's, default 1
  -c, --check 0|1         check the results (#wrong column), default 1
  -t, --nranks P          ranks (threads or processes), default 4; under mpirun: the world size
  -a, --algo LIST         ring, dbtree, tree, tree-overlap, direct or all (comma list), default
                          all;
                          none runs only the peer
  -d, --datatype T        float|f32, double|f64, half|f16, bfloat16|bf16, int32|i32, int64|i64,
                          uint8|u8; default float
  -o, --op OP             sum, prod, min, max, avg; default sum
      --transport T       threads (P threads in this process) or shm (P processes), default threads
      --peer mpi          also run Open MPI's MPI_Allreduce on the same ranks and sizes and print
                          the ratio (needs --transport shm and mpirun -np P)
  -m, --membw 0|1         measure the memory bandwidth and print busbw as % of the bound, default 1
      --slot_bytes SIZE   ccoll::Config::slot_bytes (FIFO slot size), default: the library's
      --nslots N          ccoll::Config::nslots (FIFO depth), default: the library's
      --nchannels N       ccoll::Config::nchannels, default 0 = automatic
      --nchunks N         ccoll::Config::nchunks, default 0 = the cost model's optimum
      --stream_slot_bytes SIZE  ccoll::Config::stream_slot_bytes: calls of at least SIZE write
                          the FIFO slots with non-temporal stores (0: never), default: the
                          library's
      --slot_stores M     auto (rank 0 times both kinds of slot store per size and keeps the
                          faster), streamed (non-temporal) or cached; default auto
      --json FILE         write the results as JSON
      --csv FILE          write the results as CSV
  -h, --help              this text
Examples:
  ccoll_perf                                   # 4 threads, 8 B..64 MiB, every algorithm
  ccoll_perf --transport shm -t 2 -b 16M -e 64M -f 4
  mpirun --allow-run-as-root --oversubscribe -np 4 ccoll_perf --transport shm --peer mpi -b 16M -e 64M -f 4
)";
}

namespace detail {
// "<flag>: <expected>, got '<value>'", the shape of every usage error below.
inline UsageError bad_value(std::string_view flag, std::string_view expected,
                            std::string_view got) {
  std::string message(flag);
  message.append(": ").append(expected).append(", got '").append(got).append("'");
  return UsageError(message);
}

inline long parse_long(std::string_view flag, std::string_view v, long lo, long hi) {
  if (v.empty()) throw bad_value(flag, "expected an integer", v);
  long value = 0;
  std::size_t i = 0;
  bool negative = false;
  if (v[0] == '-') {
    negative = true;
    i = 1;
  }
  if (i == v.size()) throw bad_value(flag, "expected an integer", v);
  for (; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9' || value > 100000000000L)
      throw bad_value(flag, "expected an integer", v);
    value = value * 10 + (v[i] - '0');
  }
  if (negative) value = -value;
  if (value < lo || value > hi) {
    throw UsageError(std::string(flag) + ": expected " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ", got " + std::string(v));
  }
  return value;
}
}  // namespace detail

// Parses argv (argv[0] is skipped). Throws UsageError naming the flag on bad input.
inline Options parse_args(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_inline_value = false;
    if (flag.rfind("--", 0) == 0) {
      const std::size_t eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        has_inline_value = true;
      }
    }
    auto next = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= args.size()) throw UsageError(flag + ": expected a value");
      return args[++i];
    };
    auto is = [&](const char* s, const char* l) { return flag == s || flag == l; };
    if (is("-h", "--help")) {
      o.help = true;
    } else if (is("-b", "--minbytes")) {
      const std::string v = next();
      const auto s = parse_size(v);
      if (!s) throw detail::bad_value(flag, "expected a size like 8, 64K, 16M or 1G", v);
      o.min_bytes = *s;
    } else if (is("-e", "--maxbytes")) {
      const std::string v = next();
      const auto s = parse_size(v);
      if (!s) throw detail::bad_value(flag, "expected a size like 8, 64K, 16M or 1G", v);
      o.max_bytes = *s;
    } else if (is("-f", "--stepfactor")) {
      const std::string v = next();
      char* end = nullptr;
      const double f = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(f >= 1.0) || !std::isfinite(f)) {
        throw detail::bad_value(flag, "expected a number >= 1", v);
      }
      o.step_factor = f;
    } else if (is("-n", "--iters")) {
      o.iters = static_cast<int>(detail::parse_long(flag, next(), 1, 1000000));
    } else if (is("-w", "--warmup_iters")) {
      o.warmup = static_cast<int>(detail::parse_long(flag, next(), 0, 1000000));
    } else if (is("-r", "--rounds")) {
      o.rounds = static_cast<int>(detail::parse_long(flag, next(), 1, 1000));
    } else if (is("-c", "--check")) {
      o.check = detail::parse_long(flag, next(), 0, 1) != 0;
    } else if (is("-m", "--membw")) {
      o.membw = detail::parse_long(flag, next(), 0, 1) != 0;
    } else if (is("-t", "--nranks")) {
      o.nranks = static_cast<int>(detail::parse_long(flag, next(), 1, 1024));
      o.nranks_given = true;
    } else if (is("-a", "--algo")) {
      o.algos = parse_algos(next());
    } else if (is("-d", "--datatype")) {
      const std::string v = next();
      const auto d = ccoll::parse_data_type(v);
      if (!d) {
        throw detail::bad_value(flag,
                                "expected float, double, half, bfloat16, int32, int64 or uint8", v);
      }
      o.dtype = *d;
    } else if (is("-o", "--op")) {
      const std::string v = next();
      const auto op = ccoll::parse_reduce_op(v);
      if (!op) throw detail::bad_value(flag, "expected sum, prod, min, max or avg", v);
      o.op = *op;
    } else if (flag == "--transport") {
      const std::string v = next();
      if (v == "threads") {
        o.transport = Transport::threads;
      } else if (v == "shm") {
        o.transport = Transport::shm;
      } else {
        throw detail::bad_value(flag, "expected threads or shm", v);
      }
    } else if (flag == "--peer") {
      const std::string v = next();
      if (v != "mpi") throw detail::bad_value(flag, "expected mpi", v);
      o.peer_mpi = true;
    } else if (flag == "--slot_bytes") {
      const std::string v = next();
      const auto s = parse_size(v);
      if (!s || *s == 0) throw detail::bad_value(flag, "expected a size like 64K or 1M", v);
      o.slot_bytes = *s;
    } else if (flag == "--nslots") {
      o.nslots = static_cast<std::uint32_t>(detail::parse_long(flag, next(), 1, 1024));
    } else if (flag == "--nchannels") {
      o.nchannels = static_cast<std::uint32_t>(detail::parse_long(flag, next(), 0, 64));
    } else if (flag == "--nchunks") {
      o.nchunks = static_cast<std::uint32_t>(detail::parse_long(flag, next(), 0, 1 << 20));
    } else if (flag == "--stream_slot_bytes") {
      const std::string v = next();
      const auto s = parse_size(v);
      if (!s) throw detail::bad_value(flag, "expected a size like 8M, or 0 for never", v);
      o.stream_slot_bytes = *s;
    } else if (flag == "--slot_stores") {
      const std::string v = next();
      if (v == "auto") {
        o.slot_stores = Options::SlotStores::automatic;
      } else if (v == "streamed") {
        o.slot_stores = Options::SlotStores::streamed;
      } else if (v == "cached") {
        o.slot_stores = Options::SlotStores::cached;
      } else {
        throw detail::bad_value(flag, "expected auto, streamed or cached", v);
      }
    } else if (flag == "--json") {
      o.json_path = next();
    } else if (flag == "--csv") {
      o.csv_path = next();
    } else {
      throw UsageError("unknown option '" + args[i] + "' (try -h)");
    }
  }
  if (o.min_bytes > o.max_bytes) {
    throw UsageError("-b/--minbytes (" + std::to_string(o.min_bytes) +
                     ") must not exceed -e/--maxbytes (" + std::to_string(o.max_bytes) + ")");
  }
  if (o.algos.empty() && !o.peer_mpi) {
    throw UsageError("-a/--algo none: only with --peer mpi (nothing else would run)");
  }
  if (o.step_factor == 1.0 && o.min_bytes != o.max_bytes) {
    throw UsageError("-f/--stepfactor: 1 only works with -b equal to -e");
  }
  if (o.min_bytes == 0) o.min_bytes = 1;
  return o;
}

// Message sizes min, min*f, min*f^2 ... <= max (each rounded down to whole bytes), as nccl-tests.
inline std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                             double factor) {
  std::vector<std::uint64_t> sizes;
  if (min_bytes == 0) min_bytes = 1;
  if (factor <= 1.0) {
    sizes.push_back(min_bytes);
    return sizes;
  }
  double s = static_cast<double>(min_bytes);
  while (s <= static_cast<double>(max_bytes) * (1 + 1e-12)) {
    const auto bytes = static_cast<std::uint64_t>(s);
    if (sizes.empty() || bytes != sizes.back()) sizes.push_back(bytes);
    s *= factor;
  }
  return sizes;
}

// Elements for a message of `bytes`: whole elements only (nccl-tests rounds the same way).
inline std::uint64_t elements_for(std::uint64_t bytes, ccoll::DataType d) {
  return bytes / ccoll::size_of(d);
}

// busbw = algbw * 2(P-1)/P: the per-rank link traffic of an optimal allreduce, so that the figure
// is comparable across P (nccl-tests' PERFORMANCE.md).
inline double bus_factor(int nranks) {
  return nranks <= 1 ? 0.0 : 2.0 * (nranks - 1) / static_cast<double>(nranks);
}

// Upper bound on busbw from the memory bandwidth B (bytes/s, STREAM convention: bytes read plus
// bytes written) of a shared-memory host: every rank must read its N-byte input and write its
// N-byte output at least once, so t >= 2PN / B, algbw <= B / 2P and busbw <= B (P-1) / P^2.
// docs/benchmark.md derives it.
inline double memory_bound_busbw(double membw_bytes_per_s, int nranks) {
  if (nranks <= 1) return 0.0;
  return membw_bytes_per_s * (nranks - 1) / (static_cast<double>(nranks) * nranks);
}

// One line of results.
struct Row {
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
  double peer_busbw_GBps = 0;   // MPI's busbw for the same size (0: no peer)
  long peer_wrong = -1;         // the peer's #wrong in the same rounds (-1: not checked / no peer)
  std::string paired_with;      // a peer row: the algorithm it alternated with
};

// Fills algbw/busbw from bytes, time and nranks.
inline Row make_row(std::string transport, std::string algo, int nranks, std::uint64_t bytes,
                    std::uint64_t count, ccoll::DataType d, ccoll::ReduceOp op, double time_s,
                    long wrong) {
  Row r;
  r.transport = std::move(transport);
  r.algo = std::move(algo);
  r.nranks = nranks;
  r.bytes = bytes;
  r.count = count;
  r.dtype = d;
  r.op = op;
  r.time_us = time_s * 1e6;
  r.algbw_GBps = time_s > 0 ? static_cast<double>(bytes) / time_s / 1e9 : 0.0;
  r.busbw_GBps = r.algbw_GBps * bus_factor(nranks);
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

// nccl-tests' layout plus two optional columns: busbw as % of the memory bound and, with a peer,
// the peer's busbw and our ratio to it.
inline std::string format_table_header(bool with_bound, bool with_peer) {
  std::string h = "#       size         count      type   redop     time   algbw   busbw  #wrong";
  std::string u = "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)        ";
  if (with_bound) {
    h += "  %mbound";
    u += "         ";
  }
  if (with_peer) {
    h += "  mpi busbw   ratio";
    u += "     (GB/s)        ";
  }
  return h + "\n" + u + "\n";
}

inline std::string format_row(const Row& r, bool with_bound, bool with_peer) {
  std::string s = detail::printf_string(
      "%12llu  %12llu  %8s  %6s  %7.*f  %6.2f  %6.2f  %6s",
      static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.count),
      std::string(ccoll::to_string(r.dtype)).c_str(), std::string(ccoll::to_string(r.op)).c_str(),
      r.time_us < 10000 ? 2 : 0, r.time_us, r.algbw_GBps, r.busbw_GBps,
      r.wrong < 0 ? "N/A" : std::to_string(r.wrong).c_str());
  if (with_bound) {
    s += r.bound_busbw_GBps > 0
             ? detail::printf_string("  %6.1f%%", 100.0 * r.busbw_GBps / r.bound_busbw_GBps)
             : std::string("      N/A");
  }
  if (with_peer) {
    s += r.peer_busbw_GBps > 0 ? detail::printf_string("  %9.2f  %5.2fx", r.peer_busbw_GBps,
                                                       r.busbw_GBps / r.peer_busbw_GBps)
                               : std::string("        N/A     N/A");
  }
  return s + "\n";
}

inline std::string csv_header() {
  return "transport,algo,nranks,size_bytes,count,type,op,time_us,algbw_GBps,busbw_GBps,wrong,"
         "bound_busbw_GBps,pct_of_bound,peer_busbw_GBps,ratio_to_peer,paired_with\n";
}

inline std::string csv_row(const Row& r) {
  std::ostringstream os;
  os.precision(6);
  os << r.transport << ',' << r.algo << ',' << r.nranks << ',' << r.bytes << ',' << r.count << ','
     << ccoll::to_string(r.dtype) << ',' << ccoll::to_string(r.op) << ',' << r.time_us << ','
     << r.algbw_GBps << ',' << r.busbw_GBps << ',' << r.wrong << ',' << r.bound_busbw_GBps << ',';
  if (r.bound_busbw_GBps > 0) os << 100.0 * r.busbw_GBps / r.bound_busbw_GBps;
  os << ',' << r.peer_busbw_GBps << ',';
  if (r.peer_busbw_GBps > 0) os << r.busbw_GBps / r.peer_busbw_GBps;
  os << ',' << r.paired_with << '\n';
  return os.str();
}

inline std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += detail::printf_string("\\u%04x", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

// JSON numbers must be finite.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return detail::printf_string("%.6g", v);
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
  double bound_membw_GBps = 0;  // B used for the bound
  Options options;
  std::vector<Row> rows;
};

inline std::string to_json(const Report& rep) {
  std::ostringstream os;
  os << "{\n  \"command\": \"" << json_escape(rep.command) << "\",\n";
  os << "  \"machine\": {\"cpu\": \"" << json_escape(rep.machine.cpu_model)
     << "\", \"cores\": " << rep.machine.cores << ", \"hostname\": \""
     << json_escape(rep.machine.hostname) << "\", \"date_utc\": \""
     << json_escape(rep.machine.date_utc) << "\", \"load_average\": \""
     << json_escape(rep.machine.load_average) << "\"},\n";
  os << "  \"memory_bandwidth\": [";
  for (std::size_t i = 0; i < rep.membw.size(); ++i) {
    const auto& m = rep.membw[i];
    os << (i ? ", " : "") << "{\"threads\": " << m.threads
       << ", \"copy_GBps\": " << json_number(m.copy_GBps)
       << ", \"scale_GBps\": " << json_number(m.scale_GBps)
       << ", \"triad_GBps\": " << json_number(m.triad_GBps)
       << ", \"copy_nt_GBps\": " << json_number(m.copy_nt_GBps) << "}";
  }
  os << "],\n  \"bound_membw_GBps\": " << json_number(rep.bound_membw_GBps) << ",\n";
  os << "  \"options\": {\"transport\": \"" << to_string(rep.options.transport)
     << "\", \"iters\": " << rep.options.iters << ", \"warmup\": " << rep.options.warmup
     << ", \"rounds\": " << rep.options.rounds
     << ", \"check\": " << (rep.options.check ? "true" : "false")
     << ", \"slot_bytes\": " << rep.options.slot_bytes << ", \"nslots\": " << rep.options.nslots
     << ", \"nchannels\": " << rep.options.nchannels << ", \"nchunks\": " << rep.options.nchunks
     << ", \"stream_slot_bytes\": "
     << (rep.options.stream_slot_bytes ? std::to_string(*rep.options.stream_slot_bytes)
                                       : std::string("null"))
     << ", \"slot_stores\": \""
     << (rep.options.slot_stores == Options::SlotStores::automatic  ? "auto"
         : rep.options.slot_stores == Options::SlotStores::streamed ? "streamed"
                                                                    : "cached")
     << "\""
     << ", \"datatype\": \"" << ccoll::to_string(rep.options.dtype) << "\", \"op\": \""
     << ccoll::to_string(rep.options.op) << "\"},\n";
  os << "  \"results\": [";
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    const Row& r = rep.rows[i];
    os << (i ? ",\n    " : "\n    ") << "{\"transport\": \"" << json_escape(r.transport)
       << "\", \"algo\": \"" << json_escape(r.algo) << "\", \"nranks\": " << r.nranks
       << ", \"size\": " << r.bytes << ", \"count\": " << r.count << ", \"type\": \""
       << ccoll::to_string(r.dtype) << "\", \"op\": \"" << ccoll::to_string(r.op)
       << "\", \"time_us\": " << json_number(r.time_us)
       << ", \"algbw_GBps\": " << json_number(r.algbw_GBps)
       << ", \"busbw_GBps\": " << json_number(r.busbw_GBps) << ", \"wrong\": " << r.wrong;
    if (r.bound_busbw_GBps > 0) {
      os << ", \"bound_busbw_GBps\": " << json_number(r.bound_busbw_GBps)
         << ", \"pct_of_bound\": " << json_number(100.0 * r.busbw_GBps / r.bound_busbw_GBps);
    }
    if (r.peer_busbw_GBps > 0) {
      os << ", \"peer_busbw_GBps\": " << json_number(r.peer_busbw_GBps)
         << ", \"ratio_to_peer\": " << json_number(r.busbw_GBps / r.peer_busbw_GBps)
         << ", \"peer_wrong\": " << r.peer_wrong;
    }
    if (!r.paired_with.empty()) os << ", \"paired_with\": \"" << json_escape(r.paired_with) << "\"";
    os << "}";
  }
  os << "\n  ]\n}\n";
  return os.str();
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
