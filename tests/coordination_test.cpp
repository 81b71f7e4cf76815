// Coordination of ranks whose tensors become ready in different orders ([Horovod-cache]):
// bitvector, response cache, tensor queue with groups, fusion, the in-process control plane and the
// coordinator over P threads with randomised per-rank orders.
#include <doctest/doctest.h>

#include <algorithm>
#include <exception>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/coord/bitvector.hpp"
#include "ccoll/coord/coordinator.hpp"
#include "ccoll/coord/fusion.hpp"
#include "ccoll/coord/response_cache.hpp"
#include "ccoll/coord/tensor_queue.hpp"
#include "ccoll/coord/thread_control_plane.hpp"
#include "coordination_harness.hpp"

namespace coordination_test {
using namespace ccoll;
using namespace ccoll::coord;
using namespace coordination_harness;

TEST_CASE("bitvector: set, AND/OR, count, iteration over set bits") {
  std::mt19937 rng(7);
  for (std::size_t n : {1u, 63u, 64u, 65u, 130u, 1000u}) {
    BitVector a(n), b(n);
    std::vector<bool> ra(n), rb(n);
    for (std::size_t i = 0; i < n; ++i) {
      ra[i] = rng() % 2;
      rb[i] = rng() % 3 == 0;
      a.assign(i, ra[i]);
      b.assign(i, rb[i]);
    }
    BitVector x = a, o = a;
    x &= b;
    o |= b;
    std::size_t nx = 0;
    std::vector<std::size_t> listed;
    x.for_each_set([&](std::size_t i) { listed.push_back(i); });
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(x.test(i) == (ra[i] && rb[i]));
      CHECK(o.test(i) == (ra[i] || rb[i]));
      nx += ra[i] && rb[i];
    }
    CHECK(x.count() == nx);
    CHECK(listed.size() == nx);
    CHECK(std::is_sorted(listed.begin(), listed.end()));
    CHECK(a.bytes() == (n + 63) / 64 * 8);
    // A `true` fill leaves no stray bits visible.
    BitVector ones(n, true);
    CHECK(ones.count() == n);
  }
}

TEST_CASE("response cache: positions, hits, invalid entries, LRU eviction, determinism") {
  ResponseCache c(3);
  CHECK(c.put(req("a", 10)) == 0);
  CHECK(c.put(req("b", 20)) == 1);
  CHECK(c.put(req("c", 30)) == 2);
  CHECK(c.lookup(req("b", 20)).state == ResponseCache::State::hit);
  CHECK(c.lookup(req("b", 20)).bit == 1);
  CHECK(c.lookup(req("b", 21)).state == ResponseCache::State::invalid);
  CHECK(c.lookup(req("b", 20, DataType::f16)).state == ResponseCache::State::invalid);
  CHECK(c.lookup(req("z", 1)).state == ResponseCache::State::miss);
  c.touch(0);                       // LRU order now: a, c, b -> b is least recently used
  CHECK(c.put(req("d", 40)) == 1);  // evicts b, reuses its position
  CHECK(c.evictions() == 1);
  CHECK(c.lookup(req("b", 20)).state == ResponseCache::State::miss);
  c.erase(0);
  CHECK(c.size() == 2);
  CHECK(c.put(req("e", 50)) == 0);  // lowest free position
  CHECK(c.num_bits() == 3);
  CHECK(c.lru_order() == std::vector<std::uint32_t>{0, 1, 2});

  // Same operation sequence -> same structure; a different touch order -> different LRU.
  std::mt19937 rng(3);
  ResponseCache x(16), y(16), z(16);
  for (int step = 0; step < 500; ++step) {
    const int kind = static_cast<int>(rng() % 3);
    const std::string name = cat("t", rng() % 40);
    const auto r = req(name, 1 + rng() % 3);
    if (kind == 0) {
      x.put(r);
      y.put(r);
      z.put(r);
    } else if (kind == 1) {
      const auto l = x.lookup(r);
      if (l.state != ResponseCache::State::miss) {
        x.erase(l.bit);
        y.erase(l.bit);
        z.erase(l.bit);
      }
    } else {
      const auto l = x.lookup(r);
      if (l.state != ResponseCache::State::miss) {
        x.touch(l.bit);
        y.touch(l.bit);
      }
    }
  }
  CHECK(x.fingerprint() == y.fingerprint());
  CHECK(x.size() <= 16);
  CHECK(x.evictions() > 0);
}

TEST_CASE("requests survive the wire format") {
  std::vector<TensorRequest> list = {req("layer1.weight", 37632),
                                     {"x y.z", DataType::bf16, 7, ReduceOp::max, "g", 3}};
  CHECK(wire::decode(wire::encode(list)) == list);
  CHECK(wire::decode("").empty());
  CHECK_THROWS_AS(wire::decode("a\t0\t1"), Error);
}

