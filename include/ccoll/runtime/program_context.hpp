// ccoll/runtime/program_context.hpp: what the step interpreter (runtime/interpreter.hpp) works on,
// shared by its data paths: the Group a step runs on (HostGroup here; a CUDA thread block in
// transport/cuda/block_group.cuh), one (rank, channel) program's ProgramContext, the message number
// of a port, and the leader's posts after a step.
//
// A Group provides first()/stride() (the elements a member handles), sync() (a barrier), leader()
// and any(v) (a barrier that returns to every member whether any member passed true: the leader
// passes its verdict, the others false unless they report a failure of their own),
// fence_before_post() (what the leader issues after the step's barrier, before its posts) and
// kSingleThread.
#pragma once

#include <concepts>
#include <cstdint>

#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/connection.hpp"
#include "ccoll/runtime/step_operands.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/sync/counter.hpp"
#include "ccoll/sync/poll.hpp"

namespace ccoll::runtime {

// One host thread.
struct HostGroup {
  static constexpr bool kSingleThread = true;
  // CCOLL_HD: nvcc compiles the host executors too when a CUDA translation unit includes them.
  CCOLL_HD static constexpr std::uint64_t first() { return 0; }
  CCOLL_HD static constexpr std::uint64_t stride() { return 1; }
  CCOLL_HD static constexpr bool leader() { return true; }
  CCOLL_HD static constexpr void sync() {}
  CCOLL_HD static constexpr bool any(bool value) { return value; }
  CCOLL_HD static constexpr void fence_before_post() {}
};

// Whether a Group's fence_before_post(), issued by its leader after the step's barrier, orders
// every member's writes before whatever the leader stores next, so that the step's posts (heads,
// tails, progress) can be relaxed stores: one fence per step. Groups that do not say post with
// release stores (one host thread: a release store costs nothing more than a plain one on x86).
template <class Group>
inline constexpr bool kFenceOrdersPosts = [] {
  if constexpr (requires { Group::kFenceOrdersPosts; })
    return bool{Group::kFenceOrdersPosts};
  else
    return false;
}();

// Groups of several threads place each message at the chunk's offset modulo 16 bytes inside its
// slot, so that slot and user buffers (16-byte aligned at element 0) are mutually aligned and the
// pack path applies; executors that run such groups give every slot this many spare bytes.
inline constexpr std::uint64_t kBlockSlotSlack = 16;

// Not an operator: the Op of an interpreter that reads its call's operator from
// ProgramContext::op and chooses the element loop per step. The host executors instantiate their
// interpreter so, once per element type, rather than once per element type and operator, which
// takes 5-14% off the compile time of a program that makes host communicators; a step's switch
// costs nothing beside its loop, and the loops stay those of each operator. GPU kernels take the
// operator as a template argument, so that each compiles one data path.
inline constexpr ReduceOp kOpAtRunTime = static_cast<ReduceOp>(0xff);

// Everything one (rank, channel) program needs, as plain pointers (host or device memory).
template <class T, Connection C = sync::ConnectionRef>
struct ProgramContext {
  using connection_type = C;
  const plan::Step* steps = nullptr;
  std::uint32_t nsteps = 0;
  const plan::Port* ports = nullptr;
  // Indexed by the ports' connection numbers: the plan's, or a GPU block's own (its cached
  // program, transport/cuda/block_tables.hpp).
  const C* connections = nullptr;
  const std::uint64_t* base = nullptr;  // per connection, alike: its messages in earlier calls
  const T* input = nullptr;
  T* output = nullptr;
  int nactive = 1;  // avg divides by this
  int rank = 0;
  std::uint32_t channel = 0;
  const std::uint32_t* abort = nullptr;  // non-zero: give up (another rank failed)
  // Host only: write the output with non-temporal stores. For buffers larger than the caches this
  // saves the read-for-ownership of every output line (a third of a ring step's memory traffic);
  // for small ones it would only evict data that is about to be reused.
  bool stream_output = false;
  // Host only: write the send slots with non-temporal stores too. The message then reaches its
  // reader through memory instead of through the writer's cache: on hosts where taking a line back
  // from another core's cache is slow (the writer must invalidate the copy its reader left there),
  // that is faster, at the price of memory traffic (core/config.hpp, Config::stream_slots).
  bool stream_slots = false;
  // Optional: a word in which the leader publishes, after each step and its posts (a release, or
  // a relaxed store after the step's fence: kFenceOrdersPosts), progress_base + (steps of this
  // program done in this call). Another thread, block or
  // stream reads it to start on output that is already final before the call ends ([C-Cube] Sec.
  // III-D's enqueue semaphore; runtime/layer_readiness.hpp). The base grows from call to call, so
  // an earlier call's value never satisfies a wait for a later one.
  std::uint64_t* progress = nullptr;
  std::uint64_t progress_base = 0;
  // The plan's messages are LowLatency lines (every connection has an LL region; see
  // protocol/low_latency.hpp); false: Simple slots and tail counters.
  bool low_latency = false;
  // The deadline (sync::now_ns(); 0 = none) of run_program's waits, where it takes precedence over
  // the one run_program is given, and of the polls of LowLatency lines inside a step, which a group
  // of several threads makes without the leader's check.
  std::uint64_t deadline_ns = 0;
  // LowLatency: the call's signature (protocol::LowLatency::signature), which the trailer of every
  // message sent carries and that of every message received must match.
  std::uint64_t ll_signature = 0;
  // The call's operator, read only by an interpreter instantiated with kOpAtRunTime.
  ReduceOp op = ReduceOp::sum;
};

// Connections that can carry LowLatency messages (sync::BasicConnectionRef).
template <class C>
concept LowLatencyConnection = requires(const C& c, std::uint64_t m) {
  { c.ll_lines(m) } -> std::same_as<std::uint64_t*>;
  { c.has_low_latency() } -> std::same_as<bool>;
  { C::scope } -> std::convertible_to<sync::Scope>;
};

// Which protocols a Group's steps run (protocol/protocol.hpp). By default both, as the context
// says. A GPU launch kernel compiles one data path only, so that neither costs the other
// registers: the Simple kernel (transport/cuda/block_group.cuh) says kRunsLowLatency = false and
// runs every plan as Simple, whatever the context says; the LowLatency kernel says kRunsSimple =
// false, and its executor launches it for LowLatency plans only.
template <class Group>
inline constexpr bool kRunsLowLatency = [] {
  if constexpr (requires { Group::kRunsLowLatency; })
    return bool{Group::kRunsLowLatency};
  else
    return true;
}();
template <class Group>
inline constexpr bool kRunsSimple = [] {
  if constexpr (requires { Group::kRunsSimple; })
    return bool{Group::kRunsSimple};
  else
    return true;
}();

// Whether this program's steps move LowLatency messages on Group.
template <class Group, class T, class C>
CCOLL_HD CCOLL_FORCEINLINE bool low_latency_steps(const ProgramContext<T, C>& ctx) {
  static_assert(kRunsSimple<Group> || (kRunsLowLatency<Group> && LowLatencyConnection<C>),
                "a group that runs no Simple steps must run LowLatency ones");
  if constexpr (LowLatencyConnection<C> && kRunsLowLatency<Group>) {
    if constexpr (kRunsSimple<Group>)
      return ctx.low_latency;
    else
      return true;
  } else {
    return false;
  }
}

// Why a program stopped before its end.
struct StepFailure {
  sync::WaitResult result = sync::WaitResult::Ok;
  std::uint32_t step = 0;
  std::int32_t peer = -1;
  bool waiting_for_slot = false;  // true: a free send slot (head); false: a message (tail)
};

// The absolute message number a port's message has in this call.
template <class T, class C>
CCOLL_HD inline std::uint64_t message_number(const ProgramContext<T, C>& ctx, const plan::Port& p) {
  return ctx.base[p.connection] + p.seq;
}

// How a group writes and reads LowLatency messages (protocol/low_latency.hpp): one thread orders
// its whole message by the release of the trailer, so it packs the payload (no flag per line);
// several threads write lines in parallel, each line carrying its own flag. Every rank of a
// communicator runs the same group, so the two ends of a connection agree.
template <class Group>
inline constexpr bool kPackedLowLatency = Group::kSingleThread;

// Whether Group may run steps as flagged lines on connections C (runtime/low_latency_step.hpp):
// only then does it need the shared LowLatencyOperands (runtime/step_operands.hpp).
template <class Group, class C>
inline constexpr bool kFlaggedLowLatency =
    LowLatencyConnection<C>&& kRunsLowLatency<Group> && !kPackedLowLatency<Group>;

// The leader's posts of a step, after g.fence_before_post(): relaxed stores where that fence
// orders them (kFenceOrdersPosts), release stores otherwise.
template <class Group, class C>
CCOLL_HD CCOLL_FORCEINLINE void post_received(const C& c, std::uint64_t m) {
  if constexpr (kFenceOrdersPosts<Group> && requires { c.post_received_after_fence(m); })
    c.post_received_after_fence(m);
  else
    c.post_received(m);
}
template <class Group, class C>
CCOLL_HD CCOLL_FORCEINLINE void post_sent(const C& c, std::uint64_t m, std::uint64_t bytes) {
  // A message-passing connection moves only the bytes written; memory connections need not.
  if constexpr (requires { c.post_sent(m, bytes); })
    c.post_sent(m, bytes);
  else if constexpr (kFenceOrdersPosts<Group> && requires { c.post_sent_after_fence(m); })
    c.post_sent_after_fence(m);
  else
    c.post_sent(m);
}

}  // namespace ccoll::runtime
