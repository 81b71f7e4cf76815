// ccoll_perf: an nccl-tests-style allreduce benchmark for ccoll's host transports.
//
//   ccoll_perf [-b 8] [-e 64M] [-f 2] [-t 4] [-a all] [--transport threads|shm] ...
//   ccoll_perf -a forest --topology dgx1v -b 8 -e 8M -f 4
//   ccoll_perf -a list
//   mpirun -np 4 ccoll_perf --transport shm --peer mpi -b 16M -e 64M -f 4
//
// The algorithms come from the library's registry (ccoll/algo/registry.hpp), each made into an
// algo::Registered and run as Allreduce<Transport, algo::Registered, Schedule>
// (allreduce_collective.hpp); the transports are a table (transport_registry.hpp) whose entries
// say where the ranks run. threads: P threads of this process share one Allreduce<HostThreads,
// ...>. shm: P processes, each with its own Allreduce<SharedMemory, ...>; ccoll_perf forks them
// itself, or takes them from mpirun (rank and size from the MPI world), which is also how --peer
// mpi runs the MPI library's MPI_Allreduce, and --peer gloo Gloo's allreduce (gloo_peer.hpp), on
// the same processes, buffers and sizes for the ratio. cuda-virtual: every rank on one GPU through
// a registered device transport (device_backend.hpp; built only with CUDA), with --peer nccl
// NCCL's allreduce on the same buffers. docs/benchmark.md explains the columns, the
// memory-bandwidth bound and the HBM bound of a plan on a GPU.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "controls.hpp"
#include "device_backend.hpp"
#include "device_sweep.hpp"
#include "gloo_peer.hpp"
#include "machine.hpp"
#include "perf_options.hpp"
#include "perf_prepare.hpp"
#include "perf_report.hpp"
#include "perf_tune.hpp"
#include "runner.hpp"
#include "transport_registry.hpp"

#include <ccoll/transport/session.hpp>

#if CCOLL_HAVE_MPI
#include <mpi.h>

#include <ccoll/core/config.hpp>
#include <ccoll/transport/mpi/eager_limit.hpp>
#include <ccoll/transport/mpi/measure.hpp>
#endif

