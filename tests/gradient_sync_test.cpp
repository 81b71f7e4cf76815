// Tests of gradient::GradientSync on the host-threads transport: the lowering of schedules onto
// channels; every planner's schedule on three small models (odd sizes, 1-element tensors, mixed
// dtypes) for P = 2, 3, 4, with ranks marking their tensors ready in different orders and keeping
// them in different layouts (zero-copy on one rank, staged on another), checked bitwise against
// the exact reduction and against one allreduce per tensor (gradient_sync_harness.hpp says why
// bitwise is right); gradient queuing; no allocation after the first iteration; overlap proven
// with an instrumented collective; misuse; a peer that never marks a tensor ready.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "gradient_sync_harness.hpp"
#include "heap_counter.hpp"

namespace gradient_sync_test {
using namespace ccoll;
using namespace ccoll::gradient;
using namespace gradient_sync_harness;
using namespace std::chrono_literals;

namespace {

using AR = Allreduce<transport::HostThreads, algo::Ring,
                     schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>;

std::string rank_prefix(int r) {
  std::string s("rank ");
  s += std::to_string(r);
  s += ": ";
  return s;
}

std::size_t multi_tensor_parts(const engine::ChannelPlan& plan) {
  std::size_t n = 0;
  for (const auto& part : plan.parts) n += part.first < part.last;
  return n;
}

// `iterations` iterations of `schedule` on P threads; checks every gradient after every wait().
void run_policy(const Model& model, const Schedule& schedule, int p, ReduceOp op, int iterations,
                int salt) {
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 20s;
  GradientSync<AR> sync(cfg, model.tensors, schedule, {.op = op});
  AR reference(cfg);
  const auto n = model.tensors.size();
  const auto out = on_threads(p, [&](int r) -> std::string {
    const auto layout = static_cast<Layout>((r + salt) % 3);
    RankBuffers grads = make_buffers(model.tensors, layout);
    RankBuffers in = make_buffers(model.tensors, Layout::scattered);
    RankBuffers ref = make_buffers(model.tensors, Layout::scattered);
    auto& g = sync.attach(r, grads.ptrs);
    // A rank that finds a wrong value still runs every call, so that the others do not wait for
    // it until the timeout; the first wrong value is reported.
    std::string wrong;
    std::vector<int> order(n);
    for (int it = 0; it < iterations; ++it) {
      ready_order(order, r, it);
      for (int t : order) {
        fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)], r,
             p, t, it);
        g.ready(t);
      }
      g.wait();
      for (std::size_t t = 0; t < n; ++t) {
        const TensorSpec& spec = model.tensors[t];
        fill(spec, in.ptrs[t], r, p, static_cast<int>(t), it);
        reference.rank(r).run(in.ptrs[t], ref.ptrs[t], spec.count, spec.dtype, op);
        if (wrong.empty() && std::memcmp(grads.ptrs[t], ref.ptrs[t], spec.bytes()) != 0)
          wrong = rank_prefix(r) + "tensor '" + spec.name + "' differs from its own allreduce";
        if (wrong.empty()) wrong = check(spec, grads.ptrs[t], p, static_cast<int>(t), it, op);
      }
    }
    if (!wrong.empty()) return wrong;
    const std::size_t staged = g.staged_parts();
    if (layout == Layout::packed && staged != 0) return rank_prefix(r) + "packed but staged";
    if (layout == Layout::scattered && staged != multi_tensor_parts(sync.channel_plan()))
      return rank_prefix(r) + "scattered but not staged";
    if (g.iterations() != static_cast<std::uint64_t>(iterations))
      return rank_prefix(r) + "iteration count";
    if (g.max_in_flight() > schedule.max_concurrent)
      return rank_prefix(r) + "more than K in flight";
    return "";
  });
  for (int r = 0; r < p; ++r) CHECK(out[static_cast<std::size_t>(r)] == "");
}

