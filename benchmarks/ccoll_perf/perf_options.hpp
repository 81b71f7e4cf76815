// ccoll_perf/perf_options.hpp: ccoll_perf's command line: the options, their parser and --help.
//
// The flags follow nccl-tests' all_reduce_perf (-b, -e, -f, -n, -w, -c, -t, -d, -o), so that people
// who use nccl-tests can use ours. Parsing is a pure function of the arguments (no clocks, no
// threads, no MPI), so that tests/perf_cli_test.cpp checks every message without running a
// collective. The algorithms are the library's registry (ccoll/algo/registry.hpp): -a takes its
// names and -a list prints it; the transports are ccoll_perf's own table
// (transport_registry.hpp): --transport takes its names and --help prints their accounts. Sizes
// and the usage error are the `ccoll` tool's too (tools/support/cli_args.hpp).
//
// What the options become (the algorithms made, the sizes swept) is perf_prepare.hpp; what a run
// prints and writes is perf_report.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "build_features.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/collective.hpp"
#include "cli_args.hpp"
#include "transport_registry.hpp"

namespace ccoll_perf {

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

// What ccoll_perf runs when -a is not given (its tables before the registry existed).
inline const std::vector<std::string>& default_algorithms() {
  static const std::vector<std::string> names{"ring", "dbtree", "tree", "tree-overlap", "direct"};
  return names;
}

// A bad flag or value (exit status 2); the message names the flag.
using ccoll::cli::UsageError;

// "64", "8K", "16M", "1G", "2KB", "4MiB" (binary multiples, as nccl-tests).
using ccoll::cli::parse_size;

// The algorithms that plan the collectives beside allreduce (ccoll/collective.hpp), the default
// -a for them.
inline std::vector<std::string> collective_algorithms(ccoll::plan::Collective c) {
  if (ccoll::plan::has_root(c)) return {"ring", "direct", "tree", "dbtree"};
  return {"ring", "direct"};
}

// -C NAME: allreduce, reduce_scatter, all_gather, broadcast or reduce (also with '-' for '_',
// and nccl-tests' allgather / reducescatter).
inline std::optional<ccoll::plan::Collective> parse_collective(std::string_view name) {
  std::string n(name);
  for (char& ch : n)
    if (ch == '-') ch = '_';
  using C = ccoll::plan::Collective;
  for (C c : {C::allreduce, C::reduce_scatter, C::all_gather, C::broadcast, C::reduce})
    if (n == ccoll::plan::collective_name(c)) return c;
  if (n == "reducescatter") return C::reduce_scatter;
  if (n == "allgather") return C::all_gather;
  return std::nullopt;
}

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
  // -C: the collective every algorithm runs; --root: broadcast's and reduce's root.
  ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce;
  int root = 0;
  std::string topology;  // --topology FILE|PRESET (physical::load); empty: abstract ranks
  int split = 0;         // --split N: AlgorithmRequest::split
  ccoll::DataType dtype = ccoll::DataType::f32;
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
  std::string transport = "threads";  // a name in the transport table (transport_registry.hpp)
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
  // --tune FILE: time the candidates (-a, or tune_candidates) and write the fastest per size
  // into FILE's table (algo/tuning.hpp), for this collective and rank count.
  std::string tune_path;
  // --tune without -a: algos are tune_candidates(collective, nranks), for the rank count to come.
  bool tune_default_candidates = false;
  // --tune_passes N: --tune times every candidate N times, each pass in a fresh process, and the
  // table takes each candidate's median; unset: 3 where ccoll_perf starts its ranks itself, 1
  // under mpirun (whose processes one run cannot start afresh) and on a GPU transport.
  std::optional<int> tune_passes;
  // --interleave 1: time the algorithms in turn at each size (every round each once, the best
  // kept) instead of one after another; --tune always does.
  bool interleave = false;
  // ccoll::Config::protocol: "" (the policy's choice), "simple" or "ll".
  std::string protocol;
  // ccoll::Config::in_band_agreement_bytes; unset: the library's default (0 is a value: never).
  std::optional<std::uint64_t> in_band_agreement_bytes;
  // ccoll::Config::eager_rooted_bytes; unset: the library's default (0: never).
  std::optional<std::uint64_t> eager_rooted_bytes;
  // --window 1: every rank's buffers in a registered window of each collective
  // (allocate_window; --transport shm only), so calls read the peers' buffers.
  bool window = false;
  std::string json_path;
  std::string csv_path;
  bool help = false;
};

