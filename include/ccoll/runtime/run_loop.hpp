// ccoll/runtime/run_loop.hpp: one rank's steps of one call, on one host thread.
//
// A rank runs one program per channel. One thread interleaves them with the interpreter's
// non-blocking try_step ([C-Cube] Sec. IV-B's "check"), so channels never wait on each other and
// the thread cannot deadlock; when no channel can make progress it backs off (sync/backoff.hpp)
// until the call's deadline or an abort, and then reports the first blocked step: call, channel,
// step, and the peer and message it was waiting for. After each step it publishes the channel's
// progress, from which a consumer thread learns which layers are already final
// (runtime/layer_readiness.hpp).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/runtime/connection.hpp"
#include "ccoll/runtime/control_plane.hpp"
#include "ccoll/runtime/fast_box.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/runtime/slot_store_tuner.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::runtime {

// The slot-store tuner of a call of `bytes` (> 0): floor(log2(bytes)).
inline std::size_t slot_store_bucket(std::uint64_t bytes) {
  return static_cast<std::size_t>(std::bit_width(bytes) - 1);
}

// What one rank keeps between calls (only that rank's thread touches it).
template <Connection C>
struct alignas(128) RankState {
  std::uint64_t seq = 0;  // calls attempted
  // When the last call's waits began to count toward Config::timeout: its start, or the moment
  // its plan was ready (runtime/communicator.hpp).
  std::uint64_t call_start_ns = 0;
  // A call of this rank failed with the communicator aborted: its later calls report a refused
  // call's code as Aborted (runtime/communicator.hpp).
  bool reported_stop = false;
  // Eager calls returned from but not yet compared: [unverified_first, unverified_end). A call
  // between two eager ones that failed after publishing its arguments lies inside the range and
  // is compared with them.
  std::uint64_t unverified_first = 0;
  std::uint64_t unverified_end = 0;
  std::vector<std::uint64_t> base_by_set;            // messages of earlier calls per set connection
  std::vector<std::uint64_t> base;                   // per connection of the current plan
  std::vector<std::uint32_t> pcs;                    // per channel: next step
  std::shared_ptr<const PreparedPlan<C>> last_plan;  // the last lookup (no lock to reuse it)
  std::uint64_t last_count = 0;
  std::size_t last_elem_size = 0;
  int last_root = 0;
  // The output of a small call of a collective other than allreduce, until every rank's
  // arguments compared equal (runtime/communicator.hpp).
  std::vector<std::byte> staged_output;
  // Messages sent and taken per peer through the fast boxes (runtime/fast_box.hpp).
  FastBoxCursor boxes;
  // Rank 0 only: how to write slots (Config::tune_slot_stores), per power of two of the call's
  // bytes (slot_store_bucket). The choice follows where a message's lines live, which the size's
  // magnitude decides; a fixed table keeps calls of new sizes from allocating, as the gradient
  // engines' fused calls of changing sizes need.
  std::array<SlotStoreTuner, 64> tuners{};
  // The same choice for calls that read registered windows directly: how each rank writes the
  // share of the output its peers then read (runtime/symmetric_allreduce.hpp), which meets the
  // same question of where lines live.
  std::array<SlotStoreTuner, 64> window_tuners{};
};

// How long a rank that makes no progress waits between checks that its peers are alive.
inline constexpr std::uint64_t kPeerCheckIntervalNs = 100'000'000;

struct StepOptions {
  std::uint64_t deadline_ns = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t seq = 0;
  long timeout_ms = 0;
  bool stream_output = false;
  bool stream_slots = false;
  // LowLatency plans: the call's signature (protocol::LowLatency::signature).
  std::uint64_t ll_signature = 0;
  // The call's operator (run_steps runs the interpreter with kOpAtRunTime).
  ReduceOp op = ReduceOp::sum;
  // Per channel c < progress_channels: the rank's progress word (runtime/layer_readiness.hpp),
  // advanced after each step to progress_base_of_call(seq) + steps done.
  std::uint64_t* progress = nullptr;
  std::uint32_t progress_channels = 0;
};

// Raises the abort record, naming the rank, when one of this rank's unfinished channels waits for
// a rank that left (a control plane that tells, AreaControlPlane::left): every post of a rank
// precedes its leaving, so a port still blocked on it after left() was read stays blocked. The
// peers are checked again first, after left() was read, so that a disagreement the rank published
// before it left is what every rank reports.
template <class T, ControlPlane P, Connection C>
void raise_if_waiting_for_left(P& plane, ProgramContext<T, C>& ctx, const plan::Plan& p,
                               const RankState<C>& st, int rank) {
  if constexpr (requires {
                  { plane.left(0) } -> std::convertible_to<bool>;
                }) {
    for (std::uint32_t c = 0; c < p.channels.size(); ++c) {
      const auto& steps = p.channels[c].programs[static_cast<std::size_t>(rank)].steps;
      if (st.pcs[c] >= steps.size()) continue;
      ctx.steps = steps.data();
      ctx.nsteps = static_cast<std::uint32_t>(steps.size());
      ctx.channel = c;
      const int q = blocked_port<HostGroup>(ctx, st.pcs[c], sync::WaitResult::Timeout).peer;
      if (q < 0 || !plane.left(q)) continue;
      plane.check_peers();
      if (plane.aborted()) return;
      if (blocked_port<HostGroup>(ctx, st.pcs[c], sync::WaitResult::Timeout).peer != q) continue;
      plane.raise(ErrorCode::Aborted, FailurePoint{q, -1, -1, q, FailurePoint::Waiting::left});
      return;
    }
  } else {
    (void)plane, (void)ctx, (void)p, (void)st, (void)rank;
  }
}

