// ccoll/sync/abort.hpp: the shared abort record that makes one rank's failure everyone's.
//
// When a rank's wait fails (timeout) or it hits any other error in the middle of a collective, the
// others would otherwise wait for it until their own deadlines. So the failing rank publishes an
// AbortRecord in the memory all ranks share; every wait polls its `flag` word and gives up at
// once. The first failure wins (a compare-exchange claims the record), so the error every rank
// reports names the root cause: the rank, channel, step and peer of the first failed wait.
// The record is sticky: a communicator that aborted stays aborted (its FIFOs are in an unknown
// state), like an NCCL communicator after ncclCommAbort.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"

namespace ccoll::sync {

struct AbortRecord {
  std::uint32_t flag = 0;  // 0: fine; 1: being written; 2: published
  std::uint32_t code = 0;  // a ccoll::ErrorCode
  std::int32_t rank = -1;  // the rank that failed first
  std::int32_t channel = -1;
  std::int64_t step = -1;
  std::int32_t peer = -1;
  std::uint32_t waiting_for =
      0;  // 0: other, 1: a message (tail), 2: a free slot (head), 3: arrival

  CCOLL_HD bool raised() const {
    return AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(&flag)).load_relaxed() != 0;
  }

  // Publishes a failure unless another one was published first; returns whether this one won.
  CCOLL_HD bool raise(std::uint32_t error_code, std::int32_t failed_rank, std::int32_t ch,
                      std::int64_t st, std::int32_t pr, std::uint32_t what) {
    std::uint32_t expected = 0;
    if (!AtomicWord<std::uint32_t>(&flag).compare_exchange(expected, 1u)) return false;
    code = error_code;
    rank = failed_rank;
    channel = ch;
    step = st;
    peer = pr;
    waiting_for = what;
    AtomicWord<std::uint32_t>(&flag).store_release(2u);
    return true;
  }

  // Waits (briefly) until a raised record is fully written; returns false if it never was.
  CCOLL_HD bool settle() const {
    for (int i = 0; i < 1000000; ++i) {
      if (AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(&flag)).load_acquire() == 2u)
        return true;
      cpu_relax();
    }
    return false;
  }
};

}  // namespace ccoll::sync
