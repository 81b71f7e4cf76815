// ccoll/transport/mpi/point_to_point.hpp: the links of transport::Mpi: every connection of this
// rank over MPI point-to-point messages (transport/mpi/connection.hpp).
//
// The tag of a connection is its index in the communicator's connection set, the same on every
// rank, so the two ends of a connection match without exchanging anything.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/transport/mpi/connection.hpp"

namespace ccoll::transport::mpi {

// The endpoint of connection `index` of `key` for rank `self` (null if it is not one of its ends).
inline std::unique_ptr<Endpoint> make_endpoint(MPI_Comm comm, int self,
                                               const runtime::ConnectionKey& key, std::size_t index,
                                               const Config& config) {
  if (key.from != self && key.to != self) return nullptr;
  const bool sender = key.from == self;
  return std::make_unique<Endpoint>(
      comm, sender ? Endpoint::Side::sender : Endpoint::Side::receiver, self,
      sender ? key.to : key.from, static_cast<int>(index), config.slot_bytes, config.nslots);
}

class PointToPointLinks {
 public:
  using connection_type = Connection;

  PointToPointLinks(MPI_Comm comm, int self, const std::vector<runtime::ConnectionKey>& keys,
                    const Config& config) {
    if (!keys.empty()) check_tags(comm, keys.size() - 1, self);
    connections_.resize(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      Connection& c = connections_[i];
      c.from = keys[i].from;
      c.to = keys[i].to;
      c.slot_bytes = config.slot_bytes;
      if (auto e = make_endpoint(comm, self, keys[i], i, config)) {
        c.endpoint = e.get();
        if (keys[i].from == self) senders_.push_back(e.get());
        endpoints_.push_back(std::move(e));
      }
    }
  }
  std::vector<Connection> connections() const { return connections_; }
  // This rank's sending endpoints, whose sends a call completes before it returns.
  const std::vector<Endpoint*>& senders() const { return senders_; }

 private:
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::vector<Endpoint*> senders_;
  std::vector<Connection> connections_;
};

}  // namespace ccoll::transport::mpi
