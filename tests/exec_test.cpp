// Tests of the step interpreter (runtime/interpreter.hpp) on plans built by hand through
// Plan::reset/add_step/finalize: rings, a tree with two receives and two sends, a relay, FIFOs of
// depth one, the check form (all ranks interleaved on one thread) and the wait form (a thread per
// rank), repeated calls over monotonic counters, and the error report of a plan that stalls.
#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/runtime/communicator.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/runtime/slot_store_tuner.hpp"
#include "ccoll/transport/host_threads.hpp"
#include "heap_counter.hpp"

namespace exec_test {
using namespace ccoll;
using namespace ccoll::plan;
using namespace std::chrono_literals;

namespace {

// Connection memory for a plan, plus the per-call bases, as an executor would keep them.
struct Harness {
  Plan plan;
  std::size_t elem_size;
  std::vector<std::vector<std::byte>> slots;
  std::vector<sync::ConnectionCounters> counters;
  std::vector<sync::ConnectionRef> refs;
  std::vector<std::uint64_t> base;
  std::uint32_t abort = 0;

  Harness(Plan p, std::size_t esize) : plan(std::move(p)), elem_size(esize) {
    const std::size_t n = plan.connections.size();
    slots.resize(n);
    counters.resize(n);
    refs.resize(n);
    base.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      slots[i].resize(plan.nslots * plan.slot_elems * elem_size);
      counters[i].tail = counters[i].head = 0;
      refs[i].slots = slots[i].data();
      refs[i].tail = &counters[i].tail;
      refs[i].head = &counters[i].head;
      refs[i].slot_bytes = plan.slot_elems * elem_size;
      refs[i].nslots = plan.nslots;
      refs[i].from = plan.connections[i].from;
      refs[i].to = plan.connections[i].to;
    }
  }

  template <class T>
  runtime::ProgramContext<T> context(Rank r, std::uint32_t c, const T* in, T* out) const {
    runtime::ProgramContext<T> ctx;
    const auto& steps = plan.channels[c].programs[static_cast<std::size_t>(r)].steps;
    ctx.steps = steps.data();
    ctx.nsteps = static_cast<std::uint32_t>(steps.size());
    ctx.ports = plan.ports.data();
    ctx.connections = refs.data();
    ctx.base = base.data();
    ctx.input = in;
    ctx.output = out;
    ctx.nactive = plan.nactive();
    ctx.rank = r;
    ctx.channel = c;
    ctx.abort = &abort;
    return ctx;
  }

