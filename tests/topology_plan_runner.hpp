// Test helper: verify a plan built from a physical topology and run it on host threads.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/transport/host_threads.hpp"

namespace topology_test {

inline std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)>& current_builder() {
  static std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> f;
  return f;
}
inline ccoll::plan::Plan build_current(const ccoll::plan::PlanRequest& r) {
  return current_builder()(r);
}

// Verifies build(req) symbolically, then runs a float sum allreduce of `count` elements on one
// thread per rank and checks every active rank's output (relays: untouched).
inline void verify_and_run(
    const std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)>& build,
    std::size_t count) {
  ccoll::plan::PlanRequest req;
  req.count = count;
  req.slot_bytes = 4096;
  req.nslots = 4;
  const auto plan = build(req);
  const auto report = ccoll::plan::verify(plan);
  INFO(report.error);
  REQUIRE(report.ok);
  const int p = plan.nranks;
  current_builder() = build;
  ccoll::Config c;
  c.nranks = p;
  c.slot_bytes = 4096;
  c.nslots = 4;
  c.timeout = std::chrono::milliseconds(30000);
  ccoll::transport::HostThreads::Executor ex(c, &build_current, "topology-test");
  std::vector<std::vector<float>> in(static_cast<std::size_t>(p)), out(static_cast<std::size_t>(p));
  std::vector<float> expect(count, 0.0f);
  for (int r = 0; r < p; ++r) {
    auto& v = in[static_cast<std::size_t>(r)];
    v.resize(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>((r + 1) * ((i % 5) + 1));
    if (plan.active[static_cast<std::size_t>(r)])
      for (std::size_t i = 0; i < count; ++i) expect[i] += v[i];
    out[static_cast<std::size_t>(r)].assign(count, -7.0f);
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(p));
  std::vector<std::string> errors(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      try {
        ex.run(r, in[static_cast<std::size_t>(r)].data(), out[static_cast<std::size_t>(r)].data(),
               count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < p; ++r) {
    CAPTURE(r);
    CHECK(errors[static_cast<std::size_t>(r)] == "");
    if (plan.active[static_cast<std::size_t>(r)])
      CHECK(out[static_cast<std::size_t>(r)] == expect);
    else
      CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(count, -7.0f));
  }
}

}  // namespace topology_test
