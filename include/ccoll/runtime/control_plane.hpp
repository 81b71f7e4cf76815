// ccoll/runtime/control_plane.hpp: what a transport's control plane does for the run loop.
//
// Two duties beside the data path: agreement (before a call touches any buffer, every rank learns
// every rank's arguments and all reach the same verdict) and abort propagation (the first
// failure anywhere stops every rank's waits at once and is what every rank reports). The
// shared-area control plane (runtime/area_control_plane.hpp) does both through memory every rank
// maps; a message-passing transport implements the same members over its own collectives.
#pragma once

#include <concepts>
#include <cstdint>
#include <sstream>
#include <string>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/sync/abort.hpp"

namespace ccoll::runtime {

// Where a rank was when it failed or stopped, for the abort record and the error text.
struct FailurePoint {
  int rank = -1;
  int channel = -1;  // -1: outside the steps (agreement, plan lookup)
  std::int64_t step = -1;
  int peer = -1;
  // What the rank was waiting for; `dead`: the rank itself is gone (its process exited without
  // destroying its communicator); `left`: it destroyed its communicator while a peer waited for it.
  enum class Waiting : std::uint32_t {
    nothing = 0,
    message = 1,
    free_slot = 2,
    arrival = 3,
    dead = 4,
    left = 5
  };
  Waiting waiting_for = Waiting::nothing;
};

// The verdict every rank reaches for one call; `verdict` empty: run it.
struct Agreement {
  ErrorCode code = ErrorCode::Mismatch;
  std::string verdict;
  std::uint32_t root_choice = 0;  // rank 0's CallArgs::root_choice
  int culprit = -1;               // the rank whose arguments are bad or differ from rank 0's
  // Every rank's buffers lie at the same offsets of one registered window (CallArgs::placement), so
  // the call may read them directly; planes without windows leave it false.
  bool symmetric = false;
};

template <class P>
concept ControlPlane = requires(P& p, const P& cp, const CallArgs& args, std::uint64_t seq,
                                std::uint64_t deadline_ns, ErrorCode code, FailurePoint where) {
  // Publishes `args` as `where.rank`'s arguments to call `seq` and returns the common verdict.
  // Throws Timeout or Aborted (naming the first failure) if the others do not arrive.
  { p.agree(args, seq, deadline_ns, where) } -> std::same_as<Agreement>;
  // The word every wait of this communicator polls (non-zero: give up).
  { cp.abort_word() } -> std::same_as<const std::uint32_t*>;
  { cp.aborted() } -> std::same_as<bool>;
  // Publishes a failure for every rank (the first one wins).
  p.raise(code, where);
  // The error a rank that stopped at `where` because of another's failure throws in call seq.
  { cp.stopped_error(where, seq) } -> std::same_as<Error>;
  // Called now and then while a rank waits: raises the abort record if a peer is known to be
  // gone (a transport that cannot tell does nothing), so that waits end long before the deadline.
  p.check_peers();
};

// The verdict on one call from every rank's published arguments (d(q) for q in [0, nranks), each
// with count, dtype, op, shape (encode_shape), status (0: fine, else 1 + ErrorCode) and reason):
// every rank computes it from the same data, so all reach the same one. `in_band`: the verdict
// comes after the steps (InBandControlPlane), so buffers may have been written and the communicator
// is aborted.
template <class DescriptorOf>
Agreement common_verdict(DescriptorOf&& d, int nranks, std::uint64_t seq, bool in_band = false) {
  const char* const consequence =
      in_band ? "; the communicator is aborted" : "; no rank touched its buffers";
  Agreement a;
  for (int q = 0; q < nranks && a.verdict.empty(); ++q) {
    if (d(q).status != 0) {
      a.code = static_cast<ErrorCode>(d(q).status - 1);
      a.culprit = q;
      a.verdict = "rank " + std::to_string(q) + " passed bad arguments to call " +
                  std::to_string(seq) + " (" + std::string(d(q).reason) + ")" + consequence;
    }
  }
  for (int q = 1; q < nranks && a.verdict.empty(); ++q) {
    // Checked before a stream is built: this runs on every call, and agreement is the rule.
    if (d(q).count == d(0).count && d(q).dtype == d(0).dtype && d(q).op == d(0).op &&
        d(q).shape == d(0).shape)
      continue;
    std::ostringstream os;
    if (d(q).shape != d(0).shape) {
      os << "collective differs: rank 0 calls " << describe_shape(d(0).shape) << ", rank " << q
         << " " << describe_shape(d(q).shape);
    } else if (d(q).count != d(0).count) {
      os << "count differs: rank 0 has " << d(0).count << ", rank " << q << " has " << d(q).count;
    } else if (d(q).dtype != d(0).dtype) {
      os << "datatype differs: rank 0 has " << to_string(static_cast<DataType>(d(0).dtype))
         << ", rank " << q << " has " << to_string(static_cast<DataType>(d(q).dtype));
    } else if (d(q).op != d(0).op) {
      os << "op differs: rank 0 has " << to_string(static_cast<ReduceOp>(d(0).op)) << ", rank " << q
         << " has " << to_string(static_cast<ReduceOp>(d(q).op));
    }
    a.culprit = q;
    if (!os.str().empty())
      a.verdict = os.str() + " (call " + std::to_string(seq) + ")" + (in_band ? consequence : "");
  }
  a.root_choice = d(0).root_choice;
  return a;
}

// A control plane that can also check a call's arguments alongside its steps instead of before
// them (Config::in_band_agreement_bytes): a rank publishes its arguments, runs its steps at once
// and compares everyone's arguments afterwards, so a small call costs one wave of messages
// instead of two. A disagreement is still reported on every rank, but only after buffers may
// have been written, so it aborts the communicator; a rank blocked by a peer that disagrees is
// stopped by check_peers().
template <class P>
concept InBandControlPlane = ControlPlane<P> &&
    requires(P& p, const CallArgs& args, std::uint64_t seq, std::uint64_t deadline_ns,
             FailurePoint where) {
  // Publishes `args` for call `seq` without waiting for the others (throws at once, aborting the
  // communicator, if they are bad).
  p.publish(args, seq, deadline_ns, where);
  // After the steps: waits for every rank's arguments to call `seq` and returns the verdict.
  { p.verify(seq, deadline_ns, where) } -> std::same_as<Agreement>;
  // After the steps of a call whose messages compared the arguments instead (LowLatency trailers,
  // every rank active): every rank has published call `seq`, none needs reading.
  p.settle(seq, where);
  // Eager calls (Config::eager_rooted_bytes) are compared later, in order: whether every rank has
  // published call `seq` yet (no wait), and how many pending calls make a rank's next call wait
  // for the oldest.
  { p.published_by_all(seq, where) } -> std::same_as<bool>;
  { p.max_unverified_calls() } -> std::convertible_to<std::uint64_t>;
};

// What a timeout waiting for rank q adds where the control plane knows that q's process
// destroyed its communicator (AreaControlPlane::left): it made fewer calls than this rank, or
// stopped on an error of its own.
template <class P>
std::string left_note(const P& plane, int q) {
  if constexpr (requires {
                  { plane.left(q) } -> std::convertible_to<bool>;
                }) {
    if (q >= 0 && plane.left(q))
      return " (rank " + std::to_string(q) +
             " destroyed its communicator: it made fewer calls, or stopped on an error of its "
             "own)";
  }
  return {};
}

// The first failure as every rank reports it, from the abort record.
inline std::string describe_abort(const sync::AbortRecord& a) {
  if (!a.settle()) return "another rank failed";
  std::ostringstream os;
  if (a.waiting_for == static_cast<std::uint32_t>(FailurePoint::Waiting::dead)) {
    os << "rank " << a.rank << " died (its process is gone)";
    return os.str();
  }
  if (a.waiting_for == static_cast<std::uint32_t>(FailurePoint::Waiting::left)) {
    os << "rank " << a.rank
       << " left (it destroyed its communicator while a rank waited for it: it made fewer calls, "
          "or stopped on an error of its own)";
    return os.str();
  }
  if (static_cast<ErrorCode>(a.code) == ErrorCode::Mismatch) {
    // Raised by in-band agreement (InBandControlPlane): rank = the culprit, peer = rank compared.
    os << "rank " << a.rank
       << " passed arguments (count, datatype, op or root) that differ from rank " << a.peer
       << "'s";
    return os.str();
  }
  os << "rank " << a.rank << " failed first (" << to_string(static_cast<ErrorCode>(a.code));
  if (a.waiting_for != 0) {
    static constexpr const char* kWhat[] = {"", "a message from", "a free slot at",
                                            "the arrival of"};
    os << " waiting for " << (a.waiting_for < 4 ? kWhat[a.waiting_for] : "") << " rank " << a.peer;
  }
  if (a.channel >= 0) os << " on channel " << a.channel << ", step " << a.step;
  os << ")";
  return os.str();
}

// The error of a rank that stopped at `where` in call `seq` because of the failure in `a`: it
// carries the first failure's code where that describes the call on every rank (Timeout stays
// Timeout, so that a rank that never arrives makes every rank report a timeout; Mismatch,
// InvalidArgument and Unsupported stay, so that a call one rank refused fails as that on every
// rank, even where the others stopped before they could compare its arguments); anything else is
// Aborted.
inline Error stopped_by(const sync::AbortRecord& a, FailurePoint where, std::uint64_t seq) {
  std::ostringstream os;
  os << "stopped in call " << seq;
  if (where.channel >= 0)
    os << " at channel " << where.channel << ", step " << where.step << " (waiting for "
       << (where.waiting_for == FailurePoint::Waiting::free_slot ? "a free slot at rank "
                                                                 : "a message from rank ")
       << where.peer << ")";
  os << " because " << describe_abort(a);
  const auto code = a.settle() ? static_cast<ErrorCode>(a.code) : ErrorCode::Aborted;
  const bool kept = code == ErrorCode::Timeout || code == ErrorCode::Mismatch ||
                    code == ErrorCode::InvalidArgument || code == ErrorCode::Unsupported;
  return Error(kept ? code : ErrorCode::Aborted, where.rank, os.str());
}

// A stop as a rank reports it once it has failed a call since the first failure (its later calls,
// a window it allocates): a refused call's code (InvalidArgument, Unsupported) belongs to that
// call, and a caller that corrects its arguments and calls again must learn that the
// communicator is aborted, not that its arguments are still bad.
inline Error later_stop(const Error& e) {
  if (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Unsupported) return e;
  const std::string what = e.what();
  const auto at = what.find("stopped ");
  return Error(ErrorCode::Aborted, e.rank(), at == std::string::npos ? what : what.substr(at));
}

}  // namespace ccoll::runtime
