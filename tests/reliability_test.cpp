// Misuse and absurd input on the host-threads transport: each ends in a clear ccoll::Error, never
// a hang, a wrong answer or memory exhaustion (docs/reliability.md).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccoll/ccoll.hpp"

namespace reliability_test {
using namespace ccoll;
using namespace std::chrono_literals;

namespace {

struct Outcome {
  bool ok = false;
  ErrorCode code = ErrorCode::Parse;
  std::string what;
  bool foreign = false;  // an exception that is not a ccoll::Error
};

template <class F>
std::vector<Outcome> on_threads(int p, F fn) {
  std::vector<Outcome> out(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(p));
  for (int t = 0; t < p; ++t)
    threads.emplace_back([&, t] {
      auto& o = out[static_cast<std::size_t>(t)];
      try {
        fn(t);
        o.ok = true;
      } catch (const Error& e) {
        o.code = e.code();
        o.what = e.what();
      } catch (const std::exception& e) {
        o.foreign = true;
        o.what = e.what();
      }
    });
  for (auto& th : threads) th.join();
  return out;
}

}  // namespace

TEST_CASE("two threads passing the same rank: a misuse error, and the others stop at once") {
  Config c;
  c.nranks = 3;
  c.timeout = 60s;  // the test's bound below is far shorter: nobody may wait for the deadline
  Allreduce<transport::HostThreads, algo::Ring> ar(c);
  std::vector<std::vector<float>> buf(4, std::vector<float>(1u << 20, 1.0f));
  const auto t0 = std::chrono::steady_clock::now();
  // Threads 0 and 3 both claim rank 0; rank 2 never calls, so the first rank 0 waits in its call.
  auto out = on_threads(4, [&](int t) {
    if (t == 2) return;
    const int rank = t == 3 ? 0 : t;
    if (t == 3) std::this_thread::sleep_for(50ms);  // the first claim is in its call by then
    ar.rank(rank).run(buf[static_cast<std::size_t>(t)].data(),
                      buf[static_cast<std::size_t>(t)].data(), buf[0].size(), DataType::f32,
                      ReduceOp::sum);
  });
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  CHECK(out[3].code == ErrorCode::InvalidArgument);
  CHECK(out[3].what.find("already in a call") != std::string::npos);
  for (int t : {0, 1}) {
    INFO(out[static_cast<std::size_t>(t)].what);
    CHECK_FALSE(out[static_cast<std::size_t>(t)].ok);
    CHECK(out[static_cast<std::size_t>(t)].what.find("rank 0 failed first") != std::string::npos);
  }
}

TEST_CASE("an exception that is not ccoll's, in one rank's call, stops the others at once") {
  // std::bad_alloc while a plan is built, say: the rank that meets it raises the abort, so its
  // peer reports that rather than waiting for its messages until the deadline (a timeout).
  Config c;
  c.nranks = 2;
  c.timeout = 30s;
  std::atomic<bool> thrown{false};
  const algo::Registered failing_once("ring-failing-once", [&](const plan::PlanRequest& r) {
    if (r.count == 777 && !thrown.exchange(true)) throw std::runtime_error("out of memory (test)");
    return plan::build_ring(r);
  });
  Allreduce<transport::HostThreads, algo::Registered> ar(c, failing_once);
  auto out = on_threads(2, [&](int r) {
    std::vector<float> v(777, 1.0f);
    ar.rank(r).run(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum);
  });
  CHECK(thrown);
  int foreign = 0;
  for (const auto& o : out) {
    INFO(o.what);
    CHECK_FALSE(o.ok);
    if (o.foreign) {
      ++foreign;
      CHECK(o.what == "out of memory (test)");
    } else {
      CHECK(o.code == ErrorCode::Aborted);
    }
  }
  CHECK(foreign == 1);
}

TEST_CASE("building a plan is not a wait: a build longer than Config::timeout still completes") {
  // A plan is built and verified on a call's first use of its count (seconds for a large forest,
  // or in an unoptimised build); the rank building it holds the cache's lock while its peers wait
  // for it. Config::timeout bounds the waits for peers, which count from when the plan is ready.
  Config c;
  c.nranks = 3;
  c.timeout = 100ms;
  std::atomic<int> slow_builds{0};
  const algo::Registered slow("ring-slow-to-plan", [&](const plan::PlanRequest& r) {
    if (r.count == 300 || r.count == 60000) {
      ++slow_builds;
      std::this_thread::sleep_for(3 * c.timeout);
    }
    return plan::build_ring(r);
  });
  Allreduce<transport::HostThreads, algo::Registered> ar(c, slow);
  // 300 elements agree in band, after the steps; 60,000 agree first.
  auto out = on_threads(3, [&](int r) {
    for (const std::size_t n : {std::size_t{300}, std::size_t{60000}}) {
      std::vector<float> v(n, 1.0f);
      ar.rank(r).run(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum);
      if (v.front() != 3.0f || v.back() != 3.0f)
        throw Error(ErrorCode::Mismatch, r, "wrong result");
    }
  });
  CHECK(slow_builds == 2);
  for (const auto& o : out) {
    INFO(o.what);
    CHECK(o.ok);
  }
}

TEST_CASE("a timeout of milliseconds::max() never expires instead of wrapping into the past") {
  Config c;
  c.nranks = 2;
  c.timeout = std::chrono::milliseconds::max();
  Allreduce<transport::HostThreads, algo::Ring> ar(c);
  auto out = on_threads(2, [&](int r) {
    std::vector<float> v(1000, 1.0f);
    for (int i = 0; i < 3; ++i)
      ar.rank(r).run(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum);
    if (v[0] != 8.0f) throw Error(ErrorCode::Parse, r, "wrong result");
  });
  for (const auto& o : out) {
    INFO(o.what);
    CHECK(o.ok);
  }
}

TEST_CASE("an absurd count is refused before anything is allocated, on every rank") {
  Config c;
  c.nranks = 2;
  c.timeout = 5s;
  Allreduce<transport::HostThreads, algo::Ring> ar(c);
  std::vector<float> small(16, 1.0f);
  // A count whose bytes would wrap: refused alike on every rank as an argument (the communicator
  // stays usable); one the plan cannot hold: refused by the plan.
  const std::pair<std::size_t, const char*> counts[] = {
      {std::numeric_limits<std::size_t>::max() / 4, "overflow"},
      {std::size_t{1} << 50, "slot_bytes"}};
  for (const auto& entry : counts) {
    const std::size_t count = entry.first;  // a plain variable: lambdas capture it in C++20
    const char* const why = entry.second;
    CAPTURE(count);
    auto out = on_threads(2, [&](int r) {
      ar.rank(r).run(small.data(), small.data(), count, DataType::f32, ReduceOp::sum);
    });
    for (const auto& o : out) {
      INFO(o.what);
      CHECK_FALSE(o.ok);
      CHECK((o.code == ErrorCode::Unsupported || o.code == ErrorCode::Aborted ||
             o.code == ErrorCode::InvalidArgument));
    }
    CHECK(out[0].what.find(why) != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(ar.plan(std::size_t{1} << 50, DataType::f32),
                       doctest::Contains("raise slot_bytes"), Error);
}

TEST_CASE("rank and size from the environment: out-of-range integers are refused") {
  ::setenv("CCOLL_RANK", "4294967297", 1);  // would wrap to 1 as an int
  ::setenv("CCOLL_SIZE", "2", 1);
  Config c;
  c.timeout = 100ms;
  CHECK_THROWS_WITH_AS(transport::SharedMemory::resolve(c), doctest::Contains("CCOLL_RANK"), Error);
  ::setenv("CCOLL_RANK", "-1", 1);
  CHECK_THROWS_AS(transport::SharedMemory::resolve(c), Error);
  ::setenv("CCOLL_RANK", "1", 1);
  const Config resolved = transport::SharedMemory::resolve(c);
  CHECK(resolved.rank == 1);
  CHECK(resolved.nranks == 2);
  // No session and no launcher: the parent process names it, so jobs of different parents differ.
  CHECK(resolved.session.rfind("ccoll-parent-", 0) == 0);
  ::unsetenv("CCOLL_RANK");
  ::unsetenv("CCOLL_SIZE");
}

TEST_CASE("session names: a Slurm job's steps differ; a runtime directory that is not there") {
  // Two steps (srun, mpiexec) of one allocation run at once under one SLURM_JOB_ID.
  ::setenv("CCOLL_RANK", "0", 1);
  ::setenv("CCOLL_SIZE", "2", 1);
  for (const char* var : {"CCOLL_SESSION", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"})
    ::unsetenv(var);
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_STEP_ID", "3", 1);
  CHECK(transport::SharedMemory::resolve(Config{}).session == "4242.3");
  ::unsetenv("SLURM_STEP_ID");
  CHECK(transport::SharedMemory::resolve(Config{}).session == "4242");
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("CCOLL_RANK");
  ::unsetenv("CCOLL_SIZE");
  // An inherited XDG_RUNTIME_DIR that this node lacks: the token directory falls back to /tmp.
  const char* saved = std::getenv("XDG_RUNTIME_DIR");
  const std::string keep = saved != nullptr ? saved : "";
  const char* shm_dir = std::getenv("CCOLL_SHM_DIR");
  const std::string keep_shm = shm_dir != nullptr ? shm_dir : "";
  ::unsetenv("CCOLL_SHM_DIR");
  ::setenv("XDG_RUNTIME_DIR", "/nonexistent/run/user/4242", 1);
  CHECK(transport::detail::token_dir(0) == "/tmp/ccoll-" + std::to_string(::geteuid()));
  if (saved != nullptr)
    ::setenv("XDG_RUNTIME_DIR", keep.c_str(), 1);
  else
    ::unsetenv("XDG_RUNTIME_DIR");
  if (shm_dir != nullptr) ::setenv("CCOLL_SHM_DIR", keep_shm.c_str(), 1);
}

TEST_CASE("session names: derived ones name the PID namespace and the boot, new ones are random") {
  // Pids and start times repeat across PID namespaces, so the derived name carries the namespace
  // (containers) and the boot id (hosts); siblings of one parent still derive the same name.
  const std::string derived = transport::detail::parent_session();
  CHECK(derived == transport::detail::parent_session());
  CHECK(derived.rfind("ccoll-parent-" + std::to_string(::getppid()) + "-", 0) == 0);
  const std::string ns = transport::detail::pid_namespace_id();
  REQUIRE_FALSE(ns.empty());
  CHECK(derived.find("-" + ns) != std::string::npos);
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) == 0) CHECK(ns == "ns" + std::to_string(st.st_ino));
  const std::string boot = transport::detail::boot_id();
  if (!boot.empty()) {
    CHECK(boot.size() == 16);
    CHECK(derived.substr(derived.size() - boot.size()) == boot);
  }
  const std::string a = transport::new_session("job"), b = transport::new_session("job");
  CHECK(a.rfind("job.", 0) == 0);
  CHECK(a.size() == 4 + 32);
  CHECK(a != b);
  CHECK(transport::new_session("").size() == 32);
}
}  // namespace reliability_test