  void end_call() {
    for (std::size_t i = 0; i < base.size(); ++i) base[i] += plan.connections[i].messages_per_call;
  }
};

// A ring reduce-scatter + all-gather over P ranks, one piece per rank, built step by step.
Plan hand_ring(Rank p, std::uint64_t count, std::uint64_t slot_elems, std::uint32_t nslots) {
  Plan plan;
  plan.algorithm = "hand-ring";
  plan.count = count;
  plan.slot_elems = slot_elems;
  plan.nslots = nslots;
  plan.reset(p, 1);
  auto piece_lo = [&](Rank k) { return count * static_cast<std::uint64_t>(k) / p; };
  for (Rank r = 0; r < p; ++r) {
    const Rank next = (r + 1) % p, prev = (r + p - 1) % p;
    for (Rank s = 0; s < 2 * p - 1; ++s) {
      const Rank piece = ((r - 1 - s) % p + 2 * p) % p;
      const std::uint64_t lo = piece_lo(piece), n = piece_lo(piece + 1) - lo;
      const bool recv = s > 0, send = s + 1 < 2 * p - 1, reduce = s < p, completes = s == p - 1;
      std::vector<Rank> from, to;
      if (recv) from.push_back(prev);
      if (send) to.push_back(next);
      plan.add_step(0, r, lo, n, reduce ? Source::Input : Source::None, from, to,
                    !reduce || completes, completes);
    }
  }
  plan.finalize();
  return plan;
}

// Rank 0 is the root of leaves 1 and 2: value = in + recv1 + recv2 (final), written and sent to
// both leaves in one step (2 receives, 2 sends). If `relay`, rank 3 is an inactive relay between
// leaf 2 and the root in both directions.
Plan hand_tree(std::uint64_t count, bool relay) {
  Plan plan;
  plan.algorithm = "hand-tree";
  plan.count = count;
  plan.slot_elems = count;
  plan.nslots = 1;
  plan.reset(relay ? 4 : 3, 1);
  if (relay) plan.active[3] = false;
  const Rank up2 = relay ? 3 : 0;    // where leaf 2 sends
  const Rank down2 = relay ? 3 : 2;  // where the root sends leaf 2's result
  plan.add_step(0, 1, 0, count, Source::Input, {}, {0}, false, false);
  plan.add_step(0, 2, 0, count, Source::Input, {}, {up2}, false, false);
  if (relay) plan.add_step(0, 3, 0, count, Source::None, {2}, {0}, false, false);
  plan.add_step(0, 0, 0, count, Source::Input, {1, down2}, {1, down2}, true, true);
  if (relay) plan.add_step(0, 3, 0, count, Source::None, {0}, {2}, false, false);
  plan.add_step(0, 1, 0, count, Source::None, {0}, {}, true, false);
  plan.add_step(0, 2, 0, count, Source::None, {up2}, {}, true, false);
  plan.finalize();
  return plan;
}

// The check form: every rank's program interleaved on this one thread. Returns the rounds taken.
template <class T, ReduceOp Op>
int run_interleaved(Harness& h, const std::vector<std::vector<T>>& in,
                    std::vector<std::vector<T>>& out) {
  const Rank p = h.plan.nranks;
  std::vector<std::uint32_t> pc(static_cast<std::size_t>(p), 0);
  int rounds = 0;
  for (bool progress = true; progress; ++rounds) {
    progress = false;
    for (Rank r = 0; r < p; ++r) {
      auto ctx = h.context<T>(r, 0, in[static_cast<std::size_t>(r)].data(),
                              out[static_cast<std::size_t>(r)].data());
      if (runtime::try_step<T, Op>(runtime::HostGroup{}, ctx, pc[static_cast<std::size_t>(r)]))
        progress = true;
    }
  }
  for (Rank r = 0; r < p; ++r) {
    INFO("rank " << r << " stopped early");
    REQUIRE(pc[static_cast<std::size_t>(r)] ==
            h.plan.channels[0].programs[static_cast<std::size_t>(r)].steps.size());
  }
  h.end_call();
  return rounds;
}

// The wait form: one thread per rank, each running its program with blocking waits.
template <class T, ReduceOp Op>
void run_threads(Harness& h, const std::vector<std::vector<T>>& in,
                 std::vector<std::vector<T>>& out) {
  const Rank p = h.plan.nranks;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(p));
  std::vector<int> ok(static_cast<std::size_t>(p), 0);
  const std::uint64_t deadline = sync::now_ns() + 10'000'000'000ull;
  for (Rank r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      auto ctx = h.context<T>(r, 0, in[static_cast<std::size_t>(r)].data(),
                              out[static_cast<std::size_t>(r)].data());
      runtime::StepFailure f;
      ok[static_cast<std::size_t>(r)] =
          runtime::run_program<T, Op>(runtime::HostGroup{}, ctx, deadline, &f) ? 1 : 0;
    });
  for (auto& t : threads) t.join();
  for (Rank r = 0; r < p; ++r) REQUIRE(ok[static_cast<std::size_t>(r)] == 1);
  h.end_call();
}

std::vector<std::vector<float>> inputs(Rank p, std::uint64_t n, int salt) {
  std::vector<std::vector<float>> in(static_cast<std::size_t>(p), std::vector<float>(n));
  for (Rank r = 0; r < p; ++r)
    for (std::uint64_t i = 0; i < n; ++i)
      in[static_cast<std::size_t>(r)][i] = static_cast<float>((r * 31 + i * 7 + salt) % 17);
  return in;
}

