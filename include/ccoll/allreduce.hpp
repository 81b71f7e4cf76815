// ccoll/allreduce.hpp: ccoll::Allreduce, the public allreduce type, and ccoll::Config.
//
// One type per system, composed of three policies (see docs/api.md):
//
//   using AR = ccoll::Allreduce<ccoll::transport::SharedMemory, ccoll::topology::Ring,
//                               ccoll::schedule::Phased>;
//   AR ar(ccoll::Config{});                       // collective: every rank constructs it
//   ar.run(send, recv, count, ccoll::DataType::f32, ccoll::ReduceOp::sum);   // many times
//
// The object is set up once; each run() validates its arguments on every rank and across ranks
// (count, dtype and op must agree) before any buffer is touched, looks up the plan cached for its
// count (built and verified on the first call of that count), and interprets it. After the first
// call of a given count, run() allocates nothing. send == recv runs in place. All ranks receive
// bitwise identical results (each element is finalised once, by one rank, and then copied). Errors
// are ccoll::Error with a code: InvalidArgument, Mismatch, Unsupported, Timeout, Aborted, System.
//
// Transports with an executor here: transport::HostThreads (ranks are threads; each thread calls
// run(rank, ...)) and transport::SharedMemory (ranks are processes on one host). The other
// transport tags have no executor yet and fail to compile with a message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/exec/config.hpp"
#include "ccoll/exec/host_threads.hpp"
#include "ccoll/exec/shared_memory.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/schedule/pipelined.hpp"
#include "ccoll/topology/concepts.hpp"
#include "ccoll/transport.hpp"

namespace ccoll {

namespace detail {

template <class L, class S>
plan::Plan build_with_policies(const plan::PlanRequest& request) {
  plan::PlanRequest req = request;
  S::configure(req);
  return L::build(req);
}

template <class T, class L, class S>
std::string policy_name() {
  return std::string(T::name) + "/" + std::string(L::name) + "/" + std::string(S::name);
}

template <class>
inline constexpr bool kAlwaysFalse = false;

}  // namespace detail

template <transport::Transport T, topology::LogicalTopology L, schedule::Schedule S>
class Allreduce {
  static_assert(detail::kAlwaysFalse<T>,
                "ccoll: this transport has no executor in this version of ccoll "
                "(implemented: transport::HostThreads, transport::SharedMemory)");
};

// Ranks are the threads of one process. Construct once; each of config.nranks threads calls
// run(rank, ...) with its own rank for every collective.
template <topology::LogicalTopology L, schedule::Schedule S>
class Allreduce<transport::HostThreads, L, S> {
 public:
  using transport_type = transport::HostThreads;
  using topology_type = L;
  using schedule_type = S;

  explicit Allreduce(const Config& config)
      : exec_(config, &detail::build_with_policies<L, S>,
              detail::policy_name<transport::HostThreads, L, S>()) {}

  // Collective over all nranks threads; each passes its own rank.
  void run(int rank, const void* sendbuff, void* recvbuff, std::size_t count, DataType dtype,
           ReduceOp op) {
    exec_.run(rank, sendbuff, recvbuff, count, dtype, op);
  }
  int nranks() const { return exec_.nranks(); }
  const Config& config() const { return exec_.config(); }
  // The plan run for `count` elements of `dtype` (built, verified and cached on first use).
  const plan::Plan& plan(std::size_t count, DataType dtype) {
    return exec_.communicator().prepared_plan(count, size_of(dtype)).plan;
  }
  static std::string name() { return detail::policy_name<transport::HostThreads, L, S>(); }

 private:
  exec::HostThreadsExecutor exec_;
};

// Ranks are processes on one host. Every process constructs it (a collective rendezvous bounded
// by config.timeout) and calls run() for every collective.
template <topology::LogicalTopology L, schedule::Schedule S>
class Allreduce<transport::SharedMemory, L, S> {
 public:
  using transport_type = transport::SharedMemory;
  using topology_type = L;
  using schedule_type = S;

  explicit Allreduce(const Config& config = Config{})
      : exec_(config, &detail::build_with_policies<L, S>,
              detail::policy_name<transport::SharedMemory, L, S>()) {}

  void run(const void* sendbuff, void* recvbuff, std::size_t count, DataType dtype, ReduceOp op) {
    exec_.run(sendbuff, recvbuff, count, dtype, op);
  }
  int rank() const { return exec_.rank(); }
  int nranks() const { return exec_.nranks(); }
  const Config& config() const { return exec_.config(); }
  const plan::Plan& plan(std::size_t count, DataType dtype) {
    return exec_.communicator().prepared_plan(count, size_of(dtype)).plan;
  }
  static std::string name() { return detail::policy_name<transport::SharedMemory, L, S>(); }

 private:
  exec::SharedMemoryExecutor exec_;
};

}  // namespace ccoll
