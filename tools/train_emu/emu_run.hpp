// tools/train_emu/emu_run.hpp: what one rank of ccoll_train_emu does, on any transport.
//
// A rank is a process (SharedMemory, forked by the tool) or a thread (HostThreads). Each rank
//  1. runs the backward pass without communication, to measure what its compute really takes
//     here (a busy-spin, or a sleep, of the profiled duration overshoots by scheduling noise);
//  2. times allreduces of the sweep's sizes, one at a time and K at a time on K communicators,
//     for the fit of a, b and gamma (emu_model.hpp);
//  3. builds one GradientSync per policy, then runs iterations round-robin over the policies and
//     a compute-only pass: forward, the layers' backward steps from L to 1, each followed by
//     ready(layer), and wait(); an iteration is timed from a barrier that aligns the ranks (the
//     model's iterations start together) to wait()'s return, and each layer's compute is timed
//     too, since that is what the prediction of the policy is given (RunResult::Policy).
// Ranks exchange results through Control, a barrier and a mailbox in one anonymous shared mapping
// (made before fork(), so that processes and threads use the same code). Rank 0 plans the
// schedules and hands them to the others as text: the optimum is searched under a time budget,
// so ranks planning independently might disagree, and a GradientSync needs the same schedule on
// every rank.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/gradient/coordinated_sync.hpp"
#include "ccoll/gradient/sync.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/sync/backoff.hpp"
#include "emu_model.hpp"
#include "emu_trace.hpp"
#include "heap_counter.hpp"

namespace ccoll::train_emu {

inline double now_s() {
  return static_cast<double>(sync::now_ns()) * 1e-9;
}

// --- ranks' meeting point -------------------------------------------------------------------

class Control {
 public:
  static constexpr int kMaxRanks = 64;
  static constexpr std::size_t kSlotDoubles = std::size_t{1} << 16;  // per rank
  static constexpr std::size_t kTextBytes = std::size_t{1} << 20;

  explicit Control(int nranks, std::chrono::seconds timeout = std::chrono::seconds(300))
      : nranks_(nranks), timeout_(timeout) {
    if (nranks < 1 || nranks > kMaxRanks) throw std::invalid_argument("ranks: 1..64");
    bytes_ = sizeof(Header) + sizeof(double) * kSlotDoubles * static_cast<std::size_t>(nranks) +
             kTextBytes;
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the control area failed");
    base_ = static_cast<std::byte*>(p);
    head_ = new (base_) Header();
  }
  ~Control() { ::munmap(base_, bytes_); }
  Control(const Control&) = delete;
  Control& operator=(const Control&) = delete;

  int nranks() const { return nranks_; }

