// ccoll/protocol/protocol.hpp: how a plan's messages signal their arrival, and which plans use
// which way.
//
// Two protocols, in the manner of NCCL's Simple and LL:
//   - Simple (protocol/simple.hpp): data into the slot, then a release store of the connection's
//     tail counter, which the receiver polls (sync/connection.hpp). Every byte of the slot is
//     payload; each message costs the receiver two cache-line transfers (the counter, then the
//     data). For bandwidth.
//   - LowLatency (protocol/low_latency.hpp): the message carries its arrival flag in its own
//     lines (a trailer with the call's signature; flagged 8-byte lines where several threads
//     write a message), so the receiver polls the message itself: no counter store, fence or
//     poll, and a small message crosses in one cache line. Its plans are chunked for half a slot
//     less the trailer's 8 bytes, which both encodings fit. For latency.
// A plan runs entirely in one protocol. Its protocol is part of its identity: a plan built for
// LowLatency is chunked for half slots (less its trailer) and named "<algorithm>+ll", and the
// policy that chose it (the tuning table, or Config::protocol) enters the communicator's
// fingerprint, so ranks never mix protocols on a connection.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::protocol {

enum class Id : std::uint8_t { simple, low_latency };

inline constexpr std::string_view kSimpleName = "simple";
inline constexpr std::string_view kLowLatencyName = "ll";
// The suffix of a LowLatency plan's algorithm name.
inline constexpr std::string_view kLowLatencySuffix = "+ll";

inline constexpr std::string_view name(Id id) {
  return id == Id::low_latency ? kLowLatencyName : kSimpleName;
}

// "simple" or "ll"; throws InvalidArgument naming `key` otherwise.
inline Id parse(std::string_view text, const std::string& key) {
  if (text == kSimpleName) return Id::simple;
  if (text == kLowLatencyName) return Id::low_latency;
  throw_invalid_argument(-1, key, "\"simple\" or \"ll\"", std::string(text));
}

// The payload bytes of a slot of `slot_bytes` under protocol `id`. LowLatency: what the flagged
// encoding holds (every 8-byte line half flag, then a 16-byte trailer; protocol/low_latency.hpp),
// which the packed one (16-byte trailer, then the payload) holds too, so a plan's chunks fit
// whichever group runs it; a slot of fewer than 32 bytes holds no LowLatency payload.
inline constexpr std::uint64_t payload_bytes(Id id, std::uint64_t slot_bytes) {
  if (id == Id::simple) return slot_bytes;
  return slot_bytes >= 32 ? slot_bytes / 2 - 8 : 0;
}

inline bool is_low_latency(const plan::Plan& p) {
  const std::string_view a = p.algorithm;
  return a.size() >= kLowLatencySuffix.size() &&
         a.substr(a.size() - kLowLatencySuffix.size()) == kLowLatencySuffix;
}
inline Id protocol_of(const plan::Plan& p) {
  return is_low_latency(p) ? Id::low_latency : Id::simple;
}

// Names plan p as one of protocol `id` (its chunks must fit payload_bytes(id, slot_bytes)).
inline void mark(plan::Plan& p, Id id) {
  if (id == Id::low_latency && !is_low_latency(p)) p.algorithm += kLowLatencySuffix;
  if (id == Id::simple && is_low_latency(p))
    p.algorithm.resize(p.algorithm.size() - kLowLatencySuffix.size());
}

// Builds the plan of `build` for protocol `id`: chunked for the protocol's payload per slot.
template <class Build>
plan::Plan build_for(Id id, const plan::PlanRequest& req, const Build& build) {
  plan::PlanRequest r = req;
  r.slot_bytes = payload_bytes(id, req.slot_bytes);
  if (r.slot_bytes == 0)
    throw_invalid_argument(-1, "Config::slot_bytes", ">= 32 for the LowLatency protocol",
                           std::to_string(req.slot_bytes));
  plan::Plan p = build(r);
  mark(p, id);
  return p;
}

// Config::protocol applied to a communicator's policy: "" leaves the policy's choice (simple, or
// per size for `auto`); "simple" or "ll" forces every plan into that protocol. The forced protocol
// enters the policy's identity (configured_policy_id), hence the communicator's fingerprint.
inline std::string configured_policy_id(const Config& config, std::string_view policy_id) {
  if (config.protocol.empty()) return std::string(policy_id);
  return std::string(policy_id) + "@" +
         std::string(name(parse(config.protocol, "Config::protocol")));
}

template <class Source>
Source configured_source(const Config& config, Source source) {
  if (config.protocol.empty()) return source;
  if (parse(config.protocol, "Config::protocol") == Id::simple) {
    // A LowLatency plan of a per-size policy is chunked for half slots, which also fit Simple.
    return Source([src = std::move(source)](const plan::PlanRequest& r) {
      plan::Plan p = src(r);
      mark(p, Id::simple);
      return p;
    });
  }
  return Source([src = std::move(source)](const plan::PlanRequest& r) {
    // A per-size policy may already have chosen LowLatency (and chunked for half slots).
    plan::Plan p = src(r);
    return is_low_latency(p) ? p : build_for(Id::low_latency, r, src);
  });
}

}  // namespace ccoll::protocol
