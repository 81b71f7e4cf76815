// ccoll/transport/mpi/connection.hpp: a plan connection u->v over MPI point-to-point messages.
//
// The interpreter's verbs (runtime/connection.hpp) on nonblocking sends and receives:
//   - the sender owns nslots staging slots; the interpreter writes message m into slot m % nslots
//     and post_sent(m, bytes) starts MPI_Isend of exactly the bytes written; can_send(m) is "the
//     Isend that last used the slot has completed" (MPI_Test), so up to nslots messages are in
//     flight on a connection (the FIFO depth);
//   - the receiver keeps one MPI_Irecv posted per slot, for messages m .. m + nslots - 1;
//     can_recv(m) tests the one of message m, and post_received(m) (the interpreter has consumed
//     the message) posts the receive of message m + nslots into the freed slot.
// Matching needs no sequence numbers: each connection has its own tag on a communicator the
// transport owns, MPI never lets two messages with the same source, tag and communicator overtake
// each other, and receives with one tag are matched in the order they were posted. Progress is
// made by the MPI_Test calls of the interpreter's polling: no helper thread. So a call completes
// its own sends (sends_done(), transport/mpi/executor.hpp) before it returns: a message sent by
// rendezvous (TCP, shared memory without single-copy) moves only while its sender calls MPI, and a
// rank that computes after its call would otherwise hold up the receiver of its last messages.
//
// The Connection object is a handle (copyable, as the interpreter requires) to an Endpoint that
// lives in the transport's executor. A connection that does not touch this process's rank has no
// endpoint: this rank's programs never use it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"
#include "ccoll/transport/mpi/check.hpp"

