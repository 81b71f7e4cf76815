// ccoll/physical/graph.hpp: the physical topology, a directed graph of devices and links.
//
// Nodes are GPUs, CPUs, NICs and switches (PCIe switches, NVSwitches, ToR and aggregation switches)
// grouped into hosts. A link is directed and carries `bandwidth_GBps * count` GB/s (count is the
// multiplicity: DGX-1V joins some GPU pairs with two NVLinks); a full-duplex cable is two links.
// The active set names the workers of the collective ([TopoSync]'s V~); other compute nodes
// (inactive GPUs) may serve as relays.
//
// Compute nodes (GPUs, and any node in the active set) are the only nodes that can be plan ranks.
// Switches, NICs and CPUs are never ranks: they forward traffic without running a program. A plan
// connection between two ranks therefore travels along a route that passes only through
// non-compute nodes; route() picks the widest one (largest bottleneck; then fewest hops; then least
// latency), the same rule the simulator (sim/network.hpp) uses, so planners and the simulator
// charge the same links. Forwarding through a GPU ([C-Cube]'s detour) is not a route: it is a relay
// rank in the plan, which makes its cost (a step on that GPU) visible.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace ccoll::physical {

enum class NodeKind : std::uint8_t { gpu, cpu, nic, switch_ };

inline std::string_view to_string(NodeKind k) {
  switch (k) {
    case NodeKind::gpu:
      return "gpu";
    case NodeKind::cpu:
      return "cpu";
    case NodeKind::nic:
      return "nic";
    case NodeKind::switch_:
      return "switch";
  }
  return "?";
}

// Parses "gpu", "cpu", "nic", "switch" (also "nvswitch", "pcie", "pci" as switch); throws
// otherwise.
inline NodeKind parse_node_kind(std::string_view s) {
  if (s == "gpu") return NodeKind::gpu;
  if (s == "cpu") return NodeKind::cpu;
  if (s == "nic" || s == "net") return NodeKind::nic;
  if (s == "switch" || s == "nvswitch" || s == "pcie" || s == "pci") return NodeKind::switch_;
  throw std::invalid_argument("unknown node kind \"" + std::string(s) +
                              "\" (expected gpu, cpu, nic or switch)");
}

struct Node {
  std::string id;
  NodeKind kind = NodeKind::gpu;
  std::string host;  // machine the node sits in ("" for network switches)
};

struct Link {
  int from = 0;
  int to = 0;
  double bandwidth_GBps = 0;  // per lane, this direction
  int count = 1;              // parallel lanes (NVLinks) between the same pair
  double latency_us = 0;
  std::string type;  // "nvlink", "pcie", "qpi", "net", ... (reports, DOT colours)

  double capacity_GBps() const { return bandwidth_GBps * count; }
};

// Error in a topology description; the message names the offending node or link.
struct TopologyError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct PhysicalTopology {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Link> links;   // directed
  std::vector<bool> active;  // per node; empty means "every GPU" (see is_active)

  int node_count() const { return static_cast<int>(nodes.size()); }

  int add_node(std::string id, NodeKind kind, std::string host = {}) {
    if (find(id) >= 0) throw TopologyError("duplicate node \"" + id + "\"");
    nodes.push_back(Node{std::move(id), kind, std::move(host)});
    if (!active.empty()) active.push_back(false);
    return node_count() - 1;
  }

  // Adds a->b (and b->a when duplex) with `bandwidth_GBps` per direction per lane.
  void add_link(int a, int b, double bandwidth_GBps, int count = 1, double latency_us = 0,
                std::string type = {}, bool duplex = true) {
    check_node(a, "link endpoint");
    check_node(b, "link endpoint");
    if (a == b) throw TopologyError("link from \"" + nodes[idx(a)].id + "\" to itself");
    if (!(bandwidth_GBps > 0) || !std::isfinite(bandwidth_GBps))
      throw TopologyError("link " + nodes[idx(a)].id + "-" + nodes[idx(b)].id +
                          ": bandwidth_GBps must be positive, got " +
                          std::to_string(bandwidth_GBps));
    if (count < 1)
      throw TopologyError("link " + nodes[idx(a)].id + "-" + nodes[idx(b)].id +
                          ": count must be >= 1, got " + std::to_string(count));
    if (latency_us < 0 || !std::isfinite(latency_us))
      throw TopologyError("link " + nodes[idx(a)].id + "-" + nodes[idx(b)].id +
                          ": latency_us must be >= 0, got " + std::to_string(latency_us));
    links.push_back(Link{a, b, bandwidth_GBps, count, latency_us, type});
    if (duplex) links.push_back(Link{b, a, bandwidth_GBps, count, latency_us, std::move(type)});
  }
  void add_link(std::string_view a, std::string_view b, double bandwidth_GBps, int count = 1,
                double latency_us = 0, std::string type = {}, bool duplex = true) {
    add_link(require(a, "link endpoint"), require(b, "link endpoint"), bandwidth_GBps, count,
             latency_us, std::move(type), duplex);
  }

