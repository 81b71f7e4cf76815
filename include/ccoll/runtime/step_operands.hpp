// ccoll/runtime/step_operands.hpp: a step's operands resolved to plain pointers, once per step, by
// the one thread that has just waited for them.
//
// Finding where a step reads and writes takes a chain of dependent loads: the step, its ports,
// their connections, the connections' message bases, then the slot of each message. In a group of
// several threads (a CUDA thread block) only the leader needs to do that: it has read the ports and
// connections anyway to wait for the step, so it writes the resolved pointers into storage the
// group shares (shared memory on a GPU) before the barrier that releases the step, and the members
// read them from there. The element loops then find their pointers in shared memory instead of in
// a per-thread array in local memory, which on a GPU is a copy per thread that the L1 cache cannot
// hold for a whole block. A one-thread group keeps them on its stack.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"

namespace ccoll::runtime {

// The most receive (and send) ports one step may have; a step with more is rejected when the plan
// is loaded (check_step_shapes), so the interpreter needs no allocation.
inline constexpr std::uint32_t kMaxStepPorts = 15;

// No default member initializers: a CUDA block keeps one in __shared__ memory, which admits no
// dynamic initialization. The leader writes every field a step uses before the members read it.
template <class T>
struct StepOperands {
  const T* srcs[kMaxStepPorts + 1];  // operand order of the fold: the local one at src_position
  T* dsts[kMaxStepPorts + 1];        // the output first when the step writes it, then the sends
  std::uint64_t count;               // elements
  std::uint32_t nsrc;
  std::uint32_t ndst;
  bool finalize;  // the last fold of an avg: divide by the active ranks
};

// A LowLatency step as a group of several threads runs it (runtime/low_latency_step.hpp): the
// first line of every message it receives and sends with the message's flag, in port order, and
// where the local operand falls among the received ones. Same rules as StepOperands.
template <class T>
struct LowLatencyOperands {
  const std::uint64_t* recv[kMaxStepPorts];
  std::uint64_t* send[kMaxStepPorts];
  std::uint32_t recv_flag[kMaxStepPorts];
  std::uint32_t send_flag[kMaxStepPorts];
  const T* local;  // null: the step folds only what it receives
  T* output;       // null: the step writes no output
  std::uint64_t count;
  std::uint32_t nrecv;
  std::uint32_t nsend;
  std::uint32_t local_at;  // the local operand's place in the fold (kMaxStepPorts + 1 if none)
  // The received message a member gave up waiting for (kMaxStepPorts: none), for the failure
  // report: written with a relaxed atomic store by any member that gives up, read by the leader
  // after the barrier that ends the step.
  std::uint32_t gave_up;
  bool finalize;
};

// The storage a group's members share for one step's operands: the group's own when it has some
// (`shared_operands<T>()`, a CUDA block's shared memory), otherwise `own`.
template <class T, class Group>
CCOLL_HD CCOLL_FORCEINLINE StepOperands<T>& step_operands(const Group& g, StepOperands<T>& own) {
  if constexpr (requires { g.template shared_operands<T>(); }) {
    (void)own;
    return *g.template shared_operands<T>();
  } else {
    return own;
  }
}

// The same for a LowLatency step of a group of several threads, which must have shared storage
// (`shared_low_latency_operands<T>()`): its members could not otherwise see what the leader
// resolved.
template <class T, class Group>
CCOLL_HD CCOLL_FORCEINLINE LowLatencyOperands<T>& low_latency_operands(const Group& g) {
  return *g.template shared_low_latency_operands<T>();
}

}  // namespace ccoll::runtime
