// The architecture's seams, each shown by use: a transport defined here, outside the library,
// runs every algorithm through the one Allreduce template (the interpreter over its own
// Connection type); stateful logical topologies (the packed forest, with relay ranks that forward);
// the algorithm registry; and the rank-handle calling convention with its errors.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/gradient/wfbp.hpp"  // the gradient Schedule struct next to the per-call policy
#include "ccoll/physical/presets.hpp"
#include "ccoll/runtime/area_communicator.hpp"
#include "ccoll/runtime/control_plane.hpp"

namespace transport_test {
using namespace ccoll;

namespace {

using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;

// A connection that counts the messages it carries, around the shared-memory one.
struct CountingConnection {
  sync::ConnectionRef inner;
  std::atomic<std::uint64_t>* sent = nullptr;
  std::int32_t from = 0;
  std::int32_t to = 0;
  std::byte* slot(std::uint64_t m) const { return inner.slot(m); }
  bool can_send(std::uint64_t m) const { return inner.can_send(m); }
  bool can_recv(std::uint64_t m) const { return inner.can_recv(m); }
  sync::WaitResult wait_send(std::uint64_t m, const std::uint32_t* a, std::uint64_t t) const {
    return inner.wait_send(m, a, t);
  }
  sync::WaitResult wait_recv(std::uint64_t m, const std::uint32_t* a, std::uint64_t t) const {
    return inner.wait_recv(m, a, t);
  }
  void post_sent(std::uint64_t m) const {
    sent->fetch_add(1, std::memory_order_relaxed);
    inner.post_sent(m);
  }
  void post_received(std::uint64_t m) const { inner.post_received(m); }
};
static_assert(runtime::Connection<CountingConnection>);

std::atomic<std::uint64_t> g_messages{0};

// A complete transport in a few lines: ranks are threads, connections count their messages.
struct CountingThreads {
  static constexpr std::string_view name = "counting-threads";
  using connection_type = CountingConnection;
  static Config resolve(const Config& c) { return transport::HostThreads::resolve(c); }

  class Executor {
   public:
    using Comm = runtime::Communicator<runtime::AreaControlPlane, CountingConnection>;
    Executor(const Config& config, runtime::PlanSource source, std::string_view id)
        : comm_(config, config.nranks, std::move(source), id),
          states_(static_cast<std::size_t>(config.nranks)),
          local_(static_cast<std::size_t>(config.nranks)) {
      std::iota(local_.begin(), local_.end(), 0);
      const auto layout = runtime::AreaLayout::make(comm_.nranks(), comm_.connection_keys().size(),
                                                    comm_.config().slot_bytes, config.nslots,
                                                    comm_.uses_fast_boxes());
      area_.resize(layout.total / sizeof(Line) + 1);
      auto* base = reinterpret_cast<std::byte*>(area_.data());
      runtime::init_area(base, layout, comm_.nranks(), comm_.fingerprint(), 1);
      std::vector<CountingConnection> conns;
      for (const auto& ref :
           runtime::area_connections(base, layout, comm_.connection_keys(), config.nslots))
        conns.push_back(CountingConnection{ref, &g_messages, ref.from, ref.to});
      comm_.attach(
          runtime::AreaControlPlane(base, layout, comm_.nranks(),
                                    static_cast<long>(config.timeout.count()), comm_.wait_policy()),
          std::move(conns));
      for (auto& s : states_) comm_.init_rank_state(s);
    }
    void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype,
             ReduceOp op) {
      comm_.run(states_[static_cast<std::size_t>(rank)], rank, send, recv, count, dtype, op);
    }
    int nranks() const { return comm_.nranks(); }
    std::span<const int> local_ranks() const { return local_; }
    const Config& config() const { return comm_.config(); }
    plan::Plan plan(std::size_t count, std::size_t elem_size) {
      return comm_.prepared_plan(count, elem_size)->plan;
    }

