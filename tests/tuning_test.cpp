// Tests of the per-size choice of algorithm (algo/by_size.hpp, "auto") and of its tuning table's
// JSON form (algo/tuning_table_json.hpp): the default table's choices, plans equal to those of
// the chosen algorithm, exact results across the thresholds on host threads, and bad tables.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/plan/verifier.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include "ccoll/algo/tuning_table_json.hpp"
#endif

using namespace ccoll;

namespace {

plan::PlanRequest request(int p, std::uint64_t count, std::size_t elem = 4) {
  plan::PlanRequest req;
  req.nranks = p;
  req.count = count;
  req.elem_size = elem;
  return req;
}

// Every rank's result against the exact sum (small integers: every order gives the same bits).
template <class AR>
void check_sizes(AR& ar, int p, const std::vector<std::uint64_t>& counts) {
  for (std::uint64_t n : counts) {
    std::vector<std::vector<float>> out(static_cast<std::size_t>(p), std::vector<float>(n));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r)
      threads.emplace_back([&, r] {
        std::vector<float> in(n);
        for (std::uint64_t i = 0; i < n; ++i) in[i] = static_cast<float>((r * 5 + i) % 7);
        ar.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), n, DataType::f32,
                       ReduceOp::sum);
      });
    for (auto& t : threads) t.join();
    long wrong = 0;
    for (int r = 0; r < p; ++r)
      for (std::uint64_t i = 0; i < n; ++i) {
        float expect = 0;
        for (int q = 0; q < p; ++q) expect += static_cast<float>((q * 5 + i) % 7);
        wrong += out[static_cast<std::size_t>(r)][i] != expect;
      }
    INFO("P=" << p << " count=" << n << " plan " << ar.plan(n, DataType::f32).algorithm);
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("auto: the default table's choice per rank count and size") {
  const algo::BySize a;
  CHECK(a.name == "auto");
  CHECK(a.choose(2, 8).algorithm == "oneshot");
  CHECK(a.choose(2, 4096).protocol == protocol::Id::low_latency);
  CHECK(a.choose(2, 4097).protocol == protocol::Id::simple);
  CHECK(a.choose(3, 8).protocol == protocol::Id::low_latency);
  CHECK(a.choose(4, 32 * 1024).protocol == protocol::Id::low_latency);
  CHECK(a.choose(4, 32 * 1024 + 1).protocol == protocol::Id::simple);
  CHECK(a.choose(2, 64 * 1024).algorithm == "oneshot");
  CHECK(a.choose(2, 64 * 1024 + 1).algorithm == "direct");
  CHECK(a.choose(4, 2048).algorithm == "oneshot");
  CHECK(a.choose(4, 2049).algorithm == "recdoubling");
  CHECK(a.choose(4, 32 * 1024).algorithm == "recdoubling");
  CHECK(a.choose(4, 32 * 1024 + 1).algorithm == "direct");
  CHECK(a.choose(17, 8).algorithm == "recdoubling");  // oneshot takes at most 16 ranks
  // The plan is the chosen algorithm's, verified like any other.
  for (int p : {1, 2, 3, 4, 8, 17})
    for (std::uint64_t count : {1ull, 100ull, 1000ull, 20000ull, 1000000ull}) {
      const plan::Plan plan = a.build(request(p, count));
      CAPTURE(p);
      CAPTURE(count);
      const algo::SizeRule& rule = a.choose(p, count * 4);
      CHECK(plan.algorithm ==
            rule.algorithm + (rule.protocol == protocol::Id::low_latency ? "+ll" : ""));
      CHECK(plan::verify(plan).ok);
    }
  // The message size counts bytes: 16 Ki doubles are 128 KiB.
  CHECK(a.build(request(2, 16 * 1024, 8)).algorithm == "direct");
  CHECK(a.build(request(2, 16 * 1024, 4)).algorithm == "oneshot");
}