// --timeout's largest value: 2^31 - 1 ms (24.8 days). The library turns the timeout into
// nanoseconds added to a clock reading, so a larger one could overflow.
inline constexpr long kMaxTimeoutMs = 2147483647L;

// --tune_passes's largest value.
inline constexpr long kMaxTunePasses = 99;

// The largest buffer ccoll_perf accepts: a quarter of the physical memory (no limit if unknown).
inline std::uint64_t max_buffer_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(pages) / 4 * static_cast<std::uint64_t>(page);
}

// The registry entry of one -a name: a registered name, optionally with -overlap or -phased
// (tree_overlap, the old spelling, still works). Throws UsageError listing the registry's names.
inline ccoll::algo::AlgorithmSpec find_algorithm(std::string_view name) {
  std::string spec(name);
  for (std::string_view suffix : {std::string_view("_overlap"), std::string_view("_phased")})
    if (spec.size() > suffix.size() && spec.ends_with(suffix))
      spec[spec.size() - suffix.size()] = '-';
  return ccoll::cli::find_algorithm(spec, [&](const std::string& names) {
    return "-a/--algo: expected one of " + names +
           " (optionally -overlap or -phased), all, list or none, got '" + std::string(name) + "'";
  });
}

// Expands a comma list of -a names: "all" is the default list followed by every other registered
// algorithm, without those planned on a physical graph unless `with_topology` (--topology given);
// "none" adds nothing (only the peer runs). Names become canonical (tree_overlap -> tree-overlap,
// ring-overlap -> ring) and each is kept once, at its first occurrence. A name that needs a
// topology without one is a usage error.
// The suffix of -a NAME+ll.
constexpr std::string_view ll_suffix() {
  return "+ll";
}

// --tune's candidates when -a is not given: every algorithm on abstract ranks that plans the
// collective, in both protocols (oneshot and direct up to 16 ranks: their steps take or send
// P - 1 messages, and the runtime runs at most 15 a step; plan/one_shot.hpp).
inline std::vector<std::string> tune_candidates(ccoll::plan::Collective c, int nranks) {
  const bool one_hop = nranks <= ccoll::plan::kOneShotMaxRanks;
  std::vector<std::string> base;
  if (c == ccoll::plan::Collective::allreduce) {
    if (one_hop) base.push_back("oneshot");
    for (const char* a : {"recdoubling", "ring", "dbtree"}) base.emplace_back(a);
    if (one_hop) base.emplace_back("direct");
  } else {
    base = {"ring"};
    if (one_hop) base.emplace_back("direct");
    if (ccoll::plan::has_root(c)) base.insert(base.end(), {"tree", "dbtree"});
  }
  std::vector<std::string> out;
  for (const std::string& a : base) {
    out.push_back(a);
    out.push_back(a + std::string(ll_suffix()));
  }
  return out;
}

// An -a entry's algorithm: the name without its -overlap/-phased schedule or +ll protocol.
inline std::string algorithm_base(const std::string& entry) {
  return entry.substr(0, entry.find_first_of("-+"));
}

// Whether the algorithm of -a entry `a` has plans of `c`, asked of the algorithm itself
// (algo::plans_collective): on 4 abstract ranks, or for one planned on a graph (with --topology
// only) on the full4 preset, since the run's topology is read after the options.
inline bool has_plans_of(const std::string& a, ccoll::plan::Collective c, bool with_topology) {
  if (c == ccoll::plan::Collective::allreduce) return true;
  try {
    const ccoll::algo::AlgorithmSpec spec = ccoll::algo::find_algorithm(algorithm_base(a));
    ccoll::algo::AlgorithmRequest req;
    req.nranks = 4;
    if (!spec.algorithm.needs_topology)
      return ccoll::algo::plans_collective(ccoll::algo::make_algorithm(spec.algorithm, req), c);
    if (!with_topology) return false;
    const ccoll::physical::PhysicalTopology probe_graph = ccoll::physical::preset("full4");
    req.topology = &probe_graph;
    return ccoll::algo::plans_collective(ccoll::algo::make_algorithm(spec.algorithm, req), c);
  } catch (const std::exception&) {  // ccoll::Error, or a planner's refusal of the probe graph
    return false;
  }
}

