// Tests of GradientSync<C, Coordinated> on the host-threads transport: ranks that mark their
// tensors ready in a random permutation of their own every iteration, on three small models (odd
// sizes, 1-element tensors, mixed dtypes), P = 2, 3, 4, one and two channels, fusion thresholds
// that fuse everything, something or nothing; every gradient checked bitwise against the exact
// reduction and against a plain allreduce of the same tensor (gradient_sync_harness.hpp says why
// bitwise is right). Also: the steady state decided from the response cache alone (the cycle
// statistics), groups never split, a tensor set that changes between iterations, gradient
// queuing, the control plane over an allreduce on its own, misuse, a peer that never marks a
// tensor the others marked, and no allocation once every tensor hits the response cache.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "ccoll/coord/allreduce_control_plane.hpp"
#include "ccoll/gradient/coordinated_sync.hpp"
#include "gradient_sync_harness.hpp"
#include "heap_counter.hpp"

namespace gradient_coordinated_test {
using namespace ccoll;
using namespace ccoll::gradient;
using namespace gradient_sync_harness;
using namespace std::chrono_literals;

namespace {

using AR = Allreduce<transport::HostThreads, algo::Ring,
                     schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>;

std::string at_rank(int r, const std::string& what) {
  return "rank " + std::to_string(r) + ": " + what;
}

// A permutation of 0..n-1 that differs between ranks and between iterations.
void permute(std::vector<int>& order, int rank, int iteration) {
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::mt19937 rng(static_cast<unsigned>(1 + rank * 7919 + iteration * 104729));
  std::shuffle(order.begin(), order.end(), rng);
}

struct Case {
  int p;
  int k;
  std::uint64_t threshold;
  ReduceOp op;
  int salt;
};

// `iterations` iterations on P threads, each rank in its own random order; checks every gradient
// after every wait(), and the cycle statistics.
void run_case(const Model& model, const Case& c, int iterations) {
  Config cfg;
  cfg.nranks = c.p;
  cfg.timeout = 20s;
  Coordinated policy;
  policy.fusion_threshold_bytes = c.threshold;
  policy.max_concurrent = c.k;
  policy.cycle_time = 200us;
  GradientSync<AR, Coordinated> sync(cfg, model.tensors, policy, {.op = c.op});
  AR reference(cfg);
  const auto n = model.tensors.size();
  const auto out = on_threads(c.p, [&](int r) -> std::string {
    RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>((r + c.salt) % 3));
    RankBuffers in = make_buffers(model.tensors, Layout::scattered);
    RankBuffers ref = make_buffers(model.tensors, Layout::scattered);
    auto& g = sync.attach(r, grads.ptrs);
    std::string wrong;
    std::vector<int> order(n);
    engine::CoordinationStats first;
    for (int it = 0; it < iterations; ++it) {
      permute(order, r, it);
      for (int t : order) {
        fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)], r,
             c.p, t, it);
        g.ready(t);
      }
      g.wait();
      if (it == 0) first = g.stats();
      for (std::size_t t = 0; t < n; ++t) {
        const TensorSpec& spec = model.tensors[t];
        fill(spec, in.ptrs[t], r, c.p, static_cast<int>(t), it);
        reference.rank(r).run(in.ptrs[t], ref.ptrs[t], spec.count, spec.dtype, c.op);
        if (wrong.empty() && std::memcmp(grads.ptrs[t], ref.ptrs[t], spec.bytes()) != 0)
          wrong = at_rank(r, "tensor '" + spec.name + "' differs from its own allreduce");
        if (wrong.empty()) wrong = check(spec, grads.ptrs[t], c.p, static_cast<int>(t), it, c.op);
      }
    }
    if (!wrong.empty()) return wrong;
    const engine::CoordinationStats s = g.stats();
    // The first iteration learns every tensor on the coordinator path; from then on every tensor
    // is decided from the response cache, and no cycle takes the coordinator path again.
    if (first.new_responses != n || first.cached_responses != 0)
      return at_rank(r, "first iteration: " + std::to_string(first.new_responses) + " new, " +
                            std::to_string(first.cached_responses) + " cached");
    if (s.new_responses != n || s.cached_responses != n * (iterations - 1))
      return at_rank(r, "steady state: " + std::to_string(s.new_responses) + " new, " +
                            std::to_string(s.cached_responses) + " cached");
    if (s.coordinator_cycles != first.coordinator_cycles)
      return at_rank(r, "a coordinator-path cycle after the first iteration");
    if (c.threshold == 1 && s.fused_allreduces != n * iterations)
      return at_rank(r, "a 1-byte threshold fused something");
    if (g.iterations() != static_cast<std::uint64_t>(iterations))
      return at_rank(r, "iteration count");
    if (g.max_in_flight() < 1) return at_rank(r, "nothing ever in flight");
    return "";
  });
  for (int r = 0; r < c.p; ++r) CHECK(out[static_cast<std::size_t>(r)] == "");
}