  // Spins briefly, then yields, then sleeps: ranks may outnumber cores.
  void barrier() {
    const std::uint32_t gen = head_->generation.load(std::memory_order_acquire);
    if (head_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
        static_cast<std::uint32_t>(nranks_)) {
      head_->arrived.store(0, std::memory_order_relaxed);
      head_->generation.fetch_add(1, std::memory_order_release);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t polls = 0;; ++polls) {
      if (head_->generation.load(std::memory_order_acquire) != gen) return;
      if (head_->aborted.load(std::memory_order_relaxed))
        throw std::runtime_error("another rank failed");
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited < std::chrono::microseconds(20)) {
        sync::cpu_relax();
      } else if (waited < std::chrono::milliseconds(20)) {
        std::this_thread::yield();
      } else {
        if (waited > timeout_) throw std::runtime_error("barrier: a rank never arrived");
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  void abort() { head_->aborted.store(1, std::memory_order_relaxed); }

  // Every rank's vector, indexed by rank.
  std::vector<std::vector<double>> allgather(int rank, std::span<const double> mine) {
    if (mine.size() > kSlotDoubles) throw std::length_error("allgather: too many values");
    // An empty span's data() may be null, which memcpy must not get even for zero bytes.
    if (!mine.empty()) std::memcpy(slot(rank), mine.data(), mine.size() * sizeof(double));
    head_->lengths[rank].store(mine.size(), std::memory_order_relaxed);
    barrier();
    std::vector<std::vector<double>> all(static_cast<std::size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) {
      const std::size_t n = head_->lengths[r].load(std::memory_order_relaxed);
      all[static_cast<std::size_t>(r)].assign(slot(r), slot(r) + n);
    }
    barrier();
    return all;
  }

  // Rank 0's text, on every rank.
  std::string broadcast(int rank, const std::string& text) {
    if (rank == 0) {
      if (text.size() > kTextBytes) throw std::length_error("broadcast: text too long");
      if (!text.empty()) std::memcpy(text_area(), text.data(), text.size());
      head_->text_length.store(text.size(), std::memory_order_relaxed);
    }
    barrier();
    std::string out(text_area(), head_->text_length.load(std::memory_order_relaxed));
    barrier();
    return out;
  }

 private:
  struct Header {
    std::atomic<std::uint32_t> arrived{0};
    std::atomic<std::uint32_t> generation{0};
    std::atomic<std::uint32_t> aborted{0};
    std::atomic<std::uint64_t> text_length{0};
    std::atomic<std::uint64_t> lengths[kMaxRanks] = {};
  };
  double* slot(int r) {
    return reinterpret_cast<double*>(base_ + sizeof(Header)) +
           static_cast<std::size_t>(r) * kSlotDoubles;
  }
  char* text_area() {
    return reinterpret_cast<char*>(
        base_ + sizeof(Header) + sizeof(double) * kSlotDoubles * static_cast<std::size_t>(nranks_));
  }

  int nranks_;
  std::chrono::seconds timeout_;
  std::size_t bytes_ = 0;
  std::byte* base_ = nullptr;
  Header* head_ = nullptr;
};

// --- an allreduce whose calls can be timed ----------------------------------------------------

// The spans of one rank's calls on one communicator, recorded only while `on` (the traced
// iteration). Written by the rank's worker of that channel, read by the rank's thread after
// wait(), which orders the two through the engine's mutex.
struct CallLog {
  bool on = false;
  std::vector<std::pair<double, double>> spans;
};

template <class AR>
class Timed {
 public:
  using transport_type = typename AR::transport_type;
  using topology_type = typename AR::topology_type;

  struct Handle {
    decltype(std::declval<AR&>().rank(0)) inner;
    CallLog* log;
    void run(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
      if (!log->on) {
        inner.run(send, recv, count, dtype, op);
        return;
      }
      const double t0 = now_s();
      inner.run(send, recv, count, dtype, op);
      log->spans.emplace_back(t0, now_s());
    }
  };

  Timed(const Config& config, topology_type topology)
      : ar_(config, std::move(topology)), logs_(static_cast<std::size_t>(ar_.nranks())) {}

  Handle rank(int r) { return {ar_.rank(r), &logs_[static_cast<std::size_t>(r)]}; }
  std::span<const int> local_ranks() const { return ar_.local_ranks(); }
  int nranks() const { return ar_.nranks(); }
  const Config& config() const { return ar_.config(); }
  CallLog& log(int r) { return logs_[static_cast<std::size_t>(r)]; }
  // Passed through so that GradientSync<C, Coordinated> builds its plans before the iterations.
  plan::Plan plan(std::size_t count, DataType dtype) { return ar_.plan(count, dtype); }

 private:
  AR ar_;
  std::vector<CallLog> logs_;
};

// --- where ranks live -------------------------------------------------------------------------

// Processes: every rank builds its own communicators (a collective construction per session).
struct ProcessWorld {
  std::string session;  // unique per run; each object gets its own suffix
  int nranks = 0;
  Config config(int rank, const std::string& name) const {
    Config c;
    c.nranks = nranks;
    c.rank = rank;
    c.session = session + "." + name;
    return c;
  }
  template <class T, class Ctl, class... A>
  std::shared_ptr<T> make(int, Ctl&, A&&... args) {
    return std::make_shared<T>(std::forward<A>(args)...);
  }
};

// Threads of one process: rank 0 builds each object and every rank uses it.
struct ThreadsWorld {
  int nranks = 0;
  std::shared_ptr<void> shared;
  Config config(int, const std::string&) const {
    Config c;
    c.nranks = nranks;
    return c;
  }
  template <class T, class Ctl, class... A>
  std::shared_ptr<T> make(int rank, Ctl& ctl, A&&... args) {
    if (rank == 0) shared = std::make_shared<T>(std::forward<A>(args)...);
    ctl.barrier();
    auto p = std::static_pointer_cast<T>(shared);
    ctl.barrier();
    if (rank == 0) shared.reset();
    return p;
  }
};

// --- compute ------------------------------------------------------------------------------------

enum class ComputeMode { spin, sleep };

// Holds the calling thread for `seconds` of wall time from now. spin keeps a core busy, as a CPU
// backward pass would; sleep leaves it to the communication threads, as a GPU's would.
inline void compute(double seconds, ComputeMode mode) {
  const std::uint64_t deadline = sync::now_ns() + static_cast<std::uint64_t>(seconds * 1e9);
  if (mode == ComputeMode::sleep) {
    timespec ts{static_cast<time_t>(deadline / 1000000000ull),
                static_cast<long>(deadline % 1000000000ull)};
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
    }
    return;
  }
  while (sync::now_ns() < deadline) sync::cpu_relax();
}

// --- the run ------------------------------------------------------------------------------------

struct RunOptions {
  int warmup = 3;
  int iterations = 20;
  int compute_iterations = 10;
  int fit_reps = 15;
  double sweep_factor = 4;
  ComputeMode mode = ComputeMode::spin;
  // Rank r and every thread it starts run on core r: left to itself, the scheduler of a loaded
  // host sometimes puts two ranks on one core, and then every handshake of an allreduce waits for
  // a context switch (a 100-fold change of a small allreduce's time from one run to the next).
  bool pin = true;
  std::vector<std::string> policies;
  PolicyOptions policy;
  std::string trace_policy;  // "" = no trace
};

// Rank 0's view of the whole run (the other ranks return an empty object).
struct RunResult {
  g::ModelProfile planning;  // compute times measured before the run: what was planned on
  g::ModelProfile measured;  // compute times measured during the run: what is predicted with
  Spread compute_iteration;  // the compute-only iteration
  std::vector<model::Sample> samples;
  CommFit fit;
  struct Policy {
    std::string name;
    g::Schedule schedule;
    g::engine::ChannelPlan plan;
    Spread measured;
    // The prediction is made with the compute times of this policy's own iterations (compute
    // and ready() per layer, as they ran beside the communication): on a host whose cores
    // communication shares, compute next to communication is not compute alone, and the
    // comparison is meant to test the communication model. The prediction from the compute-only
    // pass is kept beside it.
    g::ModelProfile compute;
    Prediction predicted;
    Prediction predicted_compute_only;
    bool verified = false;
    int max_in_flight = 0;
    // Heap allocations from the barrier to wait()'s return, per timed iteration (the process's
    // every thread: with threads, every rank's; the most of any rank otherwise).
    double allocations_per_iteration = 0;
    std::vector<double> iterations;  // per timed iteration: the slowest rank's time
    // The coordinated policy: what its cycles did over every iteration it ran (warm-up, timed
    // and the check), the same on every rank.
    g::engine::CoordinationStats coordination;
    std::uint64_t iterations_run = 0;
  };
  std::vector<Policy> policies;
  std::vector<Span> trace;  // the traced iteration of trace_policy
};

namespace detail {

inline std::vector<double> column_means(const std::vector<std::vector<double>>& rows) {
  std::vector<double> out(rows.empty() ? 0 : rows[0].size(), 0.0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < out.size() && i < r.size(); ++i) out[i] += r[i] / rows.size();
  return out;
}

inline std::vector<double> column_max(const std::vector<std::vector<double>>& rows) {
  std::vector<double> out(rows.empty() ? 0 : rows[0].size(), 0.0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < out.size() && i < r.size(); ++i) out[i] = std::max(out[i], r[i]);
  return out;
}

inline std::string message_name(const g::Message& m) {
  const std::string hi = std::to_string(m.hi + 1), lo = std::to_string(m.lo + 1);
  return m.lo == m.hi ? g::detail::cat({"AR ", hi}) : g::detail::cat({"AR ", hi, "-", lo});
}

}  // namespace detail

// Per-layer backward durations (and forward, and the whole) of compute-only iterations.
struct ComputeLog {
  explicit ComputeLog(int layers) : layer_s(static_cast<std::size_t>(layers)) {}
  std::vector<std::vector<double>> layer_s;
  std::vector<double> forward_s, total_s;
};

// One iteration of compute alone: forward, then the backward steps from layer L to 1.
inline void compute_iteration(const g::ModelProfile& p, ComputeMode mode, ComputeLog* log) {
  const double t0 = now_s();
  compute(p.forward_s, mode);
  double t = now_s();
  if (log) log->forward_s.push_back(t - t0);
  for (int l = p.num_layers() - 1; l >= 0; --l) {
    compute(p.layers[static_cast<std::size_t>(l)].backward_s, mode);
    const double e = now_s();
    if (log) log->layer_s[static_cast<std::size_t>(l)].push_back(e - t);
    t = e;
  }
  if (log) log->total_s.push_back(t - t0);
}

// The profile the model is given: per layer the mean measured duration over iterations and
// ranks, scaled so that the whole equals the median over iterations of the slowest rank's
// compute-only iteration. Means keep the shape (a rare preemption lands in some layer, and its
// share belongs to that layer), the scaling makes the compute-bound prediction the median that
// the measured iterations are compared with. Also returns those per-iteration totals.
template <class Ctl>
std::pair<g::ModelProfile, std::vector<double>> measured_profile(const g::ModelProfile& p,
                                                                 const ComputeLog& log, int rank,
                                                                 Ctl& ctl) {
  const auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  std::vector<double> mine{mean(log.forward_s)};
  for (const auto& v : log.layer_s) mine.push_back(mean(v));
  const auto means = detail::column_means(ctl.allgather(rank, mine));
  const auto totals = detail::column_max(ctl.allgather(rank, log.total_s));
  double sum = 0;
  for (double x : means) sum += x;
  const double k = sum > 0 ? spread(totals).median / sum : 1.0;
  std::vector<double> backward;
  for (std::size_t i = 1; i < means.size(); ++i) backward.push_back(means[i] * k);
  return {with_compute(p, means[0] * k, backward), totals};
}

// The traced iteration's spans, from every rank's [compute span count, spans...] then per
// channel [call count, spans...]; a channel's i-th call is its i-th part in issue order.
inline void append_trace(std::vector<Span>& out, const std::vector<std::vector<double>>& ranks,
                         const RunResult::Policy& pr, const g::ModelProfile& profile) {
  const int L = profile.num_layers();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto& v = ranks[r];
    std::size_t k = 0;
    const auto n = static_cast<std::size_t>(v.at(k++));
    for (std::size_t i = 0; i < n; ++i, k += 2)
      out.push_back({i == 0 ? std::string("forward")
                            : g::detail::cat({"bwd ", std::to_string(L - static_cast<int>(i) + 1)}),
                     static_cast<int>(r), 0, v.at(k), v.at(k + 1)});
    for (int c = 0; c < pr.plan.nchannels; ++c) {
      std::vector<std::size_t> msgs;
      for (std::size_t m = 0; m < pr.plan.messages.size(); ++m)
        if (pr.plan.messages[m].channel == c)
          for (auto part = pr.plan.messages[m].first_part; part < pr.plan.messages[m].end_part;
               ++part)
            msgs.push_back(m);
      const auto calls = static_cast<std::size_t>(v.at(k++));
      for (std::size_t i = 0; i < calls; ++i, k += 2) {
        const std::size_t m = msgs.at(i);
        const auto& tm = pr.predicted.pinned.messages[m];
        out.push_back({detail::message_name(pr.schedule.messages[m]),
                       static_cast<int>(r),
                       1 + c,
                       v.at(k),
                       v.at(k + 1),
                       {{"bytes", g::message_bytes(profile, pr.schedule.messages[m])},
                        {"message", m},
                        {"predicted_start_ms", tm.start_s * 1e3},
                        {"predicted_end_ms", tm.end_s * 1e3}}});
      }
    }
  }
}

// One rank's part of the run. `profile` is the scaled profile; AR an Allreduce type of the
// transport `world` describes; Ctl the ranks' meeting point (Control, or MpiControl of emu_mpi.hpp:
// barrier, allgather, broadcast, nranks).
template <class AR, class World, class Ctl>
RunResult run_rank(int rank, Ctl& ctl, World& world, const g::ModelProfile& profile,
                   const RunOptions& opt) {
  const int P = ctl.nranks();
  const int L = profile.num_layers();
  const auto tensors = g::tensors_from_profile(profile, DataType::f32);
  // One contiguous buffer in ascending layer order: every fused message runs in place.
  std::size_t total = 0;
  for (const auto& t : tensors) total += t.count;
  std::vector<float> grads(total, 0.0f);
  std::vector<void*> ptrs;
  for (std::size_t off = 0, i = 0; i < tensors.size(); off += tensors[i].count, ++i)
    ptrs.push_back(grads.data() + off);
  RunResult result;
  // The kernel's default timer slack (50 us) would lengthen every sleeping layer by as much.
  if (opt.mode == ComputeMode::sleep) ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  if (opt.pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<unsigned>(rank) % std::max(1u, std::thread::hardware_concurrency()), &set);
    ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
  }

