// ccoll/runtime/area_communicator.hpp: the communicator of transports whose ranks share one area
// of memory (host threads, processes on one host): the area's control plane and connections.
#pragma once

#include <cstddef>

#include "ccoll/runtime/area_control_plane.hpp"
#include "ccoll/runtime/communicator.hpp"
#include "ccoll/runtime/shared_area.hpp"
#include "ccoll/sync/connection.hpp"

namespace ccoll::runtime {

using AreaCommunicator = Communicator<AreaControlPlane, sync::ConnectionRef>;

inline AreaLayout area_layout(const AreaCommunicator& comm) {
  return AreaLayout::make(comm.nranks(), comm.connection_keys().size(), comm.config().slot_bytes,
                          comm.config().nslots, comm.uses_fast_boxes());
}

// Points the communicator at an initialised area (runtime/shared_area.hpp's init_area).
inline void attach_area(AreaCommunicator& comm, std::byte* area) {
  const AreaLayout layout = area_layout(comm);
  comm.attach(
      AreaControlPlane(area, layout, comm.nranks(),
                       static_cast<long>(comm.config().timeout.count()), comm.wait_policy()),
      area_connections(area, layout, comm.connection_keys(), comm.config().nslots));
}

}  // namespace ccoll::runtime
