// ccoll/sync/connection.hpp: a connection u->v, the FIFO that carries a plan's messages.
//
// A connection is `nslots` slots of `slot_bytes` bytes in the receiver's memory plus two
// counters: tail (messages written, posted by the sender) and head (messages consumed, posted by
// the receiver). Message m (counted from the first call on this connection) lives in slot
// m % nslots. The sender may write message m once head >= m + 1 - nslots (its slot is free); the
// receiver may read it once tail >= m + 1. Both counters only grow, across calls.
//
// A connection may also have a region for the low-latency protocol (protocol/low_latency.hpp):
// nslots LL slots of ll_slot_bytes each, written only as LL messages and never as Simple slots, so
// a flag is never confused with Simple payload. Message m of an LL plan lives in LL slot
// m % nslots; the head counter guards it as in Simple, and the tail is not used. The host
// transports give LL slots the Simple slots' size; a GPU plan sizes them to its own largest
// message (transport/cuda/block_tables.hpp), since LL plans carry small messages.
//
// The counters sit on their own 128-byte lines (a GPU L2 line; two x86 lines, which also defeats
// the adjacent-line prefetcher) so that a sender polling head does not steal the line the receiver
// is writing, and vice versa.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::sync {

inline constexpr std::size_t kCounterStride = 128;

// The two counters of one connection as they lie in shared memory.
struct alignas(kCounterStride) ConnectionCounters {
  alignas(kCounterStride) std::uint64_t tail;
  alignas(kCounterStride) std::uint64_t head;
  // The sender's alone: the last value of head it read. Head only grows, so this is a lower
  // bound, and the sender reads the receiver's line only when the slot it needs is not already
  // known to be free (every few messages instead of every message).
  alignas(kCounterStride) std::uint64_t head_seen;
};
static_assert(sizeof(ConnectionCounters) == 3 * kCounterStride);

// Where a connection's memory is, as the interpreter sees it (plain pointers: valid on the host
// and, for device memory, on the GPU). S: the scope of its counters (sync/atomic.hpp).
template <Scope S = Scope::system>
struct BasicConnectionRef {
  using counter_type = BasicCounter<S>;
  static constexpr Scope scope = S;

  std::byte* slots = nullptr;  // nslots * slot_bytes bytes
  std::uint64_t* tail = nullptr;
  std::uint64_t* head = nullptr;
  std::uint64_t slot_bytes = 0;
  std::uint32_t nslots = 1;
  std::int32_t from = 0;  // ranks, for error messages
  std::int32_t to = 0;
  std::byte* ll_slots = nullptr;  // nslots * ll_slot_bytes bytes of LL lines; nullptr: Simple only
  std::uint64_t ll_slot_bytes = 0;  // a multiple of 16
  // ConnectionCounters::head_seen, where the sender is one host thread or process (nullptr: read
  // head on every check).
  std::uint64_t* head_seen = nullptr;

  // The slot of absolute message number m (base of this call + the port's sequence number):
  // m % nslots, by a mask where nslots is a power of two, as the default 4 is (a 64-bit division
  // takes tens of instructions on a GPU, on every step).
  CCOLL_HD std::uint64_t slot_index(std::uint64_t m) const {
    const std::uint64_t n = nslots;
    return (n & (n - 1)) == 0 ? (m & (n - 1)) : m % n;
  }
  CCOLL_HD std::byte* slot(std::uint64_t m) const { return slots + slot_index(m) * slot_bytes; }
  // The LL lines of message m (8-byte aligned: ll_slot_bytes is a multiple of 16).
  CCOLL_HD std::uint64_t* ll_lines(std::uint64_t m) const {
    return reinterpret_cast<std::uint64_t*>(ll_slots + slot_index(m) * ll_slot_bytes);
  }
  CCOLL_HD bool has_low_latency() const { return ll_slots != nullptr; }
  // Sender side: may message m be written?
  CCOLL_HD bool can_send(std::uint64_t m) const {
    const std::uint64_t need = m + 1 - nslots_min(m);
    if (head_seen == nullptr) return counter_type(head).check(need);
    // The acquire that made a slot known free was done when head_seen was read.
    if (*head_seen >= need) return true;
    const std::uint64_t h = counter_type(head).value();
    *head_seen = h;
    return h >= need;
  }
  CCOLL_HD WaitResult wait_send(std::uint64_t m, const std::uint32_t* abort,
                                std::uint64_t deadline_ns) const {
    return counter_type(head).wait(m + 1 - nslots_min(m), abort, deadline_ns);
  }
  CCOLL_HD void post_sent(std::uint64_t m) const { counter_type(tail).post_value(m + 1); }
  // The same after a fence that orders the message's writes (BasicCounter::post_value_after_fence).
  CCOLL_HD void post_sent_after_fence(std::uint64_t m) const {
    counter_type(tail).post_value_after_fence(m + 1);
  }
  // Receiver side: has message m arrived?
  CCOLL_HD bool can_recv(std::uint64_t m) const { return counter_type(tail).check(m + 1); }
  CCOLL_HD WaitResult wait_recv(std::uint64_t m, const std::uint32_t* abort,
                                std::uint64_t deadline_ns) const {
    return counter_type(tail).wait(m + 1, abort, deadline_ns);
  }
  CCOLL_HD void post_received(std::uint64_t m) const { counter_type(head).post_value(m + 1); }
  CCOLL_HD void post_received_after_fence(std::uint64_t m) const {
    counter_type(head).post_value_after_fence(m + 1);
  }

 private:
  // min(nslots, m + 1): the first nslots messages need no free slot.
  CCOLL_HD std::uint64_t nslots_min(std::uint64_t m) const {
    return m + 1 < nslots ? m + 1 : nslots;
  }
};

// Host threads, processes and GPUs that map each other's memory.
using ConnectionRef = BasicConnectionRef<Scope::system>;
// The blocks of one kernel on one GPU.
using DeviceConnectionRef = BasicConnectionRef<Scope::device>;

}  // namespace ccoll::sync