TEST_CASE("tensor queue holds a group back until all its members are submitted") {
  TensorQueue q(0);
  q.define_group("g", {"a", "b", "c"});
  q.submit(req("a", 1));
  q.submit(req("x", 1));
  q.submit(req("b", 1));
  auto ready = q.pop_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].name == "x");
  q.submit(req("c", 1));
  ready = q.pop_ready();
  CHECK(ready.size() == 3);
  for (const auto& r : ready) CHECK(r.group == "g");
  for (const auto& r : ready) CHECK(r.group_size == 3);
  q.requeue(ready);
  CHECK(q.pop_ready().size() == 3);
  CHECK_THROWS_AS(q.submit(req("a", 1)), Error);  // still in flight
  q.complete("a");
  CHECK_NOTHROW(q.submit(req("a", 1)));
  CHECK_THROWS_AS(q.submit(req("bad\tname", 1)), Error);
  CHECK_THROWS_AS(q.define_group("h", {"z", "a"}), Error);  // a is in g already
  CHECK_THROWS_AS(q.define_group("h", {"y", "y"}), Error);  // twice in one group
  CHECK_NOTHROW(q.define_group("h", {"z"}));  // the failed definitions left nothing behind
}

TEST_CASE("fusion packs up to the threshold and never splits a group") {
  std::vector<Response> list;
  list.reserve(10);
  for (int i = 0; i < 10; ++i) list.push_back(req(cat("t", i), 100));  // 400 B each
  list[2].group = list[7].group = list[8].group = "g";
  list[2].group_size = list[7].group_size = list[8].group_size = 3;
  list[5].dtype = DataType::f16;
  const auto fused = fuse_responses(list, 1000);
  std::size_t total = 0;
  std::map<std::string, std::size_t> where;
  for (std::size_t f = 0; f < fused.size(); ++f) {
    total += fused[f].tensors.size();
    for (const auto& t : fused[f].tensors) {
      CHECK(t.dtype == fused[f].dtype);
      where[t.name] = f;
    }
    const bool single_unit = fused[f].tensors.front().group == fused[f].tensors.back().group &&
                             !fused[f].tensors.front().group.empty();
    CHECK((fused[f].bytes <= 1000 || single_unit || fused[f].tensors.size() == 1));
  }
  CHECK(total == list.size());
  CHECK(where["t2"] == where["t7"]);
  CHECK(where["t2"] == where["t8"]);
  // A group larger than the threshold is one buffer of its own.
  const auto big = fuse_responses(list, 500);
  for (const auto& f : big) {
    if (f.tensors.front().group == "g") CHECK(f.tensors.size() == 3);
  }
}

TEST_CASE("thread control plane: AND, OR, gather, broadcast; a missing rank times out") {
  constexpr int P = 5;
  ThreadControlGroup group(P);
  auto errors = run_ranks(P, [&](int r) {
    ThreadControlPlane cp(group, r);
    for (int round = 0; round < 20; ++round) {
      std::vector<std::uint64_t> w = {~(std::uint64_t{1} << r), std::uint64_t{1} << r};
      cp.allreduce_and(w);
      if (w[0] != ~std::uint64_t{0x1f}) throw std::runtime_error("AND");
      cp.allreduce_or(w);
      auto all = cp.gather_to_root(cat("r", r, "/", round));
      if (r == 0 && (all.size() != P || all[3] != cat("r3/", round)))
        throw std::runtime_error("gather");
      if (r != 0 && !all.empty()) throw std::runtime_error("gather non-root");
      if (cp.broadcast_from_root(r == 0 ? "hello" : "ignored") != "hello")
        throw std::runtime_error("broadcast");
    }
  });
  for (const auto& e : errors) CHECK(error_text(e) == "");

  ThreadControlGroup lonely(2, std::chrono::milliseconds(100));
  ThreadControlPlane cp(lonely, 0);
  std::vector<std::uint64_t> w(1);
  try {
    cp.allreduce_and(w);
    FAIL("no timeout");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(e.rank() == 0);
  }
}

