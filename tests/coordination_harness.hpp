// Test harness shared by coordination_test.cpp and coordination_slow_test.cpp: P ranks as threads,
// each producing the same tensors in its own random order, and the checks of the coordination
// invariants on what they executed.
#pragma once

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

#include "ccoll/coord/coordinator.hpp"
#include "ccoll/coord/thread_control_plane.hpp"

namespace coordination_harness {

using namespace ccoll;
using namespace ccoll::coord;

// Concatenation through a stream: g++ 12's -Wrestrict misfires on "literal" + std::string.
template <class... T>
std::string cat(const T&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

inline TensorRequest req(std::string name, std::uint64_t count, DataType dt = DataType::f32) {
  return TensorRequest{std::move(name), dt, count, ReduceOp::sum, {}, 0};
}

// Runs f(rank) on P threads; rethrows nothing, returns each rank's exception (or null).
template <class F>
std::vector<std::exception_ptr> run_ranks(int nranks, F f) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(nranks));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline std::string error_text(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "?";
}

struct Tensor {
  std::string name;
  DataType dtype;
  std::uint64_t count;
  std::string group;
};

struct Scenario {
  int nranks = 4;
  int ntensors = 40;
  int ngroups = 3;
  int group_size = 4;
  int iterations = 6;
  int max_submit_per_cycle = 6;
  CoordinatorOptions options;
  std::uint32_t seed = 1;
};

struct RankLog {
  std::vector<std::vector<std::string>> fused;  // names per fused response, all iterations
  std::vector<std::size_t> iteration_end;       // fused.size() at the end of each iteration
  std::vector<std::uint64_t> fingerprints;      // cache fingerprint after each iteration
  std::vector<int> coordinator_cycles;          // per iteration
  std::vector<std::uint64_t> steady_control;    // control bytes per cycle, coordinator-free
  std::uint64_t evictions = 0;
  bool fused_over_threshold = false;
  std::size_t max_fused_tensors = 0;
  std::size_t deferred = 0;  // cycles ending with tensors queued here (waiting for other ranks)
};

inline std::vector<Tensor> make_tensors(const Scenario& s) {
  std::mt19937 rng(s.seed);
  std::vector<Tensor> t;
  for (int i = 0; i < s.ntensors; ++i) {
    Tensor x{cat("layer", i, ".weight"), rng() % 5 == 0 ? DataType::f16 : DataType::f32,
             1 + rng() % 5000, ""};
    if (i < s.ngroups * s.group_size) {
      x.group = cat("group", i / s.group_size);
      x.dtype = DataType::f32;
    }
    t.push_back(x);
  }
  return t;
}

inline void train(const Scenario& s, const std::vector<Tensor>& tensors, ThreadControlGroup& group,
                  int rank, RankLog& log) {
  ThreadControlPlane cp(group, rank);
  Coordinator coord(cp, s.options);
  std::map<std::string, std::vector<std::string>> groups;
  for (const auto& t : tensors)
    if (!t.group.empty()) groups[t.group].push_back(t.name);
  for (auto& [g, m] : groups) coord.define_group(g, m);

  std::mt19937 rng(s.seed * 7919u + static_cast<std::uint32_t>(rank) * 104729u);
  for (int it = 0; it < s.iterations; ++it) {
    std::vector<int> order(tensors.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::shuffle(order.begin(), order.end(), rng);  // this rank's own ready order
    std::size_t next = 0, executed = 0;
    int coordinator_cycles = 0, cycles = 0;
    while (executed < tensors.size()) {
      if (++cycles > 10000) throw std::runtime_error("no progress");
      const std::size_t take = rng() % static_cast<unsigned>(s.max_submit_per_cycle + 1);
      for (std::size_t k = 0; k < take && next < order.size(); ++k) {
        const Tensor& t = tensors[static_cast<std::size_t>(order[next++])];
        coord.submit(t.name, t.dtype, t.count);
      }
      for (const auto& f : coord.run_cycle()) {
        std::vector<std::string> names;
        for (const auto& r : f.tensors) names.push_back(r.name);
        executed += names.size();
        log.max_fused_tensors = std::max(log.max_fused_tensors, names.size());
        log.fused.push_back(std::move(names));
        if (f.bytes > s.options.fusion_threshold_bytes && f.tensors.size() > 1 &&
            f.tensors.front().group.empty())
          log.fused_over_threshold = true;
      }
      const CycleStats& st = coord.last_cycle();
      if (coord.queue().queued() > 0) ++log.deferred;
      if (st.coordinator_path) {
        ++coordinator_cycles;
      } else {
        log.steady_control.push_back(st.control_bytes());
      }
    }
    log.iteration_end.push_back(log.fused.size());
    log.fingerprints.push_back(coord.cache().fingerprint());
    log.coordinator_cycles.push_back(coordinator_cycles);
  }
  log.evictions = coord.cache().evictions();
}

inline std::vector<RankLog> simulate(const Scenario& s) {
  const auto tensors = make_tensors(s);
  ThreadControlGroup group(s.nranks, std::chrono::seconds(20));
  std::vector<RankLog> logs(static_cast<std::size_t>(s.nranks));
  const auto errors = run_ranks(
      s.nranks, [&](int r) { train(s, tensors, group, r, logs[static_cast<std::size_t>(r)]); });
  for (const auto& e : errors) REQUIRE(error_text(e) == "");

  // Every rank executed the same fused responses in the same order, and the same caches.
  for (const auto& log : logs) {
    CHECK(log.fused == logs[0].fused);
    CHECK(log.iteration_end == logs[0].iteration_end);
    CHECK(log.fingerprints == logs[0].fingerprints);
    CHECK_FALSE(log.fused_over_threshold);
  }
  // Per iteration: every tensor exactly once; a group's members in one fused response.
  std::size_t begin = 0;
  for (std::size_t end : logs[0].iteration_end) {
    std::map<std::string, int> seen;
    std::map<std::string, std::set<std::size_t>> group_fused;
    for (std::size_t f = begin; f < end; ++f) {
      for (const auto& name : logs[0].fused[f]) {
        ++seen[name];
        for (const auto& t : tensors)
          if (t.name == name && !t.group.empty()) group_fused[t.group].insert(f);
      }
    }
    CHECK(seen.size() == tensors.size());
    // (no structured bindings: clang 14 cannot capture them in doctest's message lambdas)
    for (const auto& kv : seen) CHECK_MESSAGE(kv.second == 1, kv.first);
    for (const auto& kv : group_fused) CHECK_MESSAGE(kv.second.size() == 1, kv.first);
    begin = end;
  }
  return logs;
}

}  // namespace coordination_harness