namespace ccoll_perf {
namespace {

constexpr std::size_t kStreamArrayBytes = 128u << 20;  // 3.5x this machine's 36 MiB L3 per array
constexpr int kStreamReps = 10;

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

[[noreturn]] void die(int rank, const std::string& what) {
  std::fprintf(stderr, "ccoll_perf: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
#if CCOLL_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  std::_Exit(1);
}

std::string section_title(ccoll::plan::Collective c, const std::string& transport,
                          const std::string& algo, int nranks) {
  return std::string(ccoll::plan::collective_name(c)) + " " + algo + ", transport " + transport +
         ", " + std::to_string(nranks) + " ranks";
}

// What rank 0 prints and records.
class Printer {
 public:
  // device: a GPU transport's table (the plan's HBM bound, the peer's algbw).
  Printer(Report& report, Peer peer, bool device = false)
      : report_(report), peer_(peer), device_(device) {}

  void header(const std::string& transport_line, const Prepared* prepared = nullptr) {
    const auto& m = report_.machine;
    const auto& o = report_.options;
    std::string what(ccoll::plan::collective_name(o.collective));
    if (ccoll::plan::has_root(o.collective)) what += ", root " + std::to_string(o.root);
    std::printf("# ccoll_perf %d.%d: %s\n", ccoll::kVersionMajor, ccoll::kVersionMinor,
                what.c_str());
    std::printf("# command: %s\n", report_.command.c_str());
    std::printf("# date: %s  host: %s\n", m.date_utc.c_str(), m.hostname.c_str());
    std::printf("# cpu: %s, %d cores; load average at start: %s\n", m.cpu_model.c_str(), m.cores,
                m.load_average.c_str());
    std::printf("# transport: %s\n", transport_line.c_str());
    if (prepared != nullptr && prepared->topology) {
      std::printf("# topology: %s (%s), %d ranks, split %d\n", prepared->topology->name.c_str(),
                  o.topology.c_str(), prepared->nranks, o.split);
    }
    std::printf("# sizes: %s .. %s, factor %g; iters %d, warmup %d, check %d; type %s, op %s\n",
                format_size(o.min_bytes).c_str(), format_size(o.max_bytes).c_str(), o.step_factor,
                o.iters, o.warmup, o.check ? 1 : 0, std::string(ccoll::to_string(o.dtype)).c_str(),
                std::string(ccoll::to_string(o.op)).c_str());
    std::fflush(stdout);
  }

  void membw(int nranks) {
    if (report_.membw.empty()) return;
    std::printf("# memory bandwidth (STREAM counting, %zu MiB arrays, best of %d):\n",
                kStreamArrayBytes >> 20, kStreamReps);
    for (const auto& m : report_.membw) {
      std::printf("#   %d thread%s: copy %.2f  scale %.2f  triad %.2f  copy-nt %.2f GB/s\n",
                  m.threads, m.threads == 1 ? " " : "s", m.copy_GBps, m.scale_GBps, m.triad_GBps,
                  m.copy_nt_GBps);
    }
    std::printf(
        "# bound: B = %.2f GB/s (best 1:1 kernel, up to %d threads); busbw <= B(P-1)/P^2 = %.2f "
        "GB/s for P = %d\n",
        report_.bound_membw_GBps, report_.membw.back().threads,
        memory_bound_busbw(report_.bound_membw_GBps * 1e9, nranks) / 1e9, nranks);
    std::fflush(stdout);
  }

  // The GPU calibration (-m 1 on a GPU transport) and the bound it gives.
  void gpu() {
    if (!report_.gpu) return;
    const GpuCalibration& g = *report_.gpu;
    std::printf(
        "# gpu calibration (%s arrays, median of %d after warm-up; bytes read + written):\n"
        "#   cudaMemcpyAsync D2D %.1f GB/s  copy kernel (16-byte vectors) %.1f GB/s  add kernel "
        "(c = a + b) %.1f GB/s\n"
        "#   empty kernel, back to back on one stream: %.2f us per launch, cooperative %.2f us\n"
        "# bound: the plan's HBM bytes (reads + writes of every step of every rank) / copy-kernel "
        "bandwidth; %%bound = bound / time\n"
        "# min: the least any allreduce moves (2PN: each input read, each output written once) / "
        "copy-kernel bandwidth; %%min = min / time\n",
        format_size(g.array_bytes).c_str(), g.reps, g.memcpy_GBps, g.copy_kernel_GBps,
        g.add_kernel_GBps, g.launch_us, g.cooperative_launch_us);
    std::fflush(stdout);
  }

  void section(const std::string& title) {
    std::printf(
        "#\n# %s\n%s", title.c_str(),
        format_table_header(with_bound(), peer_ != Peer::none, to_string(peer_), device_).c_str());
    std::fflush(stdout);
    section_rows_ = 0;
    section_busbw_sum_ = 0;
  }

  // A row that goes to JSON/CSV but not to the table (a paired peer's measurement: the table
  // shows it in the peer's busbw column of the row it was paired with).
  void record(Row r) {
    add_bound(r);
    if (r.wrong > 0) any_wrong_ = true;
    report_.rows.push_back(std::move(r));
  }

  void row(Row r) {
    add_bound(r);
    if (r.peer_wrong > 0) any_wrong_ = true;
    std::fputs(format_row(r, with_bound(), peer_ != Peer::none, device_).c_str(), stdout);
    std::fflush(stdout);
    ++section_rows_;
    section_busbw_sum_ += r.busbw_GBps;
    if (r.wrong > 0) any_wrong_ = true;
    report_.rows.push_back(std::move(r));
  }

  // The rows of an interleaved run (--interleave), one section per algorithm, after the run.
  void interleaved(const Prepared& prepared, const std::vector<std::vector<Row>>& rows) {
    const Options& o = report_.options;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      section(section_title(o.collective, o.transport, prepared.algos[i].name, o.nranks) +
              "; interleaved with the others (best of " + std::to_string(o.rounds) + " each)");
      for (const Row& r : rows[i]) row(r);
      end_section();
    }
  }

  void end_section() {
    if (section_rows_ > 0) {
      std::printf("# Avg bus bandwidth    : %.4f GB/s\n", section_busbw_sum_ / section_rows_);
    }
  }

  void finish() {
    report_.machine.load_average = read_load_average();
    std::printf("#\n# load average at end: %s\n", report_.machine.load_average.c_str());
    if (!report_.options.json_path.empty()) {
      std::ofstream f(report_.options.json_path);
      f << to_json(report_);
      if (!f) die(0, "--json: cannot write '" + report_.options.json_path + "'");
    }
    if (!report_.options.csv_path.empty()) {
      std::ofstream f(report_.options.csv_path);
      f << csv_header();
      for (const auto& r : report_.rows) f << csv_row(r);
      if (!f) die(0, "--csv: cannot write '" + report_.options.csv_path + "'");
    }
    if (any_wrong_) std::printf("# some results were WRONG (see the #wrong column)\n");
    if (!report_.options.tune_path.empty()) {
      try {
        std::fputs(write_tuning(report_.options, report_.options.nranks, report_.rows).c_str(),
                   stdout);
      } catch (const std::exception& e) {
        die(0, e.what());
      }
    }
    std::fflush(stdout);
  }

  bool any_wrong() const { return any_wrong_; }

 private:
  bool with_bound() const {
    return device_ ? report_.gpu.has_value() : report_.bound_membw_GBps > 0;
  }
  void add_bound(Row& r) const {
    // The bound is allreduce's (docs/benchmark.md); the other collectives have none here yet.
    if (report_.bound_membw_GBps > 0 && r.collective == ccoll::plan::Collective::allreduce) {
      r.bound_busbw_GBps = memory_bound_busbw(report_.bound_membw_GBps * 1e9, r.nranks) / 1e9;
    }
  }

  Report& report_;
  Peer peer_;
  bool device_ = false;
  int section_rows_ = 0;
  double section_busbw_sum_ = 0;
  bool any_wrong_ = false;
};

void measure_membw(Report& report, int nranks) {
  if (!report.options.membw) return;
  const int parallel = std::max(1, std::min(nranks, report.machine.cores));
  report.membw.push_back(measure_memory_bandwidth(1, kStreamArrayBytes, kStreamReps));
  if (parallel > 1) {
    report.membw.push_back(measure_memory_bandwidth(parallel, kStreamArrayBytes, kStreamReps));
  }
  // The most any measured configuration drew: on a shared machine the parallel run is sometimes
  // the slower one, and an underestimated B would flatter %mbound.
  for (const auto& m : report.membw) {
    report.bound_membw_GBps = std::max(report.bound_membw_GBps, m.best_1to1_GBps());
  }
}

SweepSpec make_spec(const Options& o, const std::vector<std::uint64_t>& sizes,
                    std::string transport, std::string algo) {
  SweepSpec s;
  s.transport = std::move(transport);
  s.algo = std::move(algo);
  s.sizes = sizes;
  s.dtype = o.dtype;
  s.op = o.op;
  s.iters = o.iters;
  s.warmup = o.warmup;
  s.check = o.check;
  s.rounds = o.rounds;
  s.call = CollectiveCall{o.collective, o.root};
  return s;
}

// ---------------------------------------------------------------------------------------------
int run_threads(Report& report, const Prepared& prepared) {
  const Options& o = report.options;
  const int nranks = o.nranks;
  const TransportEntry& transport = transport_entry(o.transport);
  Printer printer(report, Peer::none);
  printer.header(std::to_string(nranks) + " threads in one process (" + transport.describe() + ")",
                 &prepared);
  measure_membw(report, nranks);
  printer.membw(nranks);
  const auto sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor);

