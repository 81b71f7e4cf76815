// ccoll_train_emu: a data-parallel training loop emulated on this machine, every gradient-level
// policy's measured iteration time beside the timeline model's prediction of the same schedule
// (docs/gradients.md, "The training-loop emulator"). emu_run.hpp says what a rank does,
// emu_model.hpp how the model is fitted and the prediction made.
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../ccoll/schedule_args.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/transport/host_threads.hpp"
#include "ccoll/transport/shared_memory.hpp"
#include "emu_model.hpp"
#include "emu_run.hpp"
#include "emu_trace.hpp"
#ifdef CCOLL_TRAIN_EMU_MPI
#include "ccoll/transport/mpi.hpp"
#include "ccoll/transport/mpi_hybrid.hpp"
#include "emu_mpi.hpp"
#endif

namespace emu = ccoll::train_emu;

namespace g = ccoll::gradient;

namespace {

const char* kHelp =
    "usage: ccoll_train_emu [options]\n"
    "Emulates data-parallel training on this machine: P ranks run a model profile's backward\n"
    "pass (busy compute of each layer's scaled duration), mark each gradient ready in a\n"
    "GradientSync and wait; prints each policy's measured iteration time beside the timeline\n"
    "model's prediction, with a, b, gamma and the compute times measured in the same run.\n"
    "  --model NAME|FILE      shipped profile (data/profiles) or a profile file [resnet152]\n"
    "  --ranks P              ranks [2]\n"
    "  --transport shm|threads|mpi|mpi-hybrid  forked processes over shared memory, threads, or\n"
    "                         the processes mpirun started (built with MPI; --ranks ignored) "
    "[shm]\n"
    "  --compute-scale X      x every compute time [0.1]\n"
    "  --bytes-scale X        x every gradient's bytes [0.0625]\n"
    "  --compute spin|sleep   a layer's compute busy-spins or sleeps [spin]\n"
    "  --policy LIST|all      wfbp,single,bucket,horovod,mg,asc,optimal,coordinated [all]\n"
    "  --concurrency K        messages in flight for asc and optimal [2]\n"
    "  --iters N --warmup N   timed and warm-up iterations per policy [20, 3]\n"
    "  --compute-iters N      iterations of the compute-only pass [10]\n"
    "  --fit-reps N           calls per size and kind for the fit [15]\n"
    "  --sweep-factor F       ratio of successive fit sizes [4]\n"
    "  --optimal-time S       budget of the optimal search [2]\n"
    "  --trace FILE           Chrome trace of one iteration (--trace-policy NAME [asc])\n"
    "  --json FILE            machine-readable results\n"
    "  --pin on|off           rank r on core r mod cores [on while ranks <= cores]\n";

struct Args {
  std::string model = "resnet152";
  int ranks = 2;
  std::string transport = "shm";
  emu::Scale scale;
  emu::RunOptions run;
  std::string trace, trace_policy = "asc", json;
  double optimal_time = 2;
  int concurrency = 2;
};

Args parse(int argc, char** argv) {
  Args a;
  std::string policies = "all", mode = "spin";
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      std::cout << kHelp;
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(k + ": missing value (see --help)");
    const std::string v = argv[++i];
    if (k == "--model")
      a.model = v;
    else if (k == "--ranks")
      a.ranks = std::stoi(v);
    else if (k == "--transport")
      a.transport = v;
    else if (k == "--compute-scale")
      a.scale.compute = std::stod(v);
    else if (k == "--bytes-scale")
      a.scale.bytes = std::stod(v);
    else if (k == "--compute")
      mode = v;
    else if (k == "--policy")
      policies = v;
    else if (k == "--concurrency")
      a.concurrency = std::stoi(v);
    else if (k == "--iters")
      a.run.iterations = std::stoi(v);
    else if (k == "--warmup")
      a.run.warmup = std::stoi(v);
    else if (k == "--compute-iters")
      a.run.compute_iterations = std::stoi(v);
    else if (k == "--fit-reps")
      a.run.fit_reps = std::stoi(v);
    else if (k == "--sweep-factor")
      a.run.sweep_factor = std::stod(v);
    else if (k == "--optimal-time")
      a.optimal_time = std::stod(v);
    else if (k == "--trace")
      a.trace = v;
    else if (k == "--trace-policy")
      a.trace_policy = v;
    else if (k == "--json")
      a.json = v;
    else
      throw std::invalid_argument("unknown option " + k + " (see --help)");
  }
  const bool mpi = a.transport == "mpi" || a.transport == "mpi-hybrid";
  if (a.transport != "shm" && a.transport != "threads" && !mpi)
    throw std::invalid_argument("--transport: shm, threads, mpi or mpi-hybrid");
#ifndef CCOLL_TRAIN_EMU_MPI
  if (mpi) throw std::invalid_argument("--transport " + a.transport + ": built without MPI");
#endif
  if (mpi) a.ranks = 2;  // the processes mpirun started: checked once MPI is initialised
  if (mode != "spin" && mode != "sleep") throw std::invalid_argument("--compute: spin or sleep");
  if (a.ranks < 2 || a.ranks > emu::Control::kMaxRanks)
    throw std::invalid_argument("--ranks: 2..64");
  if (a.run.iterations < 1 || a.run.warmup < 0 || a.run.compute_iterations < 1 ||
      a.run.fit_reps < 1)
    throw std::invalid_argument("iteration counts must be positive");
  if (a.ranks > static_cast<int>(std::thread::hardware_concurrency())) a.run.pin = false;
  a.run.mode = mode == "spin" ? emu::ComputeMode::spin : emu::ComputeMode::sleep;
  if (policies == "all") {
    a.run.policies = emu::all_policies();
  } else {
    std::stringstream ss(policies);
    for (std::string p; std::getline(ss, p, ',');) a.run.policies.push_back(p);
  }
  a.run.policy = emu::scaled_policy_options(a.scale, a.concurrency);
  a.run.policy.optimal_time_limit_s = a.optimal_time;
  if (!a.trace.empty()) {
    bool listed = false;
    for (const auto& p : a.run.policies) listed = listed || p == a.trace_policy;
    a.run.trace_policy = listed ? a.trace_policy : a.run.policies.front();
    // The trace maps each call to a message of the policy's schedule; the coordinated policy's
    // calls are decided at run time.
    if (a.run.trace_policy == "coordinated")
      throw std::invalid_argument("--trace-policy: a scheduled policy (coordinated is not traced)");
  }
  return a;
}