  // 1. Compute only, to plan on: what the backward pass takes here without communication.
  {
    ComputeLog log(L);
    for (int it = 0; it < opt.warmup + opt.compute_iterations; ++it) {
      ctl.barrier();
      compute_iteration(profile, opt.mode, it >= opt.warmup ? &log : nullptr);
    }
    result.planning = measured_profile(profile, log, rank, ctl).first;
  }

  // 2. Allreduces for the fit: each size alone, then K at once on K communicators.
  std::uint64_t lo = profile.layers[0].bytes, hi = profile.total_bytes();
  for (const auto& l : profile.layers) lo = std::min(lo, l.bytes);
  const auto sizes = sweep_bytes(lo, hi, opt.sweep_factor);
  const int K = std::max(2, opt.policy.max_concurrent);
  {
    std::vector<std::shared_ptr<AR>> comms;
    comms.reserve(static_cast<std::size_t>(K));
    for (int k = 0; k < K; ++k)
      comms.push_back(world.template make<AR>(
          rank, ctl, world.config(rank, g::detail::cat({"fit", std::to_string(k)})),
          typename AR::topology_type{}));
    std::vector<std::vector<float>> bufs(static_cast<std::size_t>(K),
                                         std::vector<float>(hi / 4, 0.0f));
    // Per size: (start, end) of each rep alone, then of each rep's K calls. A call's time runs
    // from the last rank's entry to the last rank's exit, so that the skew with which the ranks
    // leave the barrier before it is not charged to the allreduce.
    std::vector<double> mine;
    std::barrier local(K);
    std::vector<std::pair<double, double>> took(static_cast<std::size_t>(K));
    std::size_t count = 0;
    bool stop = false;
    const auto call = [&](int k) {
      const double t0 = now_s();
      comms[static_cast<std::size_t>(k)]->rank(rank).run(bufs[static_cast<std::size_t>(k)].data(),
                                                         bufs[static_cast<std::size_t>(k)].data(),
                                                         count, DataType::f32, ReduceOp::sum);
      took[static_cast<std::size_t>(k)] = {t0, now_s()};
    };
    std::vector<std::thread> helpers;
    for (int k = 1; k < K; ++k)
      helpers.emplace_back([&, k] {
        for (;;) {
          local.arrive_and_wait();
          if (stop) return;
          call(k);
          local.arrive_and_wait();
        }
      });
    for (const std::uint64_t bytes : sizes) {
      count = bytes / 4;
      for (int rep = 0; rep < 2 + opt.fit_reps; ++rep) {  // two warm-up calls build the plans
        ctl.barrier();
        call(0);
        if (rep >= 2) mine.insert(mine.end(), {took[0].first, took[0].second});
      }
      for (int rep = 0; rep < 2 + opt.fit_reps; ++rep) {
        ctl.barrier();
        local.arrive_and_wait();
        call(0);
        local.arrive_and_wait();
        if (rep >= 2)
          for (const auto& [t0, t1] : took) mine.insert(mine.end(), {t0, t1});
      }
    }
    stop = true;
    local.arrive_and_wait();
    for (auto& h : helpers) h.join();
    const auto all = ctl.allgather(rank, mine);
    const auto at = [&](std::size_t i, bool end) {
      double t = 0;
      for (const auto& v : all) t = std::max(t, v[2 * i + (end ? 1 : 0)]);
      return t;
    };
    const auto R = static_cast<std::size_t>(opt.fit_reps);
    const auto Ku = static_cast<std::size_t>(K);
    std::size_t i = 0;
    for (const std::uint64_t bytes : sizes) {
      std::vector<double> alone;
      for (std::size_t rep = 0; rep < R; ++rep, ++i) alone.push_back(at(i, true) - at(i, false));
      std::vector<std::vector<double>> together(Ku);
      for (std::size_t rep = 0; rep < R; ++rep, i += Ku) {
        for (std::size_t k = 0; k < Ku; ++k)
          together[k].push_back(at(i + k, true) - at(i + k, false));
      }
      result.samples.push_back({static_cast<double>(bytes), spread(alone).median, 1});
      for (const auto& v : together)
        result.samples.push_back({static_cast<double>(bytes), spread(v).median, K});
    }
    result.fit = fit_comm(result.samples);
    ctl.barrier();  // nobody leaves a session while a peer still uses it
  }