// A one-rank collective for failure tests, by construction order: K = 2 lanes, then the control
// channel. Lane 0's call fails once told to or once lane 1 is inside its call, which stays inside
// for `hold`; control calls wait while `hold_control` is set.
struct Script {
  std::mutex mu;
  std::condition_variable cv;
  int built = 0;
  bool hold_control = false;
  bool control_held = false;  // a control call is waiting
  bool lane0_entered = false;
  bool fail_lane0 = false;
  bool lane1_inside = false;
  std::chrono::milliseconds hold{300};
  int lane1_calls = 0;
};
Script* g_script = nullptr;

struct ScriptTopology {};

class ScriptedCollective {
 public:
  using transport_type = transport::HostThreads;
  using topology_type = ScriptTopology;
  struct Handle {
    int id;
    void run(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp) const {
      if (send != recv) std::memcpy(recv, send, count * size_of(dtype));
      Script& s = *g_script;
      std::unique_lock lock(s.mu);
      if (id == 2) {
        s.control_held = s.hold_control;
        s.cv.notify_all();
        s.cv.wait_for(lock, 5s, [&] { return !s.hold_control; });
      } else if (id == 0) {
        s.lane0_entered = true;
        s.cv.notify_all();
        s.cv.wait_for(lock, 5s, [&] { return s.fail_lane0 || s.lane1_inside; });
        throw Error(ErrorCode::Timeout, 0, "lane 0's call");
      } else {
        ++s.lane1_calls;
        s.lane1_inside = true;
        s.cv.notify_all();
        s.cv.wait_for(lock, s.hold, [] { return false; });
        s.lane1_inside = false;
      }
    }
  };
  ScriptedCollective(const Config& c, ScriptTopology) : config_(c) {
    std::lock_guard lock(g_script->mu);
    id_ = g_script->built++;
  }
  Handle rank(int) { return {id_}; }
  std::span<const int> local_ranks() const { return local_; }
  int nranks() const { return 1; }
  const Config& config() const { return config_; }

 private:
  Config config_;
  int id_ = 0;
  std::array<int, 1> local_{0};
};
static_assert(engine::AllreduceLike<ScriptedCollective>);

}  // namespace

TEST_CASE("coordinated, P = 2, 3, 4, K = 1, 2: random orders, every gradient bitwise") {
  int salt = 0;
  for (const Model& model : models()) {
    for (int p : {2, 3, 4}) {
      for (const auto& kt : {std::pair{1, std::uint64_t{64} << 20},
                             std::pair{2, std::uint64_t{4096}}, std::pair{1, std::uint64_t{1}}}) {
        const ReduceOp op = salt % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
        INFO(model.profile.name, " P=", p, " K=", kt.first, " threshold ", kt.second, " op ",
             to_string(op));
        run_case(model, {p, kt.first, kt.second, op, salt++}, 4);
      }
    }
  }
}

