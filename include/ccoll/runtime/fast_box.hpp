// ccoll/runtime/fast_box.hpp: the small-message channel of ranks that share memory: one ring of
// 128-byte boxes per ordered pair of ranks, each box carrying a whole message and the arguments
// of its call.
//
// A broadcast or reduce of at most kFastBoxPayload bytes needs one message per pair of ranks it
// connects and no plan: through the FIFOs of runtime/shared_area.hpp such a call costs the
// interpreter's dispatch and a counter and a slot per message, which is most of its time. A box
// holds the payload beside a stamp and the call's arguments, so the reader finds the message and
// what it belongs to in two adjacent cache lines, written in one pass, and writers run up to
// kFastBoxDepth messages ahead of their reader before they look at its progress. A reader takes
// a box only when the call's sequence number and arguments in it are its own (runtime/
// communicator.hpp), so a rank whose arguments differ from the writer's never writes its buffers
// from that message.
//
//   ring (writer w, reader r):  taken (written by r) | box x kFastBoxDepth
//   box:  stamp | seq | count | shape | kind | payload (kFastBoxPayload bytes)
//
// Message i (0, 1, ...) of a pair goes into box i % kFastBoxDepth with stamp i + 1, stored last
// (release); its reader waits for stamp >= i + 1, copies it out and then publishes taken = i + 1,
// after which the writer may reuse the box. Stamps grow by kFastBoxDepth per reuse, so a box
// never looks fresh to a reader that has not taken its previous message. Communicators of at most
// kFastBoxMaxRanks ranks have boxes (P * P rings, 4.2 KiB each); larger ones, where a direct
// broadcast's root would write P - 1 boxes per call, use their plans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ccoll/sync/atomic.hpp"

namespace ccoll::runtime {

inline constexpr std::size_t kFastBoxBytes = 128;
inline constexpr std::size_t kFastBoxHeaderBytes = 32;
inline constexpr std::size_t kFastBoxPayload = kFastBoxBytes - kFastBoxHeaderBytes;
inline constexpr std::uint64_t kFastBoxDepth = 32;
inline constexpr int kFastBoxMaxRanks = 8;

struct alignas(kFastBoxBytes) FastBox {
  std::uint64_t stamp = 0;  // message index + 1; stored last (release)
  std::uint64_t seq = 0;    // the writer's call
  std::uint64_t count = 0;  // the call's arguments, as its descriptor has them
  std::uint32_t shape = 0;  // encode_shape()
  std::uint32_t kind = 0;   // dtype | op << 8
  std::byte payload[kFastBoxPayload] = {};
};
static_assert(sizeof(FastBox) == kFastBoxBytes);

struct FastBoxRing {
  alignas(128) std::uint64_t taken = 0;  // messages the reader has copied out
  alignas(128) FastBox box[kFastBoxDepth];
};

// The arguments a box carries; a reader compares them with its own.
struct FastBoxArgs {
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::uint32_t shape = 0;
  std::uint32_t kind = 0;
  bool operator==(const FastBoxArgs&) const = default;
};

// Bytes of the rings of a communicator of `nranks` (0: too many ranks for boxes).
inline std::size_t fast_box_bytes(int nranks) {
  if (nranks < 2 || nranks > kFastBoxMaxRanks) return 0;
  return static_cast<std::size_t>(nranks) * static_cast<std::size_t>(nranks) * sizeof(FastBoxRing);
}

// One rank's view of the rings in a shared area (a null view: the communicator has none).
class FastBoxes {
 public:
  FastBoxes() = default;
  FastBoxes(std::byte* rings, int nranks)
      : rings_(reinterpret_cast<FastBoxRing*>(rings)), nranks_(nranks) {}
  explicit operator bool() const { return rings_ != nullptr; }
  int nranks() const { return nranks_; }
  FastBoxRing& ring(int writer, int reader) const {
    return rings_[static_cast<std::size_t>(writer) * static_cast<std::size_t>(nranks_) +
                  static_cast<std::size_t>(reader)];
  }

