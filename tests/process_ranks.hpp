// Test helper: run a function on P processes fork()ed by the test, one per rank, and collect
// what each reports through a pipe; a child that outlives its limit is killed, so a hang fails the
// test instead of stalling it. Shared by the shared-memory tests.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/transport/session.hpp"
#include "sanitized.hpp"

namespace process_ranks {

using namespace std::chrono_literals;

struct Outcome {
  int exit_code = -1;   // 0: fine; 1: threw; 2: wrong results; -1: killed
  std::string message;  // "OK", "ERR <code> <what>" or "WRONG <what>"
};

// How much longer a sanitized build runs the same test: ASan and TSan at -O0/-O1 take 5-15x
// the optimised time, and the default limit is meant to catch hangs, not slow builds.
inline constexpr int kSanitizerSlowdown = ccoll::testing::kSanitized ? 6 : 1;

// Forks one process per rank; fn(rank) returns "" on success or a description of wrong results.
// Children that outlive `limit` are killed (a hang is a failure, not a stuck test); by default
// 20 s, times kSanitizerSlowdown.
inline std::vector<Outcome> on_processes(int p, const std::function<std::string(int)>& fn,
                                         std::chrono::milliseconds limit = 0ms) {
  if (limit == 0ms) limit = 20000ms * kSanitizerSlowdown;
  std::vector<pid_t> pids(static_cast<std::size_t>(p));
  std::vector<int> fds(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    int pipefd[2];
    REQUIRE(::pipe(pipefd) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(pipefd[0]);
      std::string msg;
      int code = 0;
      try {
        const std::string wrong = fn(r);
        msg = wrong.empty() ? "OK" : "WRONG " + wrong;
        code = wrong.empty() ? 0 : 2;
      } catch (const ccoll::Error& e) {
        msg = "ERR " + std::to_string(static_cast<int>(e.code())) + " " + e.what();
        code = 1;
      } catch (const std::exception& e) {
        msg = std::string("ERR -1 ") + e.what();
        code = 1;
      }
      const ssize_t w = ::write(pipefd[1], msg.data(), msg.size());
      (void)w;
      ::_exit(code);
    }
    ::close(pipefd[1]);
    pids[static_cast<std::size_t>(r)] = pid;
    fds[static_cast<std::size_t>(r)] = pipefd[0];
  }
  std::vector<Outcome> out(static_cast<std::size_t>(p));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int r = 0; r < p; ++r) {
    int status = 0;
    for (;;) {
      const pid_t w = ::waitpid(pids[static_cast<std::size_t>(r)], &status, WNOHANG);
      if (w != 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
        ::waitpid(pids[static_cast<std::size_t>(r)], &status, 0);
        break;
      }
      std::this_thread::sleep_for(2ms);
    }
    Outcome& o = out[static_cast<std::size_t>(r)];
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    char buf[4096];
    ssize_t k;
    while ((k = ::read(fds[static_cast<std::size_t>(r)], buf, sizeof buf)) > 0)
      o.message.append(buf, static_cast<std::size_t>(k));
    ::close(fds[static_cast<std::size_t>(r)]);
  }
  return out;
}

// A session name no other test process uses, in this container or another: "<prefix>.<random>".
inline std::string unique_session(const std::string& prefix) {
  return ccoll::transport::new_session(prefix);
}

// Every rank finished without error (a failed CHECK names the rank and what it reported).
inline void require_all_ok(const std::vector<Outcome>& out) {
  for (std::size_t r = 0; r < out.size(); ++r) {
    INFO("rank " << r << ": " << out[r].message);
    CHECK(out[r].exit_code == 0);
  }
}

// The ccoll::ErrorCode a rank threw ("ERR <code> ..."), or -100 if it threw nothing.
inline int error_code_of(const Outcome& o) {
  if (o.message.rfind("ERR ", 0) != 0) return -100;
  return std::atoi(o.message.c_str() + 4);
}

}  // namespace process_ranks