TEST_CASE("groups are never split, whatever order their members become ready in") {
  const Model model = models()[2];  // twelve f32 tensors
  const int p = 3;
  const int iterations = 3;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 20s;
  Coordinated policy;
  policy.fusion_threshold_bytes = 1;  // nothing fuses but a group
  policy.cycle_time = 200us;
  policy.groups = {{"head", {"t1", "t12", "t6"}}, {"mid", {"t4", "t5"}}};
  GradientSync<AR, Coordinated> sync(cfg, model.tensors, policy);
  const auto n = model.tensors.size();
  const auto out = on_threads(p, [&](int r) -> std::string {
    RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>(r % 3));
    auto& g = sync.attach(r, grads.ptrs);
    std::vector<int> order(n);
    for (int it = 0; it < iterations; ++it) {
      permute(order, r, it);
      for (int t : order) {
        fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)], r,
             p, t, it);
        g.ready(t);
      }
      g.wait();
      for (std::size_t t = 0; t < n; ++t) {
        std::string wrong =
            check(model.tensors[t], grads.ptrs[t], p, static_cast<int>(t), it, ReduceOp::sum);
        if (!wrong.empty()) return at_rank(r, wrong);
      }
    }
    // Per iteration: the 7 ungrouped tensors alone, and each group as one allreduce.
    const auto fused = g.stats().fused_allreduces;
    if (fused != std::uint64_t{7 + 2} * static_cast<std::uint64_t>(iterations))
      return at_rank(r, std::to_string(fused) + " fused allreduces");
    return "";
  });
  for (const auto& o : out) CHECK(o == "");
  CHECK(code_of([&] {
          Coordinated bad;
          bad.groups = {{"g", {"t1", "nope"}}};
          GradientSync<AR, Coordinated> s(cfg, model.tensors, bad);
        }) == ErrorCode::InvalidArgument);
}

TEST_CASE("the tensor set changes between iterations: new tensors are learned, others untouched") {
  const Model model = models()[1];  // nine tensors, mixed dtypes
  const int p = 3;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 20s;
  Coordinated policy;
  policy.cycle_time = 200us;
  policy.fusion_threshold_bytes = 256;
  GradientSync<AR, Coordinated> sync(cfg, model.tensors, policy);
  const auto n = model.tensors.size();
  // Iteration 0: even tensors; 1: all; 2: odd; 3: all again.
  const auto used = [](int it, std::size_t t) { return it % 2 == 1 || (t % 2 == 0) == (it == 0); };
  const auto out = on_threads(p, [&](int r) -> std::string {
    RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>(r % 3));
    auto& g = sync.attach(r, grads.ptrs);
    std::vector<int> order(n);
    std::vector<std::uint64_t> learned;
    for (int it = 0; it < 4; ++it) {
      permute(order, r, it);
      for (int t : order) {
        fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)], r,
             p, t, it);
        if (used(it, static_cast<std::size_t>(t))) g.ready(t);
      }
      g.wait();
      for (std::size_t t = 0; t < n; ++t) {
        const TensorSpec& spec = model.tensors[t];
        if (used(it, t)) {
          std::string wrong = check(spec, grads.ptrs[t], p, static_cast<int>(t), it, ReduceOp::sum);
          if (!wrong.empty()) return at_rank(r, wrong);
          continue;
        }
        RankBuffers own = make_buffers({spec}, Layout::scattered);
        fill(spec, own.ptrs[0], r, p, static_cast<int>(t), it);
        if (std::memcmp(own.ptrs[0], grads.ptrs[t], spec.bytes()) != 0)
          return at_rank(r, "tensor '" + spec.name + "' was touched but not marked ready");
      }
      learned.push_back(g.stats().new_responses);
    }
    // Learned: 5 even tensors, then the 4 odd ones, then nothing new.
    if (learned != std::vector<std::uint64_t>{5, 9, 9, 9})
      return at_rank(r, "learned " + std::to_string(learned[0]) + ", " +
                            std::to_string(learned[1]) + ", " + std::to_string(learned[3]));
    return "";
  });
  for (const auto& o : out) CHECK(o == "");
}

