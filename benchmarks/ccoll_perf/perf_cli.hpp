// ccoll_perf/perf_cli.hpp: ccoll_perf's command line, size sweep and output formats.
//
// Everything here is a pure function of its arguments (no clocks, no threads, no MPI), so that
// tests/perf_cli_test.cpp can check the parser, the sweep and the table/CSV/JSON text without
// running a collective. The flags and the table follow nccl-tests' all_reduce_perf, so that people
// who read nccl-tests output can read ours: size, count, type, redop, time, algbw, busbw, #wrong
// (busbw = algbw * 2(P-1)/P).
//
// The algorithms are the library's registry (ccoll/algo/registry.hpp): -a takes its names, -a list
// prints it, and prepare_algorithms() makes each chosen one, on the --topology graph when given.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "ccoll/algo/registry.hpp"
#include "ccoll/algo/tuning_table_json.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/physical/load.hpp"
#include "ccoll/plan/traffic.hpp"
#include "device_backend.hpp"

namespace ccoll_perf {

// cuda_virtual and cuda_p2p run on GPUs through a registered device transport
// (device_backend.hpp); the others run the host interpreter.
enum class Transport { threads, shm, mpi, mpi_hybrid, cuda_virtual, cuda_p2p };
constexpr std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::cuda_virtual:
      return "cuda-virtual";
    case Transport::cuda_p2p:
      return "cuda-p2p";
    case Transport::threads:
      return "threads";
    case Transport::shm:
      return "shm";
    case Transport::mpi:
      return "mpi";
    case Transport::mpi_hybrid:
      return "mpi-hybrid";
  }
  return "?";
}

constexpr bool is_device(Transport t) {
  return t == Transport::cuda_virtual || t == Transport::cuda_p2p;
}

// The other allreduce timed on the same ranks for the ratio (--peer): the MPI library's
// MPI_Allreduce, Gloo's allreduce (gloo_peer.hpp; only where ccoll_perf was built with Gloo), or
// on a GPU transport NCCL's ncclAllReduce (nccl_peer.cu; only where built with NCCL).
enum class Peer { none, mpi, gloo, nccl };
constexpr std::string_view to_string(Peer p) {
  switch (p) {
    case Peer::nccl:
      return "nccl";
    case Peer::none:
      return "none";
    case Peer::mpi:
      return "mpi";
    case Peer::gloo:
      return "gloo";
  }
  return "?";
}

// Whether this ccoll_perf has the Gloo peer (CMake found Gloo: CCOLL_HAVE_GLOO).
#if CCOLL_HAVE_GLOO
inline constexpr bool kHaveGloo = true;
#else
inline constexpr bool kHaveGloo = false;
#endif

// Whether this ccoll_perf has the GPU transports (CMake enabled CUDA: CCOLL_HAVE_CUDA) and the
// NCCL peer (CMake found NCCL too: CCOLL_HAVE_NCCL).
#if CCOLL_HAVE_CUDA
inline constexpr bool kHaveCuda = true;
#else
inline constexpr bool kHaveCuda = false;
#endif
#if CCOLL_HAVE_NCCL
inline constexpr bool kHaveNccl = true;
#else
inline constexpr bool kHaveNccl = false;
#endif
// Whether the library has the one-GPU-per-rank transport that --transport cuda-p2p would run.
#if CCOLL_HAVE_CUDA && __has_include("ccoll/transport/cuda/p2p.cuh")
inline constexpr bool kLibraryHasCudaP2P = true;
#else
inline constexpr bool kLibraryHasCudaP2P = false;
#endif