  if (o.interleave) {
    std::vector<std::unique_ptr<Collective>> colls;
    std::vector<Collective*> pointers;
    std::vector<SweepSpec> specs;
    for (const PreparedAlgorithm& algo : prepared.algos) {
      specs.push_back(make_spec(o, sizes, o.transport, algo.name));
      try {
        colls.push_back(make_collective(o.transport, algo, make_config(o, -1, nranks, ""),
                                        CollectiveCall{o.collective, o.root}));
        specs.back().active = active_ranks(algo.logical, nranks, algo.spec.overlap, o.collective);
      } catch (const std::exception& e) {
        die(0, e.what());
      }
      pointers.push_back(colls.back().get());
    }
    std::vector<std::vector<Row>> rows(specs.size());
    run_threads_interleaved(
        specs, pointers, nranks, [&](std::size_t i, const Row& r) { rows[i].push_back(r); },
        [](int rank, const std::string& what) { die(rank, what); });
    printer.interleaved(prepared, rows);
    printer.finish();
    return printer.any_wrong() ? 1 : 0;
  }
  for (const PreparedAlgorithm& algo : prepared.algos) {
    std::unique_ptr<Collective> coll;
    SweepSpec spec = make_spec(o, sizes, o.transport, algo.name);
    try {
      coll = make_collective(o.transport, algo, make_config(o, -1, nranks, ""),
                             CollectiveCall{o.collective, o.root});
      spec.active = active_ranks(algo.logical, nranks, algo.spec.overlap, o.collective);
    } catch (const std::exception& e) {
      die(0, e.what());
    }
    printer.section(section_title(o.collective, o.transport, algo.name, nranks));
    run_threads_sweep(
        spec, *coll, nranks, [&](const Row& r) { printer.row(r); },
        [](int rank, const std::string& what) { die(rank, what); });
    printer.end_section();
  }
  printer.finish();
  return printer.any_wrong() ? 1 : 0;
}

// The peer of --peer as a RankCollective, with the names of its rows (transport, algo).
struct PeerRun {
  std::unique_ptr<RankCollective> coll;
  std::string transport;
  std::string algo;
};

PeerRun make_peer(const Options& o) {
  PeerRun p;
#if CCOLL_HAVE_MPI
  if (o.peer == Peer::mpi) {
    p.coll = make_mpi_peer(CollectiveCall{o.collective, o.root});
    p.transport = "mpi";
    p.algo = mpi_function_name(o.collective);
  }
#endif
#if CCOLL_HAVE_GLOO
  if (o.peer == Peer::gloo) {
    std::optional<std::chrono::milliseconds> timeout;
    if (o.timeout_ms) timeout = std::chrono::milliseconds(*o.timeout_ms);
    p.coll = make_gloo_peer(o.gloo_iface, timeout, CollectiveCall{o.collective, o.root});
    p.transport = "gloo";
    p.algo = gloo_function_name(o.collective);
  }
#endif
  if (o.peer != Peer::none && !p.coll) {
    throw std::invalid_argument("--peer " + std::string(to_string(o.peer)) +
                                ": not built into this ccoll_perf");
  }
  return p;
}

// One rank of the shm and MPI transports with --interleave: every algorithm's collective made
// first (each its own session, and with --window its own window and buffers), then timed in turn.
void interleaved_rank_body(Report& report, const Prepared& prepared, Control& control,
                           const std::string& session_prefix, Printer* printer,
                           RankBuffers& buffers, const std::vector<std::uint64_t>& sizes) {
  const Options& o = report.options;
  const int rank = control.rank();
  const int nranks = control.nranks();
  std::vector<std::unique_ptr<Collective>> colls;
  std::vector<std::unique_ptr<RankCollective>> views;
  std::vector<std::unique_ptr<RankBuffers>> windowed;
  std::vector<InterleavedCollective> runs;
  for (const PreparedAlgorithm& algo : prepared.algos) {
    control.barrier();
    std::string session = session_prefix;
    session.append(".").append(algo.name);
    colls.push_back(make_collective(o.transport, algo, make_config(o, rank, nranks, session),
                                    CollectiveCall{o.collective, o.root}));
    views.push_back(colls.back()->rank(rank));
    SweepSpec spec = make_spec(o, sizes, o.transport, algo.name);
    spec.active = active_ranks(algo.logical, nranks, algo.spec.overlap, o.collective);
    RankBuffers* used = &buffers;
    if (o.window) {
      const std::uint64_t count = max_count(sizes, o.dtype);
      const std::uint64_t half = (count * ccoll::size_of(o.dtype) + 4095) / 4096 * 4096;
      windowed.push_back(std::make_unique<RankBuffers>(count, o.dtype, o.op, rank, nranks, o.check,
                                                       colls.back()->allocate_window(2 * half)));
      used = windowed.back().get();
    }
    used->expect(spec.active);
    runs.push_back(InterleavedCollective{std::move(spec), views.back().get(), used});
  }
  std::vector<std::vector<Row>> rows(runs.size());
  run_interleaved_sweep(runs, control, [&](std::size_t i, const Row& r) { rows[i].push_back(r); });
  control.barrier();  // nobody destroys its end of a session while a peer still uses it
  views.clear();
  windowed.clear();
  colls.clear();
  if (printer) printer->interleaved(prepared, rows);
}

// One rank of the shm and MPI transports: every algorithm, each timed in alternating blocks with
// the peer (run_peer: o.peer, made here on every rank); -a none: the peer alone.
void shm_rank_body(Report& report, const Prepared& prepared, Control& control,
                   const std::string& session_prefix, Printer* printer, bool run_peer) {
  const Options& o = report.options;
  const int rank = control.rank();
  const int nranks = control.nranks();
  const auto sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor);
  RankBuffers buffers(max_count(sizes, o.dtype), o.dtype, o.op, rank, nranks, o.check);
  auto emit = [&](const Row& r) {
    if (printer) printer->row(r);
  };
  PeerRun peer;
  PairedPeer paired;
  if (run_peer) {
    peer = make_peer(o);
    paired.coll = peer.coll.get();
    paired.transport = peer.transport;
    paired.algo = peer.algo;
    paired.on_row = [&](const Row& r) {
      if (printer) printer->record(r);
    };
  }
  if (peer.coll && o.algos.empty()) {  // -a none: the peer alone, as its own table
    if (printer) {
      printer->section(
          section_title(o.collective, peer.transport, peer.algo + " (the peer library)", nranks));
    }
    run_sweep(make_spec(o, sizes, peer.transport, peer.algo), *peer.coll, control, buffers, emit);
    if (printer) printer->end_section();
  }
  const std::string& transport = o.transport;
  if (o.interleave) {
    interleaved_rank_body(report, prepared, control, session_prefix, printer, buffers, sizes);
    return;
  }
  for (const PreparedAlgorithm& algo : prepared.algos) {
    const std::string& name = algo.name;
    if (printer) {
      std::string title = section_title(o.collective, transport, name, nranks);
      if (peer.coll) {
        title += "; " + peer.algo + " timed in alternating blocks with it (best of " +
                 std::to_string(o.rounds) + " each)";
      }
      printer->section(title);
    }
    control.barrier();
    std::string session = session_prefix;
    session.append(".").append(name);
    auto coll = make_collective(o.transport, algo, make_config(o, rank, nranks, session),
                                CollectiveCall{o.collective, o.root});
    auto view = coll->rank(rank);
    SweepSpec spec = make_spec(o, sizes, transport, name);
    spec.active = active_ranks(algo.logical, nranks, algo.spec.overlap, o.collective);
    // --window: this collective's own buffers, in its window (the peer uses them too).
    std::unique_ptr<RankBuffers> windowed;
    if (o.window) {
      const std::uint64_t count = max_count(sizes, o.dtype);
      const std::uint64_t half = (count * ccoll::size_of(o.dtype) + 4095) / 4096 * 4096;
      windowed = std::make_unique<RankBuffers>(count, o.dtype, o.op, rank, nranks, o.check,
                                               coll->allocate_window(2 * half));
    }
    RankBuffers& used = windowed ? *windowed : buffers;
    used.expect(spec.active);
    run_sweep(spec, *view, control, used, emit, peer.coll ? &paired : nullptr);
    control.barrier();  // nobody destroys its end of the session while a peer still uses it
    view.reset();
    coll.reset();
    if (printer) printer->end_section();
  }
}