// An instrumented collective for overlap tests: one rank, no data moved; each call records how
// many calls are inside at once and, when asked, waits (bounded) until `wanted` calls are inside
// together, which only an engine that runs them at the same time can satisfy.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  int max_inside = 0;
  int wanted = 0;                       // > 0: each call waits for this many inside at once
  bool met = false;                     // `wanted` calls were inside together
  std::chrono::milliseconds window{0};  // wanted == 0: how long each call stays inside
  // after_previous messages, by count: each must start after every message issued before it
  // (here: every larger count) has returned. Later messages may already be inside: they start in
  // issue order, but their workers may reach the collective first.
  std::vector<std::size_t> exclusive;
  std::vector<std::size_t> running;  // counts of the calls inside
  int violations = 0;
  bool is_exclusive(std::size_t count) const {
    return std::find(exclusive.begin(), exclusive.end(), count) != exclusive.end();
  }
};
Gate* g_gate = nullptr;

struct FakeTopology {};

class FakeCollective {
 public:
  using transport_type = transport::HostThreads;
  using topology_type = FakeTopology;
  struct Handle {
    void run(const void*, void*, std::size_t count, DataType, ReduceOp) const {
      Gate& g = *g_gate;
      std::unique_lock lock(g.mu);
      if (g.is_exclusive(count) &&
          std::any_of(g.running.begin(), g.running.end(), [&](std::size_t c) { return c > count; }))
        ++g.violations;
      g.running.push_back(count);
      ++g.inside;
      g.max_inside = std::max(g.max_inside, g.inside);
      g.cv.notify_all();
      bool ok = true;
      if (g.wanted > 0) {
        if (g.inside >= g.wanted) g.met = true;
        ok = g.cv.wait_for(lock, 5s, [&] { return g.met; });
      } else {
        // Held open, so that a call started too early finds this one still inside. A correct
        // engine passes whatever the timing; only a wrong one needs the window to be caught.
        const auto until = std::chrono::steady_clock::now() + g.window;
        g.cv.wait_until(lock, until, [&] { return std::chrono::steady_clock::now() >= until; });
      }
      --g.inside;
      g.running.erase(std::find(g.running.begin(), g.running.end(), count));
      if (!ok) throw Error(ErrorCode::Timeout, 0, "the calls never ran at the same time");
    }
  };
  FakeCollective(const Config& c, FakeTopology) : config_(c) {}
  Handle rank(int) { return {}; }
  std::span<const int> local_ranks() const { return local_; }
  int nranks() const { return 1; }
  const Config& config() const { return config_; }

 private:
  Config config_;
  std::array<int, 1> local_{0};
};
static_assert(engine::AllreduceLike<FakeCollective>);

// A collective for failure tests, by call size: a call of `failing` elements fails once a call of
// `busy` elements is inside; that one stays inside for `hold` (or until released), so that the
// engine has a call in flight when it learns of the failure.
struct Failure {
  std::mutex mu;
  std::condition_variable cv;
  std::size_t failing = 0;
  std::size_t busy = 0;
  std::chrono::milliseconds hold{300};
  bool inside = false;  // the busy call
  int calls = 0;
};
Failure* g_failure = nullptr;

class FailingCollective {
 public:
  using transport_type = transport::HostThreads;
  using topology_type = FakeTopology;
  struct Handle {
    void run(const void*, void*, std::size_t count, DataType, ReduceOp) const {
      Failure& f = *g_failure;
      std::unique_lock lock(f.mu);
      ++f.calls;
      if (count == f.failing) {
        f.cv.wait_for(lock, 5s, [&] { return f.inside; });
        throw Error(ErrorCode::Timeout, 0, "the failing call");
      }
      if (count != f.busy) return;
      f.inside = true;
      f.cv.notify_all();
      f.cv.wait_for(lock, f.hold, [] { return false; });
      f.inside = false;
    }
  };
  FailingCollective(const Config& c, FakeTopology) : config_(c) {}
  Handle rank(int) { return {}; }
  std::span<const int> local_ranks() const { return local_; }
  int nranks() const { return 1; }
  const Config& config() const { return config_; }

 private:
  Config config_;
  std::array<int, 1> local_{0};
};
static_assert(engine::AllreduceLike<FailingCollective>);