double ms(double s) {
  return s * 1e3;
}

void report(const Args& a, const g::ModelProfile& scaled, const emu::RunResult& r) {
  std::printf(
      "model %s: %d tensors, %.3f MB of gradients (x%g), forward %.2f ms + backward "
      "%.2f ms (x%g of the profile)\n",
      scaled.name.c_str(), scaled.num_layers(), scaled.total_bytes() / 1e6, a.scale.bytes,
      ms(scaled.forward_s), ms(scaled.backward_s()), a.scale.compute);
  const char* where = a.transport == "shm"       ? "forked processes (SharedMemory)"
                      : a.transport == "threads" ? "threads (HostThreads)"
                      : a.transport == "mpi"     ? "MPI processes (transport::Mpi)"
                                                 : "MPI processes (transport::MpiHybrid)";
  std::printf("ranks %d on %s, compute %s, %u cores\n", a.ranks, where,
              a.run.mode == emu::ComputeMode::spin ? "busy-spin" : "sleep",
              std::thread::hardware_concurrency());
  std::printf(
      "compute only: measured forward %.3f ms + backward %.3f ms = %.3f ms; iteration "
      "median %.3f ms (p10 %.3f, p90 %.3f)\n",
      ms(r.measured.forward_s), ms(r.measured.backward_s()),
      ms(r.measured.forward_s + r.measured.backward_s()), ms(r.compute_iteration.median),
      ms(r.compute_iteration.p10), ms(r.compute_iteration.p90));
  const auto& f = r.fit;
  std::printf(
      "fit (%zu sizes alone, %zu at K=%d at once): a = %.2f us (model: %.2f us), b = %.4g s/B "
      "(%.3f GB/s), r2 %.4f, max rel err %.1f %%, gamma = %.3f\n",
      f.single, f.concurrent, std::max(2, a.concurrency), f.line.line.alpha_s * 1e6, f.a_s() * 1e6,
      f.line.line.beta_s_per_byte, 1e-9 / f.line.line.beta_s_per_byte, f.line.r2,
      100 * f.line.max_rel_error, f.gamma);
  std::printf("  %12s %12s %12s\n", "bytes", "alone us", "at once us");
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    if (r.samples[i].concurrent != 1) continue;
    double together = 0;
    int n = 0;
    for (std::size_t j = i + 1; j < r.samples.size() && r.samples[j].concurrent != 1; ++j, ++n)
      together += r.samples[j].time_s;
    std::printf("  %12.0f %12.1f %12.1f\n", r.samples[i].bytes, r.samples[i].time_s * 1e6,
                n ? together / n * 1e6 : 0.0);
  }
  std::printf("\n%-11s %5s %2s %4s %9s %10s %19s %9s %9s %7s %7s %9s %7s %s\n", "policy", "msgs",
              "K", "chan", "compute", "measured", "p10..p90 ms", "pred ms", "free ms", "err %",
              "err_f %", "pred_co", "err_co", "check");
  for (const auto& p : r.policies) {
    std::printf(
        "%-11s %5zu %2d %4d %9.3f %10.3f %9.3f..%-9.3f %9.3f %9.3f %+7.1f %+7.1f %9.3f %+7.1f %s\n",
        p.name.c_str(), p.schedule.messages.size(), p.schedule.max_concurrent, p.plan.nchannels,
        ms(p.compute.forward_s + p.compute.backward_s()), ms(p.measured.median), ms(p.measured.p10),
        ms(p.measured.p90), ms(p.predicted.pinned_s), ms(p.predicted.free_lanes_s),
        emu::error_pct(p.measured.median, p.predicted.pinned_s),
        emu::error_pct(p.measured.median, p.predicted.free_lanes_s),
        ms(p.predicted_compute_only.pinned_s),
        emu::error_pct(p.measured.median, p.predicted_compute_only.pinned_s),
        p.verified ? "bitwise ok" : "WRONG");
  }
  for (const auto& p : r.policies) {
    if (p.iterations_run == 0) continue;
    const auto& c = p.coordination;
    const double n = static_cast<double>(p.iterations_run);
    std::printf(
        "%s: per iteration %.1f cycles, %.1f fused allreduces, %.1f control bytes per cycle; "
        "%llu tensors decided from the response cache, %llu on the coordinator path (%llu "
        "cycles) over %llu iterations; msgs and pred: Horovod's cycle fusion at the same "
        "threshold\n",
        p.name.c_str(), static_cast<double>(c.cycles) / n,
        static_cast<double>(c.fused_allreduces) / n,
        c.cycles ? static_cast<double>(c.control_bytes) / static_cast<double>(c.cycles) : 0.0,
        static_cast<unsigned long long>(c.cached_responses),
        static_cast<unsigned long long>(c.new_responses),
        static_cast<unsigned long long>(c.coordinator_cycles),
        static_cast<unsigned long long>(p.iterations_run));
  }
  std::printf("heap allocations per timed iteration (process, most of any rank):");
  for (const auto& p : r.policies)
    std::printf(" %s %.1f", p.name.c_str(), p.allocations_per_iteration);
  std::printf("\n");
  std::printf(
      "compute: forward + backward of the policy's own iterations (each layer with its "
      "ready()); pred/free: the model with pinned channels / free lanes; pred_co: pinned, "
      "with the compute-only pass's times\n");
  std::vector<std::string> names;
  for (const auto& p : r.policies) names.push_back(p.name);
  const auto find = [&](const std::string& n) -> const emu::RunResult::Policy& {
    for (const auto& p : r.policies)
      if (p.name == n) return p;
    return r.policies.front();
  };
  const auto by_measured =
      emu::ranking(names, [&](const std::string& n) { return find(n).measured.median; });
  const auto by_model =
      emu::ranking(names, [&](const std::string& n) { return find(n).predicted.pinned_s; });
  std::printf("\nranked by measurement: ");
  for (const auto& n : by_measured) std::printf("%s ", n.c_str());
  std::printf("\nranked by the model:   ");
  for (const auto& n : by_model) std::printf("%s ", n.c_str());
  std::printf("\n");
}