std::vector<float> sum_of(const std::vector<std::vector<float>>& in,
                          const std::vector<bool>& active) {
  std::vector<float> s(in[0].size(), 0.0f);
  for (std::size_t r = 0; r < in.size(); ++r)
    if (active[r])
      for (std::size_t i = 0; i < s.size(); ++i) s[i] += in[r][i];
  return s;
}

}  // namespace

TEST_CASE("hand-made rings: check form on one thread and wait form on threads, repeated calls") {
  for (Rank p : {1, 2, 3, 5}) {
    for (std::uint32_t nslots : {2u, 3u, 4u}) {
      const std::uint64_t n = 101;
      Plan plan = hand_ring(p, n, n, nslots);
      const auto report = verify(plan);
      INFO(report.error);
      REQUIRE(report.ok);
      Harness h(plan, sizeof(float));
      for (int call = 0; call < 4; ++call) {
        INFO("P=" << p << " nslots=" << nslots << " call=" << call);
        auto in = inputs(p, n, call);
        std::vector<std::vector<float>> out(static_cast<std::size_t>(p), std::vector<float>(n));
        if (call % 2 == 0)
          run_interleaved<float, ReduceOp::sum>(h, in, out);
        else
          run_threads<float, ReduceOp::sum>(h, in, out);
        const auto ref = sum_of(in, h.plan.active);
        for (Rank r = 0; r < p; ++r) CHECK(out[static_cast<std::size_t>(r)] == ref);
      }
      // Counters only grew: every tail equals the messages of all four calls.
      for (std::size_t c = 0; c < h.counters.size(); ++c) {
        CHECK(h.counters[c].tail == 4ull * h.plan.connections[c].messages_per_call);
        CHECK(h.counters[c].head == h.counters[c].tail);
      }
    }
  }
}

TEST_CASE("hand-made tree: two receives and two sends in one step, avg finalised once") {
  for (bool relay : {false, true}) {
    const std::uint64_t n = 1000;
    Plan plan = hand_tree(n, relay);
    const auto report = verify(plan);
    INFO(report.error);
    REQUIRE(report.ok);
    Harness h(plan, sizeof(float));
    const Rank p = plan.nranks;
    auto in = inputs(p, n, 3);
    if (relay) in[3].assign(n, 1e9f);  // a relay's input must never be used
    std::vector<std::vector<float>> out(static_cast<std::size_t>(p), std::vector<float>(n, -1.0f));
    run_interleaved<float, ReduceOp::avg>(h, in, out);
    auto ref = sum_of(in, plan.active);
    for (float& x : ref) x /= 3.0f;
    for (Rank r = 0; r < 3; ++r) CHECK(out[static_cast<std::size_t>(r)] == ref);
    if (relay) CHECK(out[3] == std::vector<float>(n, -1.0f));  // relays write no output
  }
}