  int find(std::string_view id) const {
    for (int i = 0; i < node_count(); ++i)
      if (nodes[idx(i)].id == id) return i;
    return -1;
  }
  int require(std::string_view id, std::string_view what = "node") const {
    const int i = find(id);
    if (i < 0)
      throw TopologyError(std::string(what) + " \"" + std::string(id) + "\" is not a node");
    return i;
  }

  bool is_active(int n) const {
    return active.empty() ? nodes[idx(n)].kind == NodeKind::gpu : bool(active[idx(n)]);
  }
  // Compute nodes can be ranks: GPUs, plus any node named active (a CPU worker, say).
  bool is_compute(int n) const { return nodes[idx(n)].kind == NodeKind::gpu || is_active(n); }

  std::vector<int> active_nodes() const {
    std::vector<int> out;
    for (int i = 0; i < node_count(); ++i)
      if (is_active(i)) out.push_back(i);
    return out;
  }
  std::vector<int> compute_nodes() const {
    std::vector<int> out;
    for (int i = 0; i < node_count(); ++i)
      if (is_compute(i)) out.push_back(i);
    return out;
  }
  std::vector<int> gpus() const {
    std::vector<int> out;
    for (int i = 0; i < node_count(); ++i)
      if (nodes[idx(i)].kind == NodeKind::gpu) out.push_back(i);
    return out;
  }

  // Makes exactly `ids` active; throws naming an unknown id.
  void set_active(const std::vector<std::string>& ids) {
    std::vector<bool> a(nodes.size(), false);
    for (const auto& id : ids) a[idx(require(id, "active node"))] = true;
    active = std::move(a);
  }
  void set_active(const std::vector<int>& node_indices) {
    std::vector<bool> a(nodes.size(), false);
    for (int n : node_indices) {
      check_node(n, "active node");
      a[idx(n)] = true;
    }
    active = std::move(a);
  }

  // Index of the first link from->to, or -1.
  int link_between(int from, int to) const {
    for (int i = 0; i < static_cast<int>(links.size()); ++i)
      if (links[idx(i)].from == from && links[idx(i)].to == to) return i;
    return -1;
  }
  // Total capacity from->to over all direct links (0 when not adjacent).
  double direct_capacity_GBps(int from, int to) const {
    double c = 0;
    for (const auto& l : links)
      if (l.from == from && l.to == to) c += l.capacity_GBps();
    return c;
  }

  // Throws TopologyError when the description is inconsistent: no active node, links to unknown
  // nodes, non-positive bandwidth, or an active node that no route connects to the others
  // (the message names it).
  void validate() const {
    if (!active.empty() && active.size() != nodes.size())
      throw TopologyError("active set has " + std::to_string(active.size()) + " entries for " +
                          std::to_string(nodes.size()) + " nodes");
    for (const auto& l : links) {
      check_node(l.from, "link endpoint");
      check_node(l.to, "link endpoint");
      if (!(l.capacity_GBps() > 0))
        throw TopologyError("link " + nodes[idx(l.from)].id + "->" + nodes[idx(l.to)].id +
                            ": bandwidth must be positive");
    }
    const auto act = active_nodes();
    if (act.empty()) throw TopologyError("topology \"" + name + "\" has no active node");
    // Every active node must reach and be reached from the first one (through any node: relays
    // may be used), or no reduce/broadcast tree exists.
    const auto fwd = reach(act.front(), false), bwd = reach(act.front(), true);
    for (int a : act)
      if (!fwd[idx(a)] || !bwd[idx(a)])
        throw TopologyError("active node \"" + nodes[idx(a)].id +
                            "\" is disconnected from active node \"" + nodes[idx(act.front())].id +
                            "\"");
  }