// What ccoll_perf runs when -a is not given (its tables before the registry existed).
inline const std::vector<std::string>& default_algorithms() {
  static const std::vector<std::string> names{"ring", "dbtree", "tree", "tree-overlap", "direct"};
  return names;
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
  int rounds = 1;  // timed blocks per size, best kept (with --peer: alternating with the peer)
  bool check = true;
  int nranks = 4;  // threads: threads; shm: processes (ignored under mpirun: world size)
  bool nranks_given = false;
  // Registry names (ccoll::algo::find_algorithm), canonical (AlgorithmSpec::name()), in order.
  std::vector<std::string> algos = default_algorithms();
  bool list_algos = false;  // -a list: print the registry and exit
  std::string topology;     // --topology FILE|PRESET (physical::load); empty: abstract ranks
  int split = 0;            // --split N: AlgorithmRequest::split
  ccoll::DataType dtype = ccoll::DataType::f32;
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
  Transport transport = Transport::threads;
  Peer peer = Peer::none;
  std::string gloo_iface = "lo";  // --peer gloo: the network interface of Gloo's TCP pairs
  bool membw = true;              // measure the memory bandwidth and print busbw as % of the bound
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
  // ccoll::Config::timeout (deadline of every wait of one call); unset: the library's default.
  std::optional<long> timeout_ms;
  // -a auto: the tuning table (algo/tuning_table_json.hpp) instead of the library's default.
  std::string tuning_path;
  // ccoll::Config::protocol: "" (the policy's choice), "simple" or "ll".
  std::string protocol;
  // ccoll::Config::in_band_agreement_bytes; unset: the library's default (0 is a value: never).
  std::optional<std::uint64_t> in_band_agreement_bytes;
  // --window 1: every rank's buffers in a registered window of each collective
  // (Allreduce::allocate_window; --transport shm only), so calls read the peers' buffers.
  bool window = false;
  std::string json_path;
  std::string csv_path;
  bool help = false;
};

// --timeout's largest value: 2^31 - 1 ms (24.8 days). The library turns the timeout into
// nanoseconds added to a clock reading, so a larger one could overflow.
inline constexpr long kMaxTimeoutMs = 2147483647L;

// "64", "8K", "16M", "1G", "2KB", "4MiB" (binary multiples, as nccl-tests).
// The largest buffer ccoll_perf accepts: a quarter of the physical memory (no limit if unknown).
inline std::uint64_t max_buffer_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(pages) / 4 * static_cast<std::uint64_t>(page);
}

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

// The registry entry of one -a name: a registered name, optionally with -overlap or -phased
// (tree_overlap, the old spelling, still works). Throws UsageError listing the registry's names.
inline ccoll::algo::AlgorithmSpec find_algorithm(std::string_view name) {
  std::string spec(name);
  for (std::string_view suffix : {std::string_view("_overlap"), std::string_view("_phased")})
    if (spec.size() > suffix.size() && spec.ends_with(suffix))
      spec[spec.size() - suffix.size()] = '-';
  try {
    return ccoll::algo::find_algorithm(spec);
  } catch (const ccoll::Error&) {
    throw UsageError("-a/--algo: expected one of " + ccoll::algo::algorithm_names() +
                     " (optionally -overlap or -phased), all, list or none, got '" +
                     std::string(name) + "'");
  }
}

// Expands a comma list of -a names: "all" is the default list followed by every other registered
// algorithm, without those planned on a physical graph unless `with_topology` (--topology given);
// "none" adds nothing (only the peer runs). Names become canonical (tree_overlap -> tree-overlap,
// ring-overlap -> ring) and each is kept once, at its first occurrence. A name that needs a
// topology without one is a usage error.
inline std::vector<std::string> parse_algos(std::string_view s, bool with_topology = false) {
  std::vector<std::string> out;
  auto add = [&](const ccoll::algo::AlgorithmSpec& spec) {
    const std::string name = spec.name();
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (bool more = true; more;) {
    const std::size_t comma = s.find(',');
    const std::string_view name = s.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) s = s.substr(comma + 1);
    if (name == "none") continue;
    if (name == "all") {
      std::vector<ccoll::algo::AlgorithmSpec> specs;
      for (const auto& d : default_algorithms()) specs.push_back(ccoll::algo::find_algorithm(d));
      for (const auto& a : ccoll::algo::algorithms())
        specs.push_back(ccoll::algo::AlgorithmSpec{a, a.default_overlap});
      for (const auto& spec : specs)
        if (with_topology || !spec.algorithm.needs_topology) add(spec);
      continue;
    }
    const auto spec = find_algorithm(name);
    if (spec.algorithm.needs_topology && !with_topology) {
      throw UsageError("-a/--algo " + std::string(name) +
                       ": needs --topology FILE|PRESET (it is planned on a physical graph; try "
                       "--topology dgx1v)");
    }
    add(spec);
  }
  return out;
}

