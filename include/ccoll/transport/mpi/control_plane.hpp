// ccoll/transport/mpi/control_plane.hpp: the MPI transport's control plane (runtime::ControlPlane)
// over its own communicator.
//
// Agreement on call `seq`: every rank contributes a fixed-size descriptor of its arguments (count,
// dtype, op, local verdict and reason, rank 0's per-call choice) to one MPI_Iallgather and computes
// the common verdict from the same data (runtime::common_verdict), so a bad or mismatched argument
// anywhere makes every rank throw before any buffer is touched. A rank with bad arguments still
// completes the gather, so that the others learn why instead of timing out. The gather is polled
// with MPI_Test against the call's deadline and the abort record: a rank that never arrives gives
// every other rank a Timeout, not a hang.
//
// Abort propagation: the first failure a rank sees (its own, or one received) is its abort record;
// raise() sends its own to every other rank (nonblocking, on a dedicated tag), and aborted() tests
// a receive posted for such a record from any rank. Once raised the record is sticky, as on the
// shared-memory transports. A peer whose process dies is reported by MPI itself: its calls return
// errors on this communicator (MPI_ERRORS_RETURN, turned into ErrorCode::System), or the launcher
// ends the job; check_peers() has nothing more to ask.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/control_plane.hpp"
#include "ccoll/sync/abort.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"
#include "ccoll/transport/mpi/check.hpp"
#include "ccoll/transport/mpi/connection.hpp"

namespace ccoll::transport::mpi {

// One rank's arguments to one call as the gather carries them.
struct CallDescriptor {
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::uint32_t dtype = 0;
  std::uint32_t op = 0;
  std::uint32_t status = 0;  // 0: arguments fine; otherwise 1 + ErrorCode
  std::uint32_t root_choice = 0;
  std::uint32_t shape = 0;  // runtime::encode_shape(CallArgs::shape)
  char reason[92] = {};
};

// The tag abort records travel on (the control communicator carries nothing else point to point).
inline constexpr int kAbortTag = 1;

class ControlPlane {
 public:
  ControlPlane() = default;
  // `comm`: a communicator this plane alone uses (the transport's duplicate).
  ControlPlane(MPI_Comm comm, int rank, int nranks, long timeout_ms)
      : state_(std::make_shared<State>(comm, rank, nranks, timeout_ms)) {}

