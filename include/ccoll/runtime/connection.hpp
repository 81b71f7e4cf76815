// ccoll/runtime/connection.hpp: what the step interpreter needs of a connection u->v.
//
// A plan's messages travel over FIFO connections (plan/plan.hpp). The interpreter
// (runtime/interpreter.hpp) only asks a connection for the slot of message m, whether m may be
// written or read now (check), to wait for that (wait), and to publish that m was written or
// consumed (post): the vocabulary of [C-Cube] Sec. IV-B's device-side semaphores. A transport
// supplies its own model: sync::ConnectionRef (slots and counters in memory both ranks map: host
// threads, shared memory, CUDA peer memory) is one; a message-passing transport implements the
// same verbs over its own send and receive calls.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "ccoll/sync/connection.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::runtime {

template <class C>
concept Connection = std::copyable<C> &&
    requires(const C& c, std::uint64_t m, const std::uint32_t* abort, std::uint64_t t) {
  { c.slot(m) } -> std::same_as<std::byte*>;  // where message m is written / read
  { c.can_send(m) } -> std::same_as<bool>;    // sender: is m's slot free?
  { c.can_recv(m) } -> std::same_as<bool>;    // receiver: has m arrived?
  { c.wait_send(m, abort, t) } -> std::same_as<sync::WaitResult>;
  { c.wait_recv(m, abort, t) } -> std::same_as<sync::WaitResult>;
  c.post_sent(m);  // sender: m is written (a model may also offer post_sent(m, bytes), which the
                   // interpreter then calls with the bytes written: message-passing transports)
  c.post_received(m);                      // receiver: m's slot may be reused
  { c.from } -> std::convertible_to<int>;  // the two ranks, for error reports
  { c.to } -> std::convertible_to<int>;
};

static_assert(Connection<sync::ConnectionRef>);

}  // namespace ccoll::runtime