std::vector<TensorSpec> f32_tensors(std::size_t n) {
  std::vector<TensorSpec> t;
  for (std::size_t i = 0; i < n; ++i) {
    std::string name("g");
    name += std::to_string(i);
    t.push_back({std::move(name), i + 1, DataType::f32});
  }
  return t;
}

}  // namespace

TEST_CASE("lower: after_previous on channel 0, immediate round robin behind it, parts by dtype") {
  using D = DataType;
  const std::vector<TensorSpec> t = {{"a", 1, D::f32}, {"b", 2, D::f32}, {"c", 3, D::i32},
                                     {"d", 4, D::f32}, {"e", 5, D::f32}, {"f", 6, D::f32},
                                     {"g", 7, D::f32}};
  // layers 6..0: typing index 0 = layer 1. "s n m s s s s" -> messages {6}s {5}s {4}s {3}s
  // {2,1}n {0}s (issue order from layer 7 down).
  const Schedule s = schedule_from_typing(parse_typing("snmssss"), 3);
  const engine::ChannelPlan plan = engine::lower(t, s);
  REQUIRE(plan.messages.size() == 6);
  const int channels[] = {0, 1, 2, 0, 0, 1};  // s s s s | n | s
  for (std::size_t k = 0; k < 6; ++k) CHECK(plan.messages[k].channel == channels[k]);
  CHECK(plan.nchannels == 3);
  // The n message {2,1} = tensors c (i32) and b (f32): two parts, ascending layers.
  const auto& nm = plan.messages[4];
  CHECK(nm.lo == 1);
  CHECK(nm.hi == 2);
  REQUIRE(nm.end_part - nm.first_part == 2);
  CHECK(plan.parts[nm.first_part].first == 1);
  CHECK(plan.parts[nm.first_part].dtype == D::f32);
  CHECK(plan.parts[nm.first_part + 1].first == 2);
  CHECK(plan.parts[nm.first_part + 1].dtype == D::i32);
  CHECK(plan.message_of_layer[1] == 4);
  CHECK(plan.message_of_layer[0] == 5);
  // Single-layer: one message of 7 tensors, parts f32 (a, b), i32 (c), f32 (d..g).
  const engine::ChannelPlan single =
      engine::lower(t, schedule_from_typing(parse_typing("nmmmmmm"), 1));
  REQUIRE(single.messages.size() == 1);
  REQUIRE(single.parts.size() == 3);
  CHECK(single.parts[2].count == 4 + 5 + 6 + 7);
  CHECK(single.parts[2].bytes == 4 * (4 + 5 + 6 + 7));
  // Calls of 3 f32 and 3 i32 elements share a plan (same count, same element size).
  CHECK(single.distinct_calls == std::vector<std::size_t>{2});
  // A schedule that does not cover the tensors is refused.
  CHECK(code_of([&] { engine::lower(t, schedule_from_typing(parse_typing("nnn"), 1)); }) ==
        ErrorCode::InvalidArgument);
  CHECK(code_of([&] {
          std::vector<TensorSpec> dup = t;
          dup[3].name = "a";
          engine::lower(dup, s);
        }) == ErrorCode::InvalidArgument);
}

TEST_CASE("every policy, P = 2, 3, 4: bitwise the exact reduction and a per-tensor allreduce") {
  int salt = 0;
  for (const Model& model : models()) {
    const std::vector<Schedule> schedules = policies(model.profile);
    for (int p : {2, 3, 4}) {
      for (const Schedule& s : schedules) {
        const ReduceOp op = salt % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
        INFO(model.profile.name, " P=", p, " policy ", s.policy, " typing ",
             typing_string(typing_from_schedule(s, model.profile.num_layers())),
             " K=", s.max_concurrent, " op ", to_string(op));
        run_policy(model, s, p, op, 3, salt++);
      }
    }
  }
}