TEST_CASE("random per-rank orders: all ranks execute the same fused responses") {
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    for (int nranks : {2, 3, 8}) {
      Scenario s;
      s.seed = seed;
      s.nranks = nranks;
      s.options.fusion_threshold_bytes = 16 * 1024;
      CAPTURE(seed);
      CAPTURE(nranks);
      const auto logs = simulate(s);
      // The cache holds every tensor after the first iteration: no coordinator path after it,
      // and every coordinator-free cycle costs exactly one bitvector.
      for (std::size_t it = 1; it < logs[0].coordinator_cycles.size(); ++it)
        CHECK(logs[0].coordinator_cycles[it] == 0);
      CHECK(logs[0].coordinator_cycles[0] > 0);
      // The orders really differed (tensors waited for other ranks) and fusion really packed.
      for (const auto& log : logs) CHECK(log.deferred > 0);
      CHECK(logs[0].max_fused_tensors > 1);
      const std::uint64_t bits = Coordinator::kStatusBits + static_cast<std::uint64_t>(s.ntensors);
      for (auto b : logs[0].steady_control) CHECK(b == (bits + 63) / 64 * 8);
    }
  }
}

TEST_CASE("a cache smaller than the model evicts identically on every rank") {
  Scenario s;
  s.nranks = 4;
  s.ntensors = 30;
  s.options.cache_capacity = 7;
  s.options.fusion_threshold_bytes = 8 * 1024;
  const auto logs = simulate(s);
  CHECK(logs[0].evictions > 0);
  for (const auto& log : logs) CHECK(log.evictions == logs[0].evictions);
}

TEST_CASE("with the cache disabled (Horovod's original protocol) the result is the same") {
  Scenario s;
  s.nranks = 3;
  s.options.cache_enabled = false;
  const auto logs = simulate(s);
  for (int c : logs[0].coordinator_cycles) CHECK(c > 0);
}

TEST_CASE("a group is not executed until every member is ready on every rank") {
  constexpr int P = 3;
  ThreadControlGroup group(P);
  std::vector<std::vector<std::vector<std::string>>> per_cycle(P);
  const auto errors = run_ranks(P, [&](int r) {
    ThreadControlPlane cp(group, r);
    Coordinator c(cp);
    c.define_group("g", {"a", "b"});
    for (int iter = 0; iter < 2; ++iter) {  // once through the coordinator, once from the cache
      c.submit("a", DataType::f32, 10);
      c.submit("x", DataType::f32, 10);
      for (int cycle = 0; cycle < 4; ++cycle) {
        // Rank 2 produces b two cycles late; nobody may run a (or b) before that.
        if ((r == 2 && cycle == 2) || (r != 2 && cycle == 0)) c.submit("b", DataType::f32, 10);
        std::vector<std::string> names;
        for (const auto& f : c.run_cycle())
          for (const auto& t : f.tensors) names.push_back(t.name);
        per_cycle[static_cast<std::size_t>(r)].push_back(names);
      }
    }
  });
  for (const auto& e : errors) REQUIRE(error_text(e) == "");
  for (int r = 0; r < P; ++r) {
    const auto& pc = per_cycle[static_cast<std::size_t>(r)];
    CHECK(pc == per_cycle[0]);
    for (int iter = 0; iter < 2; ++iter) {
      const std::size_t base = static_cast<std::size_t>(iter) * 4;
      CHECK(pc[base] == std::vector<std::string>{"x"});
      CHECK(pc[base + 1].empty());
      CHECK(pc[base + 2].size() == 2);  // a and b together, in the cycle b became ready everywhere
      CHECK(pc[base + 3].empty());
    }
  }
}

TEST_CASE("ranks that disagree on a tensor's size or dtype all get a clear error") {
  struct Case {
    std::uint64_t count1;
    DataType dtype1;
    bool cached_first;  // the tensor ran once consistently before the disagreement
    const char* expect;
  };
  const Case cases[] = {{20, DataType::f32, false, "count 20"},
                        {10, DataType::f16, false, "dtype half"},
                        {20, DataType::f32, true, "count 20"}};
  for (const Case& k : cases) {
    constexpr int P = 3;
    ThreadControlGroup group(P, std::chrono::seconds(10));
    const auto errors = run_ranks(P, [&](int r) {
      ThreadControlPlane cp(group, r);
      Coordinator c(cp);
      if (k.cached_first) {
        c.submit("fc.weight", DataType::f32, 10);
        c.run_cycle();
      }
      if (r == 1)
        c.submit("fc.weight", k.dtype1, k.count1);
      else
        c.submit("fc.weight", DataType::f32, 10);
      for (int cycle = 0; cycle < 5; ++cycle) c.run_cycle();
    });
    for (int r = 0; r < P; ++r) {
      const std::string text = error_text(errors[static_cast<std::size_t>(r)]);
      CAPTURE(text);
      CHECK(text.find("mismatch across ranks") != std::string::npos);
      CHECK(text.find("'fc.weight'") != std::string::npos);
      CHECK(text.find("rank 1 submitted") != std::string::npos);
      CHECK(text.find(k.expect) != std::string::npos);
      CHECK(text.find("count 10, dtype float") != std::string::npos);
    }
  }
}

