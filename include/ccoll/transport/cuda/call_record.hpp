// ccoll/transport/cuda/call_record.hpp: how the ranks of a GPU job agree, call by call, on the
// arguments of their collectives (count, element type, op, root) without a host round trip.
//
// Ranks that are threads or processes enqueue their calls independently, and a rank whose call
// differs from its peers' (another count, say) would otherwise run another plan: its blocks would
// wait for messages that never come, or read slots laid out for other chunks. So each block of a
// call first publishes the call's arguments in the job's control page (control_page.cuh), in a
// small ring of records of its (rank, channel), and then reads the record of the same call number
// of every peer its program exchanges messages with. Equal: the block runs its program. Different:
// it writes a CallMismatch and raises the abort word, and every rank's next synchronize() throws
// ccoll::Error(Mismatch) naming both ranks and both argument sets.
//
// Why a ring is enough: a block reads a peer's record of call n only when its program has a port
// to that peer in call n, and the FIFO between them bounds how far either can run ahead (a sender
// fills at most Config::nslots slots before the receiver has started the call, and has checked).
// A record already overwritten by a later call (the peer's sequence number is past n) is skipped:
// the check is then left to the ranks' other pairs, never a false alarm.
//
// Plain __host__ __device__ code over plain memory: the fast suite tests it on the host.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"

namespace ccoll::transport::cuda {

// Records per (rank, channel): calls a block may be ahead of a peer's check (see above).
inline constexpr std::uint32_t kCallRecordRing = 32;

// What every rank of one call must agree on (the collective itself is the communicator's).
struct CallArguments {
  std::uint64_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::int32_t root = -1;  // broadcast and reduce; -1: the collective has none