// -a list: the registry, one algorithm a line.
inline std::string format_algorithm_list() {
  std::string s =
      "# ccoll_perf algorithms (ccoll::algo registry): -a NAME[-overlap|-phased][,NAME...]\n"
      "# name          --topology  schedule  description\n";
  for (const auto& a : ccoll::algo::algorithms()) {
    char line[64];
    std::snprintf(line, sizeof line, "%-14s  %-10s  %-8s  ", a.name.c_str(),
                  a.needs_topology ? "needed" : "optional",
                  a.default_overlap ? "overlap" : "phased");
    s.append(line).append(a.description).append("\n");
  }
  return s;
}

inline std::string usage_text() {
  return R"(Usage: ccoll_perf [options]
  -b, --minbytes SIZE     smallest message (bytes; K/M/G suffixes), default 8
  -e, --maxbytes SIZE     largest message, default 64M
  -f, --stepfactor F      multiply the size by F each step, default 2
  -n, --iters N           timed iterations per size, default 20
  -w, --warmup_iters N    untimed iterations per size, default 5
  -r, --rounds R          timed blocks of -n calls per size, the best is reported; with --peer
                          the blocks alternate with the peer's, default 1
  -c, --check 0|1         check the results (#wrong column), default 1
  -t, --nranks P          ranks (threads or processes), default 4, or with --topology the ranks
                          the algorithms were planned for; under mpirun: the world size
  -a, --algo LIST         comma list of the registry's algorithms (-a list prints them), each
                          optionally with -overlap or -phased; all: every one that can run (those
                          planned on a graph only with --topology); none: only the peer; default
                          ring,dbtree,tree,tree-overlap,direct
      --topology T        plan on this physical topology: a file (JSON, NCCL XML, nvidia-smi
                          topo -m) or a preset (dgx1v, dgx2, pcie8, full8, cluster:2x4 ...);
                          under mpirun, `measure`: the hosts' links, measured by ping-pong
      --split N           tree algorithms on a graph: cut trees into about N equal-rate
                          channels, default 0 (the algorithm's own choice)
  -d, --datatype T        float|f32, double|f64, half|f16, bfloat16|bf16, int32|i32, int64|i64,
                          uint8|u8; default float
  -o, --op OP             sum, prod, min, max, avg; default sum
      --transport T       threads (P threads in this process), shm (P processes in shared
                          memory), mpi (the MPI processes of mpirun -np P, messages through
                          MPI point-to-point) or mpi-hybrid (MPI processes, shared memory
                          inside a host, MPI between hosts), cuda-virtual (P ranks as thread
                          blocks of one kernel on one GPU, if built with CUDA) or cuda-p2p (one
                          GPU per rank, where the library has it), default threads
      --peer P            also run another allreduce on the same ranks and sizes and print the
                          ratio: mpi (the MPI library's MPI_Allreduce) or gloo (Gloo's allreduce
                          over TCP, if built with Gloo), which need mpirun -np P and --transport
                          shm, mpi or mpi-hybrid; or nccl (ncclAllReduce, one rank per visible
                          GPU, if built with NCCL) with --transport cuda-virtual
      --gloo_iface IF     --peer gloo: the network interface of Gloo's TCP pairs, default lo
  -m, --membw 0|1         measure the memory bandwidth and print busbw as % of the bound (on a
                          GPU transport: calibrate the GPU and print each plan's HBM bound),
                          default 1
      --slot_bytes SIZE   ccoll::Config::slot_bytes (FIFO slot size), default: the library's
      --nslots N          ccoll::Config::nslots (FIFO depth), default: the library's
      --nchannels N       ccoll::Config::nchannels, default 0 = automatic
      --nchunks N         ccoll::Config::nchunks, default 0 = the cost model's optimum
      --stream_slot_bytes SIZE  ccoll::Config::stream_slot_bytes: calls of at least SIZE write
                          the FIFO slots with non-temporal stores (0: never), default: the
                          library's
      --slot_stores M     auto (rank 0 times both kinds of slot store per size and keeps the
                          faster), streamed (non-temporal) or cached; default auto
      --timeout MS        ccoll::Config::timeout: how long one call waits for a peer before it
                          fails, 1..2147483647 ms, default: the library's (60000)
      --tuning FILE       -a auto chooses per size from this tuning table (JSON, see
                          include/ccoll/algo/tuning_table_json.hpp) instead of the default
      --protocol P        ccoll::Config::protocol: simple (slot and counter) or ll (low
                          latency: flagged lines) for every size; default: the algorithm's
                          choice (auto: per size from the tuning table; others: simple)
      --in_band_agreement B
                          ccoll::Config::in_band_agreement_bytes: calls of at most B bytes
                          check their arguments alongside their messages (0: always before
                          them), default: the library's (64K)
      --window 0|1        --transport shm: put every rank's buffers in a registered window
                          of the collective (ccoll::Allreduce::allocate_window), so calls read
                          their peers' buffers directly instead of staging them; the peer runs
                          on the same buffers; default 0
      --json FILE         write the results as JSON (the path is checked before the run)
      --csv FILE          write the results as CSV (the path is checked before the run)
  -h, --help              this text
Examples:
  ccoll_perf                                   # 4 threads, 8 B..64 MiB, the default algorithms
  ccoll_perf -a list                           # the algorithms
  ccoll_perf -a forest --topology dgx1v -b 8 -e 8M -f 4   # 8 ranks: the forest's
  ccoll_perf --transport shm -t 2 -b 16M -e 64M -f 4
  mpirun --allow-run-as-root --oversubscribe -np 4 ccoll_perf --transport shm --peer mpi -b 16M -e 64M -f 4
  mpirun --allow-run-as-root --oversubscribe -np 4 ccoll_perf --transport mpi --peer mpi -a ring,dbtree
  mpirun --allow-run-as-root --oversubscribe -np 2 ccoll_perf --transport mpi-hybrid --peer gloo -a ring
  ccoll_perf --transport cuda-virtual -t 8 --peer nccl -b 1M -e 256M -f 4 -r 3
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
  bool huge = false;  // more digits than any range here: reported as out of range, not parsed
  for (; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') throw bad_value(flag, "expected an integer", v);
    if (value > 100000000000L) huge = true;
    if (!huge) value = value * 10 + (v[i] - '0');
  }
  if (huge) {
    throw UsageError(std::string(flag) + ": expected " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ", got " + std::string(v));
  }
  if (negative) value = -value;
  if (value < lo || value > hi) {
    throw UsageError(std::string(flag) + ": expected " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ", got " + std::string(v));
  }
  return value;
}
}  // namespace detail

// --transport cuda-virtual / cuda-p2p: a usage error saying why this build cannot run it.
inline void check_device_transport_built(Transport t) {
  const std::string flag = "--transport " + std::string(to_string(t));
  if (!kHaveCuda) {
    throw UsageError(flag +
                     ": this ccoll_perf was built without CUDA (configure with nvcc on the PATH "
                     "and CCOLL_ENABLE_CUDA=AUTO or ON)");
  }
  if (t == Transport::cuda_p2p && !kLibraryHasCudaP2P) {
    throw UsageError(flag +
                     ": not available in this build (the library has no "
                     "ccoll/transport/cuda/p2p.cuh yet); --transport cuda-virtual runs every rank "
                     "on one GPU");
  }
}

// The registered device transport of `t` (device_backend.hpp), or a usage error: `found` is what
// find_device_transport(to_string(t)) returned.
inline const DeviceTransportEntry& require_device_transport(Transport t,
                                                            const DeviceTransportEntry* found) {
  check_device_transport_built(t);
  if (found == nullptr) {
    throw UsageError("--transport " + std::string(to_string(t)) +
                     ": not available in this build (ccoll_perf has no backend for it: a file "
                     "registering it beside benchmarks/ccoll_perf/cuda_virtual_backend.cu would "
                     "add one)");
  }
  return *found;
}

// Parses argv (argv[0] is skipped). Throws UsageError naming the flag on bad input.
inline Options parse_args(const std::vector<std::string>& args) {
  Options o;
  std::optional<std::string> algo_list;  // resolved at the end: "all" depends on --topology
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
      algo_list = next();
      if (algo_list == "list") o.list_algos = true;
    } else if (flag == "--topology") {
      o.topology = next();
      if (o.topology.empty()) throw detail::bad_value(flag, "expected a file or a preset", "");
    } else if (flag == "--split") {
      o.split = static_cast<int>(detail::parse_long(flag, next(), 0, 1024));
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
      } else if (v == "mpi") {
        o.transport = Transport::mpi;
      } else if (v == "mpi-hybrid") {
        o.transport = Transport::mpi_hybrid;
      } else if (v == "cuda-virtual" || v == "cuda-p2p") {
        o.transport = v == "cuda-virtual" ? Transport::cuda_virtual : Transport::cuda_p2p;
        check_device_transport_built(o.transport);
      } else {
        throw detail::bad_value(
            flag, "expected threads, shm, mpi, mpi-hybrid, cuda-virtual or cuda-p2p", v);
      }
    } else if (flag == "--peer") {
      const std::string v = next();
      Peer p = Peer::none;
      if (v == "mpi") {
        p = Peer::mpi;
      } else if (v == "gloo") {
        if (!kHaveGloo) {
          throw UsageError(
              "--peer gloo: this ccoll_perf was built without Gloo (install libgloo-dev and "
              "reconfigure; CMake then prints 'ccoll_perf: --peer gloo enabled')");
        }
        p = Peer::gloo;
      } else if (v == "nccl") {
        if (!kHaveNccl) {
          throw UsageError(
              "--peer nccl: this ccoll_perf was built without NCCL (it needs CUDA and NCCL's "
              "nccl.h and libnccl where CMake looks: the CUDA toolkit's directories)");
        }
        p = Peer::nccl;
      } else {
        std::string expected = "expected mpi";
        if (kHaveGloo) expected += kHaveNccl ? ", gloo" : " or gloo";
        if (kHaveNccl) expected += " or nccl";
        throw detail::bad_value(flag, expected, v);
      }
      if (o.peer != Peer::none && o.peer != p) {
        throw UsageError("--peer: one peer a run (got " + std::string(to_string(o.peer)) + " and " +
                         v + "); run each peer in its own invocation");
      }
      o.peer = p;
    } else if (flag == "--gloo_iface" || flag == "--gloo-iface") {
      o.gloo_iface = next();
      if (o.gloo_iface.empty()) throw detail::bad_value(flag, "expected an interface name", "");
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
    } else if (flag == "--timeout") {
      o.timeout_ms = detail::parse_long(flag, next(), 1, kMaxTimeoutMs);
    } else if (flag == "--in_band_agreement") {
      const std::string v = next();
      const auto b = parse_size(v);
      if (!b) throw detail::bad_value(flag, "expected a size in bytes (0, 64K, 1M, ...)", v);
      o.in_band_agreement_bytes = *b;
    } else if (flag == "--window") {
      o.window = detail::parse_long(flag, next(), 0, 1) != 0;
    } else if (flag == "--protocol") {
      o.protocol = next();
      if (o.protocol != "simple" && o.protocol != "ll")
        throw detail::bad_value(flag, "expected simple or ll", o.protocol);
    } else if (flag == "--tuning") {
      o.tuning_path = next();
      if (o.tuning_path.empty()) throw detail::bad_value(flag, "expected a file name", "");
    } else if (flag == "--json") {
      o.json_path = next();
      if (o.json_path.empty()) throw detail::bad_value(flag, "expected a file name", "");
    } else if (flag == "--csv") {
      o.csv_path = next();
      if (o.csv_path.empty()) throw detail::bad_value(flag, "expected a file name", "");
    } else {
      // --slot-bytes for --slot_bytes (the ccoll CLI's spelling) and the like: say so.
      std::string other = flag;
      if (other.rfind("--", 0) == 0) {
        for (std::size_t k = 2; k < other.size(); ++k) {
          if (other[k] == '-') {
            other[k] = '_';
          } else if (other[k] == '_') {
            other[k] = '-';
          }
        }
      }
      const bool known = other != flag && usage_text().find(" " + other + " ") != std::string::npos;
      const std::string hint = known ? ", did you mean " + other + "?" : "";
      throw UsageError("unknown option '" + args[i] + "'" + hint + " (try -h)");
    }
  }
  if (o.help || o.list_algos) return o;
  if (algo_list) o.algos = parse_algos(*algo_list, !o.topology.empty());
  // Every rank holds a send and a receive buffer of -e bytes (and a reference to check against):
  // a size beyond a quarter of the machine's memory cannot run, so it is refused before anything
  // is allocated rather than ending in the kernel's OOM killer.
  if (const std::uint64_t cap = max_buffer_bytes(); o.max_bytes > cap) {
    throw UsageError("-e/--maxbytes: " + std::to_string(o.max_bytes) +
                     " B per buffer is more than a quarter of this machine's memory (" +
                     std::to_string(cap) + " B); every rank holds a send and a receive buffer");
  }
  if (o.min_bytes > o.max_bytes) {
    throw UsageError("-b/--minbytes (" + std::to_string(o.min_bytes) +
                     ") must not exceed -e/--maxbytes (" + std::to_string(o.max_bytes) + ")");
  }
  if (o.algos.empty() && o.peer == Peer::none) {
    throw UsageError("-a/--algo none: only with --peer mpi, gloo or nccl (nothing else would run)");
  }
  // NCCL runs on GPUs, MPI and Gloo on host processes: a peer runs beside the transport it is
  // compared with.
  if (o.peer == Peer::nccl && !is_device(o.transport)) {
    throw UsageError("--peer nccl: only with --transport cuda-virtual (the GPU transports)");
  }
  if ((o.peer == Peer::mpi || o.peer == Peer::gloo) && is_device(o.transport)) {
    throw UsageError("--peer " + std::string(to_string(o.peer)) + ": not with --transport " +
                     std::string(to_string(o.transport)) + " (on a GPU the peer is nccl)");
  }
  if (o.window && o.transport != Transport::shm) {
    throw UsageError(
        "--window 1: only with --transport shm (the transport with registered "
        "windows), got --transport " +
        std::string(to_string(o.transport)));
  }
  if (o.step_factor == 1.0 && o.min_bytes != o.max_bytes) {
    throw UsageError("-f/--stepfactor: 1 only works with -b equal to -e");
  }
  // Every size must hold one element, or the sweep has rows of no elements (or none at all).
  const std::size_t elem = ccoll::size_of(o.dtype);
  if (o.min_bytes < elem) {
    throw UsageError("-b/--minbytes: " + std::to_string(o.min_bytes) +
                     " B is less than one element (" + std::string(ccoll::to_string(o.dtype)) +
                     ": " + std::to_string(elem) + " B); the smallest message is one element");
  }
  return o;
}

