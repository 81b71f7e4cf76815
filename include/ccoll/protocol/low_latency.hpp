// ccoll/protocol/low_latency.hpp: the low-latency (LL) protocol's message formats, for host and
// device.
//
// An LL message carries its own arrival flag in the memory of its payload, so a receiver needs no
// tail counter, fence or second poll per message: one transfer of the lines that hold the message.
// Two encodings, chosen by who writes a message (runtime/program_context.hpp, kPackedLowLatency):
//
//   - Flagged lines (groups of several threads: a GPU block). ceil(b / 4) data lines of 8 bytes
//     followed by kTrailerLines trailer lines: the low half of a line carries 4 bytes of payload
//     (the last data line zero-padded), the high half the message's flag, and each line is written
//     with ONE 8-byte atomic store. A member that loads a line with the expected flag therefore
//     has its payload too, whichever member wrote it and in whatever order (NCCL's LL protocol,
//     src/device/prims_ll.h, with 8-byte lines instead of its 16-byte ones). Half of every line
//     is flag.
//   - Packed (one writer thread: the host executors). The trailer's kTrailerLines lines at the
//     start of the slot, then the payload, contiguous and unflagged. The writer stores the payload,
//     then the trailer, its last line with release; the reader acquires the trailer's last line,
//     after which the payload is visible (the C++ memory model's release/acquire; plain moves on
//     x86-64). This is a Simple message whose tail counter has moved into the message's first
//     cache line: up to 48 bytes of payload arrive in one cache-line transfer, and the reduction
//     reads the payload in place as Simple does. The trailer's place is fixed, so a line of an
//     earlier, longer message's payload is never where a trailer is looked for; the head counter
//     keeps the writer from rewriting a slot while its reader still reads it.
//
// The guarantee each relies on:
//   - x86-64: naturally aligned 8-byte loads and stores are single-copy atomic (Intel SDM vol. 3A
//     Sec. 9.1.1), and std::atomic_ref<std::uint64_t> compiles to plain moves;
//   - AArch64: naturally aligned 64-bit LDR/STR are single-copy atomic (Arm ARM B2.2.1);
//   - CUDA: a naturally aligned 64-bit relaxed atomic access (cuda::atomic_ref, ld/st.relaxed at
//     the connection's scope) is a morally strong access of one 8-byte location in the PTX memory
//     model, hence never torn. (NCCL's 16-byte lines rely on 128-bit vector stores not tearing,
//     a property of the hardware that the PTX model does not promise; ccoll takes the guaranteed
//     8-byte form.)
//   - packed, everywhere: release/acquire between the one writer and the reader.
// The flag is derived from the absolute message number m of the connection (1 + m mod (2^32 - 1),
// never 0), so slots never need resetting: a stale line holds an earlier message's flag. A stale
// line could only be taken for a fresh one if the same line of the same slot went unwritten for a
// multiple of 2^32 - 1 messages of the connection (lines beyond a short message keep an earlier,
// longer message's flag); the connection's LL region is separate from its Simple slots, so Simple
// payload is never mistaken for a flag.
//
// The trailer carries the call's signature (count, datatype and op; signature()), and a message
// has arrived only when its trailer has the expected flag AND the receiver's own signature. Ranks
// that disagree on a call's arguments therefore never take each other's messages: in a plan where
// every rank's output depends on every rank's input, none of them completes the call, and the
// control plane's check of the published arguments stops them all (runtime/area_control_plane.hpp).
// Ranks that agree have compared their arguments by receiving the messages, in the same cache
// lines as the data, which is what lets an in-band call skip the comparison of the argument
// descriptors after its steps (a cache-line transfer per peer; runtime/communicator.hpp).
//
// Ordering of flagged lines: a single-thread sender stores the trailer's last line last, with
// release, and the receiver loads it with acquire, so once it is there every earlier line of the
// message is too. Groups of several threads write lines in parallel; their receivers poll every
// line, and wait for the trailer only of an empty message (a wait for it before the step would
// cost a round trip; runtime/interpreter.hpp), so the signature is not compared there: the GPU
// executors, which run such groups, compare the calls' arguments otherwise. The head counter
// (slot free) works as in Simple, in both encodings.
#pragma once

#include <cstdint>

#include "ccoll/core/platform.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::protocol {

struct LowLatency {
  static constexpr Id id = Id::low_latency;
  static constexpr std::uint32_t kLineBytes = 8;
  static constexpr std::uint32_t kPayloadBytes = 4;

  // The flag of message m: never 0, so a zeroed line is never a message.
  CCOLL_HD static constexpr std::uint32_t flag(std::uint64_t m) {
    return static_cast<std::uint32_t>(m % 0xffffffffull) + 1u;
  }
  static constexpr std::uint32_t kTrailerLines = 2;