TEST_CASE("gradient queuing: wait(layer) returns with that tensor reduced") {
  const Model model = models()[2];
  const int p = 2;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 20s;
  Coordinated policy;
  policy.cycle_time = 200us;
  policy.fusion_threshold_bytes = 4096;
  policy.max_concurrent = 2;
  GradientSync<AR, Coordinated> sync(cfg, model.tensors, policy);
  const auto n = static_cast<int>(model.tensors.size());
  const auto out = on_threads(p, [&](int r) -> std::string {
    RankBuffers grads = make_buffers(model.tensors, Layout::packed);
    auto& g = sync.attach(r, grads.ptrs);
    for (int it = 0; it < 3; ++it) {
      for (int t = n - 1; t >= 0; --t) {
        fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)], r,
             p, t, it);
        g.ready(t);
      }
      for (int t = 0; t < n; ++t) {
        g.wait(t);
        std::string wrong = check(model.tensors[static_cast<std::size_t>(t)],
                                  grads.ptrs[static_cast<std::size_t>(t)], p, t, it, ReduceOp::sum);
        if (!wrong.empty()) return at_rank(r, wrong);
      }
      g.wait();
    }
    return "";
  });
  for (const auto& o : out) CHECK(o == "");
}

TEST_CASE("no allocation once every tensor hits the response cache, P = 2, 3, 4, K = 1, 2") {
  using D = DataType;
  // Names longer than std::string's inline buffer, mixed dtypes, sizes below and above the
  // threshold (some fused and staged, some alone), and a group.
  std::vector<TensorSpec> tensors;
  const std::size_t counts[] = {1, 2049, 3, 33, 7, 20001, 1, 513, 3, 9000, 127, 4099};
  const D dtypes[] = {D::f32, D::f32, D::i32, D::f32, D::f64, D::f32,
                      D::f32, D::f32, D::f16, D::f32, D::f32, D::i32};
  for (std::size_t i = 0; i < 12; ++i)
    tensors.push_back(
        {"encoder.layer" + std::to_string(i + 1) + ".attention.weight", counts[i], dtypes[i]});
  const auto n = tensors.size();
  for (int p : {2, 3, 4}) {
    for (int k : {1, 2}) {
      INFO("P=", p, " K=", k);
      Config cfg;
      cfg.nranks = p;
      cfg.timeout = 20s;
      Coordinated policy;
      policy.fusion_threshold_bytes = 4096;
      policy.max_concurrent = k;
      policy.cycle_time = 200us;
      policy.groups.push_back({"pair", {tensors[3].name, tensors[7].name}});
      GradientSync<AR, Coordinated> sync(cfg, tensors, policy, {.op = ReduceOp::sum});
      constexpr int kWarmup = 3, kIterations = 12;
      std::uint64_t before = 0, after = 0;
      std::barrier warm(p, [&]() noexcept { before = ccoll_support::heap_allocations(); });
      std::barrier done(p, [&]() noexcept { after = ccoll_support::heap_allocations(); });
      const auto out = on_threads(p, [&](int r) -> std::string {
        RankBuffers grads = make_buffers(tensors, static_cast<Layout>(r % 3));
        auto& g = sync.attach(r, grads.ptrs);
        std::vector<int> order(n);
        std::string wrong;
        auto iteration = [&](int it) {
          permute(order, r, it);
          for (int t : order) {
            fill(tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)], r,
                 p, t, it);
            g.ready(t);
          }
          g.wait();
          for (std::size_t t = 0; t < n && wrong.empty(); ++t)
            wrong = check(tensors[t], grads.ptrs[t], p, static_cast<int>(t), it, ReduceOp::sum);
        };
        for (int it = 0; it < kWarmup; ++it) iteration(it);
        warm.arrive_and_wait();
        for (int it = kWarmup; it < kWarmup + kIterations; ++it) iteration(it);
        done.arrive_and_wait();
        if (!wrong.empty()) return at_rank(r, wrong);
        const engine::CoordinationStats s = g.stats();
        if (s.new_responses != n || s.cached_responses != n * (kWarmup + kIterations - 1))
          return at_rank(r, "not every later iteration was decided from the response cache");
        return g.staged_allreduces() > 0 ? "" : at_rank(r, "nothing staged");
      });
      for (const auto& o : out) CHECK(o == "");
      CHECK(after - before == 0);
    }
  }
}