template <class T, ControlPlane P, Connection C>
void run_steps(P& plane, RankState<C>& st, const PreparedPlan<C>& pp, int rank, const T* input,
               T* output, const StepOptions& o, const sync::WaitPolicy& policy) {
  const plan::Plan& p = pp.plan;
  const auto nch = static_cast<std::uint32_t>(p.channels.size());
  ProgramContext<T, C> ctx;
  ctx.ports = p.ports.data();
  ctx.connections = pp.connections.data();
  ctx.base = st.base.data();
  ctx.input = input;
  ctx.output = output;
  ctx.nactive = pp.nactive;
  ctx.rank = rank;
  ctx.abort = plane.abort_word();
  ctx.stream_output = o.stream_output;
  ctx.stream_slots = o.stream_slots;
  ctx.progress_base = progress_base_of_call(o.seq);
  ctx.deadline_ns = o.deadline_ns;
  // Every rank of a communicator has the same transport, so all ranks agree on the protocol.
  ctx.low_latency = pp.low_latency;
  ctx.ll_signature = o.ll_signature;
  ctx.op = o.op;
  std::uint32_t unfinished = 0;
  for (std::uint32_t c = 0; c < nch; ++c) {
    st.pcs[c] = 0;
    if (!p.channels[c].programs[static_cast<std::size_t>(rank)].steps.empty()) ++unfinished;
  }
  const HostGroup group;
  sync::Backoff backoff(policy);
  std::uint64_t next_peer_check = 0;
  while (unfinished > 0) {
    bool progressed = false;
    for (std::uint32_t c = 0; c < nch; ++c) {
      const auto& steps = p.channels[c].programs[static_cast<std::size_t>(rank)].steps;
      if (st.pcs[c] >= steps.size()) continue;
      ctx.steps = steps.data();
      ctx.nsteps = static_cast<std::uint32_t>(steps.size());
      ctx.channel = c;
      ctx.progress = c < o.progress_channels ? o.progress + c : nullptr;
      while (try_step<T, kOpAtRunTime>(group, ctx, st.pcs[c])) progressed = true;
      if (st.pcs[c] >= steps.size()) --unfinished;
    }
    if (progressed) {
      backoff.reset();
      continue;
    }
    // The clock as the backoff last read it (every few spins; 0: not yet in this call).
    const std::uint64_t now = backoff.last_ns();
    if (now != 0) {
      if (next_peer_check == 0) {
        next_peer_check = now + kPeerCheckIntervalNs;
      } else if (now >= next_peer_check) {
        plane.check_peers();
        if (!plane.aborted()) raise_if_waiting_for_left(plane, ctx, p, st, rank);
        next_peer_check = now + kPeerCheckIntervalNs;
      }
    }
    const bool aborted = plane.aborted();
    if (aborted || (now != 0 && now >= o.deadline_ns)) {
      // Report the first unfinished channel's blocked step.
      for (std::uint32_t c = 0; c < nch; ++c) {
        const auto& steps = p.channels[c].programs[static_cast<std::size_t>(rank)].steps;
        if (st.pcs[c] >= steps.size()) continue;
        ctx.steps = steps.data();
        ctx.nsteps = static_cast<std::uint32_t>(steps.size());
        ctx.channel = c;
        const StepFailure f = blocked_port<HostGroup>(ctx, st.pcs[c], sync::WaitResult::Timeout);
        const FailurePoint where{
            rank, static_cast<int>(c), f.step, f.peer,
            f.waiting_for_slot ? FailurePoint::Waiting::free_slot : FailurePoint::Waiting::message};
        if (aborted) throw plane.stopped_error(where, o.seq);
        if constexpr (requires { plane.absent_rank(o.seq); }) {
          // Arguments agreed in band: the steps may wait on a rank that never started the call.
          if (const int absent = plane.absent_rank(o.seq); absent >= 0) {
            plane.raise(ErrorCode::Timeout,
                        FailurePoint{rank, -1, -1, absent, FailurePoint::Waiting::arrival});
            throw Error(ErrorCode::Timeout, rank,
                        "rank " + std::to_string(absent) + " did not arrive at call " +
                            std::to_string(o.seq) + " within " + std::to_string(o.timeout_ms) +
                            " ms" + left_note(plane, absent));
          }
        }
        plane.raise(ErrorCode::Timeout, where);
        std::ostringstream os;
        os << "call " << o.seq << ", channel " << c << ", step " << f.step << " of " << steps.size()
           << ": waiting for "
           << (f.waiting_for_slot ? "a free slot at rank " : "a message from rank ") << f.peer
           << " for " << (sync::now_ns() - o.start_ns) / 1000000 << " ms (Config::timeout "
           << o.timeout_ms << " ms)" << left_note(plane, f.peer);
        throw Error(ErrorCode::Timeout, rank, os.str());
      }
    }
    backoff.pause();
  }
}

}  // namespace ccoll::runtime