TEST_CASE("try_step does nothing until the step's messages and slots are there") {
  for (std::uint32_t nslots : {1u, 2u}) {
    Plan plan = hand_ring(2, 10, 10, nslots);
    Harness h(plan, sizeof(float));
    auto in = inputs(2, 10, 0);
    std::vector<std::vector<float>> out(2, std::vector<float>(10));
    auto c0 = h.context<float>(0, 0, in[0].data(), out[0].data());
    auto c1 = h.context<float>(1, 0, in[1].data(), out[1].data());
    std::uint32_t pc0 = 0, pc1 = 0;
    const runtime::HostGroup g;
    CHECK(runtime::try_step<float, ReduceOp::sum>(g, c0, pc0));        // send into the empty FIFO
    CHECK_FALSE(runtime::try_step<float, ReduceOp::sum>(g, c0, pc0));  // no message from rank 1 yet
    const auto f = runtime::blocked_port<runtime::HostGroup>(c0, pc0, sync::WaitResult::Timeout);
    CHECK(f.peer == 1);
    CHECK_FALSE(f.waiting_for_slot);
    CHECK(runtime::try_step<float, ReduceOp::sum>(g, c1, pc1));
    if (nslots == 1) {
      // Every step of a ring receives and sends, and a slot is freed only when its step ends:
      // with one slot both ranks wait for each other, the deadlock plan::verify predicts.
      CHECK_FALSE(verify(plan).ok);
      CHECK_FALSE(runtime::try_step<float, ReduceOp::sum>(g, c0, pc0));
      CHECK_FALSE(runtime::try_step<float, ReduceOp::sum>(g, c1, pc1));
      const auto f1 = runtime::blocked_port<runtime::HostGroup>(c1, pc1, sync::WaitResult::Timeout);
      CHECK(f1.peer == 0);
      CHECK(f1.waiting_for_slot);
    } else {
      CHECK(runtime::try_step<float, ReduceOp::sum>(g, c1, pc1));
      CHECK(runtime::try_step<float, ReduceOp::sum>(g, c0, pc0));
      CHECK(runtime::try_step<float, ReduceOp::sum>(g, c0, pc0));
      CHECK(runtime::try_step<float, ReduceOp::sum>(g, c1, pc1));
      CHECK(pc0 == 3);
      CHECK(pc1 == 3);
      CHECK(out[0] == out[1]);
    }
  }
}

TEST_CASE("element loops: every shape matches a scalar reference, in place too") {
  std::mt19937 rng(3);
  for (std::uint32_t nsrc = 1; nsrc <= 4; ++nsrc)
    for (std::uint32_t ndst = 1; ndst <= 3; ++ndst)
      for (std::uint64_t n : {1u, 7u, 2048u, 5000u}) {
        std::vector<std::vector<double>> src(nsrc, std::vector<double>(n)),
            dst(ndst, std::vector<double>(n, 0.0));
        for (auto& s : src)
          for (auto& x : s) x = static_cast<double>(rng() % 100);
        std::vector<const double*> sp;
        std::vector<double*> dp;
        sp.reserve(src.size());
        dp.reserve(dst.size());
        for (auto& s : src) sp.push_back(s.data());
        for (auto& d : dst) dp.push_back(d.data());
        runtime::detail::element_loop<double, ReduceOp::avg, true>(runtime::HostGroup{}, dp.data(),
                                                                   ndst, sp.data(), nsrc, n, 4);
        for (std::uint64_t i = 0; i < n; ++i) {
          double v = src[0][i];
          for (std::uint32_t k = 1; k < nsrc; ++k) v += src[k][i];
          v /= 4;
          for (std::uint32_t k = 0; k < ndst; ++k) REQUIRE(dst[k][i] == v);
        }
        // The same with any subset of the destinations written by non-temporal stores, at odd
        // alignments (bit k of `streamed`: dsts[k]).
        for (std::uint32_t streamed = 1; streamed < (1u << ndst); ++streamed) {
          std::vector<std::vector<double>> out(ndst, std::vector<double>(n + 1, -1.0));
          std::vector<double*> op;
          for (std::uint32_t k = 0; k < ndst; ++k) op.push_back(out[k].data() + ((n + k) % 2));
          runtime::detail::element_loop_streaming<double, ReduceOp::avg, true>(
              op.data(), ndst, streamed, sp.data(), nsrc, n, 4);
          runtime::detail::stream_fence();
          for (std::uint32_t k = 0; k < ndst; ++k)
            for (std::uint64_t i = 0; i < n; ++i) REQUIRE(op[k][i] == dst[0][i]);
        }
        for (std::uint32_t k = 1; k < ndst; ++k) REQUIRE(dst[k] == dst[0]);
        if (nsrc == 1) {  // a plain copy streams from its source without staging
          std::vector<double> a(n + 1, -1.0), b(n, -1.0);
          double* two[2] = {a.data() + 1, b.data()};
          runtime::detail::element_loop_streaming<double, ReduceOp::sum, false>(two, 2, 1u,
                                                                                sp.data(), 1, n, 4);
          runtime::detail::stream_fence();
          for (std::uint64_t i = 0; i < n; ++i)
            REQUIRE((two[0][i] == src[0][i] && b[i] == src[0][i]));
        }
        // In place: the first destination is the first source (src = Output, write_output).
        std::vector<double> io = src[0];
        sp[0] = io.data();
        dp[0] = io.data();
        runtime::detail::element_loop<double, ReduceOp::max, false>(runtime::HostGroup{}, dp.data(),
                                                                    ndst, sp.data(), nsrc, n, 4);
        for (std::uint64_t i = 0; i < n; ++i) {
          double v = src[0][i];
          for (std::uint32_t k = 1; k < nsrc; ++k) v = std::max(v, src[k][i]);
          REQUIRE(io[i] == v);
        }
      }
}

