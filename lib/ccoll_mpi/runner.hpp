// ccoll_mpi/runner.hpp: one ccoll allreduce over an MPI communicator, behind a virtual call so that
// a communicator can hold allreduces of different schedules and transports side by side.
//
// The logical topology is a registry entry made for the communicator's size (algo/registry.hpp);
// the schedule follows the name's suffix as in ccoll_perf: overlapped reduce/broadcast
// ([C-Cube]'s C1) or phased ([C-Cube]'s baseline B).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <utility>

#include <ccoll/algo/registry.hpp>
#include <ccoll/allreduce.hpp>
#include <ccoll/core/config.hpp>
#include <ccoll/schedule/pipelined.hpp>
#include <ccoll/transport/mpi.hpp>
#include <ccoll/transport/mpi_hybrid.hpp>

namespace ccoll_mpi {

class Runner {
 public:
  Runner() = default;
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  virtual ~Runner() = default;
  virtual void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
                   ccoll::ReduceOp op) = 0;
};

// T: an MPI transport, constructed on a communicator (transport/mpi.hpp); S: the schedule.
template <class T, class S>
class MpiRunner final : public Runner {
 public:
  MpiRunner(const ccoll::Config& config, ccoll::algo::Registered logical, MPI_Comm comm)
      : ar_(config, std::move(logical), comm) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    ar_.run(send, recv, count, d, op);
  }

 private:
  ccoll::Allreduce<T, ccoll::algo::Registered, S> ar_;
};

// The plans of `spec` for nranks ranks. Local and the same on every rank; throws ccoll::Error when
// the algorithm cannot serve that many ranks.
inline ccoll::algo::Registered plan_algorithm(const ccoll::algo::AlgorithmSpec& spec, int nranks) {
  return ccoll::algo::make_algorithm(spec.algorithm,
                                     ccoll::algo::AlgorithmRequest{nullptr, nranks, 0});
}

// The allreduce of `logical` over comm: collective over comm (the transport duplicates it).
template <class T>
std::unique_ptr<Runner> make_runner(const ccoll::algo::AlgorithmSpec& spec,
                                    ccoll::algo::Registered logical, const ccoll::Config& config,
                                    MPI_Comm comm) {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  if (spec.overlap)
    return std::make_unique<MpiRunner<T, Overlapped>>(config, std::move(logical), comm);
  return std::make_unique<MpiRunner<T, ccoll::schedule::Phased>>(config, std::move(logical), comm);
}

}  // namespace ccoll_mpi