TEST_CASE("auto on host threads: exact results on both sides of every threshold") {
  for (int p : {2, 3, 4, 8}) {
    Config c;
    c.nranks = p;
    Allreduce<transport::HostThreads, algo::BySize> ar(c);
    // 512, 1024 and 8192 floats are the 2, 4 and 32 KiB thresholds; 16384 the 64 KiB one.
    check_sizes(ar, p, {1, 512, 513, 1024, 1025, 8192, 8193, 16384, 16385, 100000});
    CHECK(ar.plan(512, DataType::f32).algorithm == "oneshot+ll");
    CHECK(ar.plan(1025, DataType::f32).algorithm == (p == 2 ? "oneshot" : "recdoubling+ll"));
    CHECK(ar.plan(100000, DataType::f32).algorithm == "direct");
  }
}

TEST_CASE("auto: a custom table, its digest, and tables that cannot work") {
  algo::TuningTable t;
  t.rules.push_back(algo::SizeRule{"ring", 1024});
  t.rules.push_back(algo::SizeRule{"dbtree"});
  const algo::BySize custom(t);
  CHECK(custom.name.rfind("auto:", 0) == 0);  // ranks with other tables get other fingerprints
  CHECK(custom.name != algo::BySize{}.name);
  CHECK(custom.build(request(4, 256)).algorithm == "ring");
  CHECK(custom.build(request(4, 257)).algorithm.rfind("dbtree", 0) == 0);
  Config c;
  c.nranks = 5;
  Allreduce<transport::HostThreads, algo::BySize> ar(c, custom);
  check_sizes(ar, 5, {3, 256, 257, 5000});

  auto refused = [](std::vector<algo::SizeRule> rules, const char* why) {
    algo::TuningTable bad;
    bad.rules = std::move(rules);
    CHECK_THROWS_WITH_AS(algo::BySize{bad}, doctest::Contains(why), Error);
  };
  refused({}, "at least one rule");
  refused({algo::SizeRule{"nosuch"}}, "nosuch");
  refused({algo::SizeRule{"tree-overlap"}}, "without -overlap/-phased");
  refused({algo::SizeRule{"forest"}}, "abstract ranks");
  refused({algo::SizeRule{"auto"}}, "abstract ranks");
  refused({algo::SizeRule{"ring", 10, 4, 2}}, "min_ranks <= max_ranks");
  // A table with a gap refuses the sizes it does not cover, at planning time.
  algo::TuningTable gap;
  gap.rules.push_back(algo::SizeRule{"ring", 1024});
  CHECK_THROWS_WITH_AS(algo::BySize(gap).build(request(4, 1000)), doctest::Contains("no rule"),
                       Error);
}

#if __has_include(<nlohmann/json.hpp>)
TEST_CASE("auto: the tuning table's JSON form") {
  const algo::TuningTable t = algo::tuning_table_from_json(R"({"rules": [
      {"algorithm": "oneshot", "max_bytes": 4096, "max_ranks": 8},
      {"algorithm": "recdoubling", "max_bytes": 65536, "min_ranks": 2},
      {"algorithm": "ring"}]})");
  REQUIRE(t.rules.size() == 3);
  CHECK(t.rules[0].max_ranks == 8);
  CHECK(t.rules[1].min_ranks == 2);
  CHECK(t.rules[2].max_bytes == UINT64_MAX);
  const algo::BySize a(t);
  CHECK(a.choose(9, 100).algorithm == "recdoubling");
  CHECK(a.choose(4, 100).algorithm == "oneshot");
  auto refused = [](const char* text, const char* key) {
    CHECK_THROWS_WITH_AS(algo::tuning_table_from_json(text), doctest::Contains(key), Error);
  };
  refused("{", "'tuning'");
  refused(R"({"rule": []})", "'tuning'");
  refused(R"({"rules": [3]})", "tuning.rules[0]");
  refused(R"({"rules": [{"max_bytes": 4}]})", "tuning.rules[0].algorithm");
  refused(R"({"rules": [{"algorithm": "ring", "max_bytes": -1}]})", "tuning.rules[0].max_bytes");
  refused(R"({"rules": [{"algorithm": "ring", "max_bytes": 2.5}]})", "tuning.rules[0].max_bytes");
  refused(R"({"rules": [{"algorithm": "ring"}, {"algorithm": "ring", "min_ranks": 0}]})",
          "tuning.rules[1].min_ranks");
}
#endif