TEST_CASE("a plan that stalls: the waiting ranks report channel, step and peer, then abort") {
  // Rank 2's program lacks its last two steps, so rank 0 waits forever for its final message.
  struct Broken {
    static Plan build(const PlanRequest& req) {
      Plan p = hand_ring(req.nranks, req.count, req.slot_bytes / req.elem_size, req.nslots);
      auto& steps = p.channels[0].programs[2].steps;
      steps.resize(steps.size() - 2);
      return p;  // not finalized again: rank 0 still expects the messages
    }
  };
  Config c;
  c.nranks = 3;
  c.slot_bytes = 1024;
  c.nslots = 2;
  c.timeout = 200ms;
  c.verify_plans = false;  // the verifier would reject it, which is the point
  transport::HostThreads::Executor ex(c, &Broken::build, "broken");
  std::vector<std::vector<float>> in(3, std::vector<float>(30, 1.0f)),
      out(3, std::vector<float>(30));
  std::vector<std::string> what(3);
  std::vector<ErrorCode> codes(3, ErrorCode::Parse);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(3));
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      try {
        ex.run(r, in[static_cast<std::size_t>(r)].data(), out[static_cast<std::size_t>(r)].data(),
               30, DataType::f32, ReduceOp::sum);
      } catch (const Error& e) {
        what[static_cast<std::size_t>(r)] = e.what();
        codes[static_cast<std::size_t>(r)] = e.code();
      }
    });
  for (auto& t : threads) t.join();
  // Rank 2 finished its truncated program; rank 0 (and possibly 1) time out naming the step.
  CHECK(what[2].empty());
  REQUIRE(codes[0] == ErrorCode::Timeout);
  INFO(what[0]);
  CHECK(what[0].find("channel 0") != std::string::npos);
  CHECK(what[0].find("step") != std::string::npos);
  CHECK(what[0].find("a message from rank 2") != std::string::npos);
  // The communicator is now aborted for every rank.
  CHECK_THROWS_AS(ex.run(2, in[2].data(), out[2].data(), 30, DataType::f32, ReduceOp::sum), Error);
}

TEST_CASE("communicator: plans are cached per count and element size") {
  Config c;
  c.nranks = 3;
  c.slot_bytes = 1024;
  runtime::AreaCommunicator comm(
      c, 3,
      [](const PlanRequest& req) {
        return hand_ring(req.nranks, req.count, req.slot_bytes / req.elem_size, req.nslots);
      },
      "hand");
  const runtime::AreaLayout layout = runtime::area_layout(comm);
  std::vector<std::byte> area(layout.total + 128);
  const auto misalignment = reinterpret_cast<std::uintptr_t>(area.data()) % 128;
  std::byte* base = area.data() + (misalignment == 0 ? 0 : 128 - misalignment);
  runtime::init_area(base, layout, 3, comm.fingerprint(), 1);
  runtime::attach_area(comm, base);
  const auto a = comm.prepared_plan(90, 4);
  const auto b = comm.prepared_plan(90, 4);
  const auto d = comm.prepared_plan(90, 8);
  CHECK(a == b);
  CHECK(a != d);
  CHECK(a->plan.count == 90);
  CHECK(a->connections.size() == 3);
}

