// ccoll/sim/network.hpp: the graph the simulator moves bytes over, and routes on it.
//
// A Network is a set of nodes and directed links (capacity in bytes per second, latency in
// seconds). Ranks of a plan sit on nodes. A plan connection u -> v becomes a route: the widest path
// (largest bottleneck capacity; fewest hops, then least latency among equals) from u's node to v's
// node that passes only through nodes allowed to forward (switches, NICs, CPUs, PCIe bridges).
// GPUs do not forward on their own: a detour through a GPU is a relay rank in the plan, which makes
// its forwarding cost (a step) visible. The simulator does not depend on physical/graph.hpp;
// sim/from_physical.hpp converts a PhysicalTopology into a Network.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

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
    if (!(capacity_Bps > 0)) throw std::invalid_argument("Network::add_link: capacity must be > 0");
    links.push_back(NetLink{from, to, capacity_Bps, latency_s,
                            nodes[static_cast<std::size_t>(from)].name + "->" +
                                nodes[static_cast<std::size_t>(to)].name});
    return static_cast<int>(links.size() - 1);
  }
};

// P nodes, each ordered pair joined by its own link of `bandwidth_Bps` and `latency_s`: the
// network behind the alpha-beta closed forms (alpha = latency, beta = 1 / bandwidth).
inline Network uniform_network(int nodes, double bandwidth_Bps, double latency_s) {
  if (!(bandwidth_Bps > 0)) throw std::invalid_argument("uniform_network: bandwidth must be > 0");
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

// Widest route from `src` to every node (see the header comment). Unreachable: no links and
// bottleneck 0.
inline std::vector<Route> widest_routes_from(const Network& net, int src) {
  const auto n = net.nodes.size();
  std::vector<std::vector<int>> out(n);
  for (std::size_t l = 0; l < net.links.size(); ++l)
    out[static_cast<std::size_t>(net.links[l].from)].push_back(static_cast<int>(l));
  // Label: (bottleneck desc, hops asc, latency asc) -- isotone under extension, so Dijkstra holds.
  struct Label {
    double width = 0;
    int hops = 0;
    double latency = 0;
  };
  const auto better = [](const Label& a, const Label& b) {
    if (a.width != b.width) return a.width > b.width;
    if (a.hops != b.hops) return a.hops < b.hops;
    return a.latency < b.latency;
  };
  std::vector<Label> best(n);
  std::vector<bool> reached(n, false), done(n, false);
  std::vector<int> via(n, -1);
  best[static_cast<std::size_t>(src)] = Label{std::numeric_limits<double>::infinity(), 0, 0};
  reached[static_cast<std::size_t>(src)] = true;
  for (;;) {
    int u = -1;
    for (std::size_t i = 0; i < n; ++i)
      if (reached[i] && !done[i] && (u < 0 || better(best[i], best[static_cast<std::size_t>(u)])))
        u = static_cast<int>(i);
    if (u < 0) break;
    const auto uu = static_cast<std::size_t>(u);
    done[uu] = true;
    if (u != src && !net.nodes[uu].forwards) continue;  // endpoints only
    for (int l : out[uu]) {
      const NetLink& link = net.links[static_cast<std::size_t>(l)];
      const auto v = static_cast<std::size_t>(link.to);
      if (done[v]) continue;
      const Label cand{std::min(best[uu].width, link.capacity_Bps), best[uu].hops + 1,
                       best[uu].latency + link.latency_s};
      if (!reached[v] || better(cand, best[v])) {
        best[v] = cand;
        reached[v] = true;
        via[v] = l;
      }
    }
  }
  std::vector<Route> routes(n);
  for (std::size_t v = 0; v < n; ++v) {
    Route& r = routes[v];
    if (static_cast<int>(v) == src) continue;
    if (!reached[v]) {
      r.bottleneck_Bps = 0;
      continue;
    }
    for (int at = static_cast<int>(v); at != src;) {
      const int l = via[static_cast<std::size_t>(at)];
      r.links.push_back(l);
      at = net.links[static_cast<std::size_t>(l)].from;
    }
    std::reverse(r.links.begin(), r.links.end());
    r.latency_s = best[v].latency;
    r.bottleneck_Bps = best[v].width;
  }
  return routes;
}

}  // namespace ccoll::sim
