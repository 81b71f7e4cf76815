// Tests of gradient::GradientSync on the shared-memory transport: P = 2 and 3 processes fork()ed
// by the test, each with one communicator per channel (a rendezvous of its own), ranks marking
// their tensors ready in different orders and keeping them in different layouts, checked bitwise
// against the exact reduction (gradient_sync_harness.hpp says why bitwise is right).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "gradient_sync_harness.hpp"

using namespace ccoll;
using namespace ccoll::gradient;
using namespace gradient_sync_harness;
using namespace std::chrono_literals;

namespace {

using AR = Allreduce<transport::SharedMemory, algo::Ring,
                     schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>;

// Forks one process per rank; fn(rank) returns "" or what was wrong, which comes back through a
// pipe. A child past `limit` is killed: a hang fails the test instead of stalling it.
std::vector<std::string> on_processes(int p, const std::function<std::string(int)>& fn,
                                      std::chrono::milliseconds limit = 60000ms) {
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < p; ++r) {
    int pipefd[2];
    REQUIRE(::pipe(pipefd) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(pipefd[0]);
      std::string msg;
      try {
        msg = fn(r);
      } catch (const std::exception& e) {
        msg = "threw: ";
        msg += e.what();
      }
      if (msg.empty()) msg = "OK";
      const ssize_t w = ::write(pipefd[1], msg.data(), msg.size());
      (void)w;
      ::_exit(0);
    }
    ::close(pipefd[1]);
    pids.push_back(pid);
    fds.push_back(pipefd[0]);
  }
  std::vector<std::string> out(static_cast<std::size_t>(p));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (std::size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    while (::waitpid(pids[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &status, 0);
        break;
      }
      std::this_thread::sleep_for(2ms);  // polling a child's exit, not synchronising with it
    }
    char buf[4096];
    ssize_t k;
    while ((k = ::read(fds[r], buf, sizeof buf)) > 0)
      out[r].append(buf, static_cast<std::size_t>(k));
    ::close(fds[r]);
    if (out[r].empty()) out[r] = "killed or crashed";
  }
  return out;
}

}  // namespace

TEST_CASE("processes: fused, staged and simultaneous messages over shared memory, P = 2, 3") {
  for (int p : {2, 3}) {
    std::string session("gsync-");
    session += std::to_string(::getpid());
    session += "-";
    session += std::to_string(p);
    const auto out = on_processes(p, [&](int r) -> std::string {
      int index = 0;
      for (const Model& model : models()) {
        const std::vector<Schedule> all = policies(model.profile);
        // asc-wfbp (K = 2), single-layer (one fused message), mixed (s, m, n with K = 2).
        for (const Schedule* s : {&all[4], &all[1], &all.back()}) {
          Config cfg;
          cfg.nranks = p;
          cfg.rank = r;
          cfg.timeout = 20s;
          cfg.session = session;
          cfg.session += "-";
          cfg.session += std::to_string(index++);
          const ReduceOp op = index % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
          GradientSync<AR> sync(cfg, model.tensors, *s, {.op = op});
          RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>((r + index) % 3));
          auto& g = sync.attach(grads.ptrs);
          std::vector<int> order(model.tensors.size());
          for (int it = 0; it < 3; ++it) {
            ready_order(order, r, it);
            for (int t : order) {
              fill(model.tensors[static_cast<std::size_t>(t)],
                   grads.ptrs[static_cast<std::size_t>(t)], r, p, t, it);
              g.ready(t);
            }
            g.wait();
            for (std::size_t t = 0; t < model.tensors.size(); ++t) {
              std::string wrong =
                  check(model.tensors[t], grads.ptrs[t], p, static_cast<int>(t), it, op);
              if (!wrong.empty()) {
                wrong += " (";
                wrong += model.profile.name;
                wrong += ", ";
                wrong += s->policy;
                wrong += ")";
                return wrong;
              }
            }
          }
        }
      }
      return "";
    });
    for (const auto& o : out) CHECK(o == "OK");
  }
}
