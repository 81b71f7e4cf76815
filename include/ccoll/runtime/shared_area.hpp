// ccoll/runtime/shared_area.hpp: the memory that ranks of one host share: its layout and header.
//
// The host-threads transport puts the area on the heap, the shared-memory transport in a POSIX
// segment; both lay it out the same way:
//
//   AreaHeader | RankDescriptor x nranks | ConnectionCounters x nconn | fast boxes |
//   slots (nconn x nslots x slot_bytes)
//
// The header and descriptors are the control plane's (runtime/area_control_plane.hpp); the
// counters and slots are the connections' (sync/connection.hpp), one per ConnectionKey of the
// communicator's fixed connection set (runtime/plan_cache.hpp); the fast boxes carry the small
// broadcasts and reduces that need no plan (runtime/fast_box.hpp; only in a broadcast's or a
// reduce's area, and none above kFastBoxMaxRanks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/fast_box.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/sync/abort.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/connection.hpp"

namespace ccoll::runtime {

// Changes with the area's layout and with the format of its messages, so that processes of
// builds that would misread each other never attach to one area.
inline constexpr std::uint64_t kAreaMagic = 0x63636f6c6c763037ull;  // "ccollv07"
inline constexpr std::size_t kPage = 4096;

struct alignas(128) AreaHeader {
  std::uint64_t magic = 0;       // kAreaMagic once the area is initialised
  std::uint64_t generation = 0;  // nonce of the run that created the area
  std::uint32_t ready = 0;       // 1: initialised (written last, release)
  std::int32_t nranks = 0;
  std::uint64_t config_hash = 0;  // ranks must agree on everything that shapes the area
  std::uint64_t total_bytes = 0;
  std::uint32_t attached = 0;    // ranks that attached (shared memory)
  std::uint32_t left = 0;        // ranks that detached; the last one unlinks
  std::int64_t creator_pid = 0;  // shared memory: a segment whose creator died is stale
  alignas(128) sync::AbortRecord abort;
};

// One rank's arguments for one call, published for the others to compare. Each rank has
// kCallDescriptors of them, used in turn (call s in s % kCallDescriptors), so that a rank may
// publish call s while a slower peer still reads one of the calls before it: one call earlier in
// the common case, several when eager broadcasts and reduces run ahead
// (runtime/area_control_plane.hpp). What every comparison reads is packed four calls to a cache
// line (CallSummaryWords), so a rank that compares several calls at once reads one line per peer
// for four of them; the rest (CallDetail) is read only by calls that agree before their steps
// (the placement) and when a rank's arguments are bad (the reason).
inline constexpr std::uint64_t kCallDescriptors = 64;

// The kind of a call in one word: datatype, op, status (0: arguments fine; otherwise
// 1 + ErrorCode) and in_band (1: the rank checks this call after its steps, not before), a byte
// each.
struct CallKind {
  std::uint32_t dtype = 0, op = 0, status = 0, in_band = 0;
  std::uint32_t pack() const { return dtype | op << 8 | status << 16 | in_band << 24; }
  static CallKind unpack(std::uint32_t w) {
    return {w & 0xffu, w >> 8 & 0xffu, w >> 16 & 0xffu, w >> 24 & 0xffu};
  }
};

struct CallSummaryWords {
  std::uint64_t seq = 0;  // the call this describes (1, 2, ...); written last (release)
  std::uint64_t count = 0;
  std::uint32_t shape = 0;        // encode_shape(CallArgs::shape)
  std::uint32_t kind = 0;         // CallKind::pack()
  std::uint32_t root_choice = 0;  // rank 0 only: CallArgs::root_choice
  std::uint32_t unused = 0;
};
static_assert(sizeof(CallSummaryWords) == 32);

struct alignas(128) CallDetail {
  WindowPlacement placement;  // CallArgs::placement
  char reason[160] = {};      // the local error's text (truncated)
};

// What one rank publishes to the others: its calls' arguments and its liveness.
struct alignas(128) RankDescriptor {
  std::uint64_t ack = 0;  // the last call whose descriptors this rank has read
  std::uint32_t attached_generation = 0;
  // Processes: the process that claimed this rank (0: threads), negated once it left (destroyed
  // its communicator).
  std::int64_t pid = 0;
  alignas(128) CallSummaryWords call[kCallDescriptors];
  CallDetail detail[kCallDescriptors];
};

struct AreaLayout {
  std::size_t descriptors = 0;  // offsets from the start of the area
  std::size_t counters = 0;
  std::size_t boxes = 0;
  std::size_t box_bytes = 0;  // 0: no fast boxes
  std::size_t slots = 0;
  std::size_t total = 0;
  std::uint64_t slot_stride = 0;

  static constexpr std::size_t round_up(std::size_t x, std::size_t a) {
    return (x + a - 1) / a * a;
  }
  // `fast_boxes`: the area carries the rings of runtime/fast_box.hpp (rooted collectives only;
  // Communicator::uses_fast_boxes).
  static AreaLayout make(int nranks, std::size_t nconnections, std::uint64_t slot_bytes,
                         std::uint32_t nslots, bool fast_boxes) {
    AreaLayout l;
    l.slot_stride = round_up(slot_bytes, 128);
    l.descriptors = round_up(sizeof(AreaHeader), 128);
    l.counters =
        round_up(l.descriptors + sizeof(RankDescriptor) * static_cast<std::size_t>(nranks), kPage);
    l.boxes = round_up(l.counters + sizeof(sync::ConnectionCounters) * nconnections, kPage);
    l.box_bytes = fast_boxes ? fast_box_bytes(nranks) : 0;
    l.slots = round_up(l.boxes + l.box_bytes, kPage);
    l.total = round_up(l.slots + nconnections * nslots * l.slot_stride, kPage);
    return l;
  }
};

// Writes a fresh header into a zeroed area (the creator only; `ready` is published last).
inline void init_area(std::byte* area, const AreaLayout& layout, int nranks,
                      std::uint64_t config_hash, std::uint64_t generation,
                      std::int64_t creator_pid = 0) {
  auto* h = new (area) AreaHeader{};
  h->magic = kAreaMagic;
  h->creator_pid = creator_pid;
  h->generation = generation;
  h->nranks = nranks;
  h->config_hash = config_hash;
  h->total_bytes = layout.total;
  sync::AtomicWord<std::uint32_t>(&h->ready).store_release(1);
}

// The connections of `keys`, in key order, in an initialised area.
inline std::vector<sync::ConnectionRef> area_connections(std::byte* area, const AreaLayout& layout,
                                                         const std::vector<ConnectionKey>& keys,
                                                         std::uint32_t nslots) {
  auto* counters = reinterpret_cast<sync::ConnectionCounters*>(area + layout.counters);
  std::vector<sync::ConnectionRef> refs(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    sync::ConnectionRef& r = refs[i];
    r.slots = area + layout.slots + i * nslots * layout.slot_stride;
    r.tail = &counters[i].tail;
    r.head = &counters[i].head;
    r.head_seen = &counters[i].head_seen;
    r.slot_bytes = layout.slot_stride;
    r.nslots = nslots;
    r.from = keys[i].from;
    r.to = keys[i].to;
  }
  return refs;
}

}  // namespace ccoll::runtime
