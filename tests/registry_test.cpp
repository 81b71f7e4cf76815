// Tests of the algorithm table (algo/registry.hpp) as a program sees it when it includes the
// registry and no algorithm header: every expected name is there, found by name, once, with the
// entry's own properties, and the lookups agree with each other. This file includes nothing else
// from algo/ on purpose, so that it is the translation unit a user's lookup-only program would be.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/verifier.hpp"
#include "expected_algorithms.hpp"

namespace registry_test {
using ccoll_test::kExpectedAlgorithms;

TEST_CASE("registry: the table holds exactly the expected algorithms, sorted by name") {
  const std::vector<ccoll::algo::Algorithm> table = ccoll::algo::algorithms();
  std::vector<std::string> names;
  names.reserve(table.size());
  for (const auto& a : table) names.push_back(a.name);
  std::vector<std::string> expected;
  expected.reserve(kExpectedAlgorithms.size());
  for (const auto& e : kExpectedAlgorithms) expected.emplace_back(e.name);
  CHECK(names == expected);
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  std::string joined;
  for (const auto& n : expected) joined += (joined.empty() ? "" : ", ") + n;
  CHECK(ccoll::algo::algorithm_names() == joined);
  // The table is built once: every call returns the same object.
  CHECK(&ccoll::algo::algorithm_table() == &ccoll::algo::algorithm_table());
}

TEST_CASE("registry: every expected name is found, with and without a schedule suffix") {
  for (const auto& e : kExpectedAlgorithms) {
    const std::string name(e.name);
    CAPTURE(name);
    const ccoll::algo::AlgorithmSpec spec = ccoll::algo::find_algorithm(name);
    CHECK(spec.algorithm.name == name);
    CHECK(spec.algorithm.needs_topology == e.needs_topology);
    CHECK(spec.algorithm.make);
    CHECK(spec.overlap == spec.algorithm.default_overlap);
    CHECK(spec.name() == name);
    CHECK(ccoll::algo::find_algorithm(name + "-overlap").overlap);
    CHECK_FALSE(ccoll::algo::find_algorithm(name + "-phased").overlap);
  }
  CHECK_THROWS_WITH_AS(ccoll::algo::find_algorithm("no-such-algorithm"),
                       doctest::Contains(ccoll::algo::algorithm_names().c_str()), ccoll::Error);
}

TEST_CASE("registry: a name takes one schedule suffix, not two") {
  // "tree-phased-overlap" once stripped both suffixes and ran the phased tree, while
  // "tree-overlap-phased" was refused: neither says which schedule it means.
  for (const char* name : {"tree-phased-overlap", "tree-overlap-phased", "tree-overlap-overlap",
                           "tree-phased-phased", "ring-phased-overlap"}) {
    CAPTURE(name);
    CHECK_THROWS_AS(ccoll::algo::find_algorithm(name), ccoll::Error);
  }
}

TEST_CASE("registry: every algorithm on abstract ranks plans by name, and its plan verifies") {
  for (const auto& e : kExpectedAlgorithms) {
    if (e.needs_topology) continue;
    CAPTURE(e.name);
    ccoll::algo::AlgorithmRequest req;
    req.nranks = 4;
    const ccoll::algo::Registered reg = ccoll::algo::make_algorithm(e.name, req);
    ccoll::plan::PlanRequest r;
    r.nranks = 4;
    r.count = 1000;
    const ccoll::plan::Plan p = reg.build(r);
    CHECK(p.nranks == 4);
    CHECK_NOTHROW(ccoll::plan::verify_or_throw(p));
  }
}
}  // namespace registry_test