namespace ccoll::transport::mpi {

// Completes or lets go of a request whose owner is going away without waiting for a peer that
// may never answer: cancels it if asked, polls it for up to `limit_ns`, and frees it if it is
// still active. Returns whether the request is complete (false: MPI may still use its buffer).
inline bool release(MPI_Request& r, bool cancel, std::uint64_t limit_ns = 100'000'000) {
  if (r == MPI_REQUEST_NULL) return true;
  int done = 0;
  MPI_Test(&r, &done, MPI_STATUS_IGNORE);
  if (done != 0) return true;
  if (cancel) MPI_Cancel(&r);
  const std::uint64_t deadline = sync::now_ns() + limit_ns;
  while (done == 0 && sync::now_ns() < deadline) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
  if (done != 0) return true;
  MPI_Request_free(&r);
  return false;
}

// Refuses connections whose tags (their indices, transport/mpi/point_to_point.hpp) would pass
// MPI_TAG_UB, the largest tag the MPI library takes on `comm` (at least 32767), before any is set
// up: every rank computes the same largest tag, so every rank refuses alike.
inline void check_tags(MPI_Comm comm, std::size_t largest_tag, int self) {
  void* value = nullptr;
  int found = 0;
  check(MPI_Comm_get_attr(comm, MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr (MPI_TAG_UB)",
        self);
  const long upper = found != 0 ? *static_cast<int*>(value) : 32767;
  if (largest_tag > static_cast<std::size_t>(upper))
    throw Error(ErrorCode::Unsupported, self,
                "the plans' connections need MPI tags up to " + std::to_string(largest_tag) +
                    " (one per connection), above this MPI's MPI_TAG_UB " + std::to_string(upper) +
                    " (fewer channels, or plans with fewer connections)");
}

// One end of a connection in this process: the slots and their requests.
class Endpoint {
 public:
  enum class Side { sender, receiver };

  Endpoint(MPI_Comm comm, Side side, int self, int peer, int tag, std::uint64_t slot_bytes,
           std::uint32_t nslots)
      : comm_(comm),
        side_(side),
        self_(self),
        peer_(peer),
        tag_(tag),
        slot_bytes_(slot_bytes),
        nslots_(nslots),
        requests_(nslots, MPI_REQUEST_NULL),
        message_(nslots, 0) {
    void* mem = nullptr;
    // MPI_Alloc_mem: networks that need registered memory (InfiniBand) can register it once.
    check(MPI_Alloc_mem(static_cast<MPI_Aint>(slot_bytes * nslots), MPI_INFO_NULL, &mem),
          "MPI_Alloc_mem", self_);
    slots_ = static_cast<std::byte*>(mem);
    if (side_ == Side::receiver)
      for (std::uint32_t k = 0; k < nslots_; ++k) {
        message_[k] = k;  // the first round: message k in slot k
        post_receive(k);
      }
  }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint() {
    if (!mpi_usable()) return;  // after MPI_Finalize nothing may be called: the OS reclaims it
    bool buffers_free = true;
    for (MPI_Request& r : requests_)
      // A receive nobody will match any more is cancelled; a send whose receiver stopped early
      // (after a failure) is left to MPI.
      buffers_free = release(r, side_ == Side::receiver) && buffers_free;
    // A transfer that can neither finish nor be cancelled (its peer vanished in the middle of
    // it) may still write the slots: they are leaked rather than freed under it.
    if (buffers_free) MPI_Free_mem(slots_);
  }

  std::byte* slot(std::uint64_t m) const { return slots_ + (m % nslots_) * slot_bytes_; }

  bool can_send(std::uint64_t m) {
    MPI_Request& r = requests_[m % nslots_];
    if (r == MPI_REQUEST_NULL) return true;
    int done = 0;
    verify(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test (send)");
    return done != 0;
  }
  void post_sent(std::uint64_t m, std::uint64_t bytes) {
    const std::uint32_t k = static_cast<std::uint32_t>(m % nslots_);
    message_[k] = m;
    verify(MPI_Isend(slot(m), static_cast<int>(bytes), MPI_BYTE, peer_, tag_, comm_, &requests_[k]),
           "MPI_Isend");
    sending_ = true;
  }
  // Whether every send this endpoint started has completed (true at once on a receiver, and on a
  // sender that started none since it last answered true): one MPI_Testall, which also drives
  // MPI's progress.
  bool sends_done() {
    if (!sending_) return true;
    int done = 0;
    verify(MPI_Testall(static_cast<int>(nslots_), requests_.data(), &done, MPI_STATUSES_IGNORE),
           "MPI_Testall (send)");
    sending_ = done == 0;
    return done != 0;
  }
  // Whether sends may be in flight: some were started that sends_done() has not seen complete.
  bool sends_in_flight() const { return sending_; }
  int peer() const { return peer_; }

  bool can_recv(std::uint64_t m) {
    const std::uint32_t k = static_cast<std::uint32_t>(m % nslots_);
    if (message_[k] != m) return false;  // the slot still holds an earlier message
    MPI_Request& r = requests_[k];
    if (r == MPI_REQUEST_NULL) return true;  // arrived, not yet consumed
    int done = 0;
    verify(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test (receive)");
    return done != 0;
  }
  void post_received(std::uint64_t m) {
    const std::uint32_t k = static_cast<std::uint32_t>(m % nslots_);
    message_[k] = m + nslots_;
    post_receive(k);
  }

 private:
  // An MPI error on this connection (a peer whose process died or whose link broke, typically),
  // naming both ranks.
  void verify(int code, const char* call) const {
    if (code == MPI_SUCCESS) return;
    const bool sending = side_ == Side::sender;
    throw Error(ErrorCode::System, self_,
                std::string(call) + " on the connection " +
                    std::to_string(sending ? self_ : peer_) + "->" +
                    std::to_string(sending ? peer_ : self_) + " (peer rank " +
                    std::to_string(peer_) + "): " + error_string(code));
  }

  void post_receive(std::uint32_t k) {
    verify(MPI_Irecv(slots_ + k * slot_bytes_, static_cast<int>(slot_bytes_), MPI_BYTE, peer_, tag_,
                     comm_, &requests_[k]),
           "MPI_Irecv");
  }

  MPI_Comm comm_;
  Side side_;
  int self_;
  int peer_;
  int tag_;
  std::uint64_t slot_bytes_;
  std::uint32_t nslots_;
  std::byte* slots_ = nullptr;
  std::vector<MPI_Request> requests_;   // per slot: its send or receive in flight
  std::vector<std::uint64_t> message_;  // per slot: the message its request carries
  bool sending_ = false;                // sends started that sends_done() has not seen complete
};

// The interpreter's handle on a connection (runtime::Connection).
struct Connection {
  Endpoint* endpoint = nullptr;  // null: a connection between two other ranks
  std::int32_t from = 0;
  std::int32_t to = 0;
  std::uint64_t slot_bytes = 0;

  std::byte* slot(std::uint64_t m) const { return endpoint->slot(m); }
  bool can_send(std::uint64_t m) const { return endpoint->can_send(m); }
  bool can_recv(std::uint64_t m) const { return endpoint->can_recv(m); }
  void post_sent(std::uint64_t m, std::uint64_t bytes) const { endpoint->post_sent(m, bytes); }
  // Without a size the whole slot goes (correct, only slower); the interpreter passes the size.
  void post_sent(std::uint64_t m) const { endpoint->post_sent(m, slot_bytes); }
  void post_received(std::uint64_t m) const { endpoint->post_received(m); }
  sync::WaitResult wait_send(std::uint64_t m, const std::uint32_t* abort,
                             std::uint64_t deadline_ns) const {
    return wait_until([&] { return can_send(m); }, abort, deadline_ns);
  }
  sync::WaitResult wait_recv(std::uint64_t m, const std::uint32_t* abort,
                             std::uint64_t deadline_ns) const {
    return wait_until([&] { return can_recv(m); }, abort, deadline_ns);
  }

 private:
  template <class Ready>
  static sync::WaitResult wait_until(Ready ready, const std::uint32_t* abort,
                                     std::uint64_t deadline_ns) {
    sync::Backoff backoff;
    while (!ready()) {
      if (abort != nullptr &&
          sync::AtomicWord<std::uint32_t>(const_cast<std::uint32_t*>(abort)).load_relaxed() != 0)
        return sync::WaitResult::Aborted;
      if (sync::now_ns() >= deadline_ns) return sync::WaitResult::Timeout;
      backoff.pause();
    }
    return sync::WaitResult::Ok;
  }
};

}  // namespace ccoll::transport::mpi
