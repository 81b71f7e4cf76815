// ccoll/transport/cuda/session_protocol.hpp: the protocol of a persistent session's work queue,
// host half and device half, as plain __host__ __device__ code over plain memory.
//
// A session kernel stays resident and takes its calls from a ring of `depth` slots in host-mapped
// memory. Item j goes to slot j % depth as one record per rank of the kernel (SessionRecord: the
// plan, the buffers and the count, each word tagged with the item's ticket, j + 1). Each block's
// leader polls its rank's record, whole, until every word carries the ticket (sync::poll_until: no
// sleep for the first 50 us; on a GPU the abort word is read once per 16 us, not per poll): one
// round trip over PCIe takes a call, with no ticket to see first (a block idle for longer polls
// one word of the record, then reads it whole). Every block runs the item as soon as it sees it;
// the last block to finish item j publishes `completed = j + 1`, in order (only after item j - 1
// was published). Back-pressure: the host writes item j + depth only once item j has completed, so
// a slot holds item j, item j - depth or zeros, and the kernel's per-item arrival words can be
// reused without a reset race. The host ends the kernel with a stop item (records without a plan).
//
// Nothing here calls CUDA: session_queue.cuh adds the memory, the stream and the kernel's end,
// and the fast suite runs this protocol on host threads (tests/cuda_protocol_test.cpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "ccoll/core/error.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/poll.hpp"

#if !CCOLL_DEVICE_PASS
#include <atomic>
#endif