TEST_CASE("gradient queuing: wait(layer) returns with that layer reduced, layer 1 first") {
  const Model model = models()[2];
  const int p = 3;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 20s;
  for (const Schedule& s : {schedule_from_typing(parse_typing("snsmsnmsmsss"), 2, "queue-K2"),
                            plan_wfbp(model.profile)}) {
    INFO(s.policy);
    GradientSync<AR> sync(cfg, model.tensors, s);
    const auto out = on_threads(p, [&](int r) -> std::string {
      RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>(r % 3));
      auto& g = sync.attach(r, grads.ptrs);
      const int n = static_cast<int>(model.tensors.size());
      std::string wrong;  // the first; every rank runs every iteration regardless
      for (int it = 0; it < 3; ++it) {
        for (int t = n - 1; t >= 0; --t) {
          fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)],
               r, p, t, it);
          g.ready(t);
        }
        for (int l = 0; l < n; ++l) {  // the next forward pass, layer 1 first
          g.wait(l);
          if (wrong.empty())
            wrong = check(model.tensors[static_cast<std::size_t>(l)],
                          grads.ptrs[static_cast<std::size_t>(l)], p, l, it, ReduceOp::sum);
        }
        g.wait();  // ends the iteration; everything is done already
      }
      return wrong;
    });
    for (const auto& o : out) CHECK(o == "");
  }
}

TEST_CASE("no allocation after the first iteration (fused, staged, mixed dtypes, K = 2)") {
  const Model model = models()[1];
  const int p = 3;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 20s;
  // s, m and n messages; {1,0} (f32) and {4,3} (i32) fuse tensors of one dtype, staged unless
  // packed
  const Schedule s = schedule_from_typing(parse_typing("smsnmsnss"), 2);
  GradientSync<AR> sync(cfg, model.tensors, s, {.op = ReduceOp::avg});
  std::uint64_t before = 0, after = 0;
  std::barrier warm(p, [&]() noexcept { before = ccoll_support::heap_allocations(); });
  std::barrier done(p, [&]() noexcept { after = ccoll_support::heap_allocations(); });
  std::vector<std::string> wrong(static_cast<std::size_t>(p));
  const auto out = on_threads(p, [&](int r) -> std::string {
    RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>(r % 3));
    auto& g = sync.attach(r, grads.ptrs);
    std::vector<int> order(model.tensors.size());
    auto iteration = [&](int it) {
      ready_order(order, r, it);
      for (int t : order) {
        fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)], r,
             p, t, it);
        g.ready(t);
      }
      g.wait();
    };
    iteration(0);
    warm.arrive_and_wait();
    for (int it = 1; it <= 5; ++it) iteration(it);
    done.arrive_and_wait();
    for (std::size_t t = 0; t < model.tensors.size(); ++t) {
      std::string w =
          check(model.tensors[t], grads.ptrs[t], p, static_cast<int>(t), 5, ReduceOp::avg);
      if (!w.empty()) return w;
    }
    return g.staged_parts() > 0 || r % 3 == 0 ? "" : "nothing staged";
  });
  for (const auto& o : out) CHECK(o == "");
  CHECK(after == before);
}

TEST_CASE("overlap: K immediate messages are inside their allreduces at the same time") {
  for (int k : {2, 3}) {
    Gate gate;
    gate.wanted = k;
    g_gate = &gate;
    const auto tensors = f32_tensors(static_cast<std::size_t>(k));
    GradientSync<FakeCollective> sync(
        Config{}, tensors,
        schedule_from_typing(LayerTyping(static_cast<std::size_t>(k), LayerType::simultaneous), k));
    CHECK(sync.nchannels() == k);
    const RankBuffers buffers = make_buffers(tensors, Layout::scattered);
    auto& g = sync.attach(0, buffers.ptrs);
    for (int it = 0; it < 2; ++it) {
      gate.met = false;
      for (int t = k - 1; t >= 0; --t) g.ready(t);
      CHECK_NOTHROW(g.wait());  // a serial engine would time out in the gate
      CHECK(gate.met);
      CHECK(gate.max_inside == k);
    }
    CHECK(g.max_in_flight() == k);
    g_gate = nullptr;
  }
}

