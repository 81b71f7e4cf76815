// ccoll_perf/allreduce_collective.hpp: ccoll::Allreduce behind ccoll_perf's Collective and
// RankCollective (runner.hpp), one generic path for every host transport; with -C, the other
// collectives (ccoll/collective.hpp) behind the same interfaces.
//
// An algorithm is a registry entry made into an algo::Registered (perf_prepare.hpp's
// prepare_algorithms); its spec says the schedule (overlap: Pipelined<Overlap::ReduceBroadcast>,
// else Phased; "tree" is [C-Cube]'s phased baseline B and "tree-overlap" its overlapped C1). The
// transport is a template parameter and nothing else depends on it: each host transport's file
// (transport_registry.hpp) makes the same Allreduce<T, algo::Registered, S> with its own T and
// calls it through the same rank view, ar.rank(r).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include <ccoll/algo/registry.hpp>
#include <ccoll/allreduce.hpp>
#include <ccoll/collective.hpp>
#include <ccoll/schedule/pipelined.hpp>

#include "perf_prepare.hpp"
#include "runner.hpp"

namespace ccoll_perf {

// One rank of any ccoll::Allreduce: its handle, ar.rank(r).
template <class AR>
class RankView final : public RankCollective {
 public:
  explicit RankView(typename AR::Rank rank) : rank_(rank) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    rank_.run(send, recv, count, d, op);
  }

 private:
  typename AR::Rank rank_;
};

template <class T, class S>
class AllreduceCollective final : public Collective {
  using AR = ccoll::Allreduce<T, ccoll::algo::Registered, S>;

 public:
  AllreduceCollective(const ccoll::Config& config, ccoll::algo::Registered logical)
      : ar_(config, std::move(logical)) {}
  std::unique_ptr<RankCollective> rank(int r) override {
    return std::make_unique<RankView<AR>>(ar_.rank(r));
  }
  std::string name() const override { return ar_.name(); }
  std::span<std::byte> allocate_window(std::size_t bytes) override {
    if constexpr (requires { ar_.allocate_window(bytes); })
      return ar_.allocate_window(bytes);
    else
      throw std::invalid_argument("--window: transport '" + std::string(T::name) +
                                  "' has no registered windows");
  }

 private:
  AR ar_;
};

// One rank of a ccoll::Collective<C, ...>: the sweep's count (the whole buffer) becomes NCCL's
// arguments.
template <class Coll>
class CollectiveRankView final : public RankCollective {
 public:
  CollectiveRankView(typename Coll::Rank rank, int nranks, int root)
      : rank_(rank), nranks_(static_cast<std::size_t>(nranks)), root_(root) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    using C = ccoll::plan::Collective;
    if constexpr (Coll::collective == C::reduce_scatter)
      rank_.run(send, recv, count / nranks_, d, op);
    else if constexpr (Coll::collective == C::all_gather)
      rank_.run(send, recv, count / nranks_, d);
    else if constexpr (Coll::collective == C::broadcast)
      rank_.run(send, recv, count, d, root_);
    else
      rank_.run(send, recv, count, d, op, root_);
  }

 private:
  typename Coll::Rank rank_;
  std::size_t nranks_;
  int root_;
};

template <ccoll::plan::Collective C, class T>
class OtherCollective final : public Collective {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  using Coll = ccoll::Collective<C, T, ccoll::algo::Registered, Overlapped>;

 public:
  OtherCollective(const ccoll::Config& config, ccoll::algo::Registered logical, int root)
      : coll_(config, std::move(logical)), root_(root) {}
  std::unique_ptr<RankCollective> rank(int r) override {
    return std::make_unique<CollectiveRankView<Coll>>(coll_.rank(r), coll_.nranks(), root_);
  }
  std::string name() const override { return coll_.name(); }
  std::span<std::byte> allocate_window(std::size_t bytes) override {
    if constexpr (requires { coll_.allocate_window(bytes); })
      return coll_.allocate_window(bytes);
    else
      throw std::invalid_argument("--window: transport '" + std::string(T::name) +
                                  "' has no registered windows");
  }

 private:
  Coll coll_;
  int root_;
};

// A host transport's CollectiveFactory (transport_registry.hpp): ccoll's Allreduce on transport
// T with the algorithm's schedule, or the collective `call` names.
template <class T>
std::unique_ptr<Collective> make_allreduce_collective(const PreparedAlgorithm& algo,
                                                      const ccoll::Config& config,
                                                      const CollectiveCall& call) {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  using C = ccoll::plan::Collective;
  switch (call.collective) {
    case C::reduce_scatter:
      return std::make_unique<OtherCollective<C::reduce_scatter, T>>(config, algo.logical,
                                                                     call.root);
    case C::all_gather:
      return std::make_unique<OtherCollective<C::all_gather, T>>(config, algo.logical, call.root);
    case C::broadcast:
      return std::make_unique<OtherCollective<C::broadcast, T>>(config, algo.logical, call.root);
    case C::reduce:
      return std::make_unique<OtherCollective<C::reduce, T>>(config, algo.logical, call.root);
    case C::allreduce:
      break;
  }
  if (algo.spec.overlap)
    return std::make_unique<AllreduceCollective<T, Overlapped>>(config, algo.logical);
  return std::make_unique<AllreduceCollective<T, ccoll::schedule::Phased>>(config, algo.logical);
}

}  // namespace ccoll_perf