nlohmann::json to_json(const Args& a, const g::ModelProfile& scaled, const emu::RunResult& r) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& s : r.samples)
    samples.push_back({{"bytes", s.bytes}, {"time_s", s.time_s}, {"concurrent", s.concurrent}});
  nlohmann::json policies = nlohmann::json::array();
  for (const auto& p : r.policies)
    policies.push_back(
        {{"policy", p.name},
         {"layer_types",
          g::typing_string(g::typing_from_schedule(p.schedule, scaled.num_layers()))},
         {"messages", p.schedule.messages.size()},
         {"max_concurrent", p.schedule.max_concurrent},
         {"channels", p.plan.nchannels},
         {"max_in_flight", p.max_in_flight},
         {"measured", emu::to_json(p.measured)},
         {"iterations_s", p.iterations},
         {"compute_s", p.compute.forward_s + p.compute.backward_s()},
         {"predicted_s", p.predicted.pinned_s},
         {"predicted_from_compute_only_s", p.predicted_compute_only.pinned_s},
         {"predicted_free_lanes_s", p.predicted.free_lanes_s},
         {"error_pct", emu::error_pct(p.measured.median, p.predicted.pinned_s)},
         {"error_free_lanes_pct", emu::error_pct(p.measured.median, p.predicted.free_lanes_s)},
         {"verified", p.verified},
         {"allocations_per_iteration", p.allocations_per_iteration},
         {"coordination",
          {{"iterations", p.iterations_run},
           {"cycles", p.coordination.cycles},
           {"coordinator_cycles", p.coordination.coordinator_cycles},
           {"cached_responses", p.coordination.cached_responses},
           {"new_responses", p.coordination.new_responses},
           {"fused_allreduces", p.coordination.fused_allreduces},
           {"control_bytes", p.coordination.control_bytes}}}});
  std::vector<double> backward;
  for (const auto& l : r.measured.layers) backward.push_back(l.backward_s);
  return {{"model", scaled.name},
          {"ranks", a.ranks},
          {"transport", a.transport},
          {"compute", a.run.mode == emu::ComputeMode::spin ? "spin" : "sleep"},
          {"cores", std::thread::hardware_concurrency()},
          {"scale", {{"compute", a.scale.compute}, {"bytes", a.scale.bytes}}},
          {"iterations", a.run.iterations},
          {"warmup", a.run.warmup},
          {"profile",
           {{"forward_s", scaled.forward_s},
            {"backward_s", scaled.backward_s()},
            {"bytes", scaled.total_bytes()}}},
          {"measured_compute",
           {{"forward_s", r.measured.forward_s},
            {"backward_s", r.measured.backward_s()},
            {"layer_backward_s", backward},
            {"iteration", emu::to_json(r.compute_iteration)}}},
          {"fit",
           {{"a_s", r.fit.line.line.alpha_s},
            {"model_a_s", r.fit.a_s()},
            {"b_s_per_byte", r.fit.line.line.beta_s_per_byte},
            {"r2", r.fit.line.r2},
            {"max_rel_error", r.fit.line.max_rel_error},
            {"gamma", r.fit.gamma},
            {"samples", samples}}},
          {"policies", policies}};
}