TEST_CASE("overlap: an after_previous message starts alone, at most K run at once") {
  // Tensor i has i + 1 elements and every message here is one tensor, so a call's count names it,
  // and a larger count was issued earlier.
  for (const char* typing : {"nnnnnn", "snsnsn", "ssnssn", "ssssss"}) {
    INFO(std::string(typing));
    Gate gate;
    gate.window = 2ms;
    for (std::size_t i = 0; i < 6; ++i)
      if (typing[i] == 'n') gate.exclusive.push_back(i + 1);
    g_gate = &gate;
    const auto tensors = f32_tensors(6);
    const int k = 2;
    GradientSync<FakeCollective> sync(Config{}, tensors,
                                      schedule_from_typing(parse_typing(typing), k));
    const RankBuffers buffers = make_buffers(tensors, Layout::scattered);
    auto& g = sync.attach(0, buffers.ptrs);
    for (int it = 0; it < 3; ++it) {
      for (int t = 5; t >= 0; --t) g.ready(t);
      g.wait();
    }
    CHECK(gate.violations == 0);
    CHECK(gate.max_inside <= k);
    CHECK(g.max_in_flight() <= k);
    if (std::string(typing) == "nnnnnn") CHECK(gate.max_inside == 1);
    g_gate = nullptr;
  }
}

TEST_CASE("misuse: unknown tensors, ready twice, waits that could never return, bad attach") {
  const auto tensors = f32_tensors(4);
  Config cfg;
  cfg.nranks = 1;
  cfg.timeout = 5s;
  // "n n m s": messages {3} n, {2} s... typing index 0 is layer 1: s(1) m(2) n(3) n(4).
  const Schedule s = schedule_from_typing(parse_typing("smnn"), 2);
  GradientSync<AR> sync(cfg, tensors, s);
  std::vector<std::vector<float>> data;
  std::vector<void*> ptrs;
  data.reserve(tensors.size());
  ptrs.reserve(tensors.size());
  for (const auto& t : tensors) data.emplace_back(t.count, 1.0f);
  for (auto& d : data) ptrs.push_back(d.data());

  CHECK(code_of([&] { sync.attach(1, ptrs); }) == ErrorCode::InvalidArgument);  // not a rank
  CHECK(code_of([&] {
          std::vector<void*> few(ptrs.begin(), ptrs.end() - 1);
          sync.attach(0, few);
        }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] {
          std::vector<void*> null = ptrs;
          null[2] = nullptr;
          sync.attach(0, null);
        }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] {
          std::vector<void*> overlap = ptrs;
          overlap[3] = static_cast<float*>(ptrs[2]) + 1;  // tensor 2 has 3 elements
          sync.attach(0, overlap);
        }) == ErrorCode::InvalidArgument);
  auto& g = sync.attach(0, ptrs);
  CHECK(code_of([&] { sync.attach(0, ptrs); }) == ErrorCode::InvalidArgument);  // twice
  CHECK(&sync.rank(0) == &g);

  CHECK(code_of([&] { g.ready(-1); }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { g.ready(4); }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { g.ready("no such tensor"); }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { g.wait(4); }) == ErrorCode::InvalidArgument);
  CHECK(sync.id("g2") == 2);

  // Nothing ready: wait() and wait(layer) refuse at once instead of hanging.
  CHECK(code_of([&] { g.wait(); }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { g.wait(3); }) == ErrorCode::InvalidArgument);
  g.ready("g3");  // message {4}: done in the background
  CHECK(code_of([&] { g.ready(3); }) == ErrorCode::InvalidArgument);  // twice in one iteration
  g.wait(3);
  CHECK(data[3][0] == 1.0f);  // sum over one rank
  // Layer 1 (s) is issued after {3} and {2,1}... layer 0's message is last: needs 1 and 2 ready.
  g.ready(0);
  CHECK(code_of([&] { g.wait(0); }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { g.wait(); }) == ErrorCode::InvalidArgument);
  g.ready(2);
  g.ready(1);
  g.wait(0);
  g.wait();
  CHECK(g.iterations() == 1);
  // A new iteration: the same tensors may be marked ready again.
  for (int t = 3; t >= 0; --t) g.ready(t);
  g.wait();
  CHECK(g.iterations() == 2);
  CHECK(code_of([&] { g.wait(); }) == ErrorCode::InvalidArgument);  // nothing ready in this one
}