// One algorithm of a run, made: its name (the algo column), its registry entry and schedule, and
// the logical topology that ccoll::Allreduce<Transport, algo::Registered, Schedule> is built on.
struct PreparedAlgorithm {
  std::string name;
  ccoll::algo::AlgorithmSpec spec;
  ccoll::algo::Registered logical;
};

// -a auto with --tuning FILE: the BySize policy on that table, as a registered algorithm.
inline ccoll::algo::Registered tuned_by_size(const std::string& path,
                                             const ccoll::algo::AlgorithmRequest& req) {
  std::ifstream in(path);
  if (!in) throw UsageError("--tuning: cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  const ccoll::algo::BySize policy(ccoll::algo::tuning_table_from_json(text.str()));
  std::vector<int> nodes = ccoll::algo::active_rank_nodes(req);
  const int n = req.topology == nullptr ? 0 : static_cast<int>(nodes.size());
  ccoll::algo::Registered logical(
      policy.name, [policy](const ccoll::plan::PlanRequest& r) { return policy.build(r); }, n,
      std::move(nodes), policy);
  // Relays where the graph needs them, as make_algorithm adds them to the registry's entries.
  return req.topology == nullptr ? logical : ccoll::algo::with_relays(logical, *req.topology);
}

// The ranks of `logical`'s plans that contribute and receive on `nranks` ranks: every one on
// abstract ranks; on a graph, all but the relays (read from a plan built for `overlap`, the
// schedule the run uses, so a forest is solved once).
inline std::vector<bool> active_ranks(const ccoll::algo::Registered& logical, int nranks,
                                      bool overlap) {
  if (logical.nranks() == 0) return {};
  ccoll::plan::PlanRequest req;
  req.nranks = nranks;
  req.count = static_cast<std::uint64_t>(nranks) * 64;
  req.overlap = overlap;
  return logical.build(req).active;
}

// What a run needs beyond its options: the physical topology (--topology), the algorithms made on
// it (or on nranks abstract ranks) and the rank count.
struct Prepared {
  std::shared_ptr<const ccoll::physical::PhysicalTopology> topology;  // null: abstract ranks
  int nranks = 0;
  std::vector<PreparedAlgorithm> algos;
};

// Loads --topology and makes every -a algorithm. The rank count is -t's (or mpirun's), else the
// one the algorithms were planned for (a forest's: the graph's GPUs and relays), else 4. A given
// count that disagrees with an algorithm's is a usage error naming both (`ranks_from` names where
// the given count came from); so are algorithms planned for different counts. Planning itself
// (a forest's solve) happens on the first call of each schedule, not here.
// `measured`: the topology to plan on instead of loading --topology (ccoll_perf measures it under
// mpirun with --topology measure).
inline Prepared prepare_algorithms(
    const Options& o, const std::string& ranks_from = "-t/--nranks",
    std::shared_ptr<const ccoll::physical::PhysicalTopology> measured = nullptr) {
  Prepared p;
  if (measured) {
    p.topology = std::move(measured);
  } else if (!o.topology.empty()) {
    try {
      p.topology = std::make_shared<const ccoll::physical::PhysicalTopology>(
          ccoll::physical::load(o.topology));
    } catch (const std::exception& e) {
      throw UsageError("--topology: " + std::string(e.what()));
    }
  }
  const std::string on = p.topology ? " on topology '" + p.topology->name + "'" : "";
  int fixed = 0;
  std::string fixed_by;
  for (const auto& name : o.algos) {
    const ccoll::algo::AlgorithmSpec spec = find_algorithm(name);
    const ccoll::algo::AlgorithmRequest req{p.topology.get(), o.nranks, o.split};
    std::optional<ccoll::algo::Registered> logical;
    try {
      if (spec.algorithm.name == "auto" && !o.tuning_path.empty())
        logical.emplace(tuned_by_size(o.tuning_path, req));
      else
        logical.emplace(ccoll::algo::make_algorithm(spec.algorithm, req));
    } catch (const std::exception& e) {
      std::string msg = "-a/--algo ";
      msg.append(name).append(on).append(": ").append(e.what());
      throw UsageError(msg);
    }
    if (const int n = logical->nranks(); n > 0) {
      if (o.nranks_given && n != o.nranks) {
        std::string msg = ranks_from;
        msg.append(" ")
            .append(std::to_string(o.nranks))
            .append(" disagrees with algorithm '")
            .append(name)
            .append("', planned for ")
            .append(std::to_string(n))
            .append(" ranks")
            .append(on);
        if (ranks_from == "-t/--nranks")
          msg.append(" (leave -t out: the topology sets the rank count)");
        else
          msg.append(" (start ").append(std::to_string(n)).append(")");
        throw UsageError(msg);
      }
      if (fixed != 0 && n != fixed) {
        std::string msg = "-a/--algo: '";
        msg.append(fixed_by)
            .append("' was planned for ")
            .append(std::to_string(fixed))
            .append(" ranks")
            .append(on)
            .append(", '")
            .append(name)
            .append("' for ")
            .append(std::to_string(n))
            .append(" (run them separately)");
        throw UsageError(msg);
      }
      fixed = n;
      fixed_by = name;
    }
    p.algos.push_back(PreparedAlgorithm{name, spec, std::move(*logical)});
  }
  p.nranks = fixed > 0 ? fixed : o.nranks;
  return p;
}

// Checks that an output file (--json, --csv) can be written, before the run rather than after it:
// throws std::runtime_error naming the flag (main: exit status 1, as when the write fails). An
// existing file is opened for appending and left as it is; a new one is created and removed.
inline void check_output_path(std::string_view flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string what = std::string(flag) + ": cannot write '" + path + "'";
  if (fs::is_directory(path, ec)) throw std::runtime_error(what + ": it is a directory");
  const bool existed = fs::exists(path, ec);
  errno = 0;
  {
    std::ofstream f(path, std::ios::app);
    if (!f) {
      const int e = errno;
      throw std::runtime_error(what + (e ? std::string(": ") + std::strerror(e) : std::string()));
    }
  }
  if (!existed) fs::remove(path, ec);
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

// The HBM bound of a plan whose ranks all run on one GPU: the bytes its steps read and write
// (plan::memory_traffic) at the bandwidth a copy kernel draws (bytes read plus written per
// second), in seconds. docs/benchmark.md derives it.
inline double device_bound_time_s(const ccoll::plan::Plan& p, std::size_t elem_size,
                                  double copy_bytes_per_s) {
  if (copy_bytes_per_s <= 0) return 0.0;
  return static_cast<double>(ccoll::plan::memory_traffic(p, elem_size).total()) / copy_bytes_per_s;
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
  double peer_busbw_GBps = 0;   // the peer's busbw for the same size (0: no peer)
  long peer_wrong = -1;         // the peer's #wrong in the same rounds (-1: not checked / no peer)
  std::string paired_with;      // a peer row: the algorithm it alternated with
  // A GPU transport's bound (device_bound_time_s; 0: none); bound_busbw_GBps is then the busbw
  // that time would give, so that pct_of_bound = bound time / time.
  double bound_time_us = 0;
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

// nccl-tests' layout plus optional columns: busbw as % of the memory bound and, with a peer, the
// peer's busbw (headed "<peer> busbw") and our ratio to it. On a GPU transport (`device`) the
// bound columns are the plan's HBM bound time and its % of the measured time, and the peer's
// figure is its algbw (Row::peer_algbw_GBps).
inline std::string format_table_header(bool with_bound, bool with_peer,
                                       std::string_view peer = "mpi", bool device = false) {
  std::string h = "#       size         count      type   redop     time   algbw   busbw  #wrong";
  std::string u = "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)        ";
  if (with_bound && device) {
    h += "    bound  %bound";
    u += "     (us)        ";
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
    s += r.bound_time_us > 0 && r.time_us > 0
             ? detail::printf_string("  %7.*f  %5.1f%%", r.bound_time_us < 10000 ? 2 : 0,
                                     r.bound_time_us, 100.0 * r.bound_time_us / r.time_us)
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
  if (ratio_to_peer(r) > 0) os << ratio_to_peer(r);
  os << ',' << r.paired_with << '\n';
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
  opts["transport"] = std::string(to_string(o.transport));
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
  opts["tuning"] = o.tuning_path.empty() ? json(nullptr) : json(o.tuning_path);
  opts["protocol"] = o.protocol.empty() ? json(nullptr) : json(o.protocol);
  opts["window"] = o.window;
  opts["in_band_agreement_bytes"] =
      o.in_band_agreement_bytes ? json(*o.in_band_agreement_bytes) : json(nullptr);
  opts["datatype"] = std::string(ccoll::to_string(o.dtype));
  opts["op"] = std::string(ccoll::to_string(o.op));
  opts["topology"] = o.topology.empty() ? json(nullptr) : json(o.topology);
  opts["split"] = o.split;
  j["results"] = json::array();
  for (const Row& r : rep.rows) {
    json row = {{"transport", r.transport},
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