template <class AR, class World>
int run_threads(const Args& a, const g::ModelProfile& scaled, emu::RunResult& out) {
  emu::Control ctl(a.ranks);
  World world;
  world.nranks = a.ranks;
  std::vector<std::thread> ranks;
  ranks.reserve(static_cast<std::size_t>(a.ranks));
  std::vector<std::string> errors(static_cast<std::size_t>(a.ranks));
  for (int r = 0; r < a.ranks; ++r)
    ranks.emplace_back([&, r] {
      try {
        auto res = emu::run_rank<AR>(r, ctl, world, scaled, a.run);
        if (r == 0) out = std::move(res);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        ctl.abort();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < a.ranks; ++r)
    if (!errors[static_cast<std::size_t>(r)].empty()) {
      std::fprintf(stderr, "ccoll_train_emu: rank %d: %s\n", r,
                   errors[static_cast<std::size_t>(r)].c_str());
      return 1;
    }
  return 0;
}

int run_processes(const Args& a, const g::ModelProfile& scaled, emu::RunResult& out) {
  using AR = ccoll::Allreduce<ccoll::transport::SharedMemory, ccoll::algo::Ring>;
  emu::Control ctl(a.ranks);  // before fork(): one mapping shared by every rank
  emu::ProcessWorld world{ccoll::transport::new_session("train_emu"), a.ranks};
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> children;
  int rank = 0;
  for (int r = 1; r < a.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      rank = r;
      break;
    }
    children.push_back(pid);
  }
  try {
    auto res = emu::run_rank<AR>(rank, ctl, world, scaled, a.run);
    if (rank != 0) std::_Exit(0);
    out = std::move(res);
  } catch (const std::exception& e) {
    ctl.abort();
    std::fprintf(stderr, "ccoll_train_emu: rank %d: %s\n", rank, e.what());
    if (rank != 0) std::_Exit(1);
    for (pid_t c : children) ::waitpid(c, nullptr, 0);
    return 1;
  }
  bool ok = true;
  for (pid_t c : children) {
    int status = 0;
    ::waitpid(c, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) std::fprintf(stderr, "ccoll_train_emu: a child rank failed\n");
  return ok ? 0 : 1;
}

#ifdef CCOLL_TRAIN_EMU_MPI
// The processes mpirun started; rank 0 returns the result, the others exit once done. MPI is
// initialised by the caller.
template <class AR>
int run_mpi(Args& a, const g::ModelProfile& scaled, emu::RunResult& out) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &a.ranks);
  if (a.ranks > static_cast<int>(std::thread::hardware_concurrency())) a.run.pin = false;
  try {
    emu::MpiControl ctl(MPI_COMM_WORLD);
    emu::MpiWorld world;
    auto res = emu::run_rank<AR>(rank, ctl, world, scaled, a.run);
    if (rank == 0) out = std::move(res);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccoll_train_emu: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  if (rank != 0) std::exit(0);
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    const g::ModelProfile scaled =
        emu::scale_profile(ccoll::cli::resolve_profile(a.model), a.scale);
    emu::RunResult r;
    int rc = 0;
    if (a.transport == "threads") {
      using AR = ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring>;
      rc = run_threads<AR, emu::ThreadsWorld>(a, scaled, r);
#ifdef CCOLL_TRAIN_EMU_MPI
    } else if (a.transport == "mpi" || a.transport == "mpi-hybrid") {
      emu::init_mpi_thread_multiple();
      if (a.transport == "mpi")
        rc = run_mpi<ccoll::Allreduce<ccoll::transport::Mpi, ccoll::algo::Ring>>(a, scaled, r);
      else
        rc =
            run_mpi<ccoll::Allreduce<ccoll::transport::MpiHybrid, ccoll::algo::Ring>>(a, scaled, r);
#endif
    } else {
      rc = run_processes(a, scaled, r);
    }
    if (rc != 0) return rc;
    report(a, scaled, r);
    if (!a.json.empty()) {
      std::ofstream out(a.json);
      out << to_json(a, scaled, r).dump(1) << "\n";
    }
    if (!a.trace.empty()) {
      std::ofstream out(a.trace);
      out << emu::chrome_trace(r.trace, {{"model", scaled.name},
                                         {"policy", a.run.trace_policy},
                                         {"ranks", a.ranks},
                                         {"transport", a.transport}})
                 .dump()
          << "\n";
    }
    bool ok = true;
    for (const auto& p : r.policies) ok = ok && p.verified;
    return ok ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccoll_train_emu: %s\n", e.what());
    return 1;
  }
}