TEST_CASE("a tensor that changes size on every rank is re-coordinated, not an error") {
  constexpr int P = 4;
  ThreadControlGroup group(P);
  std::vector<std::vector<std::uint64_t>> counts(P);
  const auto errors = run_ranks(P, [&](int r) {
    ThreadControlPlane cp(group, r);
    Coordinator c(cp);
    for (std::uint64_t n : {10u, 10u, 33u, 33u}) {
      c.submit("emb", DataType::f32, n);
      std::size_t done = 0;
      while (done == 0) {
        for (const auto& f : c.run_cycle())
          for (const auto& t : f.tensors) {
            counts[static_cast<std::size_t>(r)].push_back(t.count);
            ++done;
          }
      }
      if (c.cache().size() != 1) throw std::runtime_error("stale entry kept");
    }
  });
  for (const auto& e : errors) REQUIRE(error_text(e) == "");
  for (const auto& c : counts) CHECK(c == std::vector<std::uint64_t>{10, 10, 33, 33});
}

TEST_CASE("a group name or member that would break the wire form is rejected at define_group") {
  // A newline in a group name used to fail to parse on rank 0 alone (the other ranks then waited
  // for its broadcast until the deadline); a tab shifted the fields and truncated the group.
  TensorQueue q(0);
  for (const char* bad : {"bad\ngroup", "bad\tgroup"}) {
    try {
      q.define_group(bad, {"a", "b"});
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
    }
  }
  CHECK_THROWS_AS(q.define_group("g", {"a", "b\tc"}), Error);
  CHECK_THROWS_AS(q.define_group("g", {"a", ""}), Error);
  CHECK_NOTHROW(q.define_group("g", {"a", "b"}));  // nothing was left behind
}

TEST_CASE("ranks with different coordinator options all get an error in the first cycle") {
  // Different capacities used to evict different entries, so one bit named b on rank 0 and a on
  // rank 1 and the ranks ran different allreduces without any error.
  struct Case {
    CoordinatorOptions rank1;
    const char* expect;
  };
  const Case cases[] = {{{.cache_capacity = 1}, "cache_capacity"},
                        {{.fusion_threshold_bytes = 100}, "fusion_threshold_bytes"},
                        {{.cache_enabled = false}, "cache_enabled"}};
  for (const Case& k : cases) {
    constexpr int P = 3;
    ThreadControlGroup group(P, std::chrono::seconds(10));
    const auto errors = run_ranks(P, [&](int r) {
      ThreadControlPlane cp(group, r);
      Coordinator c(cp, r == 1 ? k.rank1 : CoordinatorOptions{.cache_capacity = 2});
      c.submit("a", DataType::f32, 10);
      c.submit("b", DataType::f32, 20);
      c.run_cycle();
    });
    for (const auto& e : errors) {
      const std::string text = error_text(e);
      CAPTURE(text);
      CHECK(text.find("options differ across ranks") != std::string::npos);
      CHECK(text.find(k.expect) != std::string::npos);
    }
  }
  // The capacity of a disabled cache does not matter.
  ThreadControlGroup group(2);
  const auto errors = run_ranks(2, [&](int r) {
    ThreadControlPlane cp(group, r);
    Coordinator c(cp, {.cache_capacity = r == 0 ? 1u : 5u, .cache_enabled = false});
    c.submit("a", DataType::f32, 10);
    if (c.run_cycle().size() != 1) throw std::runtime_error("not executed");
  });
  for (const auto& e : errors) CHECK(error_text(e) == "");
}

TEST_CASE("byte sizes near 2^64 neither wrap in fusion nor pass submit") {
  // Two 2^63-byte tensors used to sum to 0 bytes and share one "empty" fused buffer.
  const std::uint64_t huge = std::uint64_t{1} << 61;  // f32: 2^63 bytes
  const auto two = fuse_responses({req("x", huge), req("y", huge)}, 64u << 20);
  CHECK(two.size() == 2);
  std::vector<Response> group = {req("x", huge), req("y", huge), req("z", 4)};
  group[0].group = group[1].group = "g";
  group[0].group_size = group[1].group_size = 2;
  const auto g = fuse_responses(group, 64u << 20);
  REQUIRE(g.size() == 2);
  CHECK(g[0].tensors.size() == 2);
  CHECK(g[1].tensors.front().name == "z");

  TensorQueue q(0);
  CHECK_THROWS_AS(q.submit(req("w", std::uint64_t{1} << 62, DataType::f32)), Error);
  CHECK_NOTHROW(q.submit(req("v", std::uint64_t{1} << 60, DataType::f64)));
}
}  // namespace coordination_test
