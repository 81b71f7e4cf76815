// ccoll/allreduce.hpp: ccoll::Allreduce, the public allreduce type: one transport, one logical
// topology and one schedule composed (docs/api.md).
//
//   using AR = ccoll::Allreduce<ccoll::transport::SharedMemory, ccoll::algo::Ring,
//                               ccoll::schedule::Phased>;
//   AR ar(ccoll::Config{});     // collective: every rank constructs it
//   ar.run(send, recv, count, ccoll::DataType::f32, ccoll::ReduceOp::sum);  // many times
//
// One calling convention for every transport: a call is made through a rank handle,
// ar.rank(r).run(...), for a rank r this process hosts (local_ranks()). The host-threads transport
// hosts every rank, and thread r uses ar.rank(r); a process transport hosts one, its own
// (ar.rank()), and ar.run(...) is short for ar.rank(ar.rank()).run(...). Stateful topologies are
// passed in: Allreduce<T, algo::PackedForest, S> ar(config,
// algo::PackedForest(physical::preset("dgx1v"))).
//
// The object is set up once; each call validates its arguments on every rank and across ranks
// (count, dtype and op must agree) before any buffer is touched, looks up the plan cached for its
// count (built and verified on the first call of that count), and interprets it. After the first
// call of a given count, a call allocates nothing. send == recv runs in place. All ranks receive
// bitwise identical results (each element is finalised once, by one rank, and then copied). Errors
// are ccoll::Error with a code: InvalidArgument, Mismatch, Unsupported, Timeout, Aborted, System.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/runtime/local_ranks.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/schedule/pipelined.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/resolve.hpp"

namespace ccoll {

template <transport::Transport T, algo::LogicalTopology L,
          schedule::Schedule S = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>
class Allreduce {
 public:
  using transport_type = T;
  using topology_type = L;
  using schedule_type = S;

  // One rank's view: every call of that rank goes through it.
  class Rank {
   public:
    void run(const void* sendbuff, void* recvbuff, std::size_t count, DataType dtype, ReduceOp op) {
      exec_->run(rank_, sendbuff, recvbuff, count, dtype, op);
    }
    int id() const { return rank_; }
    // Which layers of this rank's output are already final while its call of `count` elements of
    // `dtype` runs, for another thread of this process to start on them ([C-Cube] Sec. III-D;
    // runtime/layer_readiness.hpp, docs/gradients.md). layer_end[l] is where layer l ends. For the
    // transports whose ranks run the host interpreter (threads, shared memory, MPI).
    runtime::LayerReadiness layer_readiness(std::size_t count, DataType dtype,
                                            std::span<const std::uint64_t> layer_end) {
      return exec_->communicator().layer_readiness(rank_, count, size_of(dtype), layer_end);
    }

   private:
    friend class Allreduce;
    Rank(typename T::Executor* exec, int rank) : exec_(exec), rank_(rank) {}
    typename T::Executor* exec_;
    int rank_;
  };

  explicit Allreduce(const Config& config = Config{}) requires std::default_initializable<L>
      : Allreduce(config, L{}) {}
  Allreduce(const Config& config, L topology)
      : topology_(std::move(topology)),
        exec_(
            resolve(config, topology_),
            [this](const plan::PlanRequest& request) { return build(request); }, name()) {}
  // Transports that need more than a Config to join (an MPI communicator, say) take it after the
  // topology: Allreduce<transport::Mpi, L, S> ar(config, L{}, comm).
  template <class A0, class... A>
  requires std::constructible_from<typename T::Executor, const Config&, runtime::PlanSource,
                                   std::string_view, A0, A...>
  Allreduce(const Config& config, L topology, A0&& arg0, A&&... args)
      : topology_(std::move(topology)),
        exec_(
            resolve(config, topology_, arg0, args...),
            [this](const plan::PlanRequest& request) { return build(request); }, name(),
            std::forward<A0>(arg0), std::forward<A>(args)...) {}
  Allreduce(const Allreduce&) = delete;
  Allreduce& operator=(const Allreduce&) = delete;

  // The handle of local rank r (threads: 0..nranks-1; a process: its own rank).
  Rank rank(int r) { return Rank(&exec_, runtime::hosted_rank(exec_, r)); }
  // This process's rank, for transports that host one rank per process.
  int rank() const { return runtime::sole_rank(exec_); }
  // A call by this process's rank (transports with one rank per process).
  void run(const void* sendbuff, void* recvbuff, std::size_t count, DataType dtype, ReduceOp op) {
    exec_.run(rank(), sendbuff, recvbuff, count, dtype, op);
  }
  // Collective, for transports whose ranks can map each other's memory (SharedMemory): `bytes` of
  // memory every rank maps, for the buffers of later calls. Calls whose input and output lie at
  // the same offsets of one window on every rank read the peers' buffers directly instead of
  // staging each message (docs/api.md, "Registered windows"); the memory lives as long as this
  // object.
  std::span<std::byte> allocate_window(std::size_t bytes) requires
      requires(typename T::Executor& e) {
    e.allocate_window(bytes);
  }
  { return exec_.allocate_window(bytes); }
  std::span<const int> local_ranks() const { return exec_.local_ranks(); }
  int nranks() const { return exec_.nranks(); }
  const Config& config() const { return exec_.config(); }
  const L& topology() const { return topology_; }
  // The transport's executor, for what only that transport knows (the hosts of MpiHybrid, say).
  typename T::Executor& executor() { return exec_; }
  // A copy of the plan run for `count` elements of `dtype` (built, verified and cached on first
  // use).
  plan::Plan plan(std::size_t count, DataType dtype) { return exec_.plan(count, size_of(dtype)); }
  std::string name() const {
    return std::string(T::name) + "/" + std::string(topology_.name) + "/" + std::string(S::name);
  }

 private:
  template <class... A>
  static Config resolve(const Config& config, const L& topology, const A&... args) {
    return transport::resolve_for<T>(config, topology, args...);
  }
  plan::Plan build(const plan::PlanRequest& request) const {
    plan::PlanRequest req = request;
    S::configure(req);
    return topology_.build(req);
  }

  L topology_;
  typename T::Executor exec_;
};

}  // namespace ccoll