TEST_CASE("a peer that never marks a tensor ready: the others fail within the timeout, for good") {
  const Model model = models()[0];
  const int p = 2;
  Config cfg;
  cfg.nranks = p;
  cfg.timeout = 1000ms;
  // Declared before the engine, so that they outlive it: rank 1 leaves without waiting, and its
  // workers may still be reducing its gradients when its thread ends.
  std::vector<RankBuffers> buffers;
  buffers.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) buffers.push_back(make_buffers(model.tensors, Layout::packed));
  GradientSync<AR> sync(cfg, model.tensors, plan_wfbp(model.profile));
  std::atomic<int> code0{-1};
  std::atomic<long long> elapsed_ms{0};
  const auto out = on_threads(p, [&](int r) -> std::string {
    auto& g = sync.attach(r, buffers[static_cast<std::size_t>(r)].ptrs);
    const int n = static_cast<int>(model.tensors.size());
    if (r == 1) {  // forgets layer 1, and does not wait
      for (int t = n - 1; t >= 1; --t) g.ready(t);
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
    // A failed engine stays failed: every later call reports the error.
    const auto first = static_cast<ErrorCode>(code0.load());
    if (code_of([&] { g.ready(0); }) != first) return "ready() after the failure";
    if (code_of([&] { g.wait(); }) != first) return "wait() after the failure";
    return "";
  });
  for (const auto& o : out) CHECK(o == "");
  // Timeout where rank 0 waited for rank 1; Aborted if, on a loaded machine, some earlier step of
  // rank 1 timed out first and aborted the channel.
  CHECK((code0 == static_cast<int>(ErrorCode::Timeout) ||
         code0 == static_cast<int>(ErrorCode::Aborted)));
  CHECK(elapsed_ms < 10000);
}

TEST_CASE("a failed call is rethrown only once no other call of the rank is in flight") {
  // Tensor i has i + 1 elements. "sss", K = 2: tensor 2's message, on channel 0, fails while
  // tensor 1's is inside its call on channel 1; tensor 0's never starts.
  const std::vector<TensorSpec> tensors = f32_tensors(3);
  const Schedule schedule = schedule_from_typing(parse_typing("sss"), 2);
  RankBuffers buffers = make_buffers(tensors, Layout::scattered);
  Failure failure;
  failure.failing = 3;
  failure.busy = 2;
  g_failure = &failure;
  // The user may free its buffers once the error reaches it: the busy call must be over by then.
  const auto busy_after = [&](auto&& call) {
    ErrorCode code = ErrorCode::InvalidArgument;
    for (int i = 0; i < 5000 && code == ErrorCode::InvalidArgument; ++i) {
      code = code_of(call);
      if (code == ErrorCode::InvalidArgument) std::this_thread::sleep_for(1ms);
    }
    std::lock_guard lock(failure.mu);
    CHECK(code == ErrorCode::Timeout);
    return failure.inside;
  };
  SUBCASE("ready()") {
    GradientSync<FailingCollective> sync(Config{}, tensors, schedule);
    auto& g = sync.attach(0, buffers.ptrs);
    g.ready(2);
    g.ready(1);
    // Tensor 2 is ready already: InvalidArgument until the engine fails, then its error.
    CHECK_FALSE(busy_after([&] { g.ready(2); }));
  }
  SUBCASE("wait(layer) of the failed message") {
    GradientSync<FailingCollective> sync(Config{}, tensors, schedule);
    auto& g = sync.attach(0, buffers.ptrs);
    g.ready(2);
    g.ready(1);
    CHECK_FALSE(busy_after([&] { g.wait(2); }));
  }
  CHECK(failure.calls == 2);
  g_failure = nullptr;
}
}  // namespace gradient_sync_test
