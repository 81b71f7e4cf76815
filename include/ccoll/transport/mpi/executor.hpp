// ccoll/transport/mpi/executor.hpp: the executor of the MPI transports, generic over how the
// connections of a plan are carried (its Links policy).
//
// Bootstrap: the rank and size are the communicator's (MPI_COMM_WORLD when none is passed);
// Config::rank, nranks and session are ignored. The constructor is collective over the
// communicator: it duplicates it twice (data and control, so that nothing the application sends
// can match ccoll's messages; errors returned, not fatal), checks that every rank built the same
// plans (the plan cache's fingerprint, gathered), lets the Links policy set up this rank's
// connections, and attaches the control plane (transport/mpi/control_plane.hpp). Calls then run
// the same verified plans through the same interpreter as on every other transport, and complete
// their own sends before they return (finish_sends()).
//
// Setup either succeeds on every rank or fails on every rank: each stage that can fail on some
// ranks only (a Config one rank refuses, an allocation) ends in a gather of every rank's outcome
// that every rank takes part in, failed or not (agree_on_setup()). A rank whose stage failed
// rethrows its own error; the others throw one naming the lowest failed rank and its reason,
// instead of waiting in the next setup collective for a rank that will never call it.
//
// A Links policy is constructed from (data communicator, rank, connection keys, Config) and
// provides connection_type, connections() (one per key, in key order) and senders() (this rank's
// sending MPI endpoints). Two exist: transport/mpi/point_to_point.hpp (every connection over MPI
// messages) and transport/mpi/hybrid.hpp (shared memory between ranks of one host, MPI messages
// between hosts).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/runtime/communicator.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/mpi/check.hpp"
#include "ccoll/transport/mpi/connection.hpp"
#include "ccoll/transport/mpi/control_plane.hpp"

