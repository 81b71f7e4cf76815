// ccoll_perf: an nccl-tests-style allreduce benchmark for ccoll's host transports.
//
//   ccoll_perf [-b 8] [-e 64M] [-f 2] [-t 4] [-a all] [--transport threads|shm] ...
//   mpirun -np 4 ccoll_perf --transport shm --peer mpi -b 16M -e 64M -f 4
//
// threads: P threads of this process share one Allreduce<HostThreads, ...>. shm: P processes, each
// with its own Allreduce<SharedMemory, ...>; ccoll_perf forks them itself, or takes them from
// mpirun (rank and size from the MPI world), which is also how --peer mpi runs Open MPI's
// MPI_Allreduce on the same processes, buffers and sizes for the ratio. docs/benchmark.md explains
// the columns and the memory-bandwidth bound.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "controls.hpp"
#include "machine.hpp"
#include "perf_cli.hpp"
#include "runner.hpp"

#if CCOLL_HAVE_MPI
#include <mpi.h>
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

// What rank 0 prints and records.
class Printer {
 public:
  Printer(Report& report, bool with_peer) : report_(report), with_peer_(with_peer) {}

  void header(const std::string& transport_line) {
    const auto& m = report_.machine;
    const auto& o = report_.options;
    std::printf("# ccoll_perf %d.%d: allreduce\n", ccoll::kVersionMajor, ccoll::kVersionMinor);
    std::printf("# command: %s\n", report_.command.c_str());
    std::printf("# date: %s  host: %s\n", m.date_utc.c_str(), m.hostname.c_str());
    std::printf("# cpu: %s, %d cores; load average at start: %s\n", m.cpu_model.c_str(), m.cores,
                m.load_average.c_str());
    std::printf("# transport: %s\n", transport_line.c_str());
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

  void section(const std::string& title) {
    std::printf("#\n# %s\n%s", title.c_str(),
                format_table_header(report_.bound_membw_GBps > 0, with_peer_).c_str());
    std::fflush(stdout);
    section_rows_ = 0;
    section_busbw_sum_ = 0;
  }

  // A row that goes to JSON/CSV but not to the table (a paired peer's measurement: the table
  // shows it in the mpi busbw column of the row it was paired with).
  void record(Row r) {
    add_bound(r);
    if (r.wrong > 0) any_wrong_ = true;
    report_.rows.push_back(std::move(r));
  }

  void row(Row r) {
    add_bound(r);
    if (r.peer_wrong > 0) any_wrong_ = true;
    std::fputs(format_row(r, report_.bound_membw_GBps > 0, with_peer_).c_str(), stdout);
    std::fflush(stdout);
    ++section_rows_;
    section_busbw_sum_ += r.busbw_GBps;
    if (r.wrong > 0) any_wrong_ = true;
    report_.rows.push_back(std::move(r));
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
    std::fflush(stdout);
  }

  bool any_wrong() const { return any_wrong_; }

 private:
  void add_bound(Row& r) const {
    if (report_.bound_membw_GBps > 0) {
      r.bound_busbw_GBps = memory_bound_busbw(report_.bound_membw_GBps * 1e9, r.nranks) / 1e9;
    }
  }

  Report& report_;
  bool with_peer_;
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
  return s;
}

std::string section_title(const std::string& transport, const std::string& algo, int nranks) {
  return "allreduce " + algo + ", transport " + transport + ", " + std::to_string(nranks) +
         " ranks";
}

// ---------------------------------------------------------------------------------------------
int run_threads(Report& report) {
  const Options& o = report.options;
  const int nranks = o.nranks;
  Printer printer(report, false);
  printer.header(std::to_string(nranks) + " threads in one process (HostThreads)");
  measure_membw(report, nranks);
  printer.membw(nranks);
  const auto sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor);
  const std::uint64_t max_elems = max_count(sizes, o.dtype);

  for (Algo algo : o.algos) {
    const std::string name(to_string(algo));
    std::unique_ptr<ThreadsAllreduce> ar;
    try {
      ar = make_threads_allreduce(algo, nranks, o);
    } catch (const std::exception& e) {
      die(0, e.what());
    }
    ThreadsShared shared(nranks);
    printer.section(section_title("threads", name, nranks));
    const SweepSpec spec = make_spec(o, sizes, "threads", name);
    auto body = [&](int rank) {
      try {
        RankBuffers buffers(max_elems, o.dtype, o.op, rank, nranks, o.check);
        auto coll = ar->bind(rank);
        ThreadsControl control(shared, rank);
        run_sweep(spec, *coll, control, buffers, [&](const Row& r) { printer.row(r); });
      } catch (const std::exception& e) {
        die(rank, e.what());
      }
    };
    std::vector<std::thread> threads;
    for (int r = 1; r < nranks; ++r) threads.emplace_back(body, r);
    body(0);
    for (auto& t : threads) t.join();
    printer.end_section();
  }
  printer.finish();
  return printer.any_wrong() ? 1 : 0;
}