TEST_CASE("Config::slot_bytes = 0 is the transport's choice: 1 MiB on the host transports") {
  Config c;
  CHECK(c.slot_bytes == 0);
  CHECK(with_slot_bytes(c).slot_bytes == kDefaultSlotBytes);
  CHECK(with_slot_bytes(c, 4096).slot_bytes == 4096);
  c.slot_bytes = 2048;
  CHECK(with_slot_bytes(c, 4096).slot_bytes == 2048);  // a value given is kept
  // What the executors and their plans see, and the fingerprint ranks compare: the resolved
  // size, so a rank that leaves it at 0 agrees with one that names the default.
  c.nranks = 3;
  c.slot_bytes = 0;
  Allreduce<transport::HostThreads, algo::Ring> defaulted(c);
  CHECK(defaulted.config().slot_bytes == kDefaultSlotBytes);
  c.slot_bytes = kDefaultSlotBytes;
  Allreduce<transport::HostThreads, algo::Ring> named(c);
  CHECK(named.executor().communicator().fingerprint() ==
        defaulted.executor().communicator().fingerprint());
  // A plan's messages fill the slot: 1 MiB of floats per message at most.
  CHECK(defaulted.executor().plan(1u << 20, 4).slot_elems == kDefaultSlotBytes / 4);
  std::vector<std::vector<float>> in(3, std::vector<float>(1u << 20, 1.0f));
  std::vector<std::vector<float>> out(3, std::vector<float>(1u << 20, 0.0f));
  std::vector<std::thread> ranks;
  ranks.reserve(3);
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      defaulted.rank(r).run(in[static_cast<std::size_t>(r)].data(),
                            out[static_cast<std::size_t>(r)].data(), in[0].size(), DataType::f32,
                            ReduceOp::sum);
    });
  for (auto& t : ranks) t.join();
  CHECK(std::all_of(out.begin(), out.end(), [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return x == 3.0f; });
  }));
}

TEST_CASE("communicator: the plan cache is bounded, evicting the least recently used plan") {
  Config c;
  c.nranks = 3;
  c.slot_bytes = 1024;
  c.max_cached_plans = 4;
  runtime::AreaCommunicator comm(
      c, 3,
      [](const PlanRequest& req) {
        return hand_ring(req.nranks, req.count, req.slot_bytes / req.elem_size, req.nslots);
      },
      "hand");
  const runtime::AreaLayout layout = runtime::area_layout(comm);
  std::vector<std::byte> area(layout.total + 128);
  const auto misalignment = reinterpret_cast<std::uintptr_t>(area.data()) % 128;
  std::byte* base = area.data() + (misalignment == 0 ? 0 : 128 - misalignment);
  runtime::init_area(base, layout, 3, comm.fingerprint(), 1);
  runtime::attach_area(comm, base);
  const auto first = comm.prepared_plan(30, 4);
  for (std::uint64_t n = 31; n < 200; ++n) {
    (void)comm.prepared_plan(n, 4);
    (void)comm.prepared_plan(30, 4);  // kept: looked up after every other count
    CHECK(comm.cached_plans() <= 4);
  }
  CHECK(comm.prepared_plan(30, 4) == first);
  CHECK(first->plan.count == 30);  // a holder keeps an evicted plan alive in any case
  // A count whose messages cannot be planned in bounded memory is refused before building.
  CHECK_THROWS_WITH_AS(comm.prepared_plan(std::uint64_t{1} << 40, 4),
                       doctest::Contains("raise slot_bytes"), Error);
  CHECK_THROWS_AS(comm.prepared_plan(~std::uint64_t{0} / 2, 4), Error);
}