   private:
    struct alignas(128) Line {
      std::byte b[128];
    };
    Comm comm_;
    std::vector<Comm::rank_state> states_;
    std::vector<int> local_;
    std::vector<Line> area_;
  };
};
static_assert(transport::Transport<CountingThreads>);
static_assert(transport::Transport<transport::HostThreads>);
static_assert(transport::Transport<transport::SharedMemory>);
static_assert(runtime::ControlPlane<runtime::AreaControlPlane>);
static_assert(algo::LogicalTopology<algo::Ring> && algo::LogicalTopology<algo::PackedForest> &&
              algo::LogicalTopology<algo::Registered>);
static_assert(schedule::Schedule<schedule::Phased>);
static_assert(std::is_class_v<gradient::Schedule>);  // no clash with schedule::Schedule

// Every local rank of `ar` on its own thread: inputs rank+1+i%7 (inactive ranks' inputs must not
// count); returns the number of wrong elements over the active ranks' outputs.
template <class AR>
long run_and_check(AR& ar, std::size_t count, const std::vector<bool>& active) {
  const int p = ar.nranks();
  std::vector<std::vector<float>> in(static_cast<std::size_t>(p)), out(in.size());
  for (int r = 0; r < p; ++r) {
    in[static_cast<std::size_t>(r)].resize(count);
    for (std::size_t i = 0; i < count; ++i)
      in[static_cast<std::size_t>(r)][i] = static_cast<float>(r + 1 + static_cast<int>(i % 7));
    out[static_cast<std::size_t>(r)].assign(count, -1.0f);
  }
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(p));
  for (int r : ar.local_ranks())
    threads.emplace_back([&, r] {
      try {
        auto handle = ar.rank(r);
        for (int call = 0; call < 2; ++call)
          handle.run(in[static_cast<std::size_t>(r)].data(),
                     out[static_cast<std::size_t>(r)].data(), count, DataType::f32, ReduceOp::sum);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CHECK(e == "");
  long wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    float expect = 0;
    for (int r = 0; r < p; ++r)
      if (active[static_cast<std::size_t>(r)]) expect += in[static_cast<std::size_t>(r)][i];
    for (int r = 0; r < p; ++r)
      if (active[static_cast<std::size_t>(r)] && out[static_cast<std::size_t>(r)][i] != expect)
        ++wrong;
  }
  return wrong;
}

std::vector<bool> all_active(int p) {
  return std::vector<bool>(static_cast<std::size_t>(p), true);
}

}  // namespace

TEST_CASE("a transport defined outside the library runs every algorithm through Allreduce") {
  Config c;
  c.nranks = 5;
  c.slot_bytes = 4096;
  {
    g_messages = 0;
    Allreduce<CountingThreads, algo::Ring> ar(c);
    CHECK(ar.name() == "counting-threads/ring/pipelined-overlap");
    CHECK(run_and_check(ar, 3001, all_active(5)) == 0);
    std::uint64_t per_call = 0;
    for (const auto& conn : ar.plan(3001, DataType::f32).connections)
      per_call += conn.messages_per_call;
    CHECK(g_messages.load() == 2 * per_call);  // two calls, every message through our connection
  }
  {
    Allreduce<CountingThreads, algo::DoubleBinaryTree, schedule::Phased> ar(c);
    CHECK(run_and_check(ar, 777, all_active(5)) == 0);
  }
}

TEST_CASE("Config::protocol reaches a transport that does nothing about protocols") {
  // The plan cache applies it, so a transport's executor need not: this one has no LowLatency
  // region and runs the LL plan's half-slot chunks as Simple messages.
  Config c;
  c.nranks = 3;
  c.slot_bytes = 1024;
  for (const std::string name : {"", "simple", "ll"}) {
    c.protocol = name;
    Allreduce<CountingThreads, algo::Ring> ar(c);
    const plan::Plan p = ar.plan(5000, DataType::f32);
    const bool ll = name == "ll";
    CHECK(p.algorithm == (ll ? "ring+ll" : "ring"));
    CHECK(p.slot_elems * 4 <= (ll ? c.slot_bytes / 2 - 8 : c.slot_bytes));
    CHECK(run_and_check(ar, 5000, all_active(3)) == 0);
  }
  Config ll = c, simple = c;
  ll.protocol = "ll";
  simple.protocol = "simple";
  CHECK(Allreduce<CountingThreads, algo::Ring>(ll).plan(64, DataType::f32).algorithm == "ring+ll");
  CHECK(CountingThreads::Executor(ll, &algo::Ring::build, "id").plan(64, 4).algorithm == "ring+ll");
  CHECK(CountingThreads::Executor(simple, &algo::Ring::build, "id").plan(64, 4).algorithm ==
        "ring");
}

TEST_CASE("packed forest: a stateful topology built from a physical graph, on host threads") {
  const auto dgx = physical::preset("dgx1v");
  algo::PackedForest forest(dgx);
  CHECK(forest.nranks() == 8);
  Config c;  // nranks 0: the forest's
  c.slot_bytes = 64 * 1024;
  Allreduce<transport::HostThreads, algo::PackedForest, schedule::Phased> phased(c, forest);
  CHECK(phased.nranks() == 8);
  CHECK(run_and_check(phased, 100003, all_active(8)) == 0);
  Allreduce<transport::HostThreads, algo::PackedForest, Overlapped> overlapped(c, forest);
  CHECK(overlapped.plan(4096, DataType::f32).algorithm == "forest-overlap");
  CHECK(run_and_check(overlapped, 4099, all_active(8)) == 0);
  c.nranks = 4;
  CHECK_THROWS_WITH_AS(
      (Allreduce<transport::HostThreads, algo::PackedForest, schedule::Phased>(c, forest)),
      doctest::Contains("the ranks topology 'forest' was planned for"), Error);
}

TEST_CASE("packed forest with relays: inactive GPUs are ranks that forward") {
  auto dgx = physical::preset("dgx1v");
  // Five active workers; the forest may route through the three others ([TopoSync] Sec. III-D).
  dgx.set_active({"gpu0", "gpu1", "gpu2", "gpu5", "gpu6"});
  algo::PackedForest forest(dgx);
  REQUIRE(forest.nranks() == 8);
  const auto& ranks = forest.ranks();
  int relays_used = 0;
  const plan::Plan p = forest.build([] {
    plan::PlanRequest r;
    r.nranks = 8;
    r.count = 1 << 16;
    r.slot_bytes = 1 << 16;
    return r;
  }());
  for (int r = 0; r < 8; ++r)
    if (!ranks.active[static_cast<std::size_t>(r)])
      for (const auto& ch : p.channels)
        if (!ch.programs[static_cast<std::size_t>(r)].steps.empty()) {
          ++relays_used;
          break;
        }
  CHECK(relays_used > 0);  // some tree forwards through an inactive GPU
  Config c;
  c.slot_bytes = 64 * 1024;
  Allreduce<transport::HostThreads, algo::PackedForest, schedule::Phased> ar(c, forest);
  CHECK(run_and_check(ar, 50001, ranks.active) == 0);
}

TEST_CASE("registry: every algorithm by name, on abstract ranks or a physical graph") {
  const auto names = algo::algorithm_names();
  for (const char* n : {"ring", "dbtree", "tree", "direct", "ps", "forest", "blink", "hdbtree"})
    CHECK(names.find(n) != std::string::npos);
  const auto cluster = physical::preset("cluster:2x4:nvlink:25");
  for (const auto& a : algo::algorithms()) {
    for (bool overlap : {false, true}) {
      CAPTURE(a.name);
      CAPTURE(overlap);
      algo::AlgorithmRequest req;
      if (a.needs_topology)
        req.topology = &cluster;
      else
        req.nranks = 6;
      const algo::Registered reg = algo::make_algorithm(a, req);
      Config c;
      c.nranks = a.needs_topology ? 0 : 6;
      c.slot_bytes = 16 * 1024;
      const auto p = a.needs_topology ? reg.nranks() : 6;
      if (overlap) {
        Allreduce<transport::HostThreads, algo::Registered, Overlapped> ar(c, reg);
        CHECK(run_and_check(ar, 5003, all_active(p)) == 0);
      } else {
        Allreduce<transport::HostThreads, algo::Registered, schedule::Phased> ar(c, reg);
        CHECK(run_and_check(ar, 5003, all_active(p)) == 0);
      }
    }
  }
  const auto spec = algo::find_algorithm("tree-overlap");
  CHECK(spec.algorithm.name == "tree");
  CHECK(spec.overlap);
  CHECK_FALSE(algo::find_algorithm("tree").overlap);
  CHECK_THROWS_WITH_AS(algo::find_algorithm("bogus"), doctest::Contains("ring"), Error);
  algo::AlgorithmRequest none;
  CHECK_THROWS_WITH_AS(algo::make_algorithm(algo::find_algorithm("forest").algorithm, none),
                       doctest::Contains("physical topology"), Error);
}

TEST_CASE("rank handles: one calling convention, clear errors") {
  Config c;
  c.nranks = 3;
  Allreduce<transport::HostThreads, algo::Ring> ar(c);
  CHECK(ar.local_ranks().size() == 3);
  CHECK_THROWS_WITH_AS(ar.rank(3), doctest::Contains("a rank of this process (0, 1, 2)"), Error);
  CHECK_THROWS_WITH_AS(ar.rank(), doctest::Contains("hosts 3 ranks per process"), Error);
  CHECK(ar.rank(2).id() == 2);
  c.nranks = 0;
  CHECK_THROWS_WITH_AS((Allreduce<transport::HostThreads, algo::Ring>(c)),
                       doctest::Contains("Config::nranks"), Error);
}
}  // namespace transport_test