// The algorithms with plans of `c`, for a refusal to name: "ring, direct, ..." (those planned on
// a graph marked as needing --topology).
inline std::string algorithms_with_plans_of(ccoll::plan::Collective c) {
  std::string names;
  for (const auto& a : ccoll::algo::algorithms())
    if (has_plans_of(a.name, c, true))
      names.append(names.empty() ? "" : ", ")
          .append(a.name)
          .append(a.needs_topology ? " (with --topology)" : "");
  return names;
}

// -a's list; `all` expands to every algorithm that can run: without --topology those planned on
// abstract ranks, and only those with plans of `collective`.
inline std::vector<std::string> parse_algos(
    std::string_view s, bool with_topology = false,
    ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce) {
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
        if ((with_topology || !spec.algorithm.needs_topology) &&
            has_plans_of(spec.name(), collective, with_topology))
          add(spec);
      continue;
    }
    // NAME+ll: the algorithm's plans in the LowLatency protocol (a one-rule tuning table, so
    // that --tune can time both protocols of one algorithm in one run).
    if (name.ends_with(ll_suffix())) {
      const std::string_view base = name.substr(0, name.size() - ll_suffix().size());
      const auto spec = find_algorithm(base);
      if (spec.name() != base || spec.algorithm.needs_topology || base == "auto")
        throw UsageError("-a/--algo " + std::string(name) +
                         ": +ll follows an algorithm that plans on abstract ranks, without "
                         "-overlap/-phased");
      if (std::find(out.begin(), out.end(), name) == out.end()) out.emplace_back(name);
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

namespace detail {
// `text` after `lead`, wrapped as --help's paragraphs are: at 94 columns, the continuation lines
// indented to the width of `lead`.
inline std::string wrap_help(std::string_view lead, std::string_view text) {
  constexpr std::size_t kWidth = 94;
  std::string out(lead);
  std::size_t column = lead.size();
  bool line_start = true;
  for (std::size_t i = 0; i <= text.size();) {
    std::size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(i, end - i);
    i = end + 1;
    if (word.empty()) continue;
    if (!line_start && column + 1 + word.size() > kWidth) {
      out.append("\n").append(lead.size(), ' ');
      column = lead.size();
      line_start = true;
    }
    if (!line_start) {
      out += ' ';
      ++column;
    }
    out.append(word);
    column += word.size();
    line_start = false;
  }
  return out + "\n";
}
}  // namespace detail

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
  -C, --collective C      allreduce, reduce_scatter, all_gather, broadcast or reduce (sizes are
                          the whole buffer, as nccl-tests': reduce-scatter's input, all-gather's
                          output; busbw factors 2(P-1)/P, (P-1)/P, (P-1)/P, 1, 1); the others
                          run on every transport with -a ring (rings and chains), direct, and
                          for broadcast and reduce tree and dbtree (the default: all of them),
                          --peer mpi, gloo or nccl; default allreduce
      --root R            broadcast and reduce: the root rank, default 0
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
)" + detail::wrap_help("      --transport T       ", transport_help() + ", default threads") +
         R"(      --peer P            also run another library's collective (-C) on the same ranks and
                          sizes and print the ratio: mpi (the MPI library's MPI_Allreduce or
                          -C's collective) or gloo (Gloo's, over TCP, if built with Gloo), which
                          need mpirun -np P and --transport shm, mpi or mpi-hybrid; or nccl
                          (ncclAllReduce or -C's collective, one rank per visible GPU, if built
                          with NCCL) with a GPU transport
      --gloo_iface IF     --peer gloo: the network interface of Gloo's TCP pairs, default lo
  -m, --membw 0|1         measure the memory bandwidth and print busbw as % of the bound (on a
                          GPU transport: calibrate the GPU and print each plan's HBM bound and
                          the minimum traffic's),
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
      --interleave 0|1    time the algorithms in turn at each size (each round times every
                          algorithm once; the best round of each is kept) rather than one
                          after another, so that a change in the machine's state hits all of
                          them alike; default 0 (--tune: 1)
      --tune FILE         time the candidates (-a; default: every algorithm on abstract ranks
                          that plans -C, each also as NAME+ll, the LowLatency protocol) and
                          write the fastest per size (each candidate's median over
                          --tune_passes passes) into FILE's table for this collective and
                          rank count (FILE is created from the default table, or updated: run
                          once per -t and -C); the candidates are interleaved (on a GPU
                          transport, timed one after another); use the table with -a auto
                          --tuning FILE
      --tune_passes N     --tune times the candidates in N passes, each in a fresh process,
                          and takes each candidate's median time per size (1..99); default 3,
                          1 under mpirun (mpirun's processes cannot be started afresh) and on
                          a GPU transport
      --protocol P        ccoll::Config::protocol: simple (slot and counter) or ll (low
                          latency: flagged lines) for every size; default: the algorithm's
                          choice (auto: per size from the tuning table; others: simple)
      --in_band_agreement B
                          ccoll::Config::in_band_agreement_bytes: calls of at most B bytes
                          check their arguments alongside their messages (0: always before
                          them), default: the library's (64K)
      --eager_rooted B    ccoll::Config::eager_rooted_bytes: broadcasts and reduces of at
                          most B bytes return once the rank's steps are done and compare
                          arguments at one of the rank's next calls; default: the library's
                          (0: never)
      --window 0|1        --transport shm: put every rank's buffers in a registered window
                          of the collective (allocate_window), so that calls read their peers'
                          buffers directly instead of staging them (allreduce: above
                          --in_band_agreement); the peer runs on the same buffers; default 0
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
    } else if (is("-C", "--collective")) {
      const std::string v = next();
      const auto c = parse_collective(v);
      if (!c)
        throw detail::bad_value(flag,
                                "expected allreduce, reduce_scatter, all_gather, broadcast or "
                                "reduce",
                                v);
      o.collective = *c;
    } else if (flag == "--root") {
      o.root = static_cast<int>(detail::parse_long(flag, next(), 0, 1023));
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
      const TransportEntry* t = find_transport(v);
      if (t == nullptr) throw detail::bad_value(flag, "expected " + transport_names(), v);
      check_transport_built(*t);
      o.transport = v;
    } else if (flag == "--peer") {
      const std::string v = next();
      Peer p = Peer::none;
      if (v == "mpi") {
        p = Peer::mpi;
      } else if (v == "gloo") {
        if (!kHaveGloo) {
          throw UsageError(
              kHaveMpi ? "--peer gloo: this ccoll_perf was built without Gloo (install "
                         "libgloo-dev and reconfigure; CMake then prints 'ccoll_perf: --peer "
                         "gloo enabled')"
                       : "--peer gloo: this ccoll_perf was built without Gloo, and without the "
                         "MPI it runs on (`scripts/setup -DCCOLL_ENABLE_MPI=AUTO ccoll_perf`, "
                         "or scripts/bench with --peer gloo, builds both where libgloo-dev is "
                         "installed)");
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
    } else if (flag == "--eager_rooted") {
      const std::string v = next();
      const auto b = parse_size(v);
      if (!b) throw detail::bad_value(flag, "expected a size in bytes (0, 4K, 64K, ...)", v);
      o.eager_rooted_bytes = *b;
    } else if (flag == "--window") {
      o.window = detail::parse_long(flag, next(), 0, 1) != 0;
    } else if (flag == "--protocol") {
      o.protocol = next();
      if (o.protocol != "simple" && o.protocol != "ll")
        throw detail::bad_value(flag, "expected simple or ll", o.protocol);
    } else if (flag == "--interleave") {
      o.interleave = detail::parse_long(flag, next(), 0, 1) != 0;
    } else if (flag == "--tune") {
      o.tune_path = next();
      if (o.tune_path.empty()) throw detail::bad_value(flag, "expected a file name", "");
    } else if (flag == "--tune_passes") {
      o.tune_passes = static_cast<int>(detail::parse_long(flag, next(), 1, kMaxTunePasses));
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
  const bool allreduce = o.collective == ccoll::plan::Collective::allreduce;
  if (!allreduce && !algo_list) o.algos = collective_algorithms(o.collective);
  if (algo_list) o.algos = parse_algos(*algo_list, !o.topology.empty(), o.collective);
  if (!o.tune_path.empty()) {
    if (!algo_list) {
      o.algos = tune_candidates(o.collective, o.nranks);
      o.tune_default_candidates = true;
    }
    for (const std::string& a : o.algos) {
      const std::string base = a.substr(0, a.find('+'));
      const auto spec = find_algorithm(base);
      if (spec.name() != base || base == "auto" || spec.algorithm.needs_topology)
        throw UsageError("--tune: -a " + a +
                         ": a candidate is an algorithm that plans on abstract ranks, without "
                         "-overlap/-phased, optionally with +ll");
    }
    if (o.algos.empty()) throw UsageError("--tune: -a names no candidate");
    if (!o.topology.empty())
      throw UsageError("--tune: the table's algorithms plan on abstract ranks, not --topology");
    if (o.peer != Peer::none) throw UsageError("--tune: not with --peer (it times ccoll's plans)");
    if (o.window)
      throw UsageError(
          "--tune: not with --window (windowed calls read their peers' buffers, whatever the "
          "plan; the table serves staged calls)");
    if (!o.protocol.empty())
      throw UsageError("--tune: not with --protocol (name NAME+ll candidates with -a)");
    // A host shared with other work drifts between one candidate's sweep and the next, so its
    // candidates take turns at each size. A GPU transport times each call with CUDA events on a
    // device no other job uses: its candidates are timed one after another.
    o.interleave = !is_device(o.transport);
  } else if (o.tune_passes) {
    throw UsageError("--tune_passes: only with --tune FILE");
  }
  if (o.interleave) {
    if (o.peer != Peer::none)
      throw UsageError(
          "--interleave: not with --peer (the peer alternates with each algorithm already)");
    if (is_device(o.transport))
      throw UsageError("--interleave: not on --transport " + o.transport + " yet");
  }
  if (!allreduce) {
    const std::string c(ccoll::plan::collective_name(o.collective));
    for (const std::string& a : o.algos) {
      if (!has_plans_of(a, o.collective, !o.topology.empty())) {
        std::string message = "-C " + c;
        message.append(": -a ").append(a).append(" has no ").append(c).append(" plans; ");
        message.append("these have: ").append(algorithms_with_plans_of(o.collective));
        throw UsageError(message);
      }
    }
  }
  if (!ccoll::plan::has_root(o.collective) && o.root != 0)
    throw UsageError("--root: only with -C broadcast or reduce");
  if (!o.tuning_path.empty() &&
      std::none_of(o.algos.begin(), o.algos.end(),
                   [](const std::string& a) { return algorithm_base(a) == "auto"; }))
    throw UsageError("--tuning: only with -a auto (the table chooses auto's plans)");
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
    throw UsageError(
        "--peer nccl: only with --transport cuda-virtual or cuda-p2p (the GPU transports)");
  }
  if ((o.peer == Peer::mpi || o.peer == Peer::gloo) && is_device(o.transport)) {
    throw UsageError("--peer " + std::string(to_string(o.peer)) + ": not with --transport " +
                     o.transport + " (on a GPU the peer is nccl)");
  }
  if (ccoll::plan::has_root(o.collective) && o.root >= o.nranks && o.nranks_given)
    throw UsageError("--root " + std::to_string(o.root) + ": expected a rank below -t " +
                     std::to_string(o.nranks));
  if (o.window && !transport_entry(o.transport).windows) {
    throw UsageError(
        "--window 1: only with --transport shm (the transport with registered "
        "windows), got --transport " +
        o.transport);
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

// Under mpirun the rank count is the world's, known only after parse_args. --tune's default
// candidates follow it: planned for the default -t, they kept oneshot at 17 ranks and more, whose
// plan refuses them and ended the run.
inline void set_world_size(Options& o, int nranks) {
  o.nranks = nranks;
  o.nranks_given = true;
  if (o.tune_default_candidates) o.algos = tune_candidates(o.collective, nranks);
}

// What a ccoll_perf built without MPI cannot run (scripts/bench builds it so unless its
// arguments ask for MPI), and how to build one that can: empty when the run needs no MPI. The
// parser already refuses --transport mpi|mpi-hybrid and --peer gloo in such a build; this names
// what reaches the run: a start under mpirun, --peer mpi and --topology measure.
inline std::string refusal_without_mpi(const Options& o, bool under_mpirun) {
  const char* needs_mpi = under_mpirun              ? "a run under mpirun"
                          : o.peer == Peer::mpi     ? "--peer mpi"
                          : o.topology == "measure" ? "--topology measure"
                                                    : nullptr;
  if (needs_mpi == nullptr) return {};
  return std::string("this ccoll_perf was built without MPI, which ") + needs_mpi +
         " needs: `scripts/setup -DCCOLL_ENABLE_MPI=AUTO ccoll_perf` builds it with MPI "
         "(scripts/bench does so itself when its arguments name mpi or gloo); without mpirun, "
         "--transport shm -t P forks the ranks itself";
}

}  // namespace ccoll_perf