TEST_CASE("the control plane over an allreduce: AND, OR, gather and broadcast, P = 3") {
  const int p = 3;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 20s;
  AR ar(cfg);
  const auto out = on_threads(p, [&](int r) -> std::string {
    coord::AllreduceControlPlane<decltype(ar.rank(0))> cp(ar.rank(r), r, p);
    std::vector<std::uint64_t> w = {~std::uint64_t{0} ^ (std::uint64_t{1} << r),
                                    0x8000000000000001ull, std::uint64_t{1} << (10 + r)};
    std::vector<std::uint64_t> o = w;
    cp.allreduce_and(w);
    cp.allreduce_or(o);
    if (w != std::vector<std::uint64_t>{~std::uint64_t{7}, 0x8000000000000001ull, 0})
      return at_rank(r, "AND");
    if (o != std::vector<std::uint64_t>{~std::uint64_t{0}, 0x8000000000000001ull, 0x7ull << 10})
      return at_rank(r, "OR");
    const std::string mine(static_cast<std::size_t>(r) * 5, static_cast<char>('a' + r));
    const auto all = cp.gather_to_root(mine);
    if (r == 0 && all != std::vector<std::string>{"", "bbbbb", "cccccccccc"})
      return at_rank(r, "gather");
    if (r != 0 && !all.empty()) return at_rank(r, "gather gave a non-root rank something");
    const std::string b = cp.broadcast_from_root(r == 0 ? "decision\n\t" : "ignored");
    if (b != "decision\n\t") return at_rank(r, "broadcast");
    return "";
  });
  for (const auto& o : out) CHECK(o == "");
}

TEST_CASE("misuse: unknown tensors, ready twice, waits that could never return, bad policies") {
  const Model model = models()[0];
  Config cfg;
  cfg.nranks = 1;
  cfg.timeout = 5s;
  GradientSync<AR, Coordinated> sync(cfg, model.tensors, Coordinated{});
  RankBuffers grads = make_buffers(model.tensors, Layout::packed);
  auto& g = sync.attach(0, grads.ptrs);
  CHECK(code_of([&] { g.ready(99); }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { g.ready("nope"); }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { g.wait(2); }) == ErrorCode::InvalidArgument);
  g.ready("l3");
  CHECK(code_of([&] { g.ready(2); }) == ErrorCode::InvalidArgument);
  g.wait(2);
  g.wait();
  CHECK(g.iterations() == 1);
  CHECK(code_of([&] { sync.attach(0, grads.ptrs); }) == ErrorCode::InvalidArgument);
  Coordinated bad;
  bad.max_concurrent = 0;
  CHECK(code_of([&] { GradientSync<AR, Coordinated> s(cfg, model.tensors, bad); }) ==
        ErrorCode::InvalidArgument);
  auto tabbed = model.tensors;
  tabbed[0].name = "a\tb";
  CHECK(code_of([&] { GradientSync<AR, Coordinated> s(cfg, tabbed, Coordinated{}); }) ==
        ErrorCode::InvalidArgument);
}