int run_shm_forked(Report& report, const Prepared& prepared) {
  const Options& o = report.options;
  const int nranks = o.nranks;
  Printer printer(report, Peer::none);
  printer.header(std::to_string(nranks) + " processes forked by ccoll_perf (" +
                     transport_entry(o.transport).describe() + ")",
                 &prepared);
  measure_membw(report, nranks);  // before fork: no threads may exist at fork time
  printer.membw(nranks);

  ForkControl control(nranks, std::chrono::minutes(5));
  // Random, not the pid: pids repeat across PID namespaces (two containers' ccoll_perf are both
  // pid 1), and jobs of one name would meet in /dev/shm.
  const std::string session = ccoll::transport::new_session("ccoll_perf");
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> children;
  int rank = 0;
  for (int r = 1; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) die(0, "fork failed");
    if (pid == 0) {
      rank = r;
      break;
    }
    children.push_back(pid);
  }
  control.set_rank(rank);
  try {
    shm_rank_body(report, prepared, control, session, rank == 0 ? &printer : nullptr, false);
  } catch (const std::exception& e) {
    control.abort();
    if (rank != 0) {
      std::fprintf(stderr, "ccoll_perf: rank %d: %s\n", rank, e.what());
      std::_Exit(1);
    }
    std::fprintf(stderr, "ccoll_perf: rank 0: %s\n", e.what());
    for (pid_t c : children) waitpid(c, nullptr, 0);
    return 1;
  }
  if (rank != 0) {
    std::fflush(stdout);
    std::_Exit(0);
  }
  bool children_ok = true;
  for (pid_t c : children) {
    int status = 0;
    waitpid(c, &status, 0);
    children_ok = children_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  printer.finish();
  if (!children_ok) {
    std::fprintf(stderr, "ccoll_perf: a child rank failed\n");
    return 1;
  }
  return printer.any_wrong() ? 1 : 0;
}

