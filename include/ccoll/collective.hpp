// ccoll/collective.hpp: ccoll::ReduceScatter, ccoll::AllGather, ccoll::Broadcast and
// ccoll::Reduce: the collectives beside allreduce, with Allreduce's composition (one transport,
// one logical topology, one schedule) and calling convention (docs/collectives.md).
//
//   using RS = ccoll::ReduceScatter<ccoll::transport::SharedMemory, ccoll::algo::Ring>;
//   RS rs(ccoll::Config{});     // collective: every rank constructs it
//   rs.run(send, recv, recvcount, ccoll::DataType::f32, ccoll::ReduceOp::sum);
//
//   ccoll::AllGather<T, L>   run(send, recv, sendcount, dtype)
//   ccoll::Broadcast<T, L>   run(send, recv, count, dtype, root)
//   ccoll::Reduce<T, L>      run(send, recv, count, dtype, op, root)
//
// Arguments are NCCL's (ncclReduceScatter, ncclAllGather, ncclBroadcast, ncclReduce): counts per
// rank where the collective has blocks, the in-place forms (reduce-scatter: recvbuff = sendbuff +
// rank * recvcount; all-gather: sendbuff = recvbuff + rank * sendcount; broadcast and reduce:
// sendbuff = recvbuff), broadcast's sendbuff used on the root only and reduce's recvbuff on the
// root only (null elsewhere is fine). Every call is checked on every rank and across ranks (count,
// datatype, op, collective and root must agree) before any buffer is written, as Allreduce's;
// broadcasts and reduces of at most Config::eager_rooted_bytes (off by default) return after their
// steps instead and are compared at one of the rank's next calls (runtime/communicator.hpp).
//
// Each object holds its own executor (connections, shared memory), built for its collective: the
// logical topology must plan it (algo::Ring: rings and chains; algo::Direct: one hop; broadcast and
// reduce also algo::Tree and algo::DoubleBinaryTree; algo::PackedForest on a graph: equal-share
// trees), or the constructor throws
// ErrorCode::Unsupported. Every transport runs them: HostThreads, SharedMemory (calls read the
// peers' buffers directly when they lie in a registered window: allocate_window), Mpi, MpiHybrid,
// and the GPU's CudaVirtualRanks and CudaP2P, whose executors also take stream-ordered calls with
// a runtime::CallShape (docs/collectives.md).
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/local_ranks.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/schedule/pipelined.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/resolve.hpp"