TEST_CASE("slot store tuner: explores both modes, keeps the faster, probes less while it wins") {
  using Tuner = runtime::SlotStoreTuner;
  // Synthetic machine: the time of a call in each mode.
  std::uint64_t cost[2] = {800, 1000};  // cached faster by 20%
  Tuner t;
  std::vector<Tuner::Mode> modes;
  auto call = [&] {
    const Tuner::Mode m = t.next();
    modes.push_back(m);
    t.record(m, cost[m]);
  };
  for (int i = 0; i < 5; ++i) call();
  // Untimed first call streams; then cached, streamed, cached, streamed.
  CHECK(modes == std::vector<Tuner::Mode>{Tuner::Streamed, Tuner::Cached, Tuner::Streamed,
                                          Tuner::Cached, Tuner::Streamed});
  CHECK(t.current() == Tuner::Cached);
  // Exploitation with probes: every probe confirms cached, so the interval doubles up to the cap.
  std::uint64_t probes = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::size_t before = modes.size();
    call();
    if (modes[before] == Tuner::Streamed) ++probes;
  }
  CHECK(t.current() == Tuner::Cached);
  CHECK(t.probe_interval() == Tuner::kMaxInterval);
  CHECK(probes >= 5);
  CHECK(probes <= 3000 / Tuner::kMinInterval);
  // The machine changes (the virtual CPUs moved): cached becomes 3x slower. The smoothed estimate
  // of the current mode follows within a few calls, and the next probe switches.
  cost[Tuner::Cached] = 3000;
  const std::size_t changed = modes.size();
  for (std::uint32_t i = 0; i < Tuner::kMaxInterval + 4; ++i) call();
  CHECK(t.current() == Tuner::Streamed);
  CHECK(modes.back() == Tuner::Streamed);
  std::size_t cached_after = 0;  // the calls still run cached before the probe found out
  for (std::size_t i = changed; i < modes.size(); ++i) cached_after += modes[i] == Tuner::Cached;
  CHECK(cached_after <= Tuner::kMaxInterval + 1);
  // A tie keeps the safer default, streaming.
  Tuner tie;
  for (int i = 0; i < 5; ++i) {
    const Tuner::Mode m = tie.next();
    tie.record(m, 1000);
  }
  CHECK(tie.current() == Tuner::Streamed);
}

TEST_CASE("slot store tuners: one per power of two of a call's bytes, so new sizes allocate none") {
  CHECK(runtime::slot_store_bucket(1) == 0);
  CHECK(runtime::slot_store_bucket(8191) == 12);
  CHECK(runtime::slot_store_bucket(8192) == 13);
  CHECK(runtime::slot_store_bucket(std::uint64_t{1} << 63) == 63);
  // Calls from 4 KiB up are tuned; 2048..2060 floats are one bucket (8 KiB up to 8 KiB + 48 B),
  // whose plans are built first, as the coordinated gradient engine builds its size classes.
  Config c;
  c.nranks = 2;
  c.stream_slot_bytes = 4096;
  Allreduce<transport::HostThreads, algo::Ring> ar(c);
  constexpr std::size_t first = 2048, last = 2060;
  for (std::size_t n = first; n <= last; ++n) (void)ar.plan(n, DataType::f32);
  std::vector<std::vector<float>> data(2, std::vector<float>(last, 1.0f));
  std::uint64_t before = 0, after = 0;
  std::barrier warm(2, [&]() noexcept { before = ccoll_support::heap_allocations(); });
  std::barrier done(2, [&]() noexcept { after = ccoll_support::heap_allocations(); });
  std::vector<std::thread> threads;
  threads.reserve(2);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      float* d = data[static_cast<std::size_t>(r)].data();
      ar.rank(r).run(d, d, first, DataType::f32, ReduceOp::max);  // the bucket's first call
      warm.arrive_and_wait();
      for (std::size_t n = first + 1; n <= last; ++n)
        ar.rank(r).run(d, d, n, DataType::f32, ReduceOp::max);
      done.arrive_and_wait();
    });
  for (auto& t : threads) t.join();
  CHECK(after - before == 0);
  for (const auto& v : data) CHECK(std::count(v.begin(), v.end(), 1.0f) == static_cast<long>(last));
}
}  // namespace exec_test
