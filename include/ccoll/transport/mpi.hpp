// ccoll/transport/mpi.hpp: the MPI transport: one rank per MPI process, on any intracommunicator.
//
//   MPI_Init(&argc, &argv);
//   ccoll::Allreduce<ccoll::transport::Mpi, ccoll::algo::Ring> ar(ccoll::Config{}, {}, comm);
//   ar.run(send, recv, count, ccoll::DataType::f32, ccoll::ReduceOp::sum);
//
// Bootstrap: the rank and size are the communicator's (MPI_COMM_WORLD when none is passed);
// Config::rank, nranks and session are ignored. The executor's constructor is collective over the
// communicator: it duplicates it twice (data and control, so that nothing the application sends
// can match ccoll's messages), checks that every rank built the same plans (the plan cache's
// fingerprint, gathered), and posts the receives of this rank's connections
// (transport/mpi/connection.hpp). The same verified plans and the same interpreter as on the
// other transports then run over nonblocking point-to-point messages; agreement and abort
// propagation go through the control plane (transport/mpi/control_plane.hpp).
//
// Calls: from one thread per process at a time (MPI_THREAD_SINGLE or FUNNELED suffices), in the
// same order on every rank, like any MPI collective. The object must be destroyed before
// MPI_Finalize to release its MPI resources (after it, destruction releases only memory).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/runtime/communicator.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/mpi/check.hpp"
#include "ccoll/transport/mpi/connection.hpp"
#include "ccoll/transport/mpi/control_plane.hpp"

namespace ccoll::transport {

struct Mpi {
  static constexpr std::string_view name = "mpi";
  using connection_type = mpi::Connection;
  using Communicator = runtime::Communicator<mpi::ControlPlane, mpi::Connection>;

  static Config resolve(const Config& c) { return resolve(c, MPI_COMM_WORLD); }
  static Config resolve(Config c, MPI_Comm comm) {
    if (!mpi::mpi_usable())
      throw Error(ErrorCode::InvalidArgument, -1,
                  "transport::Mpi: MPI is not initialised (call MPI_Init first) or already "
                  "finalised");
    if (comm == MPI_COMM_NULL)
      throw_invalid_argument(-1, "communicator", "an MPI intracommunicator", "MPI_COMM_NULL");
    int inter = 0;
    mpi::check(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter", -1);
    if (inter != 0)
      throw_invalid_argument(-1, "communicator", "an MPI intracommunicator",
                             "an intercommunicator");
    mpi::check(MPI_Comm_rank(comm, &c.rank), "MPI_Comm_rank", -1);
    mpi::check(MPI_Comm_size(comm, &c.nranks), "MPI_Comm_size", c.rank);
    return c;
  }

  class Executor {
   public:
    Executor(const Config& config, runtime::PlanSource source, std::string_view policy_id,
             MPI_Comm comm = MPI_COMM_WORLD)
        : resolved_(resolve(config, comm)),
          rank_(resolved_.rank),
          data_(comm, rank_),
          control_(comm, rank_),
          comm_(resolved_, resolved_.nranks, std::move(source), policy_id),
          local_{rank_} {
      check_fingerprints();
      const std::vector<runtime::ConnectionKey>& keys = comm_.connection_keys();
      std::vector<mpi::Connection> connections(keys.size());
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const runtime::ConnectionKey& k = keys[i];
        mpi::Connection& c = connections[i];
        c.from = k.from;
        c.to = k.to;
        c.slot_bytes = comm_.config().slot_bytes;
        if (k.from != rank_ && k.to != rank_) continue;
        const bool sender = k.from == rank_;
        // The tag is the connection's index in the set, the same on every rank.
        endpoints_.push_back(std::make_unique<mpi::Endpoint>(
            data_.comm, sender ? mpi::Endpoint::Side::sender : mpi::Endpoint::Side::receiver, rank_,
            sender ? k.to : k.from, static_cast<int>(i), comm_.config().slot_bytes,
            comm_.config().nslots));
        c.endpoint = endpoints_.back().get();
      }
      comm_.attach(mpi::ControlPlane(control_.comm, rank_, comm_.nranks(),
                                     static_cast<long>(comm_.config().timeout.count())),
                   std::move(connections));
      comm_.init_rank_state(state_);
    }
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype,
             ReduceOp op) {
      if (rank != rank_)
        throw_invalid_argument(rank, "rank", "this process's rank " + std::to_string(rank_),
                               std::to_string(rank));
      if (busy_.exchange(true, std::memory_order_acquire))
        throw Error(ErrorCode::InvalidArgument, rank,
                    "transport::Mpi: a call is already in progress on another thread (calls of "
                    "one communicator must not overlap)");
      struct Release {
        std::atomic<bool>& flag;
        ~Release() { flag.store(false, std::memory_order_release); }
      } release{busy_};
      comm_.run(state_, rank, send, recv, count, dtype, op);
    }
    int nranks() const { return comm_.nranks(); }
    std::span<const int> local_ranks() const { return {local_.data(), local_.size()}; }
    const Config& config() const { return comm_.config(); }
    plan::Plan plan(std::size_t count, std::size_t elem_size) {
      return comm_.prepared_plan(count, elem_size)->plan;
    }
    Communicator& communicator() { return comm_; }

   private:
    // A communicator duplicated for ccoll's own use, errors returned rather than fatal.
    struct OwnedComm {
      OwnedComm(MPI_Comm parent, int rank) {
        mpi::check(MPI_Comm_dup(parent, &comm), "MPI_Comm_dup", rank);
        mpi::check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
                   rank);
      }
      OwnedComm(const OwnedComm&) = delete;
      OwnedComm& operator=(const OwnedComm&) = delete;
      ~OwnedComm() {
        if (comm != MPI_COMM_NULL && mpi::mpi_usable()) MPI_Comm_free(&comm);
      }
      MPI_Comm comm = MPI_COMM_NULL;
    };

    // Ranks built with different plans (another build, other Config or policies) refuse to run
    // together: every rank sees every fingerprint, so all throw the same error.
    void check_fingerprints() {
      const std::uint64_t mine = comm_.fingerprint();
      std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.nranks()));
      mpi::check(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, control_.comm),
                 "MPI_Allgather (plan fingerprints)", rank_);
      for (std::size_t q = 1; q < all.size(); ++q)
        if (all[q] != all[0])
          throw Error(ErrorCode::Mismatch, rank_,
                      "rank " + std::to_string(q) +
                          " built different plans than rank 0 (another Config, algorithm, schedule "
                          "or build of ccoll)");
    }

    // Declared in construction order; destroyed in reverse: the endpoints' and the control plane's
    // requests go before the communicators they were posted on.
    Config resolved_;
    int rank_;
    OwnedComm data_;
    OwnedComm control_;
    Communicator comm_;
    std::vector<std::unique_ptr<mpi::Endpoint>> endpoints_;
    Communicator::rank_state state_;
    std::atomic<bool> busy_{false};
    std::vector<int> local_;
  };
};

static_assert(Transport<Mpi>);

}  // namespace ccoll::transport
