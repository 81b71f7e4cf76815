// ccoll/protocol/simple.hpp: the slot-and-counter (Simple) protocol, named beside LowLatency.
//
// Message m is written into slot m % nslots with ordinary stores, then published with a release
// store of the connection's tail counter (value m + 1); the receiver acquires the tail before it
// reads the slot, and releases the head counter once it has ([C-Cube] Sec. IV-B's semaphores;
// sync/connection.hpp holds the counters). The whole slot is payload, and the stores may be
// vectorised or non-temporal, so it is the protocol for bandwidth; each message costs its receiver
// two cache-line transfers (the counter, then the data), which is what LowLatency saves.
#pragma once

#include <cstdint>

#include "ccoll/protocol/protocol.hpp"

namespace ccoll::protocol {

struct Simple {
  static constexpr Id id = Id::simple;
  // Payload bytes of a slot of `slot_bytes`: all of it.
  static constexpr std::uint64_t payload(std::uint64_t slot_bytes) { return slot_bytes; }
};

}  // namespace ccoll::protocol
