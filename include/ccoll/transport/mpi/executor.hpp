// ccoll/transport/mpi/executor.hpp: the executor of the MPI transports, generic over how the
// connections of a plan are carried (its Links policy).
//
// Bootstrap: the rank and size are the communicator's (MPI_COMM_WORLD when none is passed);
// Config::rank, nranks and session are ignored. The constructor is collective over the
// communicator: it duplicates it twice (data and control, so that nothing the application sends
// can match ccoll's messages; errors returned, not fatal), checks that every rank built the same
// plans (the plan cache's fingerprint, gathered), lets the Links policy set up this rank's
// connections, and attaches the control plane (transport/mpi/control_plane.hpp). Calls then run
// the same verified plans through the same interpreter as on every other transport.
//
// A Links policy is constructed from (data communicator, rank, connection keys, Config) and
// provides connection_type and connections(): one per key, in key order. Two exist:
// transport/mpi/point_to_point.hpp (every connection over MPI messages) and
// transport/mpi/hybrid.hpp (shared memory between ranks of one host, MPI messages between hosts).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/runtime/communicator.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/transport/mpi/check.hpp"
#include "ccoll/transport/mpi/control_plane.hpp"

namespace ccoll::transport::mpi {

// Rank and size from an intracommunicator; clear errors for everything else.
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

// A communicator of the parent's ranks, in its order, for ccoll's own use, errors returned rather
// than fatal. Made by MPI_Comm_split, not MPI_Comm_dup: a duplicate would take the parent's info
// hints (a program's mpi_assert_allow_overtaking would break the FIFO order of the slots'
// messages, its mpi_assert_no_any_source the control plane's receives) and run the program's
// attribute copy callbacks on a communicator it never made.
class OwnedComm {
 public:
  OwnedComm(MPI_Comm parent, int rank) {
    check(MPI_Comm_split(parent, 0, rank, &comm_), "MPI_Comm_split", rank);
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", rank);
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  ~OwnedComm() {
    if (comm_ != MPI_COMM_NULL && mpi_usable()) MPI_Comm_free(&comm_);
  }
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

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
        comm_(resolved_, resolved_.nranks, std::move(source), policy_id),
        links_((check_fingerprints(), data_.get()), rank_, comm_.connection_keys(), comm_.config()),
        local_{rank_} {
    comm_.attach(ControlPlane(control_.get(), rank_, comm_.nranks(),
                              static_cast<long>(comm_.config().timeout.count())),
                 links_.connections());
    comm_.init_rank_state(state_);
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
    comm_.run(state_, rank, send, recv, count, dtype, op, shape);
  }
  int nranks() const { return comm_.nranks(); }
  std::span<const int> local_ranks() const { return {local_.data(), local_.size()}; }
  const Config& config() const { return comm_.config(); }
  plan::Plan plan(std::size_t count, std::size_t elem_size) {
    return comm_.prepared_plan(count, elem_size)->plan;
  }
  Communicator& communicator() { return comm_; }
  const Links& links() const { return links_; }

 private:
  // Ranks built with different plans (another build, other Config or policies) refuse to run
  // together: every rank sees every fingerprint, so all throw the same error.
  void check_fingerprints() {
    const std::uint64_t mine = comm_.fingerprint();
    std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.nranks()));
    check(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, control_.get()),
          "MPI_Allgather (plan fingerprints)", rank_);
    for (std::size_t q = 1; q < all.size(); ++q)
      if (all[q] != all[0])
        throw Error(ErrorCode::Mismatch, rank_,
                    "rank " + std::to_string(q) +
                        " built different plans than rank 0 (another Config, algorithm, schedule "
                        "or build of ccoll)");
  }

  // Declared in construction order; destroyed in reverse: the links' and the control plane's
  // requests go before the communicators they were posted on.
  Config resolved_;
  int rank_;
  OwnedComm data_;
  OwnedComm control_;
  Communicator comm_;
  Links links_;
  typename Communicator::rank_state state_;
  std::atomic<bool> busy_{false};
  std::vector<int> local_;
};

}  // namespace ccoll::transport::mpi