 private:
  FastBoxRing* rings_ = nullptr;
  int nranks_ = 0;
};

// An eager call through the boxes whose comparison is pending (runtime/communicator.hpp): a call
// that received has compared its box already; one that sent counts as compared once every
// reader has taken its box, since a reader takes only a box of its own arguments. upto[q]: the
// messages sent to q by the end of the call (0: none sent to q).
struct FastBoxCall {
  std::uint64_t seq = 0;
  bool received = false;
  std::uint64_t upto[kFastBoxMaxRanks] = {};
};

// What one rank remembers of its pairs (its thread only): messages sent to and taken from each
// peer, the last `taken` it read of each reader, and its pending eager calls by seq % calls.size().
struct FastBoxCursor {
  std::vector<std::uint64_t> sent, taken, room;
  std::vector<FastBoxCall> calls;
  void reset(int nranks, std::size_t pending_calls) {
    sent.assign(static_cast<std::size_t>(nranks), 0);
    taken.assign(static_cast<std::size_t>(nranks), 0);
    room.assign(static_cast<std::size_t>(nranks), 0);
    calls.assign(pending_calls, FastBoxCall{});
  }
  FastBoxCall& call(std::uint64_t seq) { return calls[seq % calls.size()]; }
};

// Writes `bytes` (<= kFastBoxPayload) from `data` as rank `me`'s next message to `reader`.
// wait(word, target) returns once *word >= target (or throws: a deadline, an abort).
template <class Wait>
void fast_box_send(const FastBoxes& boxes, FastBoxCursor& cur, int me, int reader,
                   const FastBoxArgs& args, const void* data, std::size_t bytes, Wait&& wait) {
  FastBoxRing& ring = boxes.ring(me, reader);
  const auto r = static_cast<std::size_t>(reader);
  const std::uint64_t i = cur.sent[r];
  if (i >= cur.room[r] + kFastBoxDepth) {
    wait(&ring.taken, i - kFastBoxDepth + 1);
    cur.room[r] = sync::AtomicWord<std::uint64_t>(&ring.taken).load_acquire();
  }
  FastBox& b = ring.box[i % kFastBoxDepth];
  b.seq = args.seq;
  b.count = args.count;
  b.shape = args.shape;
  b.kind = args.kind;
  std::memcpy(b.payload, data, bytes);
  sync::AtomicWord<std::uint64_t>(&b.stamp).store_release(i + 1);
  cur.sent[r] = i + 1;
  // The box two messages on was last read by the reader a ring ago and sits in its cache: take
  // it for writing now, while the caller does other work, rather than at the next call's store
  // (which a later load can find itself waiting for). Two on, not one: the reader polls the next
  // box's stamp while it waits.
  __builtin_prefetch(&ring.box[(i + 2) % kFastBoxDepth], 1, 3);
}

// Waits for rank `me`'s next message from `writer` and returns its box (not yet taken: read it,
// then fast_box_release()). wait() as fast_box_send's.
template <class Wait>
const FastBox& fast_box_receive(const FastBoxes& boxes, const FastBoxCursor& cur, int me,
                                int writer, Wait&& wait) {
  FastBoxRing& ring = boxes.ring(writer, me);
  const std::uint64_t i = cur.taken[static_cast<std::size_t>(writer)];
  FastBox& b = ring.box[i % kFastBoxDepth];
  wait(&b.stamp, i + 1);
  return b;
}

inline FastBoxArgs fast_box_args(const FastBox& b) {
  return {b.seq, b.count, b.shape, b.kind};
}

// Whether every box of `c` has been taken by its reader: from the `taken` words last read, and,
// when `look`, from the readers' words themselves (a read of each one's line).
inline bool fast_box_taken(const FastBoxes& boxes, FastBoxCursor& cur, int me, const FastBoxCall& c,
                           bool look) {
  for (int q = 0; q < boxes.nranks(); ++q) {
    const auto i = static_cast<std::size_t>(q);
    if (cur.room[i] >= c.upto[i]) continue;
    if (!look) return false;
    cur.room[i] = sync::AtomicWord<std::uint64_t>(&boxes.ring(me, q).taken).load_acquire();
    if (cur.room[i] < c.upto[i]) return false;
  }
  return true;
}

// Hands the box fast_box_receive() returned back to its writer.
inline void fast_box_release(const FastBoxes& boxes, FastBoxCursor& cur, int me, int writer) {
  const std::uint64_t i = ++cur.taken[static_cast<std::size_t>(writer)];
  sync::AtomicWord<std::uint64_t>(&boxes.ring(writer, me).taken).store_release(i);
}

}  // namespace ccoll::runtime