#if CCOLL_HAVE_MPI
// The header's account of the peer: which library, which version, which algorithm.
std::string peer_description(const Options& o) {
  switch (o.peer) {
    case Peer::none:
    case Peer::nccl:  // a GPU peer: never under mpirun (run_device)
      break;
    case Peer::mpi:
      return "; peer: " + mpi_library_version() + "'s " + mpi_function_name(o.collective);
    case Peer::gloo:
#if CCOLL_HAVE_GLOO
      return "; peer: " + gloo_description(o.collective) + " on interface " + o.gloo_iface;
#else
      break;
#endif
  }
  return "";
}

// Between hosts, Open MPI's TCP transport sends a message above its eager limit by rendezvous,
// which stalls a link loaded in both directions (docs/mpi.md, "Over TCP"): when the MPI
// transports' messages of a slot would, the header says so before the figures it slows. Empty
// otherwise (one host, another MPI, the TCP transport not selected, or a limit that covers a
// slot). Collective.
std::string tcp_rendezvous_note(const Options& o, int rank) {
  if (o.transport != "mpi" && o.transport != "mpi-hybrid") return "";
  // Nodes as MPI sees them (hosts emulated by CCOLL_MPI_HOST on one node talk through its
  // shared-memory transport, not TCP).
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int node_size = 0, world_size = 0, smallest_node = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Allreduce(&node_size, &smallest_node, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (smallest_node == world_size) return "";
  const std::uint64_t slot = o.slot_bytes != 0 ? o.slot_bytes : ccoll::kDefaultSlotBytes;
  const std::optional<std::uint64_t> limit = ccoll::transport::mpi::tcp_eager_limit();
  // A message goes eagerly if it fits in the limit with Open MPI's header (tens of bytes).
  constexpr std::uint64_t kHeaderRoom = 1024;
  if (!limit || *limit >= slot + kHeaderRoom) return "";
  return "Open MPI's btl_tcp_eager_limit (" + std::to_string(*limit) +
         " B) does not hold a slot (" + std::to_string(slot) +
         " B) and its header: if messages between hosts go over pml ob1 and btl tcp, each waits "
         "for a rendezvous, which stalls links loaded both ways; mpirun --mca "
         "btl_tcp_eager_limit " +
         std::to_string(2 * slot) +
         " (or a smaller --slot_bytes) lifts it (docs/mpi.md, \"Over TCP\")";
}

int run_under_mpirun(Report& report) {
  MPI_Init(nullptr, nullptr);
  MpiControl control;
  const int rank = control.rank();
  const int nranks = control.nranks();
  Options& o = report.options;
  if (o.nranks_given && o.nranks != nranks) {
    die(rank, "-t/--nranks " + std::to_string(o.nranks) + " disagrees with mpirun's " +
                  std::to_string(nranks) + " processes (leave -t out under mpirun)");
  }
  set_world_size(o, nranks);
  if (transport_entry(o.transport).ranks == RankPlacement::threads) {
    die(rank,
        "under mpirun ccoll_perf needs --transport shm or mpi (each MPI process is one rank)");
  }
  // --topology measure: the hosts' links, measured now (transport/mpi/measure.hpp).
  std::shared_ptr<const ccoll::physical::PhysicalTopology> measured;
  ccoll::transport::mpi::HostLinks links;
  if (o.topology == "measure") {
    try {
      links = ccoll::transport::mpi::measure_host_links(MPI_COMM_WORLD);
      measured = std::make_shared<const ccoll::physical::PhysicalTopology>(
          ccoll::transport::mpi::measured_topology(links));
    } catch (const std::exception& e) {
      die(rank, std::string("--topology measure: ") + e.what());
    }
  }
  Prepared prepared;
  try {
    prepared = prepare_algorithms(o, "mpirun -np", measured);
  } catch (const UsageError& e) {
    die(rank, e.what());
  }
  if (o.peer == Peer::mpi && !mpi_supports(o.dtype)) {
    die(rank, "--peer mpi: MPI has no " + std::string(ccoll::to_string(o.dtype)) + " type");
  }
  const std::string tcp_note = tcp_rendezvous_note(o, rank);  // collective
  std::unique_ptr<Printer> printer;
  if (rank == 0) {
    printer = std::make_unique<Printer>(report, o.peer);
    printer->header(std::to_string(nranks) + " processes started by mpirun (" +
                        transport_entry(o.transport).describe() + peer_description(o) + ")",
                    &prepared);
    if (!tcp_note.empty()) std::printf("# note: %s\n", tcp_note.c_str());
    if (measured) {
      std::printf("# measured host links (ping-pong between hosts' first ranks; %d hosts):\n",
                  links.nhosts);
      for (int a = 0; a < links.nhosts; ++a)
        for (int b = a + 1; b < links.nhosts; ++b)
          std::printf("#   h%d-h%d: %.3f GB/s, %.1f us\n", a, b,
                      links.at(links.bandwidth_GBps, a, b), links.at(links.latency_us, a, b));
    }
    measure_membw(report, nranks);  // the other ranks sleep in the polled barrier meanwhile
    printer->membw(nranks);
  }
  control.barrier();
  // One session name for all ranks: rank 0 draws it.
  char session[64] = {};
  if (rank == 0)
    std::snprintf(session, sizeof session, "%s",
                  ccoll::transport::new_session("ccoll_perf").c_str());
  MPI_Bcast(session, sizeof session, MPI_CHAR, 0, MPI_COMM_WORLD);
  try {
    shm_rank_body(report, prepared, control, session, printer.get(), o.peer != Peer::none);
  } catch (const std::exception& e) {
    die(rank, e.what());
  }
  int rc = 0;
  if (printer) {
    printer->finish();
    rc = printer->any_wrong() ? 1 : 0;
  }
  MPI_Finalize();
  return rc;
}
#endif

// A GPU transport: every rank in this process, on the GPU of a registered device transport
// (--transport cuda-virtual), the peer (--peer nccl) on the same buffers in alternating blocks.
int run_device(Report& report) {
  Options& o = report.options;
  const DeviceTransportEntry* entry = nullptr;
  Prepared prepared;
  try {
    entry = &require_device_transport(o.transport, find_device_transport(o.transport));
    prepared = prepare_algorithms(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ccoll_perf: %s\n", e.what());
    return 2;
  }
  o.nranks = prepared.nranks;
  const int nranks = o.nranks;
  const std::string& transport_name = o.transport;
  const auto sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor);
  Printer printer(report, o.peer, true);
  bool algorithm_failed = false;
  try {
    DeviceRunSpec run;
    run.nranks = nranks;
    run.max_count = max_count(sizes, o.dtype);
    run.dtype = o.dtype;
    run.op = o.op;
    run.check = o.check;
    run.collective = o.collective;
    run.root = o.root;
    auto transport = entry->make(run);
    std::unique_ptr<DeviceCollective> peer;
    if (o.peer != Peer::none) peer = transport->peer(to_string(o.peer));
    printer.header(transport->description(), &prepared);
    if (peer) std::printf("# peer: %s\n", peer->description().c_str());
    if (o.membw) {
      report.gpu = transport->calibrate();
      printer.gpu();
    }
    const double copy_GBps = report.gpu ? report.gpu->copy_kernel_GBps : 0.0;
    auto emit = [&](const Row& r) { printer.row(r); };
    auto record = [&](const Row& r) { printer.record(r); };
    if (peer && o.algos.empty()) {  // -a none: the peer alone, as its own table
      printer.section(peer->name() + " (the peer library): " + peer->description());
      run_device_sweep(make_spec(o, sizes, "nccl", peer->name()), nullptr, peer.get(), 0.0, emit,
                       record);
      printer.end_section();
    }
    for (const PreparedAlgorithm& algo : prepared.algos) {
      // One algorithm that fails (refused by the device fit, a plan error, a timeout) stops its
      // own rows only: the others still run, and the exit status reports it.
      try {
        const std::vector<bool> active =
            active_ranks(algo.logical, nranks, algo.spec.overlap, o.collective);
        auto coll =
            transport->ccoll(make_config(o, -1, nranks, ""), plan_source(algo, o.collective),
                             policy_id(transport_name, algo), active);
        std::string title = section_title(o.collective, transport_name, algo.name, nranks);
        if (peer) {
          title += "; " + peer->name() + " timed in alternating blocks with it (best of " +
                   std::to_string(o.rounds) + " each)";
        }
        printer.section(title);
        std::printf("# ccoll: %s\n", coll->description().c_str());
        SweepSpec spec = make_spec(o, sizes, transport_name, algo.name);
        spec.active = active;
        // The launch (channels, blocks, threads) before the first row and wherever it changes.
        std::string launch;
        auto on_launch = [&launch](const std::string& text) {
          if (text == launch) return;
          launch = text;
          std::printf("# launch: %s\n", text.c_str());
        };
        run_device_sweep(spec, coll.get(), peer.get(), copy_GBps, emit, record, on_launch);
        printer.end_section();
      } catch (const std::exception& e) {
        std::fflush(stdout);
        std::printf("# %s: stopped: %s\n", algo.name.c_str(), e.what());
        std::fflush(stdout);
        std::fprintf(stderr, "ccoll_perf: %s: %s\n", algo.name.c_str(), e.what());
        algorithm_failed = true;
      }
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ccoll_perf: %s\n", e.what());
    return 1;
  }
  printer.finish();
  return printer.any_wrong() || algorithm_failed ? 1 : 0;
}

int run_here(Report& report, const char* argv0);

// --tune in several passes (perf_tune.hpp): each pass runs in a fresh process and writes its
// report; the table, --json and --csv take each candidate's median, and the first pass's memory
// bandwidths.
int run_tune_passes(Report& report, const char* argv0) {
  const int passes = *report.options.tune_passes;
  TunePasses run;
  try {
    run = run_in_fresh_processes(passes, [&](int k, const std::string& json) {
      std::printf("#\n# --tune: pass %d of %d, in a fresh process\n", k + 1, passes);
      Report pass = report;
      pass.machine = read_machine_info();  // this pass's start: date and load
      pass.options.tune_path.clear();
      pass.options.csv_path.clear();
      pass.options.json_path = json;
      return run_here(pass, argv0);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccoll_perf: %s\n", e.what());
    return 1;
  }
  if (run.status == 2) return 2;
  std::vector<std::vector<Row>> rows;
  for (const ReportData& r : run.reports) rows.push_back(r.rows);
  const PassMedians medians = median_rows(rows);
  if (!run.reports.empty()) {
    report.membw = run.reports.front().membw;
    report.bound_membw_GBps = run.reports.front().bound_membw_GBps;
  }
  int nranks = report.options.nranks;
  for (const Row& r : medians.rows) nranks = r.nranks;
  report.options.nranks = nranks;
  std::vector<ccoll::algo::SizeRule> rules;
  try {
    rules = ccoll::algo::derive_rules(report.options.collective, nranks, tuned_times(medians.rows));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccoll_perf: --tune: %s\n", e.what());
    return 1;
  }
  std::fputs(format_pass_medians(medians, passes, rules).c_str(), stdout);
  // finish() writes the table (the same rules), --json and --csv from the medians.
  Printer printer(report, Peer::none, is_device(report.options.transport));
  for (const Row& r : medians.rows) printer.record(r);
  printer.finish();
  return std::max(run.status, printer.any_wrong() ? 1 : 0);
}

int main_impl(int argc, char** argv) {
  std::vector<std::string> argv_all(argv, argv + argc);
  Report report;
  try {
    report.options = parse_args(std::vector<std::string>(argv_all.begin() + 1, argv_all.end()));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ccoll_perf: %s\n", e.what());
    return 2;
  }
  const Options& o = report.options;
  if (o.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (o.list_algos) {
    std::fputs(format_algorithm_list().c_str(), stdout);
    return 0;
  }
  // The output files are checked now: a path that cannot be written fails before the run, not
  // after it (exit status 1, as when writing fails).
  try {
    if (!o.json_path.empty()) check_output_path("--json", o.json_path);
    if (!o.csv_path.empty()) check_output_path("--csv", o.csv_path);
    if (!o.tune_path.empty()) {
      check_output_path("--tune", o.tune_path);
      (void)read_tune_base(o.tune_path, is_device(o.transport));
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ccoll_perf: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccoll_perf: %s\n", e.what());
    return 1;
  }
  report.command = command_line(argv_all);
  report.machine = read_machine_info();
  if (!o.tune_path.empty()) {
    const bool mpirun = launched_by_mpirun();
    if (mpirun && o.tune_passes.value_or(1) > 1) {
      std::fprintf(stderr,
                   "ccoll_perf: --tune_passes %d: under mpirun the ranks are mpirun's processes, "
                   "which one run cannot start afresh; run with --tune_passes 1 (the default "
                   "under mpirun), or without mpirun (--transport shm -t P)\n",
                   *o.tune_passes);
      return 2;
    }
    // A GPU transport times each call with CUDA events on a device no other job uses: one pass,
    // unless asked (device time is what a GPU user has least of).
    report.options.tune_passes = o.tune_passes.value_or(mpirun || is_device(o.transport) ? 1 : 3);
    // (--transport mpi without mpirun: run_here says how to start it, once.)
    if (*report.options.tune_passes > 1 &&
        transport_entry(o.transport).ranks != RankPlacement::mpirun)
      return run_tune_passes(report, argv[0]);
  }
  return run_here(report, argv[0]);
}

// The run in this process: its ranks, or those it forks or takes from mpirun.
int run_here(Report& report, const char* argv0) {
  const Options& o = report.options;
  const TransportEntry& transport = transport_entry(o.transport);
  if (transport.ranks == RankPlacement::device) {
    if (launched_by_mpirun()) {
      std::fprintf(stderr,
                   "ccoll_perf: --transport %s runs every rank in this process: run it without "
                   "mpirun\n",
                   o.transport.c_str());
      return 2;
    }
    return run_device(report);
  }
#if !CCOLL_HAVE_MPI
  const std::string refusal = refusal_without_mpi(o, launched_by_mpirun());
  if (!refusal.empty()) {
    std::fprintf(stderr, "ccoll_perf: %s\n", refusal.c_str());
    return 2;
  }
#else
  if (launched_by_mpirun()) return run_under_mpirun(report);
#endif
  if (o.topology == "measure") {
    std::fprintf(stderr,
                 "ccoll_perf: --topology measure measures the links between MPI processes: run "
                 "it under mpirun\n");
    return 2;
  }
  if (transport.ranks == RankPlacement::mpirun) {
    std::fprintf(stderr,
                 "ccoll_perf: --transport %s runs one rank per MPI process: run\n"
                 "  mpirun --allow-run-as-root --oversubscribe -np 4 %s --transport %s\n",
                 o.transport.c_str(), argv0, o.transport.c_str());
    return 2;
  }
  if (o.peer != Peer::none) {
    const std::string peer(to_string(o.peer));
    std::fprintf(stderr,
                 "ccoll_perf: --peer %s needs the ranks to be MPI processes: run\n"
                 "  mpirun --allow-run-as-root --oversubscribe -np 4 %s --transport shm --peer %s "
                 "-b 16M -e 64M -f 4\n",
                 peer.c_str(), argv0, peer.c_str());
    return 2;
  }
  Prepared prepared;
  try {
    prepared = prepare_algorithms(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ccoll_perf: %s\n", e.what());
    return 2;
  }
  report.options.nranks = prepared.nranks;
  if (transport.ranks == RankPlacement::threads) return run_threads(report, prepared);
  return run_shm_forked(report, prepared);
}

}  // namespace
}  // namespace ccoll_perf

int main(int argc, char** argv) {
  // Line-buffered even into a file or pipe: a run stopped by a time limit keeps every row it
  // printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return ccoll_perf::main_impl(argc, argv);
}
