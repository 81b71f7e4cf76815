// ccoll/sim/from_physical.hpp: a PhysicalTopology as the simulator's Network.
//
// Node i of the topology is node i of the network; link l is link l (capacity bandwidth x count,
// converted to bytes per second; latency to seconds). Compute nodes (GPUs, active nodes) do not
// forward, everything else does -- the routing rule of physical/graph.hpp, so the simulator
// charges the links the planners planned for.
#pragma once

#include <vector>

#include "ccoll/physical/graph.hpp"
#include "ccoll/sim/network.hpp"

namespace ccoll::sim {

inline Network to_network(const physical::PhysicalTopology& t) {
  Network net;
  for (int i = 0; i < static_cast<int>(t.nodes.size()); ++i)
    net.add_node(t.nodes[static_cast<std::size_t>(i)].id, !t.is_compute(i));
  for (const auto& l : t.links)
    net.add_link(l.from, l.to, l.capacity_GBps() * 1e9, l.latency_us * 1e-6);
  return net;
}

// The usual placement: plan rank r on the r-th compute node (node order; GPUs of a cluster preset
// are numbered machine by machine).
inline std::vector<int> compute_rank_nodes(const physical::PhysicalTopology& t) {
  return t.compute_nodes();
}

}  // namespace ccoll::sim