namespace ccoll::transport::mpi {

// Rank and size from an intracommunicator; clear errors for everything else. What it refuses
// (MPI not usable, a null or inter-communicator) is refused alike on every rank of the
// communicator, before any collective, so it needs no agreement.
inline Config resolve_on(Config c, MPI_Comm comm) {
  if (!mpi_usable())
    throw Error(ErrorCode::InvalidArgument, -1,
                "the MPI transports need MPI initialised (call MPI_Init first) and not finalised");
  if (comm == MPI_COMM_NULL)
    throw_invalid_argument(-1, "communicator", "an MPI intracommunicator", "MPI_COMM_NULL");
  int inter = 0;
  check(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter", -1);
  if (inter != 0)
    throw_invalid_argument(-1, "communicator", "an MPI intracommunicator", "an intercommunicator");
  check(MPI_Comm_rank(comm, &c.rank), "MPI_Comm_rank", -1);
  check(MPI_Comm_size(comm, &c.nranks), "MPI_Comm_size", c.rank);
  return with_slot_bytes(c);
}

// What one rank's setup stage came to: nothing thrown, or the error it rethrows once every rank
// has heard of it.
struct SetupOutcome {
  std::exception_ptr error;
  ErrorCode code = ErrorCode::System;
  std::string reason;

  template <class Stage>
  void attempt(Stage&& stage) {
    try {
      stage();
    } catch (const Error& e) {
      fail(e.code(), e.what());
    } catch (const std::exception& e) {
      fail(ErrorCode::System, e.what());
    } catch (...) {
      fail(ErrorCode::System, "an exception that is not a std::exception");
    }
  }

 private:
  void fail(ErrorCode c, std::string_view what) {
    error = std::current_exception();
    code = c;
    constexpr std::string_view kPrefix = "ccoll: ";
    if (what.substr(0, kPrefix.size()) == kPrefix) what.remove_prefix(kPrefix.size());
    reason = what;
  }
};

// Collective over `comm` (every rank calls it once per stage, whatever its outcome): every rank's
// `value` (the plan fingerprint, say), once no rank's stage failed. Otherwise a rank that failed
// rethrows its own error, and the others throw the lowest failed rank's code where it describes
// the setup on every rank (a refused Config stays InvalidArgument, as a call one rank refuses
// does: runtime::stopped_by), Aborted otherwise, naming that rank and its reason.
inline std::vector<std::uint64_t> agree_on_setup(MPI_Comm comm, int rank, int nranks,
                                                 std::uint64_t value, const SetupOutcome& mine,
                                                 const char* stage) {
  struct Entry {
    std::uint64_t value;
    std::uint64_t status;  // 0: fine; otherwise 1 + ErrorCode
  };
  const Entry e{value, mine.error ? 1u + static_cast<std::uint64_t>(mine.code) : 0u};
  std::vector<Entry> all(static_cast<std::size_t>(nranks));
  check(MPI_Allgather(&e, sizeof e, MPI_BYTE, all.data(), sizeof e, MPI_BYTE, comm),
        "MPI_Allgather (setup)", rank);
  const auto failed =
      std::find_if(all.begin(), all.end(), [](const Entry& x) { return x.status != 0; });
  if (failed == all.end()) {
    std::vector<std::uint64_t> values(all.size());
    for (std::size_t q = 0; q < all.size(); ++q) values[q] = all[q].value;
    return values;
  }
  // The failed rank's reason: one broadcast, on the failure path only.
  const int culprit = static_cast<int>(failed - all.begin());
  char reason[256] = {};
  if (rank == culprit) mine.reason.copy(reason, sizeof reason - 1);
  check(MPI_Bcast(reason, sizeof reason, MPI_CHAR, culprit, comm), "MPI_Bcast (setup)", rank);
  if (mine.error) std::rethrow_exception(mine.error);
  const auto code = static_cast<ErrorCode>(failed->status - 1);
  const bool kept = code == ErrorCode::InvalidArgument || code == ErrorCode::Mismatch ||
                    code == ErrorCode::Unsupported;
  throw Error(kept ? code : ErrorCode::Aborted, rank,
              "rank " + std::to_string(culprit) + " could not set up " + stage + " (" + reason +
                  "): every rank refuses the communicator");
}

template <class Links>
class Executor {
 public:
  using connection_type = typename Links::connection_type;
  using Communicator = runtime::Communicator<ControlPlane, connection_type>;

  Executor(const Config& config, runtime::PlanSource source, std::string_view policy_id,
           MPI_Comm comm = MPI_COMM_WORLD)
      : resolved_(resolve_on(config, comm)),
        rank_(resolved_.rank),
        data_(comm, rank_),
        control_(comm, rank_),
        local_{rank_} {
    const int nranks = resolved_.nranks;
    SetupOutcome plans;
    plans.attempt([&] {
      comm_ = std::make_unique<Communicator>(resolved_, nranks, std::move(source), policy_id);
    });
    check_fingerprints(agree_on_setup(control_.get(), rank_, nranks,
                                      comm_ ? comm_->fingerprint() : 0, plans,
                                      "the communicator's plans"));
    SetupOutcome links;
    links.attempt([&] {
      links_ =
          std::make_unique<Links>(data_.get(), rank_, comm_->connection_keys(), comm_->config());
      comm_->attach(ControlPlane(control_.get(), rank_, nranks,
                                 static_cast<long>(comm_->config().timeout.count())),
                    links_->connections());
      comm_->init_rank_state(state_);
    });
    agree_on_setup(control_.get(), rank_, nranks, 0, links, "the communicator's connections");
  }
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
           runtime::CallShape shape = {}) {
    if (rank != rank_)
      throw_invalid_argument(rank, "rank", "this process's rank " + std::to_string(rank_),
                             std::to_string(rank));
    if (busy_.exchange(true, std::memory_order_acquire))
      throw Error(ErrorCode::InvalidArgument, rank,
                  "an MPI transport call is already in progress on another thread (calls of one "
                  "communicator must not overlap)");
    struct Release {
      std::atomic<bool>& flag;
      ~Release() { flag.store(false, std::memory_order_release); }
    } release{busy_};
    comm_->run(state_, rank, send, recv, count, dtype, op, shape);
    // The call's deadline, as the communicator counted it.
    finish_sends(state_.call_start_ns);
  }
  int nranks() const { return comm_->nranks(); }
  std::span<const int> local_ranks() const { return {local_.data(), local_.size()}; }
  const Config& config() const { return comm_->config(); }
  plan::Plan plan(std::size_t count, std::size_t elem_size) {
    return comm_->prepared_plan(count, elem_size)->plan;
  }
  Communicator& communicator() { return *comm_; }
  const Links& links() const { return *links_; }

 private:
  // Ranks built with different plans (another build, other Config or policies) refuse to run
  // together: every rank sees every fingerprint, so all throw the same error.
  void check_fingerprints(const std::vector<std::uint64_t>& all) const {
    for (std::size_t q = 1; q < all.size(); ++q)
      if (all[q] != all[0])
        throw Error(ErrorCode::Mismatch, rank_,
                    "rank " + std::to_string(q) +
                        " built different plans than rank 0 (another Config, algorithm, schedule "
                        "or build of ccoll)");
  }

  // Completes the MPI sends this call started before it returns. MPI moves a rendezvous message
  // (TCP, shared memory without single-copy) only while its sender calls MPI, so a rank that
  // returned with sends in flight and then computed without calling MPI would hold up their
  // receivers until their deadline. The receivers need nothing more from this rank: every receive
  // of this call's messages is posted during their own call (a slot's next receive as its message
  // is consumed), so the wait ends as soon as they take the messages, and an eager message
  // completes at the first test. Bounded like the steps' waits: the call's deadline and the abort
  // record, reported as they report theirs.
  void finish_sends(std::uint64_t start_ns) {
    const std::vector<Endpoint*>& senders = links_->senders();
    ControlPlane& plane = comm_->control_plane();
    std::size_t done = 0;  // senders[0, done) have nothing in flight
    // Waiting for the receiver to take a message, as a sender waits for a free slot.
    const auto where = [&] {
      return runtime::FailurePoint{rank_, -1, -1, senders[done]->peer(),
                                   runtime::FailurePoint::Waiting::free_slot};
    };
    const auto all_done = [&] {
      try {
        while (done < senders.size() && senders[done]->sends_done()) ++done;
      } catch (const Error& e) {
        plane.raise(e.code(), where());  // a broken connection stops every rank, as in the steps
        throw;
      }
      return done == senders.size();
    };
    if (all_done()) return;
    const std::chrono::milliseconds timeout = comm_->config().timeout;
    const std::uint64_t deadline_ns = sync::deadline_after(start_ns, timeout);
    sync::Backoff backoff(comm_->wait_policy());
    do {
      if (plane.aborted()) throw plane.stopped_error(where(), state_.seq);
      const std::uint64_t now = sync::now_ns();
      if (now >= deadline_ns) {
        plane.raise(ErrorCode::Timeout, where());
        throw Error(ErrorCode::Timeout, rank_,
                    "call " + std::to_string(state_.seq) + ": waiting for rank " +
                        std::to_string(senders[done]->peer()) +
                        " to receive this rank's last messages for " +
                        std::to_string((now - start_ns) / 1000000) + " ms (Config::timeout " +
                        std::to_string(timeout.count()) + " ms)");
      }
      backoff.pause();
    } while (!all_done());
  }

  // Declared in construction order; destroyed in reverse: the links' and the control plane's
  // requests go before the communicators they were posted on.
  Config resolved_;
  int rank_;
  OwnedComm data_;
  OwnedComm control_;
  std::unique_ptr<Communicator> comm_;  // on the heap: built inside a setup stage that may fail
  std::unique_ptr<Links> links_;
  typename Communicator::rank_state state_;
  std::atomic<bool> busy_{false};
  std::vector<int> local_;
};

}  // namespace ccoll::transport::mpi