  // Nodes reachable from `src` along links (reverse: against them).
  std::vector<bool> reach(int src, bool reverse) const {
    std::vector<bool> seen(nodes.size(), false);
    std::vector<int> stack{src};
    seen[idx(src)] = true;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (const auto& l : links) {
        const int a = reverse ? l.to : l.from, b = reverse ? l.from : l.to;
        if (a == u && !seen[idx(b)]) seen[idx(b)] = true, stack.push_back(b);
      }
    }
    return seen;
  }

  static std::size_t idx(int i) { return static_cast<std::size_t>(i); }

 private:
  void check_node(int n, const char* what) const {
    if (n < 0 || n >= node_count())
      throw TopologyError(std::string(what) + " index " + std::to_string(n) + " is not a node");
  }
};

// A route: the links a message from one compute node to another crosses, in order.
using Route = std::vector<int>;

// All routes from compute node `src` to every node, following the rule in the header comment.
// Intermediate nodes are non-compute. Returns per node the link list (empty: unreachable or src).
inline std::vector<Route> routes_from(const PhysicalTopology& t, int src) {
  const auto n = t.nodes.size();
  std::vector<std::vector<int>> out_links(n);
  for (int i = 0; i < static_cast<int>(t.links.size()); ++i)
    out_links[PhysicalTopology::idx(t.links[PhysicalTopology::idx(i)].from)].push_back(i);
  // Label: (bottleneck desc, hops asc, latency asc). Extending a path never improves it, so
  // Dijkstra on the lexicographic order is exact.
  struct Label {
    double width = -1;
    int hops = 0;
    double latency = 0;
  };
  const auto better = [](const Label& a, const Label& b) {
    if (a.width != b.width) return a.width > b.width;
    if (a.hops != b.hops) return a.hops < b.hops;
    return a.latency < b.latency;
  };
  std::vector<Label> best(n);
  std::vector<int> via(n, -1);
  std::vector<bool> done(n, false);
  best[PhysicalTopology::idx(src)] = Label{std::numeric_limits<double>::infinity(), 0, 0};
  for (;;) {
    int u = -1;
    for (std::size_t i = 0; i < n; ++i)
      if (!done[i] && best[i].width >= 0 &&
          (u < 0 || better(best[i], best[PhysicalTopology::idx(u)])))
        u = static_cast<int>(i);
    if (u < 0) break;
    done[PhysicalTopology::idx(u)] = true;
    if (u != src && t.is_compute(u)) continue;  // compute nodes end routes, never forward
    for (int li : out_links[PhysicalTopology::idx(u)]) {
      const Link& l = t.links[PhysicalTopology::idx(li)];
      const Label& bu = best[PhysicalTopology::idx(u)];
      Label c{std::min(bu.width, l.capacity_GBps()), bu.hops + 1, bu.latency + l.latency_us};
      const auto v = PhysicalTopology::idx(l.to);
      if (!done[v] && (best[v].width < 0 || better(c, best[v]))) best[v] = c, via[v] = li;
    }
  }
  std::vector<Route> routes(n);
  for (std::size_t v = 0; v < n; ++v) {
    if (static_cast<int>(v) == src || via[v] < 0) continue;
    for (int w = static_cast<int>(v); w != src;) {
      const int li = via[PhysicalTopology::idx(w)];
      routes[v].push_back(li);
      w = t.links[PhysicalTopology::idx(li)].from;
    }
    std::reverse(routes[v].begin(), routes[v].end());
  }
  return routes;
}

// Routes between every ordered pair of compute nodes: table[a][b] (node indices; empty when a == b
// or no route exists).
struct RouteTable {
  std::vector<std::vector<Route>> table;
  const Route& operator()(int a, int b) const {
    return table[PhysicalTopology::idx(a)][PhysicalTopology::idx(b)];
  }
};

inline RouteTable all_routes(const PhysicalTopology& t) {
  RouteTable r;
  r.table.assign(t.nodes.size(), {});
  for (int s : t.compute_nodes()) r.table[PhysicalTopology::idx(s)] = routes_from(t, s);
  return r;
}

// Bottleneck capacity of a route in GB/s (infinity for an empty route).
inline double route_capacity_GBps(const PhysicalTopology& t, const Route& r) {
  double c = std::numeric_limits<double>::infinity();
  for (int li : r) c = std::min(c, t.links[PhysicalTopology::idx(li)].capacity_GBps());
  return c;
}

inline double route_latency_us(const PhysicalTopology& t, const Route& r) {
  double s = 0;
  for (int li : r) s += t.links[PhysicalTopology::idx(li)].latency_us;
  return s;
}

}  // namespace ccoll::physical