  // Data lines of a message of `bytes` payload bytes; its trailer follows them.
  CCOLL_HD static constexpr std::uint64_t data_lines(std::uint64_t bytes) {
    return (bytes + kPayloadBytes - 1) / kPayloadBytes;
  }
  // All lines of the message: data and trailer.
  CCOLL_HD static constexpr std::uint64_t lines(std::uint64_t bytes) {
    return data_lines(bytes) + kTrailerLines;
  }
  // A call's signature as its trailers carry it: count (48 bits), datatype and op (8 bits each),
  // exact for every count a slot-chunked plan can have.
  CCOLL_HD static constexpr std::uint64_t signature(std::uint64_t count, std::uint32_t dtype,
                                                    std::uint32_t op) {
    return (count & 0xffffffffffffull) | (static_cast<std::uint64_t>(dtype & 0xffu) << 48) |
           (static_cast<std::uint64_t>(op & 0xffu) << 56);
  }

  // Packed encoding: the payload starts this many bytes into the slot, after the trailer.
  static constexpr std::uint64_t kPackedPayloadOffset = kTrailerLines * kLineBytes;
  // The trailer of a message whose slot starts at `l` (`bytes` payload bytes): after the data
  // lines (flagged) or at the start of the slot (packed).
  // Word: std::uint64_t for a writer, const std::uint64_t for a reader.
  template <class Word>
  CCOLL_HD static constexpr Word* trailer(Word* l, bool packed, std::uint64_t bytes) {
    return packed ? l : l + data_lines(bytes);
  }

  // Writes the trailer `t` of message flag f, its last line with release when `release` (a
  // single-thread sender, after its payload).
  template <sync::Scope S>
  CCOLL_HD static void store_trailer(std::uint64_t* t, std::uint64_t sig, std::uint32_t f,
                                     bool release) {
    store<S>(t, static_cast<std::uint32_t>(sig), f, false);
    store<S>(t + 1, static_cast<std::uint32_t>(sig >> 32), f, release);
  }
  // One poll of the trailer `t`: true if the message has arrived, i.e. both lines carry flag f and
  // the signature is `sig` (a message of a call with other arguments never arrives). The last line
  // is loaded first, with acquire, so the rest of a single-thread sender's message is there too.
  template <sync::Scope S>
  CCOLL_HD static bool arrived(const std::uint64_t* t, std::uint64_t sig, std::uint32_t f) {
    std::uint32_t hi = 0, lo = 0;
    return load<S>(t + 1, f, &hi, true) && hi == static_cast<std::uint32_t>(sig >> 32) &&
           load<S>(t, f, &lo, false) && lo == static_cast<std::uint32_t>(sig);
  }
  // Polls the trailer `t` until the message has arrived, *abort != 0 or the deadline (0: none)
  // passes.
  template <sync::Scope S>
  CCOLL_HD static sync::WaitResult wait_arrival(const std::uint64_t* t, std::uint64_t sig,
                                                std::uint32_t f, const std::uint32_t* abort,
                                                std::uint64_t deadline_ns) {
    return sync::poll_until([&] { return arrived<S>(t, sig, f); }, abort, deadline_ns);
  }
  CCOLL_HD static constexpr std::uint64_t line(std::uint32_t data, std::uint32_t f) {
    return (static_cast<std::uint64_t>(f) << 32) | data;
  }

  // Writes one line: payload and flag in one store (release: the sender's last line).
  template <sync::Scope S>
  CCOLL_HD static void store(std::uint64_t* l, std::uint32_t data, std::uint32_t f, bool release) {
    const sync::AtomicWord<std::uint64_t, S> w(l);
    if (release)
      w.store_release(line(data, f));
    else
      w.store_relaxed(line(data, f));
  }
  // One poll of a line: true and its payload if it carries flag f.
  template <sync::Scope S>
  CCOLL_HD static bool load(const std::uint64_t* l, std::uint32_t f, std::uint32_t* data,
                            bool acquire) {
    const sync::AtomicWord<std::uint64_t, S> w(const_cast<std::uint64_t*>(l));
    const std::uint64_t v = acquire ? w.load_acquire() : w.load_relaxed();
    if (static_cast<std::uint32_t>(v >> 32) != f) return false;
    *data = static_cast<std::uint32_t>(v);
    return true;
  }
  // Polls a line until it carries flag f, *abort != 0 or the deadline (0: none) passes.
  template <sync::Scope S>
  CCOLL_HD static sync::WaitResult wait(const std::uint64_t* l, std::uint32_t f,
                                        std::uint32_t* data, bool acquire,
                                        const std::uint32_t* abort, std::uint64_t deadline_ns) {
    return sync::poll_until([&] { return load<S>(l, f, data, acquire); }, abort, deadline_ns);
  }
};

// A message of the payload that payload_bytes() allows fills its slot exactly, trailer included.
static_assert(LowLatency::lines(payload_bytes(Id::low_latency, 1024)) * LowLatency::kLineBytes ==
              1024);
static_assert(LowLatency::lines(payload_bytes(Id::low_latency, 32)) * LowLatency::kLineBytes == 32);
// A packed message of that payload fits its slot too.
static_assert(LowLatency::kPackedPayloadOffset + payload_bytes(Id::low_latency, 32) <= 32);
static_assert(LowLatency::kPackedPayloadOffset + payload_bytes(Id::low_latency, 1024) <= 1024);

}  // namespace ccoll::protocol