  runtime::Agreement agree(const runtime::CallArgs& args, std::uint64_t seq,
                           std::uint64_t deadline_ns, runtime::FailurePoint where) {
    State& s = *state_;
    CallDescriptor& mine = s.descriptors[static_cast<std::size_t>(s.nranks)];
    mine = CallDescriptor{};
    mine.seq = seq;
    mine.count = args.count;
    mine.dtype = static_cast<std::uint32_t>(args.dtype);
    mine.op = static_cast<std::uint32_t>(args.op);
    mine.status = args.ok() ? 0u : 1u + static_cast<std::uint32_t>(args.error);
    mine.root_choice = args.root_choice;
    mine.shape = runtime::encode_shape(args.shape);
    std::memcpy(mine.reason, args.reason.data(),
                std::min(args.reason.size(), sizeof mine.reason - 1));
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&mine, sizeof(CallDescriptor), MPI_BYTE, s.descriptors.get(),
                         sizeof(CallDescriptor), MPI_BYTE, s.comm, &request),
          "MPI_Iallgather (call agreement)", s.rank);
    sync::Backoff backoff;
    for (;;) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test (call agreement)", s.rank);
      if (done != 0) break;
      where.waiting_for = runtime::FailurePoint::Waiting::arrival;
      if (aborted()) {
        s.abandoned.push_back(request);  // a collective request may be neither freed nor cancelled
        throw stopped_error(where, seq);
      }
      if (sync::now_ns() >= deadline_ns) {
        s.abandoned.push_back(request);
        raise(ErrorCode::Timeout, where);
        throw Error(ErrorCode::Timeout, s.rank,
                    "not every rank arrived at call " + std::to_string(seq) + " within " +
                        std::to_string(s.timeout_ms) + " ms (Config::timeout)");
      }
      backoff.pause();
    }
    if (!args.ok()) throw Error(args.error, s.rank, args.reason);
    for (int q = 0; q < s.nranks; ++q)
      if (s.descriptors[static_cast<std::size_t>(q)].seq != seq)
        return runtime::Agreement{
            ErrorCode::Mismatch,
            "rank " + std::to_string(q) + " is at call " +
                std::to_string(s.descriptors[static_cast<std::size_t>(q)].seq) + ", rank " +
                std::to_string(s.rank) + " at call " + std::to_string(seq),
            0};
    return runtime::common_verdict(
        [&s](int q) -> const auto& { return s.descriptors[static_cast<std::size_t>(q)]; }, s.nranks,
        seq);
  }

  void check_peers() {}

  const std::uint32_t* abort_word() const { return &state_->record.flag; }
  bool aborted() const {
    State& s = *state_;
    if (s.record.raised()) return true;
    if (s.incoming_request == MPI_REQUEST_NULL) return false;
    int done = 0;
    if (MPI_Test(&s.incoming_request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done == 0)
      return false;
    const sync::AbortRecord& in = *s.incoming;
    s.record.raise(in.code, in.rank, in.channel, in.step, in.peer, in.waiting_for);
    return true;
  }
  void raise(ErrorCode code, runtime::FailurePoint where) {
    State& s = *state_;
    if (!s.record.raise(static_cast<std::uint32_t>(code), where.rank, where.channel, where.step,
                        where.peer, static_cast<std::uint32_t>(where.waiting_for)))
      return;
    // Best effort: a rank that cannot be told finds out at its own deadline. The sends carry a
    // copy that outlives this object if a send can neither finish nor be dropped.
    s.sent = std::make_unique<sync::AbortRecord>(s.record);
    for (int q = 0; q < s.nranks; ++q) {
      if (q == s.rank) continue;
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Isend(s.sent.get(), sizeof(sync::AbortRecord), MPI_BYTE, q, kAbortTag, s.comm, &r) ==
          MPI_SUCCESS)
        s.outgoing.push_back(r);
    }
  }
  Error stopped_error(runtime::FailurePoint where, std::uint64_t seq) const {
    return runtime::stopped_by(state_->record, where, seq);
  }

 private:
  struct State {
    State(MPI_Comm c, int r, int n, long t)
        : comm(c),
          rank(r),
          nranks(n),
          timeout_ms(t),
          descriptors(std::make_unique<CallDescriptor[]>(static_cast<std::size_t>(n) + 1)) {
      check(MPI_Irecv(incoming.get(), sizeof(sync::AbortRecord), MPI_BYTE, MPI_ANY_SOURCE,
                      kAbortTag, comm, &incoming_request),
            "MPI_Irecv (abort record)", rank);
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() {
      if (!mpi_usable()) return;
      // The receive of an abort record may be matched by a record still in flight; if it can
      // neither finish nor be cancelled, its buffer is leaked rather than freed under it.
      if (!release(incoming_request, true)) (void)incoming.release();
      bool sent_free = true;
      for (MPI_Request& r : outgoing) sent_free = release(r, false, 0) && sent_free;
      if (!sent_free) (void)sent.release();
      // `abandoned` gathers of an aborted communicator are left to MPI (erroneous to free or
      // cancel), and a late peer's arrival completes them whenever this process next calls MPI:
      // their send and receive buffer, `descriptors`, is leaked rather than freed under them.
      if (!abandoned.empty()) (void)descriptors.release();
    }

    MPI_Comm comm;
    int rank;
    int nranks;
    long timeout_ms;
    // descriptors[0..nranks): everyone's, gathered; descriptors[nranks]: this rank's own.
    std::unique_ptr<CallDescriptor[]> descriptors;
    sync::AbortRecord record;  // the first failure this rank knows of
    std::unique_ptr<sync::AbortRecord> incoming = std::make_unique<sync::AbortRecord>();  // sent
    MPI_Request incoming_request = MPI_REQUEST_NULL;
    std::unique_ptr<sync::AbortRecord> sent;  // what `outgoing` carries
    std::vector<MPI_Request> outgoing;
    std::vector<MPI_Request> abandoned;
  };
  std::shared_ptr<State> state_;
};

static_assert(runtime::ControlPlane<ControlPlane>);

}  // namespace ccoll::transport::mpi
