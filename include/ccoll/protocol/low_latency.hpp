// ccoll/protocol/low_latency.hpp: the low-latency (LL) protocol's line format, for host and device.
//
// A message of b payload bytes is written as max(1, ceil(b / 4)) lines of 8 bytes: the low half
// carries 4 bytes of payload (the last line zero-padded), the high half the message's flag, and
// the line is written with ONE 8-byte atomic store. A receiver that loads a line with the expected
// flag therefore has its payload too: no tail counter, fence or second poll per message (NCCL's
// LL protocol, src/device/prims_ll.h, with 8-byte lines instead of its 16-byte ones). The
// guarantee relied on:
//   - x86-64: naturally aligned 8-byte loads and stores are single-copy atomic (Intel SDM vol. 3A
//     Sec. 9.1.1), and std::atomic_ref<std::uint64_t> compiles to plain moves;
//   - AArch64: naturally aligned 64-bit LDR/STR are single-copy atomic (Arm ARM B2.2.1);
//   - CUDA: a naturally aligned 64-bit relaxed atomic access (cuda::atomic_ref, ld/st.relaxed at
//     the connection's scope) is a morally strong access of one 8-byte location in the PTX memory
//     model, hence never torn. (NCCL's 16-byte lines rely on 128-bit vector stores not tearing,
//     a property of the hardware that the PTX model does not promise; ccoll takes the guaranteed
//     8-byte form.)
// The flag is derived from the absolute message number m of the connection (1 + m mod (2^32 - 1),
// never 0), so slots never need resetting: a stale line holds an earlier message's flag. A stale
// line could only be taken for a fresh one if the same line of the same slot went unwritten for a
// multiple of 2^32 - 1 messages of the connection (lines beyond a short message keep an earlier,
// longer message's flag); the connection's LL region is separate from its Simple slots, so Simple
// payload is never mistaken for a flag.
//
// Ordering: a single-thread sender stores its last line with release and the receiver loads it
// with acquire, so once the last line is there every earlier line of the message is too (host
// executors check only the last line before a step). Groups of several threads write lines in
// parallel; their receivers poll every line. The head counter (slot free) works as in Simple.
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
  // Lines of a message of `bytes` payload bytes: an empty message still has one (its arrival).
  CCOLL_HD static constexpr std::uint64_t lines(std::uint64_t bytes) {
    return bytes == 0 ? 1 : (bytes + kPayloadBytes - 1) / kPayloadBytes;
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
    if (load<S>(l, f, data, acquire)) return sync::WaitResult::Ok;
    sync::Backoff backoff;
    for (std::uint32_t polls = 0;; ++polls) {
      if (load<S>(l, f, data, acquire)) return sync::WaitResult::Ok;
      if (backoff.past_spinning() || (polls & 15u) == 15u) {
        if (abort != nullptr &&
            sync::AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed() != 0)
          return sync::WaitResult::Aborted;
        if (deadline_ns != 0 && sync::now_ns() >= deadline_ns)
          return load<S>(l, f, data, acquire) ? sync::WaitResult::Ok : sync::WaitResult::Timeout;
      }
      backoff.pause();
    }
  }
};

}  // namespace ccoll::protocol
