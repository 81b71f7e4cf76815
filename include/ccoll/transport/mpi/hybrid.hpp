// ccoll/transport/mpi/hybrid.hpp: the links of transport::MpiHybrid: each connection over the
// best way its two ranks have, shared memory when they are on one host, MPI messages otherwise.
//
// Hosts are found by transport/mpi/hosts.hpp (shared-memory nodes, split further by
// CCOLL_MPI_HOST). The
// connections between two ranks of a host get their counters and slots in one MPI shared-memory
// window of that host (MPI_Win_allocate_shared, allocated by the host's first rank), and run the
// same protocol as the shared-memory transport (sync/connection.hpp: slots in memory both ends map,
// tail and head counters); the others are MPI point-to-point connections
// (transport/mpi/connection.hpp). A HybridConnection holds either and dispatches each verb on a
// flag that never changes, so the branch costs nothing measurable next to a message.
//
// The window is accessed with the counters' own atomics (acquire/release, as on the
// shared-memory transport) inside one passive-target epoch (MPI_Win_lock_all) that lasts as long
// as the links.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/mpi/check.hpp"
#include "ccoll/transport/mpi/connection.hpp"
#include "ccoll/transport/mpi/hosts.hpp"
#include "ccoll/transport/mpi/point_to_point.hpp"

namespace ccoll::transport::mpi {

struct HybridConnection {
  sync::ConnectionRef shared;  // shared.slots != nullptr: both ranks on this host
  Connection message;          // otherwise (endpoint null: a connection between two others)
  std::int32_t from = 0;
  std::int32_t to = 0;

  bool on_host() const { return shared.slots != nullptr; }
  std::byte* slot(std::uint64_t m) const { return on_host() ? shared.slot(m) : message.slot(m); }
  bool can_send(std::uint64_t m) const {
    return on_host() ? shared.can_send(m) : message.can_send(m);
  }
  bool can_recv(std::uint64_t m) const {
    return on_host() ? shared.can_recv(m) : message.can_recv(m);
  }
  sync::WaitResult wait_send(std::uint64_t m, const std::uint32_t* abort, std::uint64_t t) const {
    return on_host() ? shared.wait_send(m, abort, t) : message.wait_send(m, abort, t);
  }
  sync::WaitResult wait_recv(std::uint64_t m, const std::uint32_t* abort, std::uint64_t t) const {
    return on_host() ? shared.wait_recv(m, abort, t) : message.wait_recv(m, abort, t);
  }
  void post_sent(std::uint64_t m) const { on_host() ? shared.post_sent(m) : message.post_sent(m); }
  void post_sent(std::uint64_t m, std::uint64_t bytes) const {
    on_host() ? shared.post_sent(m) : message.post_sent(m, bytes);
  }
  void post_received(std::uint64_t m) const {
    on_host() ? shared.post_received(m) : message.post_received(m);
  }
};

class HybridLinks {
 public:
  using connection_type = HybridConnection;

  HybridLinks(MPI_Comm comm, int self, const std::vector<runtime::ConnectionKey>& keys,
              const Config& config) {
    Hosts hosts = find_hosts(comm, self);
    host_ = std::move(hosts.host);
    host_of_ = std::move(hosts.host_of);
    const int host_rank = hosts.host_rank;
    const int leader = host(self);

    // This host's connections: counters and slots, one after the other, in key order.
    const std::size_t slots_bytes = round_up(config.slot_bytes * config.nslots);
    const std::size_t stride = sizeof(sync::ConnectionCounters) + slots_bytes;
    std::vector<std::size_t> offset(keys.size(), kNotOnThisHost);
    std::size_t total = 0;
    std::size_t largest_tag = 0;  // of the connections between hosts, on every host
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (host(keys[i].from) != host(keys[i].to)) largest_tag = i;
      if (host(keys[i].from) == leader && host(keys[i].to) == leader) {
        offset[i] = total;
        total += stride;
      }
    }
    check_tags(comm, largest_tag, self);
    void* mine = nullptr;
    check(MPI_Win_allocate_shared(static_cast<MPI_Aint>(host_rank == 0 ? total : 0), 1,
                                  MPI_INFO_NULL, host_.get(), &mine, &window_),
          "MPI_Win_allocate_shared", self);
    MPI_Aint size = 0;
    int disp = 0;
    void* base = nullptr;
    check(MPI_Win_shared_query(window_, 0, &size, &disp, &base), "MPI_Win_shared_query", self);
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_), "MPI_Win_lock_all", self);
    locked_ = true;
    auto* area = static_cast<std::byte*>(base);
    if (host_rank == 0)
      for (std::size_t i = 0; i < keys.size(); ++i)
        if (offset[i] != kNotOnThisHost)
          new (area + offset[i]) sync::ConnectionCounters{};  // both counters start at zero
    MPI_Win_sync(window_);
    check(MPI_Barrier(host_.get()), "MPI_Barrier (host)", self);
    MPI_Win_sync(window_);

    connections_.resize(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      HybridConnection& c = connections_[i];
      c.from = keys[i].from;
      c.to = keys[i].to;
      c.message.from = c.from;
      c.message.to = c.to;
      c.message.slot_bytes = config.slot_bytes;
      if (offset[i] != kNotOnThisHost) {
        auto* counters = reinterpret_cast<sync::ConnectionCounters*>(area + offset[i]);
        c.shared.slots = area + offset[i] + sizeof(sync::ConnectionCounters);
        c.shared.tail = &counters->tail;
        c.shared.head = &counters->head;
        c.shared.slot_bytes = config.slot_bytes;
        c.shared.nslots = config.nslots;
        c.shared.from = c.from;
        c.shared.to = c.to;
        ++on_host_;
      } else if (auto e = make_endpoint(comm, self, keys[i], i, config)) {
        c.message.endpoint = e.get();
        if (keys[i].from == self) senders_.push_back(e.get());
        endpoints_.push_back(std::move(e));
      }
    }
  }
  HybridLinks(const HybridLinks&) = delete;
  HybridLinks& operator=(const HybridLinks&) = delete;
  ~HybridLinks() {
    endpoints_.clear();
    if (!mpi_usable()) return;
    if (locked_) MPI_Win_unlock_all(window_);
    if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  }

  std::vector<HybridConnection> connections() const { return connections_; }
  // The host of each rank (named by its first rank) and how many connections share memory.
  const std::vector<int>& host_of() const { return host_of_; }
  std::size_t connections_on_host() const { return on_host_; }
  // This rank's sending endpoints between hosts, whose sends a call completes before it returns.
  const std::vector<Endpoint*>& senders() const { return senders_; }

 private:
  static constexpr std::size_t kNotOnThisHost = ~std::size_t{0};
  static std::size_t round_up(std::uint64_t bytes) {
    return static_cast<std::size_t>((bytes + sync::kCounterStride - 1) / sync::kCounterStride *
                                    sync::kCounterStride);
  }
  int host(int rank) const { return host_of_[static_cast<std::size_t>(rank)]; }

  OwnedComm host_;  // freed after the window (members go after the destructor's body)
  MPI_Win window_ = MPI_WIN_NULL;
  bool locked_ = false;
  std::vector<int> host_of_;
  std::size_t on_host_ = 0;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::vector<Endpoint*> senders_;
  std::vector<HybridConnection> connections_;
};

static_assert(runtime::Connection<HybridConnection>);

}  // namespace ccoll::transport::mpi