namespace ccoll::transport::cuda {

// The most items a session's ring holds: the executors allocate every session's queue when they
// are built (session_queue.cuh, SessionQueueMemory), so its size is fixed then.
inline constexpr std::uint32_t kMaxSessionDepth = 64;

// The word the kernel publishes to the host while a session runs (host-mapped).
struct SessionQueueControl {
  alignas(128) std::uint64_t completed = 0;  // items every block has finished
};

// What one record of an item carries: a rank's part of a queued call.
struct SessionWork {
  const void* plan = nullptr;  // the plan's tables in device memory; nullptr: the stop item
  const void* input = nullptr;
  void* output = nullptr;
  std::uint64_t count = 0;  // elements
};

// A record as it lies in host-mapped memory: four words, each a payload below 2^48 (an address of
// a 48-bit address space, or a count) with the item's tag above it (session_tag: 1..65535, never
// 0). A word is one 8-byte access, single-copy atomic on the host and over PCIe, so a reader that
// finds the tag in all four words has the whole record, without a separate ticket to poll first
// and the round trip that would cost; a record still being written shows a word of an older tag
// (or zero) and is read again. A slot holds item j, item j - depth (depth < 65535: another tag) or
// zeros (no tag), so the tags tell them apart.
struct alignas(32) SessionRecord {
  std::uint64_t words[4] = {};
};

inline constexpr unsigned kSessionTagShift = 48;
inline constexpr std::uint64_t kSessionPayloadLimit = std::uint64_t{1} << kSessionTagShift;

// The tag of ticket t (1, 2, ...): 1..65535, so that a zeroed record never carries one, and
// tickets less than 65535 apart have different tags.
CCOLL_HD constexpr std::uint64_t session_tag(std::uint64_t ticket) {
  return (ticket - 1) % 0xFFFFu + 1;
}

CCOLL_HD constexpr std::uint64_t session_tagged(std::uint64_t payload, std::uint64_t ticket) {
  return payload | session_tag(ticket) << kSessionTagShift;
}

// Can `w` be written into a record? (Every address and the count below 2^48.)
inline bool session_encodable(const SessionWork& w) {
  const auto fits = [](std::uint64_t v) { return v < kSessionPayloadLimit; };
  return fits(reinterpret_cast<std::uintptr_t>(w.plan)) &&
         fits(reinterpret_cast<std::uintptr_t>(w.input)) &&
         fits(reinterpret_cast<std::uintptr_t>(w.output)) && fits(w.count);
}

// Throws Unsupported, naming `rank`, if a record cannot hold `w` (session_encodable): before
// anything is written, so that no rank's blocks run a call the others never see.
inline void check_session_encodable(const SessionWork& w, int rank) {
  if (!session_encodable(w))
    throw Error(ErrorCode::Unsupported, rank,
                "a session queues addresses and counts below 2^48; this call's are not "
                "(launch it instead)");
}

// The host's write of item `ticket - 1`'s record (release stores, in any order: the reader checks
// every word's tag). `w` is session_encodable. Scope: who reads the record (a relay's copy in
// device memory is read on its own GPU alone: session_relay_record).
template <sync::Scope S = sync::Scope::system>
CCOLL_HD inline void session_write_record(SessionRecord& r, std::uint64_t ticket,
                                          const SessionWork& w) {
  const std::uint64_t payloads[4] = {reinterpret_cast<std::uintptr_t>(w.plan),
                                     reinterpret_cast<std::uintptr_t>(w.input),
                                     reinterpret_cast<std::uintptr_t>(w.output), w.count};
  for (int i = 0; i < 4; ++i)
    sync::AtomicWord<std::uint64_t, S>(&r.words[i])
        .store_release(session_tagged(payloads[i], ticket));
}

// The address a record's payload names (its bits, as the host wrote them).
template <class Pointer>
CCOLL_HD inline Pointer session_address(std::uint64_t payload) {
  static_assert(sizeof(Pointer) == sizeof(payload));
  Pointer p;
  std::memcpy(&p, &payload, sizeof(p));
  return p;
}

// One read of a record: true, with `w` filled, when every word carries `ticket`'s tag. The four
// loads are independent, so they are in flight together: one round trip over PCIe.
CCOLL_HD inline bool session_read_record(const SessionRecord& r, std::uint64_t ticket,
                                         SessionWork& w) {
  std::uint64_t v[4];
  for (int i = 0; i < 4; ++i)
    v[i] = sync::AtomicWord<std::uint64_t>(const_cast<std::uint64_t*>(&r.words[i])).load_relaxed();
  const std::uint64_t tag = session_tag(ticket);
  for (int i = 0; i < 4; ++i)
    if (v[i] >> kSessionTagShift != tag) return false;
  constexpr std::uint64_t mask = kSessionPayloadLimit - 1;
  w.plan = session_address<const void*>(v[0] & mask);
  w.input = session_address<const void*>(v[1] & mask);
  w.output = session_address<void*>(v[2] & mask);
  w.count = v[3] & mask;
  return true;
}

// What the kernel needs of the queue (all pointers as the device sees them).
struct SessionQueueView {
  SessionRecord* records = nullptr;  // host-mapped: `depth` items of `stride` records
  std::uint32_t depth = 1;
  std::uint32_t stride = 1;                // records per item (a transport's ranks per kernel)
  SessionQueueControl* control = nullptr;  // host-mapped
  std::uint64_t* arrivals = nullptr;       // device memory, depth words: blocks done with item j
  std::uint64_t* completed = nullptr;      // device memory: the device's copy of control->completed
};

// A block's writes (its outputs) before its arrival is seen: at system scope by the host and by
// peer GPUs; at device scope by the blocks of one GPU, whose last block then fences at system scope
// before it publishes the item's completion (cumulativity carries the others' writes).
template <sync::Scope S = sync::Scope::system>
CCOLL_HD inline void session_fence() {
#if CCOLL_DEVICE_PASS
  if constexpr (S == sync::Scope::device)
    __threadfence();
  else
    __threadfence_system();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// After a record was read whole: what the host wrote before it is visible, and stale copies of the
// plan's tables (device memory an earlier plan may have used) are gone from this SM's cache. The
// record's loads are relaxed, so that they are in flight together; the fence makes the one that
// read a release store an acquire.
CCOLL_HD inline void session_acquire_fence() {
#if CCOLL_HAVE_LIBCUDACXX
  ::cuda::atomic_thread_fence(::cuda::memory_order_acquire, ::cuda::thread_scope_system);
#else
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
}

// Does the first word of a record carry `ticket`'s tag? One load: the poll of a block that has
// been idle for a while.
CCOLL_HD inline bool session_record_begun(const SessionRecord& r, std::uint64_t ticket) {
  const std::uint64_t v =
      sync::AtomicWord<std::uint64_t>(const_cast<std::uint64_t*>(&r.words[0])).load_relaxed();
  return v >> kSessionTagShift == session_tag(ticket);
}

// The block leader's wait for item j's record `index` (its rank's part of the call): Ok with `w`
// filled, or Aborted when the abort word was raised. For the first DevicePollSchedule::kSpinNs
// of the wait, when a call is likely close (a session's calls come back to back), each poll reads
// the whole record: one round trip takes the call. After that the block polls the first word
// alone, one load per poll as a ticket would cost, and reads the record once that word shows the
// item: every block of the grid polls host memory while the session is idle, so the idle polls
// stay as cheap as they can be. No deadline: a session may wait for its next call as long as it
// likes.
CCOLL_HD inline sync::WaitResult session_wait_record(const SessionQueueView& q, std::uint64_t j,
                                                     std::uint32_t index,
                                                     const std::uint32_t* abort, SessionWork& w) {
  const SessionRecord& r = q.records[(j % q.depth) * q.stride + index];
  const std::uint64_t idle_from = sync::now_ns() + sync::DevicePollSchedule::kSpinNs;
  bool begun = false;  // idle: the first word has shown the item
  const sync::WaitResult result = sync::poll_until(
      [&] {
        if (!begun && sync::now_ns() >= idle_from) {
          if (!session_record_begun(r, j + 1)) return false;
          begun = true;
        }
        return session_read_record(r, j + 1, w);
      },
      abort, 0);
  if (result == sync::WaitResult::Ok) session_acquire_fence();
  return result;
}

// The relay: one thread copies record `index` of item j from the host's ring (`host`, host-mapped)
// into `mirror` (the same layout, depth items of host.stride records, in device memory) once the
// host has written it whole, and the blocks wait for their records in the mirror
// (session_wait_record on a view whose records are the mirror's). A block that polls host memory
// costs a PCIe read per poll, and the reads of many blocks queue at the host's bridge, each poll
// then taking as long as the queue ahead of it (the abort word's reads did that with hundreds of
// blocks waiting: docs/results/gpu-2026-11-30-h200.md); with a relay, the host's records are read
// by one thread per record and the blocks poll L2. The copy keeps each word's tag, so a mirror
// slot holds item j, item j - depth or zeros as the host's slot does, and the host's
// back-pressure frees both: the host writes item j + depth only once item j has completed, after
// every block read its copy of item j. So a relay copies only records that some block reads: the
// host may overwrite one that no block reads before the relay took it, and the relay would wait
// for it forever. Ok, with `stop` set at the stop item (copied too: the blocks end on it); Aborted
// when the abort word was raised.
CCOLL_HD inline sync::WaitResult session_relay_record(const SessionQueueView& host,
                                                      SessionRecord* mirror, std::uint64_t j,
                                                      std::uint32_t index,
                                                      const std::uint32_t* abort, bool& stop) {
  SessionWork w;
  const sync::WaitResult result = session_wait_record(host, j, index, abort, w);
  if (result != sync::WaitResult::Ok) return result;
  // After session_wait_record's acquire fence: a block that reads this copy whole and fences
  // sees what the host wrote before the record (the plan's tables), by causality.
  session_write_record<sync::Scope::device>(mirror[(j % host.depth) * host.stride + index], j + 1,
                                            w);
  stop = w.plan == nullptr;
  return sync::WaitResult::Ok;
}

// The block leader's arrival after item j, its outputs written: the last of `nblocks` to arrive
// publishes completion of j once j - 1 is published. False: the abort word was raised meanwhile
// (item j - 1 was cut short, so j never completes). ArrivalScope: who must see a block's outputs
// when it arrives (session_fence); the completion is always published at system scope.
template <sync::Scope ArrivalScope = sync::Scope::system>
CCOLL_HD inline bool session_item_done(const SessionQueueView& q, std::uint64_t j, unsigned nblocks,
                                       std::uint32_t* abort) {
  session_fence<ArrivalScope>();  // the block's outputs before its arrival
  sync::AtomicWord<std::uint64_t, sync::Scope::device> arrived(&q.arrivals[j % q.depth]);
  if (arrived.fetch_add_acq_rel(1) + 1 != nblocks) return true;
  // The last block of item j: every block's outputs are written. The word is free again: the host
  // posts item j + depth only after it has seen item j complete.
  arrived.store_relaxed(0);
  sync::AtomicWord<std::uint64_t, sync::Scope::device> completed(q.completed);
  if (sync::poll_until([&] { return completed.load_acquire() >= j; }, abort, 0) !=
      sync::WaitResult::Ok)
    return false;
  session_fence();
  // The host's word first: the last block of item j + 1 publishes j + 2 only once it has read
  // this block's j + 1 in the device's word, so its store to the host's word then comes after
  // this one's. The other way round, this block's j + 1 could land in the host's word after the
  // next item's j + 2, and the host's count would go back for good.
  sync::AtomicWord<std::uint64_t>(&q.control->completed).store_release(j + 1);
  completed.store_release(j + 1);
  return true;
}

// When the host, waiting for a ticket, asks the driver whether the session's kernel still runs
// (cudaStreamQuery, session_queue.cuh): the kernel never returns while the session is open, so
// that query only notices a kernel that ended early (a fault) and would otherwise leave the wait
// spinning. A driver call costs microseconds, and the lent GPU machine's were slow (an empty
// launch 3.5-5.4 us, a launch and its synchronisation 19-30 us:
// docs/results/gpu-2026-11-30-h200.md and its latency_p8_c1.log), so a wait
// that asked on its first poll would add a query to every call that did not complete at once.
// Instead the host asks only once the queue has made no progress (its completion count has not
// moved) for kQuietNs, and then at most once per kIntervalNs: calls that complete one after
// another never pay a query, and a kernel that died is still noticed within a fraction of a
// millisecond, whichever tickets the caller polls. Plain arithmetic on clock values (now_ns()),
// so that the fast suite tests it with made-up clocks.
class SessionDriverPace {
 public:
  static constexpr std::uint64_t kQuietNs = 100'000;
  static constexpr std::uint64_t kIntervalNs = 100'000;

  // Is a driver query due now, the queue's completion count being `completed`? A count that
  // moved since the last ask starts a new quiet time.
  bool due(std::uint64_t completed, std::uint64_t now) {
    if (!asked_ || completed != completed_) {
      asked_ = true;
      completed_ = completed;
      since_ = now;
      return false;
    }
    if (now - since_ < kQuietNs || now < next_) return false;
    next_ = now + kIntervalNs;
    return true;
  }

 private:
  bool asked_ = false;
  std::uint64_t completed_ = 0;
  std::uint64_t since_ = 0;
  std::uint64_t next_ = 0;
};

// The host half of the ring: which slot the next item goes to, when that slot is free, the
// writing of an item's records and of the stop item, and the completion of a ticket. Tickets are
// 1, 2, ...: ticket t is item t - 1.
class SessionRing {
 public:
  SessionRing() = default;
  // `records` (depth items of `stride`) and `control` as the host sees them; items use their first
  // `used` records (<= stride). Starts a new sequence: those records and the completion word are
  // zeroed (a previous session's record could otherwise pass for this one's), so no kernel may be
  // using them.
  SessionRing(SessionRecord* records, SessionQueueControl* control, std::uint32_t depth,
              std::uint32_t stride = 1, std::uint32_t used = 1)
      : records_(records),
        control_(control),
        depth_(depth == 0 ? 1 : depth),
        stride_(stride == 0 ? 1 : stride),
        used_(used > stride_ ? stride_ : used) {
    for (std::uint32_t i = 0; i < depth_; ++i)
      for (std::uint32_t k = 0; k < used_; ++k)
        for (std::uint64_t& word : records_[i * stride_ + k].words)
          sync::AtomicWord<std::uint64_t>(&word).store_relaxed(0);
    sync::AtomicWord<std::uint64_t>(&control_->completed).store_release(0);
  }

  std::uint32_t depth() const { return depth_; }
  std::uint32_t used() const { return used_; }
  std::uint64_t posted() const { return posted_; }
  std::uint64_t completed() const {
    return sync::AtomicWord<std::uint64_t>(&control_->completed).load_acquire();
  }
  bool has_completed(std::uint64_t ticket) const { return completed() >= ticket; }

  // The ticket that must complete before the next item's slot is free (0: it is free now): the
  // kernel may still be reading the item `depth` posts back, and its arrival word.
  std::uint64_t ticket_freeing_next() const { return posted_ >= depth_ ? posted_ - depth_ + 1 : 0; }
  // Writes record `index` (< used()) of the next item, which publishes it to the blocks that read
  // that record; the caller has waited for ticket_freeing_next(). `w` is session_encodable.
  void write(std::uint32_t index, const SessionWork& w) const {
    session_write_record(records_[(posted_ % depth_) * stride_ + index], posted_ + 1, w);
  }
  // Counts the item whose records were written; its ticket.
  std::uint64_t post() { return ++posted_; }
  // Writes the stop item into every record of the next slot (ticket posted() + 1, not counted in
  // posted()): the kernel ends when it reaches it, after every posted item.
  void post_stop() const {
    for (std::uint32_t k = 0; k < used_; ++k) write(k, SessionWork{});
  }

 private:
  SessionRecord* records_ = nullptr;
  SessionQueueControl* control_ = nullptr;
  std::uint32_t depth_ = 1;
  std::uint32_t stride_ = 1;
  std::uint32_t used_ = 1;
  std::uint64_t posted_ = 0;
};

}  // namespace ccoll::transport::cuda
