// ccoll/runtime/area_control_plane.hpp: the control plane of transports whose ranks share memory
// (host threads, processes on one host): agreement through per-rank descriptors and an abort
// record, both in the shared area (runtime/shared_area.hpp).
//
// Each rank has kCallDescriptors call descriptors (runtime/shared_area.hpp), call s in
// s % kCallDescriptors. Agreement on call `seq`, rank r:
//   1. r makes sure every rank has acknowledged call seq - kCallDescriptors (read the descriptors
//      r is about to reuse), writes its descriptor (count, dtype, op, local verdict and reason,
//      and on rank 0 its per-call choice) and publishes seq last (release);
//   2. r waits for every rank's descriptor of seq and compares them: every rank reaches the same
//      verdict from the same data, so a mismatch or a bad argument anywhere makes every rank throw
//      before any rank has touched a buffer; then r acknowledges seq.
// In-band agreement (publish / verify) does step 1 before the call's steps and step 2 after
// them, so a small call costs one wave of handoffs instead of two; a disagreement then aborts the
// communicator (also on ranks that compared first: each rank decides by its own count and Config),
// and check_peers() stops ranks that wait for a peer that disagrees. Eager broadcasts and reduces
// (Config::eager_rooted_bytes) publish the same way and are compared later, at one of their rank's
// next calls: once every rank's arguments are in, and at the latest when kMaxUnverifiedCalls are
// pending, so a rank runs that many calls ahead of its slowest peer's arrival instead of waiting
// for it every call. A
// LowLatency call in which every rank takes part skips step 2 (settle): its messages carry the
// arguments and are taken only by ranks with the same ones (protocol/low_latency.hpp), so its
// completion is the comparison, and ranks that disagree wait until check_peers() names the rank
// that differs. A rank whose own arguments are bad publishes them and throws at once (it has
// nothing to read). Waits give up at the call's deadline or when the abort record is raised; the
// first failure wins the record, so every rank reports the root cause. Ranks that are processes
// record their pid in their descriptor; check_peers() (every kPeerCheckNs of waiting) raises the
// record for a rank whose process is gone, so a killed peer is reported within a fraction of a
// second, naming it, whatever Config::timeout is. A process that destroys its communicator negates
// its pid (left, not dead): a rank that returned from its last eager calls and exited has left
// its messages in its peers' FIFOs, and a peer still finishing them must not report it dead. A
// rank that waits for a rank that left (its message, a free slot in it, one of its words) is
// stopped within kPeerCheckNs, "rank R left", once its wait is judged again after the mark was
// read: every store of a rank precedes its leaving.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/control_plane.hpp"
#include "ccoll/runtime/fast_box.hpp"
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
        boxes_(layout.box_bytes != 0 ? FastBoxes(area + layout.boxes, nranks) : FastBoxes{}),
        nranks_(nranks),
        timeout_ms_(timeout_ms),
        policy_(policy),
        known_(static_cast<std::size_t>(nranks)) {}

  // Agreement before the steps: publish, wait for every rank's arguments, compare.
  Agreement agree(const CallArgs& args, std::uint64_t seq, std::uint64_t deadline_ns,
                  const FailurePoint& where) {
    write_descriptor(args, seq, false, deadline_ns, where);
    // A rank whose own arguments are bad reads everyone's too: if a peer runs this call in band
    // (its steps wait for our messages), read_verdict raises the record at once, so the peer stops
    // before our next call's messages could be taken for this call's.
    return read_verdict(seq, deadline_ns, where, false);
  }

  // In-band agreement (InBandControlPlane): publish now, compare after the steps.
  void publish(const CallArgs& args, std::uint64_t seq, std::uint64_t deadline_ns,
               const FailurePoint& where) {
    write_descriptor(args, seq, true, deadline_ns, where);
    if (!args.ok()) {
      acknowledge(where.rank, seq);
      // The others would wait for our messages: stop them now, naming us.
      raise(args.error, where);
      throw Error(args.error, where.rank, args.reason + "; the communicator is aborted");
    }
  }
  Agreement verify(std::uint64_t seq, std::uint64_t deadline_ns, const FailurePoint& where) {
    return read_verdict(seq, deadline_ns, where, true);
  }

  // Eager calls pending comparison at which a rank's next call waits for the oldest: a rank then
  // publishes call s with at most kMaxUnverifiedCalls - 1 earlier calls uncompared, having
  // compared every call up to s - kCallDescriptors + 1, on which write_descriptor relies.
  static constexpr std::uint64_t kMaxUnverifiedCalls = kCallDescriptors - 1;
  std::uint64_t max_unverified_calls() const { return kMaxUnverifiedCalls; }

  // Whether every rank has published its arguments to call `seq`: a look, no wait.
  bool published_by_all(std::uint64_t seq, const FailurePoint& where) const {
    if (known_[static_cast<std::size_t>(where.rank)].published_by_all >= seq) return true;
    for (int q = 0; q < nranks_; ++q)
      if (sync::AtomicWord<std::uint64_t>(&call_of(q, seq).seq).load_acquire() < seq) return false;
    return true;
  }

  // A call whose messages carried its signature (protocol/low_latency.hpp) and whose plan makes
  // every rank's output depend on every rank's input has completed: every rank has published it
  // (a rank publishes before its steps), and none of this rank's reads of call seq is left.
  void settle(std::uint64_t seq, const FailurePoint& where) {
    known_[static_cast<std::size_t>(where.rank)].published_by_all = seq;
    acknowledge(where.rank, seq);
  }

  // This rank will read no descriptor of calls up to `seq` (they were compared by other means):
  // the others may reuse them.
  void acknowledge_call(std::uint64_t seq, const FailurePoint& where) {
    acknowledge(where.rank, seq);
  }

  // Raises the abort record for the first rank whose process no longer exists, and for an
  // in-band call whose ranks disagree (a rank may wait for messages its peer never sends).
  // A rank that left (a negative pid) is not dead: its pid is read again once its process is
  // found gone, since a process negates its pid before it exits.
  void check_peers() {
    for (int q = 0; q < nranks_; ++q) {
      const sync::AtomicWord<std::int64_t> word(&descriptors_[q].pid);
      const std::int64_t pid = word.load_acquire();
      if (pid > 0 && pid != ::getpid() && process_gone(static_cast<pid_t>(pid)) &&
          word.load_acquire() == pid) {
        raise(ErrorCode::Aborted, FailurePoint{q, -1, -1, q, FailurePoint::Waiting::dead});
        return;
      }
    }
    check_in_band_calls();
  }

  // Whether rank q's process destroyed its communicator (processes only).
  bool left(int q) const {
    return sync::AtomicWord<std::int64_t>(&descriptors_[q].pid).load_acquire() < 0;
  }

  // The first rank that has not yet published its arguments to call `seq` (-1: none): in an
  // in-band call, the rank a timed-out wait is really waiting for.
  int absent_rank(std::uint64_t seq) const {
    for (int q = 0; q < nranks_; ++q)
      if (sync::AtomicWord<std::uint64_t>(&call_of(q, seq).seq).load_acquire() < seq) return q;
    return -1;
  }

  // Waits until `peer`'s *word >= target (a barrier of a symmetric call, say), giving up like
  // agreement does: at the deadline (Timeout, naming the peer), on abort, or when the peer's
  // process is gone.
  void wait_peer_word(const std::uint64_t* word, std::uint64_t target, int rank, int peer,
                      std::uint64_t deadline_ns, std::uint64_t seq) {
    wait_word(word, target, rank, peer, deadline_ns, seq);
  }

  // The area's small-message rings (runtime/fast_box.hpp; a null view above kFastBoxMaxRanks).
  const FastBoxes& fast_boxes() const { return boxes_; }
  // The last call whose descriptors rank q has read or no longer needs (its peers may reuse
  // descriptors up to it).
  std::uint64_t acknowledged(int q) const {
    return sync::AtomicWord<std::uint64_t>(&descriptors_[q].ack).load_acquire();
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
  // What check_peers() reads of a call descriptor that its rank may be rewriting.
  struct CallSummary {
    std::uint64_t seq, count;
    std::uint32_t dtype, op, status, in_band, shape;
    bool operator==(const CallSummary&) const = default;
    bool same_call(const CallSummary& o) const {
      return count == o.count && dtype == o.dtype && op == o.op && shape == o.shape;
    }
  };

  CallSummaryWords& call_of(int q, std::uint64_t seq) const {
    return descriptors_[q].call[seq % kCallDescriptors];
  }
  CallDetail& detail_of(int q, std::uint64_t seq) const {
    return descriptors_[q].detail[seq % kCallDescriptors];
  }
  // What common_verdict() compares of rank q's call `seq` (read after its seq, with acquire).
  struct DescriptorView {
    std::uint64_t count;
    std::uint32_t dtype, op, status, shape, root_choice;
    const char* reason;
  };
  DescriptorView view_of(int q, std::uint64_t seq) const {
    const CallSummaryWords& w = call_of(q, seq);
    const CallKind k = CallKind::unpack(w.kind);
    return {w.count, k.dtype, k.op, k.status, w.shape, w.root_choice, detail_of(q, seq).reason};
  }

  // Publishes this rank's arguments to call `seq` (its seq last, with release). Its descriptor
  // was last used by call seq - kCallDescriptors, which every rank must have read. A rank that
  // publishes call s has compared every call up to s - kCallDescriptors + 1, or acknowledged it
  // without reading it (a call compared through the fast boxes; the communicator leaves fewer
  // than kMaxUnverifiedCalls eager calls uncompared), so once this rank has seen every
  // rank's descriptor of call seq-1, every rank is done with seq - kCallDescriptors and nothing
  // needs to be read here: the common case, which then touches no other rank's memory. Otherwise
  // (this rank runs ahead with eager calls, or its last call failed before it read the others)
  // it waits for every rank's acknowledgement of that call, remembering the least it saw.
  void write_descriptor(const CallArgs& args, std::uint64_t seq, bool in_band,
                        std::uint64_t deadline_ns, const FailurePoint& where) {
    const int rank = where.rank;
    Known& known = known_[static_cast<std::size_t>(rank)];
    if (seq > kCallDescriptors && known.published_by_all + 1 < seq &&
        known.acked_by_all + kCallDescriptors < seq) {
      std::uint64_t least = ~std::uint64_t{0};
      for (int q = 0; q < nranks_; ++q) {
        wait_word(&descriptors_[q].ack, seq - kCallDescriptors, rank, q, deadline_ns, seq);
        least =
            std::min(least, sync::AtomicWord<std::uint64_t>(&descriptors_[q].ack).load_acquire());
      }
      known.acked_by_all = least;
    }
    CallSummaryWords& mine = call_of(rank, seq);
    CallDetail& detail = detail_of(rank, seq);
    // The old call's seq goes first, so that check_peers() never takes the new fields for the old
    // call's (it reads seq, the fields, then seq again): the fields are stored with release, so a
    // reader that sees one of them sees this store too.
    sync::AtomicWord<std::uint64_t>(&mine.seq).store_relaxed(0);
    const CallKind kind{static_cast<std::uint32_t>(args.dtype), static_cast<std::uint32_t>(args.op),
                        args.ok() ? 0u : 1u + static_cast<std::uint32_t>(args.error),
                        in_band ? 1u : 0u};
    sync::AtomicWord<std::uint64_t>(&mine.count).store_release(args.count);
    sync::AtomicWord<std::uint32_t>(&mine.kind).store_release(kind.pack());
    sync::AtomicWord<std::uint32_t>(&mine.shape).store_release(encode_shape(args.shape));
    sync::AtomicWord<std::uint32_t>(&mine.root_choice)
        .store_release(rank == 0 ? args.root_choice : 0u);
    // Stored only when it changes: the line stays this rank's while its calls stage.
    if (!(detail.placement == args.placement)) detail.placement = args.placement;
    if (!args.ok() || detail.reason[0] != 0) {
      std::memset(detail.reason, 0, sizeof detail.reason);
      std::memcpy(detail.reason, args.reason.data(),
                  std::min(args.reason.size(), sizeof detail.reason - 1));
    }
    sync::AtomicWord<std::uint64_t>(&mine.seq).store_release(seq);
  }

  void acknowledge(int rank, std::uint64_t seq) {
    sync::AtomicWord<std::uint64_t>(&descriptors_[rank].ack).store_release(seq);
  }

  // Waits for every rank's descriptor of call `seq`, compares them and acknowledges.
  Agreement read_verdict(std::uint64_t seq, std::uint64_t deadline_ns, const FailurePoint& where,
                         bool in_band) {
    for (int q = 0; q < nranks_; ++q)
      wait_word(&call_of(q, seq).seq, seq, where.rank, q, deadline_ns, seq);
    known_[static_cast<std::size_t>(where.rank)].published_by_all = seq;
    // A rank that ran its steps before comparing (in band, or an eager broadcast or reduce:
    // ranks decide by their own count and Config) may have moved its connections on, whichever
    // way this rank compares: a disagreement then aborts the communicator.
    bool steps_ran = in_band;
    for (int q = 0; q < nranks_ && !steps_ran; ++q)
      steps_ran =
          CallKind::unpack(sync::AtomicWord<std::uint32_t>(&call_of(q, seq).kind).load_relaxed())
              .in_band != 0;
    // Read (rank 0's root choice included) before the acknowledgement, after which the others
    // may reuse these descriptors.
    Agreement a =
        common_verdict([this, seq](int q) { return view_of(q, seq); }, nranks_, seq, steps_ran);
    if (a.verdict.empty() && !in_band) {
      const CallDetail& first = detail_of(0, seq);
      a.symmetric = first.placement.window != 0;
      for (int q = 1; q < nranks_ && a.symmetric; ++q)
        a.symmetric = detail_of(q, seq).placement == first.placement;
    }
    acknowledge(where.rank, seq);
    // Messages of a call the ranks disagree on leave the connections out of step.
    if (steps_ran && !a.verdict.empty())
      raise(a.code, a.code == ErrorCode::Mismatch
                        ? FailurePoint{a.culprit, -1, -1, 0, FailurePoint::Waiting::nothing}
                        : FailurePoint{a.culprit, -1, -1, -1, FailurePoint::Waiting::nothing});
    return a;
  }

  CallSummary summary(int q, std::size_t slot) const {
    CallSummaryWords& d = descriptors_[q].call[slot];
    CallSummary c{};
    c.seq = sync::AtomicWord<std::uint64_t>(&d.seq).load_acquire();
    // Acquire, so that a second look at seq (check_in_band_calls) comes after these loads.
    c.count = sync::AtomicWord<std::uint64_t>(&d.count).load_acquire();
    const CallKind k = CallKind::unpack(sync::AtomicWord<std::uint32_t>(&d.kind).load_acquire());
    c.dtype = k.dtype;
    c.op = k.op;
    c.status = k.status;
    c.in_band = k.in_band;
    c.shape = sync::AtomicWord<std::uint32_t>(&d.shape).load_acquire();
    return c;
  }

  // For each descriptor slot, the newest call any rank has published: if it runs in band and its
  // ranks disagree, raise the record (Mismatch, or the bad arguments' code) naming the first rank
  // that differs from the first to publish. A descriptor rewritten while it is read is skipped (its
  // seq changes; it is looked at again on the next check).
  void check_in_band_calls() {
    for (std::size_t slot = 0; slot < kCallDescriptors; ++slot) {
      std::uint64_t newest = 0;
      for (int q = 0; q < nranks_; ++q) newest = std::max(newest, summary(q, slot).seq);
      if (newest == 0) continue;
      bool in_band = false;
      int first = -1;
      int culprit = -1;
      CallSummary reference{};
      ErrorCode code = ErrorCode::Mismatch;
      for (int q = 0; q < nranks_; ++q) {
        const CallSummary c = summary(q, slot);
        if (c.seq != newest || summary(q, slot).seq != newest) continue;
        // Any rank in band may be waiting, the culprit's own descriptor aside.
        in_band = in_band || c.in_band != 0;
        if (culprit >= 0) continue;
        if (c.status != 0) {
          culprit = q;
          code = static_cast<ErrorCode>(c.status - 1);
        } else if (first < 0) {
          first = q;
          reference = c;
        } else if (!c.same_call(reference)) {
          culprit = q;
          in_band = in_band || reference.in_band != 0;
        }
      }
      if (culprit >= 0 && in_band) {
        raise(code, FailurePoint{culprit, -1, -1, first, FailurePoint::Waiting::nothing});
        return;
      }
    }
  }

  // Waits until *word >= target; `peer` is the rank whose word it is.
  void wait_word(const std::uint64_t* word, std::uint64_t target, int rank, int peer,
                 std::uint64_t deadline_ns, std::uint64_t seq) {
    sync::Counter c(const_cast<std::uint64_t*>(word));
    if (c.check(target)) return;  // the common case: no clock read
    sync::WaitResult r = sync::WaitResult::Timeout;
    for (;;) {
      const std::uint64_t now = sync::now_ns();
      const std::uint64_t slice =
          now + kPeerCheckNs < deadline_ns ? now + kPeerCheckNs : deadline_ns;
      r = c.wait(target, &header_->abort.flag, slice, policy_);
      if (r != sync::WaitResult::Timeout || slice == deadline_ns) break;
      check_peers();
      // After left() is read, the peer's descriptors are compared again (a disagreement it
      // published before leaving is the cause to report) and the word checked again: the peer's
      // stores all precede its leaving, so a word still short then stays short.
      if (!aborted() && left(peer)) {
        check_peers();
        if (!aborted() && !c.check(target))
          raise(ErrorCode::Aborted, FailurePoint{peer, -1, -1, peer, FailurePoint::Waiting::left});
      }
    }
    if (r == sync::WaitResult::Ok) return;
    FailurePoint where{rank, -1, -1, peer, FailurePoint::Waiting::arrival};
    if (r == sync::WaitResult::Aborted) throw stopped_error(where, seq);
    raise(ErrorCode::Timeout, where);
    throw Error(ErrorCode::Timeout, rank,
                "rank " + std::to_string(peer) + " did not arrive at call " + std::to_string(seq) +
                    " within " + std::to_string(timeout_ms_) + " ms" + left_note(*this, peer));
  }

  AreaHeader* header_ = nullptr;
  RankDescriptor* descriptors_ = nullptr;
  FastBoxes boxes_;
  int nranks_ = 0;
  long timeout_ms_ = 0;
  sync::WaitPolicy policy_;
  // Per rank (touched by that rank's thread only): what it knows of the others, so that
  // publishing rarely reads their words: the last call whose descriptors it saw from every rank,
  // and the least acknowledgement of all ranks it last read.
  struct alignas(128) Known {
    std::uint64_t published_by_all = 0;
    std::uint64_t acked_by_all = 0;
  };
  std::vector<Known> known_;
};

static_assert(InBandControlPlane<AreaControlPlane>);

}  // namespace ccoll::runtime