namespace ccoll {

// An executor that runs the other collectives: its run() takes the call's shape.
template <class E>
concept CollectiveExecutor = requires(E& e, const void* s, void* r, runtime::CallShape shape) {
  e.run(0, s, r, std::size_t{1}, DataType::f32, ReduceOp::sum, shape);
};

template <plan::Collective C, transport::Transport T, algo::LogicalTopology L,
          schedule::Schedule S = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>
requires(C != plan::Collective::allreduce) &&
    CollectiveExecutor<typename T::Executor> class Collective {
 public:
  using transport_type = T;
  using topology_type = L;
  using schedule_type = S;
  static constexpr plan::Collective collective = C;

  // One rank's view: every call of that rank goes through it.
  class Rank {
   public:
    // ncclReduceScatter: rank k's recvbuff gets block k (recvcount elements) of the reduction of
    // every rank's sendbuff (nranks * recvcount elements).
    void run(const void* sendbuff, void* recvbuff, std::size_t recvcount, DataType dtype,
             ReduceOp op) requires(C == plan::Collective::reduce_scatter) {
      exec_->run(rank_, sendbuff, recvbuff, recvcount, dtype, op, runtime::CallShape{C, 0});
    }
    // ncclAllGather: every recvbuff gets every rank's sendbuff (sendcount elements), in rank order.
    void run(const void* sendbuff, void* recvbuff, std::size_t sendcount,
             DataType dtype) requires(C == plan::Collective::all_gather) {
      exec_->run(rank_, sendbuff, recvbuff, sendcount, dtype, ReduceOp::sum,
                 runtime::CallShape{C, 0});
    }
    // ncclBroadcast: every recvbuff gets the root's sendbuff.
    void run(const void* sendbuff, void* recvbuff, std::size_t count, DataType dtype,
             int root) requires(C == plan::Collective::broadcast) {
      exec_->run(rank_, sendbuff, recvbuff, count, dtype, ReduceOp::sum,
                 runtime::CallShape{C, root});
    }
    // ncclReduce: the root's recvbuff gets the reduction of every rank's sendbuff.
    void run(const void* sendbuff, void* recvbuff, std::size_t count, DataType dtype, ReduceOp op,
             int root) requires(C == plan::Collective::reduce) {
      exec_->run(rank_, sendbuff, recvbuff, count, dtype, op, runtime::CallShape{C, root});
    }
    int id() const { return rank_; }

   private:
    friend class Collective;
    Rank(typename T::Executor* exec, int rank) : exec_(exec), rank_(rank) {}
    typename T::Executor* exec_;
    int rank_;
  };

  explicit Collective(const Config& config = Config{}) requires std::default_initializable<L>
      : Collective(config, L{}) {}
  Collective(const Config& config, L topology)
      : topology_(std::move(topology)),
        exec_(
            transport::resolve_for<T>(config, topology_),
            [this](const plan::PlanRequest& request) { return build(request); }, name()) {}
  // Transports that need more than a Config to join (an MPI communicator) take it after the
  // topology: ReduceScatter<transport::Mpi, L> rs(config, L{}, comm).
  template <class A0, class... A>
  requires std::constructible_from<typename T::Executor, const Config&, runtime::PlanSource,
                                   std::string_view, A0, A...>
  Collective(const Config& config, L topology, A0&& arg0, A&&... args)
      : topology_(std::move(topology)),
        exec_(
            transport::resolve_for<T>(config, topology_, arg0, args...),
            [this](const plan::PlanRequest& request) { return build(request); }, name(),
            std::forward<A0>(arg0), std::forward<A>(args)...) {}
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  // The handle of local rank r (threads: 0..nranks-1; a process: its own rank).
  Rank rank(int r) { return Rank(&exec_, runtime::hosted_rank(exec_, r)); }
  // This process's rank, for transports that host one rank per process.
  int rank() const { return runtime::sole_rank(exec_); }
  // A call by this process's rank (transports with one rank per process); the arguments are those
  // of Rank::run.
  template <class... A>
  void run(const void* sendbuff, void* recvbuff, A... args) requires requires(Rank r) {
    r.run(sendbuff, recvbuff, args...);
  }
  { rank(rank()).run(sendbuff, recvbuff, args...); }

  // Collective, as Allreduce::allocate_window (SharedMemory): `bytes` every rank maps. A call
  // whose input and output lie at the same offsets of one window on every rank reads the peers'
  // buffers directly (runtime/symmetric_shards.hpp, symmetric_rooted.hpp; a broadcast's input off
  // the root or a reduce's output may be null instead when the root's call is in place).
  std::span<std::byte> allocate_window(std::size_t bytes) requires
      requires(typename T::Executor& e) {
    e.allocate_window(bytes);
  }
  { return exec_.allocate_window(bytes); }
  std::span<const int> local_ranks() const { return exec_.local_ranks(); }
  int nranks() const { return exec_.nranks(); }
  const Config& config() const { return exec_.config(); }
  const L& topology() const { return topology_; }
  typename T::Executor& executor() { return exec_; }
  std::string name() const {
    return std::string(T::name) + "/" + std::string(topology_.name) + "/" + std::string(S::name) +
           "/" + std::string(plan::collective_name(C));
  }

 private:
  plan::Plan build(const plan::PlanRequest& request) const {
    plan::PlanRequest req = request;
    S::configure(req);
    req.collective = C;
    plan::Plan p = topology_.build(req);
    if (p.collective != C)
      throw Error(ErrorCode::Unsupported, -1,
                  "the logical topology '" + std::string(topology_.name) + "' plans no " +
                      std::string(plan::collective_name(C)) +
                      " (docs/collectives.md lists the plans of each collective)");
    return p;
  }

  L topology_;
  typename T::Executor exec_;
};

template <transport::Transport T, algo::LogicalTopology L,
          schedule::Schedule S = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>
using ReduceScatter = Collective<plan::Collective::reduce_scatter, T, L, S>;
template <transport::Transport T, algo::LogicalTopology L,
          schedule::Schedule S = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>
using AllGather = Collective<plan::Collective::all_gather, T, L, S>;
template <transport::Transport T, algo::LogicalTopology L,
          schedule::Schedule S = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>
using Broadcast = Collective<plan::Collective::broadcast, T, L, S>;
template <transport::Transport T, algo::LogicalTopology L,
          schedule::Schedule S = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>
using Reduce = Collective<plan::Collective::reduce, T, L, S>;

}  // namespace ccoll
