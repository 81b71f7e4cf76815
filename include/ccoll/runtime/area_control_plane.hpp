// ccoll/runtime/area_control_plane.hpp: the control plane of transports whose ranks share memory
// (host threads, processes on one host): agreement through per-rank descriptors and an abort
// record, both in the shared area (runtime/shared_area.hpp).
//
// Agreement on call `seq`, rank r:
//   1. r waits until every rank has acknowledged call seq-1 (read its descriptors), then writes
//      its descriptor (count, dtype, op, local verdict and reason, and on rank 0 its per-call
//      choice) and publishes seq last (release);
//   2. r waits for every rank's descriptor of seq and compares them: every rank reaches the same
//      verdict from the same data, so a mismatch or a bad argument anywhere makes every rank throw
//      before any rank has touched a buffer; then r acknowledges seq.
// A rank whose own arguments are bad publishes them and throws at once (it has nothing to read).
// Waits give up at the call's deadline or when the abort record is raised; the first failure
// wins the record, so every rank reports the root cause. Ranks that are processes record their pid
// in their descriptor; check_peers() (every kPeerCheckNs of waiting) raises the record for a rank
// whose process is gone, so a killed peer is reported within a fraction of a second, naming it,
// whatever Config::timeout is.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/control_plane.hpp"
#include "ccoll/runtime/shared_area.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::runtime {

// Whether a process has exited: it no longer exists, or it is a zombie its parent has not reaped
// yet (a launcher that waits for its children in order leaves a dead rank a zombie for a while).
inline bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string stat(buf, n);
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() &&
         (stat[close + 2] == 'Z' || stat[close + 2] == 'X');
}

// How often a waiting rank checks that its peers' processes still exist.
inline constexpr std::uint64_t kPeerCheckNs = 100'000'000;

class AreaControlPlane {
 public:
  AreaControlPlane() = default;
  AreaControlPlane(std::byte* area, const AreaLayout& layout, int nranks, long timeout_ms,
                   const sync::WaitPolicy& policy)
      : header_(reinterpret_cast<AreaHeader*>(area)),
        descriptors_(reinterpret_cast<RankDescriptor*>(area + layout.descriptors)),
        nranks_(nranks),
        timeout_ms_(timeout_ms),
        policy_(policy) {}

  Agreement agree(const CallArgs& args, std::uint64_t seq, std::uint64_t deadline_ns,
                  FailurePoint where) {
    const int rank = where.rank;
    // The previous call's descriptors must have been read by everyone before ours is overwritten.
    for (int q = 0; q < nranks_; ++q)
      wait_word(&descriptors_[q].ack, seq - 1, rank, q, deadline_ns, seq);
    RankDescriptor& mine = descriptors_[rank];
    mine.count = args.count;
    mine.dtype = static_cast<std::uint32_t>(args.dtype);
    mine.op = static_cast<std::uint32_t>(args.op);
    mine.status = args.ok() ? 0u : 1u + static_cast<std::uint32_t>(args.error);
    if (rank == 0) mine.root_choice = args.root_choice;
    std::memset(mine.reason, 0, sizeof mine.reason);
    std::memcpy(mine.reason, args.reason.data(),
                std::min(args.reason.size(), sizeof mine.reason - 1));
    sync::AtomicWord<std::uint64_t>(&mine.seq).store_release(seq);
    if (!args.ok()) {
      // Nothing of ours to read any more: let the others overwrite their descriptors later.
      sync::AtomicWord<std::uint64_t>(&mine.ack).store_release(seq);
      throw Error(args.error, rank, args.reason);
    }
    for (int q = 0; q < nranks_; ++q)
      wait_word(&descriptors_[q].seq, seq, rank, q, deadline_ns, seq);
    // Read (rank 0's root choice included) before the acknowledgement below, after which the
    // others may reuse their descriptors.
    Agreement a = common_verdict(descriptors_, nranks_, seq);
    sync::AtomicWord<std::uint64_t>(&mine.ack).store_release(seq);
    return a;
  }

  // Raises the abort record for the first rank whose process no longer exists.
  void check_peers() {
    for (int q = 0; q < nranks_; ++q) {
      const auto pid =
          static_cast<pid_t>(sync::AtomicWord<std::int64_t>(&descriptors_[q].pid).load_acquire());
      if (pid > 0 && pid != ::getpid() && process_gone(pid)) {
        raise(ErrorCode::Aborted, FailurePoint{q, -1, -1, q, FailurePoint::Waiting::dead});
        return;
      }
    }
  }

  const std::uint32_t* abort_word() const { return &header_->abort.flag; }
  bool aborted() const { return header_->abort.raised(); }
  void raise(ErrorCode code, FailurePoint where) {
    header_->abort.raise(static_cast<std::uint32_t>(code), where.rank, where.channel, where.step,
                         where.peer, static_cast<std::uint32_t>(where.waiting_for));
  }

  // Every rank that stops because another failed reports the first failure's code, so that a
  // rank that never arrives makes every other rank report a timeout.
  Error stopped_error(FailurePoint where, std::uint64_t seq) const {
    return stopped_by(header_->abort, where, seq);
  }

 private:
  // Waits until *word >= target; `peer` is the rank whose word it is.
  void wait_word(const std::uint64_t* word, std::uint64_t target, int rank, int peer,
                 std::uint64_t deadline_ns, std::uint64_t seq) {
    sync::Counter c(const_cast<std::uint64_t*>(word));
    sync::WaitResult r = sync::WaitResult::Timeout;
    for (;;) {
      const std::uint64_t now = sync::now_ns();
      const std::uint64_t slice =
          now + kPeerCheckNs < deadline_ns ? now + kPeerCheckNs : deadline_ns;
      r = c.wait(target, &header_->abort.flag, slice, policy_);
      if (r != sync::WaitResult::Timeout || slice == deadline_ns) break;
      check_peers();
    }
    if (r == sync::WaitResult::Ok) return;
    FailurePoint where{rank, -1, -1, peer, FailurePoint::Waiting::arrival};
    if (r == sync::WaitResult::Aborted) throw stopped_error(where, seq);
    raise(ErrorCode::Timeout, where);
    throw Error(ErrorCode::Timeout, rank,
                "rank " + std::to_string(peer) + " did not arrive at call " + std::to_string(seq) +
                    " within " + std::to_string(timeout_ms_) + " ms");
  }

  AreaHeader* header_ = nullptr;
  RankDescriptor* descriptors_ = nullptr;
  int nranks_ = 0;
  long timeout_ms_ = 0;
  sync::WaitPolicy policy_;
};

static_assert(ControlPlane<AreaControlPlane>);

}  // namespace ccoll::runtime