// One rank of the shm transport: every algorithm, then (with a peer) MPI first.
void shm_rank_body(Report& report, Control& control, const std::string& session_prefix,
                   Printer* printer, bool run_peer) {
  const Options& o = report.options;
  const int rank = control.rank();
  const int nranks = control.nranks();
  const auto sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor);
  RankBuffers buffers(max_count(sizes, o.dtype), o.dtype, o.op, rank, nranks, o.check);
  auto emit = [&](const Row& r) {
    if (printer) printer->row(r);
  };
  std::unique_ptr<RankCollective> mpi;
  PairedPeer paired;
#if CCOLL_HAVE_MPI
  if (run_peer) {
    mpi = make_mpi_allreduce();
    paired.coll = mpi.get();
    paired.transport = "mpi";
    paired.algo = "MPI_Allreduce";
    paired.on_row = [&](const Row& r) {
      if (printer) printer->record(r);
    };
  }
  if (run_peer && o.algos.empty()) {  // -a none: MPI alone, as its own table
    if (printer) printer->section(section_title("mpi", "MPI_Allreduce (Open MPI)", nranks));
    run_sweep(make_spec(o, sizes, "mpi", "MPI_Allreduce"), *mpi, control, buffers, emit);
    if (printer) printer->end_section();
  }
#else
  (void)run_peer;
#endif
  for (Algo algo : o.algos) {
    const std::string name(to_string(algo));
    if (printer) {
      std::string title = section_title("shm", name, nranks);
      if (mpi) {
        title += "; MPI_Allreduce timed in alternating blocks with it (best of " +
                 std::to_string(o.rounds) + " each)";
      }
      printer->section(title);
    }
    control.barrier();
    std::string session = session_prefix;
    session.append(".").append(name);
    auto coll = make_shm_allreduce(algo, rank, nranks, session, o);
    run_sweep(make_spec(o, sizes, "shm", name), *coll, control, buffers, emit,
              mpi ? &paired : nullptr);
    control.barrier();  // nobody destroys its end of the session while a peer still uses it
    coll.reset();
    if (printer) printer->end_section();
  }
}

int run_shm_forked(Report& report) {
  const Options& o = report.options;
  const int nranks = o.nranks;
  Printer printer(report, false);
  printer.header(std::to_string(nranks) + " processes forked by ccoll_perf (SharedMemory)");
  measure_membw(report, nranks);  // before fork: no threads may exist at fork time
  printer.membw(nranks);
  if (!have_ccoll_runtime()) die(0, "this ccoll_perf was built without ccoll's runtime");

  ForkControl control(nranks, std::chrono::minutes(5));
  const std::string session = "ccoll_perf." + std::to_string(getpid());
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
    shm_rank_body(report, control, session, rank == 0 ? &printer : nullptr, false);
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
  o.nranks = nranks;
  if (o.transport != Transport::shm) {
    die(rank, "under mpirun ccoll_perf needs --transport shm (each MPI process is one rank)");
  }
  if (o.peer_mpi && !mpi_supports(o.dtype)) {
    die(rank, "--peer mpi: MPI has no " + std::string(ccoll::to_string(o.dtype)) + " type");
  }
  std::unique_ptr<Printer> printer;
  if (rank == 0) {
    printer = std::make_unique<Printer>(report, o.peer_mpi);
    printer->header(std::to_string(nranks) + " processes started by mpirun (SharedMemory" +
                    std::string(o.peer_mpi ? "; peer: Open MPI MPI_Allreduce" : "") + ")");
    measure_membw(report, nranks);  // the other ranks sleep in the polled barrier meanwhile
    printer->membw(nranks);
  }
  control.barrier();
  // One session name for all ranks: rank 0's pid.
  char session[64] = {};
  if (rank == 0)
    std::snprintf(session, sizeof session, "ccoll_perf.%d", static_cast<int>(getpid()));
  MPI_Bcast(session, sizeof session, MPI_CHAR, 0, MPI_COMM_WORLD);
  try {
    if (!have_ccoll_runtime() && !o.algos.empty()) {
      throw std::runtime_error("this ccoll_perf was built without ccoll's runtime");
    }
    shm_rank_body(report, control, session, printer.get(), o.peer_mpi);
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
  report.command = command_line(argv_all);
  report.machine = read_machine_info();

  if (launched_by_mpirun()) {
#if CCOLL_HAVE_MPI
    return run_under_mpirun(report);
#else
    std::fprintf(stderr,
                 "ccoll_perf: started by mpirun, but built without MPI; run it without mpirun "
                 "(--transport shm -t P forks the ranks itself)\n");
    return 2;
#endif
  }
  if (o.peer_mpi) {
    std::fprintf(stderr,
                 "ccoll_perf: --peer mpi needs the ranks to be MPI processes: run\n"
                 "  mpirun --allow-run-as-root --oversubscribe -np 4 %s --transport shm --peer mpi "
                 "-b 16M -e 64M -f 4\n",
                 argv[0]);
    return 2;
  }
  if (o.transport == Transport::threads) return run_threads(report);
  return run_shm_forked(report);
}

}  // namespace
}  // namespace ccoll_perf

int main(int argc, char** argv) {
  return ccoll_perf::main_impl(argc, argv);
}
