// ccoll_mpi/runner.hpp: one ccoll collective over an MPI communicator (an allreduce, or a
// reduce-scatter, all-gather, broadcast or reduce: ccoll/collective.hpp), behind a virtual call so
// that a communicator can hold collectives of different kinds, schedules and transports side by
// side.
//
// The logical topology is a registry entry made for the communicator's size (algo/registry.hpp);
// the schedule follows the name's suffix as in ccoll_perf: overlapped reduce/broadcast
// ([C-Cube]'s C1) or phased ([C-Cube]'s baseline B).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include <ccoll/algo/registry.hpp>
#include <ccoll/allreduce.hpp>
#include <ccoll/collective.hpp>
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
  // NCCL's arguments: count per rank for reduce-scatter and all-gather; `root` for broadcast
  // and reduce.
  virtual void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
                   ccoll::ReduceOp op, int root) = 0;
};

// T: an MPI transport, constructed on a communicator (transport/mpi.hpp); S: the schedule.
template <class T, class S>
class MpiRunner final : public Runner {
 public:
  MpiRunner(const ccoll::Config& config, ccoll::algo::Registered logical, MPI_Comm comm)
      : ar_(config, std::move(logical), comm) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d, ccoll::ReduceOp op,
           int) override {
    ar_.run(send, recv, count, d, op);
  }

 private:
  ccoll::Allreduce<T, ccoll::algo::Registered, S> ar_;
};

// T: an MPI transport; C: the collective.
template <class T, ccoll::plan::Collective C>
class CollectiveRunner final : public Runner {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;

 public:
  CollectiveRunner(const ccoll::Config& config, ccoll::algo::Registered logical, MPI_Comm comm)
      : coll_(config, std::move(logical), comm) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d, ccoll::ReduceOp op,
           int root) override {
    if constexpr (C == ccoll::plan::Collective::reduce_scatter)
      coll_.run(send, recv, count, d, op);
    else if constexpr (C == ccoll::plan::Collective::all_gather)
      coll_.run(send, recv, count, d);
    else if constexpr (C == ccoll::plan::Collective::broadcast)
      coll_.run(send, recv, count, d, root);
    else
      coll_.run(send, recv, count, d, op, root);
  }

 private:
  ccoll::Collective<C, T, ccoll::algo::Registered, Overlapped> coll_;
};

// The plans of `spec` for nranks ranks. Local and the same on every rank; throws ccoll::Error when
// the algorithm cannot serve that many ranks.
inline ccoll::algo::Registered plan_algorithm(const ccoll::algo::AlgorithmSpec& spec, int nranks) {
  return ccoll::algo::make_algorithm(spec.algorithm,
                                     ccoll::algo::AlgorithmRequest{nullptr, nranks, 0});
}

// The collective `c` of `logical` over comm: collective over comm (the transport duplicates it).
template <class T>
std::unique_ptr<Runner> make_runner(const ccoll::algo::AlgorithmSpec& spec,
                                    ccoll::algo::Registered logical, const ccoll::Config& config,
                                    MPI_Comm comm, ccoll::plan::Collective c) {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  using C = ccoll::plan::Collective;
  switch (c) {
    case C::reduce_scatter:
      return std::make_unique<CollectiveRunner<T, C::reduce_scatter>>(config, std::move(logical),
                                                                      comm);
    case C::all_gather:
      return std::make_unique<CollectiveRunner<T, C::all_gather>>(config, std::move(logical), comm);
    case C::broadcast:
      return std::make_unique<CollectiveRunner<T, C::broadcast>>(config, std::move(logical), comm);
    case C::reduce:
      return std::make_unique<CollectiveRunner<T, C::reduce>>(config, std::move(logical), comm);
    case C::allreduce:
      break;
  }
  if (spec.overlap)
    return std::make_unique<MpiRunner<T, Overlapped>>(config, std::move(logical), comm);
  return std::make_unique<MpiRunner<T, ccoll::schedule::Phased>>(config, std::move(logical), comm);
}

}  // namespace ccoll_mpi