  // 3. Rank 0 plans every policy on the measured profile and fitted model.
  const g::CommModel cm = result.fit.model();
  std::string plans;
  if (rank == 0)
    for (const auto& name : opt.policies)
      plans += encode_schedule(make_policy(name, result.planning, cm, opt.policy), L) + "\n";
  plans = ctl.broadcast(rank, plans);

  // 4. Every policy's GradientSync, then iterations round-robin over the compute-only pass and the
  // policies (in a rotating order), so that a change in the machine's background load over the
  // run shifts every column alike instead of whichever policy ran at that moment.
  // The coordinated policy runs a GradientSync<C, Coordinated>; its schedule (Horovod's cycle
  // fusion) is only what the model predicts it with.
  using Sync = g::GradientSync<Timed<AR>>;
  using CSync = g::GradientSync<Timed<AR>, g::Coordinated>;
  struct Run {
    std::string name;
    g::Schedule schedule;
    std::shared_ptr<Sync> sync;
    typename Sync::Rank* engine = nullptr;
    std::shared_ptr<CSync> csync;
    typename CSync::Rank* cengine = nullptr;
    std::vector<double> times;
    std::uint64_t allocations = 0;  // over the timed iterations
    ComputeLog compute{0};          // this policy's own layers: compute and ready(), as they ran
    void ready(int l) { engine ? engine->ready(l) : cengine->ready(l); }
    void wait() { engine ? engine->wait() : cengine->wait(); }
    int max_in_flight() const {
      return engine ? engine->max_in_flight() : cengine->max_in_flight();
    }
    int traced_channels() const { return sync ? sync->nchannels() : 0; }
  };
  std::vector<Run> runs;
  std::size_t pos = 0;
  for (const auto& name : opt.policies) {
    const std::size_t eol = plans.find('\n', pos);
    Run run;
    run.name = name;
    run.schedule = decode_schedule(plans.substr(pos, eol - pos), name);
    pos = eol + 1;
    if (name == "coordinated") {
      g::Coordinated policy;
      policy.fusion_threshold_bytes = opt.policy.horovod.threshold_bytes;
      policy.cycle_time = std::chrono::microseconds(
          std::max<long>(1, static_cast<long>(opt.policy.horovod.cycle_time_s * 1e6)));
      run.csync = world.template make<CSync>(rank, ctl, world.config(rank, "p." + name), tensors,
                                             policy, g::SyncOptions{});
      run.cengine = &run.csync->attach(rank, ptrs);
    } else {
      run.sync = world.template make<Sync>(rank, ctl, world.config(rank, "p." + name), tensors,
                                           run.schedule, g::SyncOptions{});
      run.engine = &run.sync->attach(rank, ptrs);
    }
    run.compute = ComputeLog(L);
    // Reserved so that the timed iterations' own bookkeeping allocates nothing (counted below).
    run.times.reserve(static_cast<std::size_t>(opt.iterations));
    run.compute.forward_s.reserve(static_cast<std::size_t>(opt.iterations));
    run.compute.total_s.reserve(static_cast<std::size_t>(opt.iterations));
    for (auto& l : run.compute.layer_s) l.reserve(static_cast<std::size_t>(opt.iterations));
    runs.push_back(std::move(run));
  }
  const int traced = opt.warmup + opt.iterations - 1;
  std::vector<std::pair<double, double>> compute_spans;
  compute_spans.reserve(static_cast<std::size_t>(L) + 1);
  ComputeLog log(L);
  const std::size_t columns = runs.size() + 1;  // the compute-only pass is column runs.size()
  for (int it = 0; it < opt.warmup + opt.iterations; ++it) {
    for (std::size_t j = 0; j < columns; ++j) {
      const std::size_t col = (j + static_cast<std::size_t>(it)) % columns;
      if (col == runs.size()) {
        ctl.barrier();
        compute_iteration(profile, opt.mode, it >= opt.warmup ? &log : nullptr);
        continue;
      }
      Run& run = runs[col];
      const bool tracing = run.name == opt.trace_policy && it == traced;
      for (int c = 0; c < run.traced_channels() && tracing; ++c) {
        run.sync->channel(c).log(rank).on = true;
        run.sync->channel(c).log(rank).spans.reserve(run.schedule.messages.size());
      }
      ctl.barrier();
      const bool timed = it >= opt.warmup;
      const std::uint64_t allocated = ccoll_support::heap_allocations();
      const double t0 = now_s();
      compute(profile.forward_s, opt.mode);
      double t = now_s();
      if (tracing) compute_spans.emplace_back(t0, t);
      if (timed) run.compute.forward_s.push_back(t - t0);
      for (int l = L - 1; l >= 0; --l) {
        compute(profile.layers[static_cast<std::size_t>(l)].backward_s, opt.mode);
        if (tracing) compute_spans.emplace_back(t, now_s());
        run.ready(l);
        const double e = now_s();
        if (timed) run.compute.layer_s[static_cast<std::size_t>(l)].push_back(e - t);
        t = e;
      }
      if (timed) run.compute.total_s.push_back(t - t0);
      run.wait();
      const double t1 = now_s();
      if (timed) run.allocations += ccoll_support::heap_allocations() - allocated;
      if (it >= opt.warmup) run.times.push_back(t1 - t0);
      for (int c = 0; c < run.traced_channels() && tracing; ++c)
        run.sync->channel(c).log(rank).on = false;
    }
  }
  const auto [measured, compute_totals] = measured_profile(profile, log, rank, ctl);
  result.measured = measured;
  result.compute_iteration = spread(compute_totals);

