// ccoll/transport/cuda/peer_presence.hpp: whether the other processes of a GPU job are still
// there, and the leave barrier that keeps a rank's memory alive while peers may write into it.
//
// The ranks of a CudaP2P process job write into each other's GPU memory: a connection's slots and
// tail counter live in the receiver's memory, its head counter in the sender's. Two things follow.
//   - Liveness. A rank whose process died leaves its peers' kernels waiting until Config::timeout;
//     the host of a waiting rank checks, while it waits in synchronize(), whether the processes of
//     its peers still exist (each publishes its pid in the job's control page), so that the
//     failure names the rank that exited instead of a bare timeout.
//   - Leaving. A rank that frees its memory while a peer's kernel still writes into it corrupts
//     whatever the allocator hands out next (or faults the peer). So a rank that leaves first waits
//     for its own kernels, raises its `left` word, and then waits, bounded by Config::timeout,
//     until every peer it is connected with has raised its own or has exited: each peer's word goes
//     up only after that peer's kernels have completed.
// Plain host code over the control page's words (control_page.cuh): the fast suite tests it with
// forked processes.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/sync/atomic.hpp"

namespace ccoll::transport::cuda {

// False when process `pid` no longer exists or is a zombie (it exited and was not reaped yet);
// pid <= 0 (not published: a rank of this process) counts as alive.
inline bool process_alive(std::int64_t pid) {
  if (pid <= 0) return true;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  // kill() succeeds on a zombie; its state in /proc says it has exited.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: kill() said it exists
  const auto paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

// The ranks among `peers` whose processes have exited (pids[rank]: that rank's published pid).
inline std::vector<int> exited_peers(const std::int64_t* pids, std::span<const int> peers) {
  std::vector<int> gone;
  for (int q : peers) {
    auto* word = const_cast<std::int64_t*>(pids + q);
    if (!process_alive(sync::AtomicWord<std::int64_t>(word).load_acquire())) gone.push_back(q);
  }
  return gone;
}

// " (rank 1, pid 4242, has exited; rank 3, ...)": the exited peers, for a failure message.
inline std::string describe_exited(const std::int64_t* pids, std::span<const int> gone) {
  std::string s;
  for (int q : gone)
    s += (s.empty() ? "" : "; ") + std::string("rank ") + std::to_string(q) + " (pid " +
         std::to_string(pids[q]) + ") has exited";
  return s;
}

// The leave barrier. Raises left[me] (the caller's kernels have completed), then waits until every
// rank of `peers` has raised its word or has exited, or `timeout` passes (0: no wait beyond one
// look). Returns the peers still present at the end: their kernels may still write into this
// rank's memory.
inline std::vector<int> leave(std::uint64_t* left, const std::int64_t* pids, int me,
                              std::span<const int> peers, std::chrono::milliseconds timeout) {
  sync::AtomicWord<std::uint64_t>(left + me).store_release(1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> waiting(peers.begin(), peers.end());
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    std::vector<int> still;
    for (int q : waiting) {
      if (sync::AtomicWord<std::uint64_t>(left + q).load_acquire() != 0) continue;
      auto* pid = const_cast<std::int64_t*>(pids + q);
      if (!process_alive(sync::AtomicWord<std::int64_t>(pid).load_acquire())) continue;
      still.push_back(q);
    }
    waiting = std::move(still);
    if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) return waiting;
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(5)) pause *= 2;
  }
}

}  // namespace ccoll::transport::cuda
