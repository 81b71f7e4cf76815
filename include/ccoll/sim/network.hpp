// ccoll/sim/network.hpp: the graph the simulator moves bytes over, and routes on it.
//
// A Network is a set of nodes and directed links (capacity in bytes per second, latency in
// seconds). Ranks of a plan sit on nodes. A plan connection u -> v becomes a route: the widest path
// (largest bottleneck capacity; fewest hops, then least latency among equals) from u's node to v's
// node that passes only through nodes allowed to forward (switches, NICs, CPUs, PCIe bridges),
// found by physical/widest_route.hpp's search, the planners' own.
// GPUs do not forward on their own: a detour through a GPU is a relay rank in the plan, which makes
// its forwarding cost (a step) visible. The simulator does not depend on physical/graph.hpp;
// sim/from_physical.hpp converts a PhysicalTopology into a Network.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/physical/widest_route.hpp"

namespace ccoll::sim {

struct NetLink {
  int from = 0;
  int to = 0;
  double capacity_Bps = 0;  // bytes per second in this direction
  double latency_s = 0;
  std::string name;  // for reports and traces ("gpu0->gpu1")
};

struct NetNode {
  std::string name;
  bool forwards = false;  // may carry traffic between two other nodes
};

struct Network {
  std::vector<NetNode> nodes;
  std::vector<NetLink> links;
  // uniform_network: every ordered pair of nodes has its own link of this capacity and latency,
  // created by the simulator when a plan first uses it (P^2 links would not fit at P = 1024).
  bool uniform = false;
  double uniform_capacity_Bps = 0;
  double uniform_latency_s = 0;

  int add_node(std::string name, bool forwards) {
    nodes.push_back(NetNode{std::move(name), forwards});
    return static_cast<int>(nodes.size() - 1);
  }
  int add_link(int from, int to, double capacity_Bps, double latency_s) {
    if (from < 0 || to < 0 || from >= static_cast<int>(nodes.size()) ||
        to >= static_cast<int>(nodes.size()))
      throw std::invalid_argument("Network::add_link: unknown node");
    // Finite figures only: an infinite capacity never gets a rate, a negative latency lands
    // messages in the past.
    if (!(capacity_Bps > 0) || !std::isfinite(capacity_Bps))
      throw std::invalid_argument("Network::add_link: capacity must be finite and > 0");
    if (!(latency_s >= 0) || !std::isfinite(latency_s))
      throw std::invalid_argument("Network::add_link: latency must be finite and >= 0");
    links.push_back(NetLink{from, to, capacity_Bps, latency_s,
                            nodes[static_cast<std::size_t>(from)].name + "->" +
                                nodes[static_cast<std::size_t>(to)].name});
    return static_cast<int>(links.size() - 1);
  }
};

// P nodes, each ordered pair joined by its own link of `bandwidth_Bps` and `latency_s`: the
// network behind the alpha-beta closed forms (alpha = latency, beta = 1 / bandwidth).
inline Network uniform_network(int nodes, double bandwidth_Bps, double latency_s) {
  if (!(bandwidth_Bps > 0) || !std::isfinite(bandwidth_Bps))
    throw std::invalid_argument("uniform_network: bandwidth must be finite and > 0");
  if (!(latency_s >= 0) || !std::isfinite(latency_s))
    throw std::invalid_argument("uniform_network: latency must be finite and >= 0");
  Network net;
  for (int i = 0; i < nodes; ++i) net.add_node(std::to_string(i).insert(0, 1, 'r'), false);
  net.uniform = true;
  net.uniform_capacity_Bps = bandwidth_Bps;
  net.uniform_latency_s = latency_s;
  return net;
}

struct Route {
  std::vector<int> links;  // in order from source to destination; empty: same node
  double latency_s = 0;
  double bottleneck_Bps = std::numeric_limits<double>::infinity();
};

namespace detail {

// The network as physical::WidestRouteSearch reads it, with the adjacency lists built once: the
// simulator asks for the routes from every rank's node
// (docs/results/simulator-scale-2026-11-24.md).
class NetworkGraph {
 public:
  explicit NetworkGraph(const Network& net) : net_(net), out_(net.nodes.size()) {
    for (std::size_t l = 0; l < net.links.size(); ++l)
      out_[static_cast<std::size_t>(net.links[l].from)].push_back(static_cast<int>(l));
  }
  int node_count() const { return static_cast<int>(net_.nodes.size()); }
  const std::vector<int>& out(int u) const { return out_[static_cast<std::size_t>(u)]; }
  int link_from(int l) const { return link(l).from; }
  int link_to(int l) const { return link(l).to; }
  double link_width(int l) const { return link(l).capacity_Bps; }
  std::int64_t link_latency_ps(int l) const {
    return physical::latency_picoseconds(link(l).latency_s);
  }
  bool forwards(int u) const { return net_.nodes[static_cast<std::size_t>(u)].forwards; }
  const NetLink& link(int l) const { return net_.links[static_cast<std::size_t>(l)]; }

 private:
  const Network& net_;
  std::vector<std::vector<int>> out_;
};

// Widest routes from one source at a time (see the header comment for the rule).
class WidestRouter {
 public:
  explicit WidestRouter(const Network& net) : graph_(net), search_(graph_) {}

  void from(int src) {
    src_ = src;
    search_.from(src);
  }

  // The route from the last from()'s source to `v`. Unreachable: no links and bottleneck 0.
  Route route_to(int v) const {
    Route r;
    if (v == src_) return r;
    if (!search_.reached(v)) {
      r.bottleneck_Bps = 0;
      return r;
    }
    r.links = search_.route(v);
    for (const int l : r.links) r.latency_s += graph_.link(l).latency_s;
    r.bottleneck_Bps = search_.width(v);
    return r;
  }

 private:
  NetworkGraph graph_;
  physical::WidestRouteSearch<NetworkGraph> search_;
  int src_ = 0;
};

}  // namespace detail

// Widest route from `src` to every node (see the header comment). Unreachable: no links and
// bottleneck 0.
inline std::vector<Route> widest_routes_from(const Network& net, int src) {
  detail::WidestRouter router(net);
  router.from(src);
  std::vector<Route> routes(net.nodes.size());
  for (std::size_t v = 0; v < routes.size(); ++v) routes[v] = router.route_to(static_cast<int>(v));
  return routes;
}

}  // namespace ccoll::sim