TEST_CASE("a peer that never marks a tensor the others marked: they fail within the timeout") {
  const Model model = models()[0];
  const int p = 2;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 1000ms;
  std::vector<RankBuffers> buffers;
  buffers.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) buffers.push_back(make_buffers(model.tensors, Layout::packed));
  Coordinated policy;
  policy.cycle_time = 200us;
  GradientSync<AR, Coordinated> sync(cfg, model.tensors, policy);
  std::atomic<int> code0{-1};
  std::atomic<long long> elapsed_ms{0};
  const auto out = on_threads(p, [&](int r) -> std::string {
    auto& g = sync.attach(r, buffers[static_cast<std::size_t>(r)].ptrs);
    const int n = static_cast<int>(model.tensors.size());
    if (r == 1) {  // forgets tensor 0; what it marked is reduced
      for (int t = n - 1; t >= 1; --t) g.ready(t);
      g.wait();
      return "";
    }
    for (int t = n - 1; t >= 0; --t) g.ready(t);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      g.wait();
      return "wait() returned";
    } catch (const Error& e) {
      code0 = static_cast<int>(e.code());
    }
    elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    const auto first = static_cast<ErrorCode>(code0.load());
    if (code_of([&] { g.ready(0); }) != first) return "ready() after the failure";
    if (code_of([&] { g.wait(); }) != first) return "wait() after the failure";
    return "";
  });
  for (const auto& o : out) CHECK(o == "");
  CHECK((code0 == static_cast<int>(ErrorCode::Timeout) ||
         code0 == static_cast<int>(ErrorCode::Aborted)));
  CHECK(elapsed_ms < 10000);
}

TEST_CASE("a failed call: nothing starts after it, and its error comes once nothing is in flight") {
  const std::vector<TensorSpec> tensors = {{"A", 4, DataType::f32}, {"B", 4, DataType::f32}};
  std::array<float, 4> a{}, b{};
  const std::array<void*, 2> ptrs = {a.data(), b.data()};
  Script script;
  g_script = &script;
  Coordinated policy;
  policy.max_concurrent = 2;
  policy.fusion_threshold_bytes = 1;  // A and B are two fused allreduces, on lanes 0 and 1
  policy.cycle_time = 200us;
  const auto until = [&](auto&& pred) {
    std::unique_lock lock(script.mu);
    REQUIRE(script.cv.wait_for(lock, 5s, pred));
  };
  SUBCASE("a cycle that ran while a call failed decides jobs that never run") {
    GradientSync<ScriptedCollective, Coordinated> sync(Config{}, tensors, policy);
    auto& g = sync.attach(0, ptrs);
    g.ready(0);
    until([&] { return script.lane0_entered; });
    {
      std::lock_guard lock(script.mu);
      script.hold_control = true;
    }
    g.ready(1);
    until([&] { return script.control_held; });  // the cycle that decides B is running
    {
      std::lock_guard lock(script.mu);
      script.fail_lane0 = true;
      script.cv.notify_all();
    }
    // The user may free its buffers from here on.
    CHECK(code_of([&] { g.wait(); }) == ErrorCode::Timeout);
    {
      std::lock_guard lock(script.mu);
      script.hold_control = false;
      script.cv.notify_all();
    }
    std::this_thread::sleep_for(200ms);  // time for a wrong engine to run B
    std::lock_guard lock(script.mu);
    CHECK(script.lane1_calls == 0);
  }
  SUBCASE("ready() rethrows once the other lane's call is over") {
    GradientSync<ScriptedCollective, Coordinated> sync(Config{}, tensors, policy);
    auto& g = sync.attach(0, ptrs);
    g.ready(0);
    g.ready(1);
    // A is ready already: InvalidArgument until the engine fails, then its error.
    ErrorCode code = ErrorCode::InvalidArgument;
    for (int i = 0; i < 5000 && code == ErrorCode::InvalidArgument; ++i) {
      code = code_of([&] { g.ready(0); });
      if (code == ErrorCode::InvalidArgument) std::this_thread::sleep_for(1ms);
    }
    std::lock_guard lock(script.mu);
    CHECK(code == ErrorCode::Timeout);
    CHECK(script.lane1_calls == 1);
    CHECK_FALSE(script.lane1_inside);
  }
  g_script = nullptr;
}
}  // namespace gradient_coordinated_test
