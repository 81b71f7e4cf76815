// ccoll/runtime/low_latency_area.hpp: a shared area with the connections' low-latency regions.
//
// The LowLatency protocol (protocol/low_latency.hpp) needs, per connection, slots that are only
// ever written as LL messages: a line of Simple payload left where a flag is looked for could
// carry any 32-bit value, the expected flag included. The host transports therefore map, after the
// area of runtime/shared_area.hpp, one more region of nconn x nslots x slot stride bytes:
//
//   area (AreaLayout::total bytes) | LL slots (nconn x nslots x slot_stride)
//
// and give every connection its LL slots. The region starts zeroed (a fresh anonymous mapping or
// shared-memory segment), and a zero line is never a message (flags are never 0). Its pages are
// committed only when an LL message first touches them.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "ccoll/runtime/area_communicator.hpp"
#include "ccoll/runtime/area_control_plane.hpp"
#include "ccoll/runtime/shared_area.hpp"
#include "ccoll/sync/connection.hpp"

namespace ccoll::runtime {

struct LowLatencyAreaLayout {
  AreaLayout area;
  std::size_t ll_slots = 0;  // offset of the LL region
  std::size_t total = 0;     // bytes to map
};

inline LowLatencyAreaLayout low_latency_area_layout(const AreaCommunicator& comm) {
  LowLatencyAreaLayout l;
  l.area = area_layout(comm);
  l.ll_slots = l.area.total;
  l.total = AreaLayout::round_up(
      l.ll_slots + comm.connection_keys().size() * comm.config().nslots * l.area.slot_stride,
      kPage);
  return l;
}

// attach_area (runtime/area_communicator.hpp), with every connection's LL slots.
inline void attach_area_with_low_latency(AreaCommunicator& comm, std::byte* area) {
  const LowLatencyAreaLayout layout = low_latency_area_layout(comm);
  std::vector<sync::ConnectionRef> connections =
      area_connections(area, layout.area, comm.connection_keys(), comm.config().nslots);
  for (std::size_t i = 0; i < connections.size(); ++i) {
    connections[i].ll_slots =
        area + layout.ll_slots + i * comm.config().nslots * layout.area.slot_stride;
    connections[i].ll_slot_bytes = layout.area.slot_stride;
  }
  comm.attach(
      AreaControlPlane(area, layout.area, comm.nranks(),
                       static_cast<long>(comm.config().timeout.count()), comm.wait_policy()),
      std::move(connections));
}

}  // namespace ccoll::runtime