  for (Run& run : runs) {
    // One more iteration, untimed, checks every reduced gradient bitwise: small integers, so
    // every sum is exact whatever order the reduction took.
    for (std::size_t i = 0; i < grads.size(); ++i)
      grads[i] = static_cast<float>((rank + 1) * (1 + static_cast<int>(i % 5)));
    for (int l = L - 1; l >= 0; --l) run.ready(l);
    run.wait();
    double wrong = 0;
    const int triangular = P * (P + 1) / 2;  // the sum of the ranks' (rank + 1)
    for (std::size_t i = 0; i < grads.size(); ++i)
      wrong += grads[i] != static_cast<float>(triangular * (1 + static_cast<int>(i % 5)));
    std::fill(grads.begin(), grads.end(), 0.0f);

    const auto all_times = ctl.allgather(rank, run.times);
    const g::ModelProfile own = measured_profile(profile, run.compute, rank, ctl).first;
    const auto all_wrong = ctl.allgather(rank, std::vector<double>{wrong});
    const auto all_allocations =
        ctl.allgather(rank, std::vector<double>{static_cast<double>(run.allocations) /
                                                static_cast<double>(std::max(1, opt.iterations))});
    const bool trace = run.name == opt.trace_policy;
    // The traced iteration: [compute span count, spans...] then per channel [count, spans...].
    std::vector<double> spans;
    if (trace) {
      spans.push_back(static_cast<double>(compute_spans.size()));
      for (auto [s, e] : compute_spans) spans.insert(spans.end(), {s, e});
      for (int c = 0; c < run.traced_channels(); ++c) {
        const auto& calls = run.sync->channel(c).log(rank).spans;
        spans.push_back(static_cast<double>(calls.size()));
        for (auto [s, e] : calls) spans.insert(spans.end(), {s, e});
      }
    }
    const auto all_spans = ctl.allgather(rank, spans);
    const int in_flight = run.max_in_flight();
    if (rank == 0) {
      RunResult::Policy pr;
      pr.name = run.name;
      pr.schedule = run.schedule;
      pr.plan = run.sync ? run.sync->channel_plan() : g::engine::lower(tensors, run.schedule);
      pr.iterations = detail::column_max(all_times);
      pr.measured = spread(pr.iterations);
      pr.compute = own;
      pr.predicted = predict(own, run.schedule, cm, pr.plan);
      pr.predicted_compute_only = predict(result.measured, run.schedule, cm, pr.plan);
      pr.verified = true;
      for (const auto& w : all_wrong) pr.verified = pr.verified && w[0] == 0;
      pr.max_in_flight = in_flight;
      for (const auto& a : all_allocations)
        pr.allocations_per_iteration = std::max(pr.allocations_per_iteration, a[0]);
      if (run.cengine) {
        pr.coordination = run.cengine->stats();
        pr.iterations_run = run.cengine->iterations();
      }
      if (trace) append_trace(result.trace, all_spans, pr, profile);
      result.policies.push_back(std::move(pr));
    }
  }
  ctl.barrier();  // nobody destroys its end of the channels while a peer still uses them
  runs.clear();
  ctl.barrier();
  return result;
}

}  // namespace ccoll::train_emu