  CCOLL_HD bool operator==(const CallArguments& o) const {
    return count == o.count && dtype == o.dtype && op == o.op && root == o.root;
  }
};

// One entry of a ring: three words, each tagged with the call (its number + 1), so that a reader
// can tell a record of its call from an older one (not published yet) or a newer one (overwritten)
// without a lock:
//   count_tag = count | (call + 1) << 48   (the low 16 bits of call + 1)
//   root_tag  = (root + 1) | (call + 1) << 32   (the low 32 bits of call + 1)
//   kind_seq  = dtype | op << 8 | (call + 1) << 16
// The writer stores count_tag and root_tag, then kind_seq with release; a reader that acquires
// kind_seq of call n sees the other words of call n or later, and tells which by their tags.
struct CallRecord {
  std::uint64_t count_tag = 0;
  std::uint64_t root_tag = 0;
  std::uint64_t kind_seq = 0;  // 0: never written
};
static_assert(sizeof(CallRecord) == 24);

// Counts of up to 2^48 - 1 elements are compared exactly (no GPU holds more).
inline constexpr std::uint64_t kCallRecordCountMask = (std::uint64_t{1} << 48) - 1;

// What a block found when it compared its call with a peer's record.
enum class CallCheck : std::uint8_t {
  same,         // the peer made this call with the same arguments
  differs,      // the peer made this call with other arguments (*theirs)
  pending,      // the peer has not published this call yet: poll again
  overwritten,  // the peer is past this call and its record is gone: not checkable here
};

// Publishes call `call` of a (rank, channel) into its ring (kCallRecordRing records).
CCOLL_HD inline void publish_call(CallRecord* ring, std::uint64_t call, const CallArguments& args) {
  CallRecord& r = ring[call % kCallRecordRing];
  const std::uint64_t seq = call + 1;
  sync::AtomicWord<std::uint64_t>(&r.count_tag)
      .store_relaxed((args.count & kCallRecordCountMask) | (seq << 48));
  sync::AtomicWord<std::uint64_t>(&r.root_tag)
      .store_relaxed(static_cast<std::uint32_t>(args.root + 1) | (seq << 32));
  sync::AtomicWord<std::uint64_t>(&r.kind_seq)
      .store_release(static_cast<std::uint64_t>(args.dtype) |
                     static_cast<std::uint64_t>(args.op) << 8 | seq << 16);
}

// Compares call `call` with the peer's record of it (the peer's ring of the same channel).
CCOLL_HD inline CallCheck check_peer_call(const CallRecord* peer_ring, std::uint64_t call,
                                          const CallArguments& mine, CallArguments* theirs) {
  auto* r = const_cast<CallRecord*>(&peer_ring[call % kCallRecordRing]);
  const std::uint64_t seq = call + 1;
  const std::uint64_t kind = sync::AtomicWord<std::uint64_t>(&r->kind_seq).load_acquire();
  const std::uint64_t theirs_seq = kind >> 16;
  const std::uint64_t want = seq & (~std::uint64_t{0} >> 16);
  if (theirs_seq < want) return CallCheck::pending;
  if (theirs_seq > want) return CallCheck::overwritten;
  const std::uint64_t count = sync::AtomicWord<std::uint64_t>(&r->count_tag).load_relaxed();
  if ((count >> 48) != (seq & 0xffffu)) return CallCheck::overwritten;  // a later call's count
  const std::uint64_t root = sync::AtomicWord<std::uint64_t>(&r->root_tag).load_relaxed();
  if ((root >> 32) != (seq & 0xffffffffu)) return CallCheck::overwritten;
  CallArguments a;
  a.count = count & kCallRecordCountMask;
  a.root = static_cast<std::int32_t>(static_cast<std::uint32_t>(root)) - 1;
  a.dtype = static_cast<DataType>(kind & 0xffu);
  a.op = static_cast<ReduceOp>((kind >> 8) & 0xffu);
  if (theirs != nullptr) *theirs = a;
  CallArguments m = mine;
  m.count &= kCallRecordCountMask;
  return a == m ? CallCheck::same : CallCheck::differs;
}

// How one block's agreement on a call ended.
enum class Agreement : std::uint8_t {
  agreed,   // every peer made the same call (or its record was already overwritten)
  differs,  // `peer` made this call with other arguments (`theirs`)
  timeout,  // `peer` did not publish this call within the timeout
  aborted,  // the abort word was raised while waiting for `peer`
};
struct AgreementOutcome {
  Agreement result = Agreement::agreed;
  std::int32_t peer = -1;
  CallArguments theirs;
};

// The block leader's agreement on call `call` of (rank, channel): publishes its arguments, then
// compares them with the record of the same call of each of `peers` (the ranks its program
// exchanges messages with in this call), polling a peer that has not published yet with the
// abort word every 16 polls (every poll once the backoff sleeps) and a deadline of `timeout_ns`
// (0: none) from now. `records`: every (rank, channel)'s ring, rank-major, `nchannels` per rank.
CCOLL_HD inline AgreementOutcome agree_on_call_records(
    CallRecord* records, std::uint32_t nchannels, std::int32_t rank, std::uint32_t channel,
    const std::int32_t* peers, std::uint32_t npeers, std::uint64_t call, const CallArguments& args,
    std::uint32_t* abort, std::uint64_t timeout_ns) {
  auto ring = [&](std::int32_t r) {
    return records + (static_cast<std::uint64_t>(r) * nchannels + channel) * kCallRecordRing;
  };
  publish_call(ring(rank), call, args);
  const std::uint64_t now = sync::now_ns();
  const std::uint64_t deadline = timeout_ns == 0     ? 0
                                 : timeout_ns > ~now ? ~std::uint64_t{0}
                                                     : now + timeout_ns;
  AgreementOutcome out;
  for (std::uint32_t i = 0; i < npeers; ++i) {
    const std::int32_t q = peers[i];
    sync::Backoff backoff;
    for (std::uint32_t polls = 0;; ++polls) {
      const CallCheck r = check_peer_call(ring(q), call, args, &out.theirs);
      if (r == CallCheck::same || r == CallCheck::overwritten) break;
      out.peer = q;
      if (r == CallCheck::differs) {
        out.result = Agreement::differs;
        return out;
      }
      if (backoff.past_spinning() || (polls & 15u) == 15u) {
        if (sync::AtomicWord<std::uint32_t>(abort).load_relaxed() != 0) {
          out.result = Agreement::aborted;
          return out;
        }
        if (deadline != 0 && sync::now_ns() >= deadline) {
          out.result = Agreement::timeout;
          return out;
        }
      }
      backoff.pause();
    }
  }
  out.peer = -1;
  out.theirs = CallArguments{};
  return out;
}

// What a block that found a mismatch leaves for the host (one per (rank, channel)).
struct CallMismatch {
  std::uint64_t seq = 0;  // call number + 1 (0: none)
  std::int32_t rank = -1;
  std::int32_t peer = -1;
  CallArguments mine, theirs;
};

// The mismatch that explains the others, from every block's record (seq 0: none): the lowest
// call, then the lowest pair of ranks, so that every rank names the same one. Null: none.
inline const CallMismatch* first_mismatch(const CallMismatch* found, std::size_t n) {
  const CallMismatch* m = nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    const CallMismatch& x = found[i];
    if (x.seq != 0 && (m == nullptr || x.seq < m->seq ||
                       (x.seq == m->seq && std::min(x.rank, x.peer) < std::min(m->rank, m->peer))))
      m = &x;
  }
  return m;
}

// "rank 1's call 3 (count 100, f32, sum) differs from rank 0's (count 200, f32, sum)", with the
// lower rank first so that every rank reports the same text.
inline std::string describe_mismatch(const CallMismatch& m) {
  auto args = [](const CallArguments& a) {
    return "count " + std::to_string(a.count) + ", " + std::string(to_string(a.dtype)) + ", " +
           std::string(to_string(a.op)) +
           (a.root >= 0 ? ", root " + std::to_string(a.root) : std::string());
  };
  const bool swap = m.peer < m.rank;
  const int a = swap ? m.peer : m.rank, b = swap ? m.rank : m.peer;
  const CallArguments& aa = swap ? m.theirs : m.mine;
  const CallArguments& ba = swap ? m.mine : m.theirs;
  return "cuda-p2p: the ranks' calls differ: call " + std::to_string(m.seq - 1) + " of rank " +
         std::to_string(a) + " has " + args(aa) + ", of rank " + std::to_string(b) + " " +
         args(ba) + " (every rank must make the same calls in the same order)";
}

}  // namespace ccoll::transport::cuda
