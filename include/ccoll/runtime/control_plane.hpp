// ccoll/runtime/control_plane.hpp: what a transport's control plane does for the run loop.
//
// Two duties beside the data path: agreement (before a call touches any buffer, every rank learns
// every rank's arguments and all reach the same verdict) and abort propagation (the first
// failure anywhere stops every rank's waits at once and is what every rank reports). The
// shared-area control plane (runtime/area_control_plane.hpp) does both through memory every rank
// maps; a message-passing transport implements the same members over its own collectives.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>

#include "ccoll/core/error.hpp"
#include "ccoll/runtime/call_args.hpp"

namespace ccoll::runtime {

// Where a rank was when it failed or stopped, for the abort record and the error text.
struct FailurePoint {
  int rank = -1;
  int channel = -1;  // -1: outside the steps (agreement, plan lookup)
  std::int64_t step = -1;
  int peer = -1;
  // What the rank was waiting for; `dead`: the rank itself is gone (its process exited).
  enum class Waiting : std::uint32_t {
    nothing = 0,
    message = 1,
    free_slot = 2,
    arrival = 3,
    dead = 4
  };
  Waiting waiting_for = Waiting::nothing;
};

// The verdict every rank reaches for one call; `verdict` empty: run it.
struct Agreement {
  ErrorCode code = ErrorCode::Mismatch;
  std::string verdict;
  std::uint32_t root_choice = 0;  // rank 0's CallArgs::root_choice
};

template <class P>
concept ControlPlane = requires(P& p, const P& cp, const CallArgs& args, std::uint64_t seq,
                                std::uint64_t deadline_ns, ErrorCode code, FailurePoint where) {
  // Publishes `args` as `where.rank`'s arguments to call `seq` and returns the common verdict.
  // Throws Timeout or Aborted (naming the first failure) if the others do not arrive.
  { p.agree(args, seq, deadline_ns, where) } -> std::same_as<Agreement>;
  // The word every wait of this communicator polls (non-zero: give up).
  { cp.abort_word() } -> std::same_as<const std::uint32_t*>;
  { cp.aborted() } -> std::same_as<bool>;
  // Publishes a failure for every rank (the first one wins).
  p.raise(code, where);
  // The error a rank that stopped at `where` because of another's failure throws in call seq.
  { cp.stopped_error(where, seq) } -> std::same_as<Error>;
  // Called now and then while a rank waits: raises the abort record if a peer is known to be
  // gone (a transport that cannot tell does nothing), so that waits end long before the deadline.
  p.check_peers();
};

}  // namespace ccoll::runtime
