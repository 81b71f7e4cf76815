// ccoll_perf/ccoll_collectives.cpp: ccoll's Allreduce types behind ccoll_perf's RankCollective.
//
// One instantiation per (transport, algorithm): ring and dbtree use the pipelined schedule (a ring
// has no phases to overlap), "tree" is seed 004's phased baseline B and "tree-overlap" its
// overlapped C1.
#include <stdexcept>

#include "runner.hpp"

#if __has_include(<ccoll/allreduce.hpp>)
#include <ccoll/allreduce.hpp>
#include <ccoll/topology/direct.hpp>
#include <ccoll/topology/double_binary_tree.hpp>
#include <ccoll/topology/ring.hpp>
#include <ccoll/topology/tree.hpp>
#define CCOLL_PERF_HAVE_RUNTIME 1
#else
#define CCOLL_PERF_HAVE_RUNTIME 0
#endif

namespace ccoll_perf {

#if CCOLL_PERF_HAVE_RUNTIME

namespace {

using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
using Phased = ccoll::schedule::Phased;

template <class Transport, class Topology, class Schedule>
using AR = ccoll::Allreduce<Transport, Topology, Schedule>;

template <class A>
class ThreadsRank final : public RankCollective {
 public:
  ThreadsRank(A& ar, int rank) : ar_(ar), rank_(rank) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    ar_.run(rank_, send, recv, count, d, op);
  }

 private:
  A& ar_;
  int rank_;
};

template <class A>
class ThreadsImpl final : public ThreadsAllreduce {
 public:
  explicit ThreadsImpl(const ccoll::Config& cfg) : ar_(cfg) {}
  std::unique_ptr<RankCollective> bind(int rank) override {
    return std::make_unique<ThreadsRank<A>>(ar_, rank);
  }

 private:
  A ar_;
};

template <class A>
class ShmImpl final : public RankCollective {
 public:
  explicit ShmImpl(const ccoll::Config& cfg) : ar_(cfg) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    ar_.run(send, recv, count, d, op);
  }

 private:
  A ar_;
};

// Calls f.template operator()<Topology, Schedule>() for the algorithm.
template <class F>
auto with_policies(Algo algo, F&& f) {
  switch (algo) {
    case Algo::ring:
      return f.template operator()<ccoll::topology::Ring, Overlapped>();
    case Algo::dbtree:
      return f.template operator()<ccoll::topology::DoubleBinaryTree, Overlapped>();
    case Algo::tree:
      return f.template operator()<ccoll::topology::Tree, Phased>();
    case Algo::tree_overlap:
      return f.template operator()<ccoll::topology::Tree, Overlapped>();
    case Algo::direct:
      return f.template operator()<ccoll::topology::Direct, Overlapped>();
  }
  throw std::invalid_argument("unknown algorithm");
}

void apply_knobs(ccoll::Config& cfg, const Options& knobs) {
  if (knobs.slot_bytes != 0) cfg.slot_bytes = knobs.slot_bytes;
  if (knobs.nslots != 0) cfg.nslots = knobs.nslots;
  cfg.nchannels = knobs.nchannels;
  cfg.nchunks = knobs.nchunks;
  if (knobs.stream_slot_bytes) cfg.stream_slot_bytes = *knobs.stream_slot_bytes;
  if (knobs.slot_stores == Options::SlotStores::streamed) cfg.tune_slot_stores = false;
  if (knobs.slot_stores == Options::SlotStores::cached) cfg.stream_slot_bytes = 0;
}

}  // namespace

bool have_ccoll_runtime() {
  return true;
}

std::unique_ptr<ThreadsAllreduce> make_threads_allreduce(Algo algo, int nranks,
                                                         const Options& knobs) {
  ccoll::Config cfg;
  cfg.nranks = nranks;
  apply_knobs(cfg, knobs);
  return with_policies(algo, [&]<class L, class S>() -> std::unique_ptr<ThreadsAllreduce> {
    return std::make_unique<ThreadsImpl<AR<ccoll::transport::HostThreads, L, S>>>(cfg);
  });
}

std::unique_ptr<RankCollective> make_shm_allreduce(Algo algo, int rank, int nranks,
                                                   const std::string& session,
                                                   const Options& knobs) {
  ccoll::Config cfg;
  cfg.rank = rank;
  cfg.nranks = nranks;
  cfg.session = session;
  apply_knobs(cfg, knobs);
  return with_policies(algo, [&]<class L, class S>() -> std::unique_ptr<RankCollective> {
    return std::make_unique<ShmImpl<AR<ccoll::transport::SharedMemory, L, S>>>(cfg);
  });
}

#else  // no runtime in this checkout yet: say so instead of measuring anything

bool have_ccoll_runtime() {
  return false;
}

std::unique_ptr<ThreadsAllreduce> make_threads_allreduce(Algo, int, const Options&) {
  throw std::runtime_error("this ccoll_perf was built without include/ccoll/allreduce.hpp");
}

std::unique_ptr<RankCollective> make_shm_allreduce(Algo, int, int, const std::string&,
                                                   const Options&) {
  throw std::runtime_error("this ccoll_perf was built without include/ccoll/allreduce.hpp");
}

#endif

}  // namespace ccoll_perf
