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
// latency) by physical/widest_route.hpp's search, which the simulator (sim/network.hpp) runs too,
// so planners and the simulator charge the same links. Forwarding through a GPU ([C-Cube]'s detour)
// is not a route: it is a relay rank in the plan, which makes its cost (a step on that GPU)
// visible.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ccoll/physical/widest_route.hpp"

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

  // Adds a->b (and b->a when duplex) with `bandwidth_GBps` per direction per lane. A link in a
  // direction the pair is already linked in joins the existing link as more lanes (parallel
  // cables, a file that lists a doubled NVLink twice, a GPU's NVLinks to several NVSwitch chips
  // modelled as one switch node): the lanes add up, the per-lane bandwidth becomes the mean
  // weighted by lanes so that the capacity is the sum, the latency is the larger one and the type
  // the first one given. Every consumer (routes, forest, relays, simulator, DOT, the writers) so
  // sees one link per ordered pair, of the summed capacity.
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
    join_link(Link{a, b, bandwidth_GBps, count, latency_us, type});
    if (duplex) join_link(Link{b, a, bandwidth_GBps, count, latency_us, std::move(type)});
  }
  void add_link(std::string_view a, std::string_view b, double bandwidth_GBps, int count = 1,
                double latency_us = 0, std::string type = {}, bool duplex = true) {
    add_link(require(a, "link endpoint"), require(b, "link endpoint"), bandwidth_GBps, count,
             latency_us, std::move(type), duplex);
  }

  // The node named `id`, or -1. Constant time: an index over the ids is kept as nodes are added
  // (ids are not renamed once added; a renamed one is found by a rebuild of the index).
  int find(std::string_view id) const {
    for (; indexed_ < nodes.size(); ++indexed_) index_.emplace(nodes[indexed_].id, indexed_);
    const auto it = index_.find(std::string(id));
    if (it == index_.end()) return -1;
    if (it->second < nodes.size() && nodes[it->second].id == id)
      return static_cast<int>(it->second);
    index_.clear();  // stale: rebuild
    indexed_ = 0;
    return find(id);
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

  // Makes exactly `ids` active: the set a user names (a file's "active", a tool's --active), each
  // a compute node once; throws naming an unknown id, one listed twice, a NIC or a switch (which
  // forward traffic and run no plan program).
  void set_active(const std::vector<std::string>& ids) {
    std::vector<bool> a(nodes.size(), false);
    for (const auto& id : ids) {
      const int n = require(id, "active node");
      if (a[idx(n)]) throw TopologyError("active node \"" + id + "\" is listed twice");
      if (const NodeKind k = nodes[idx(n)].kind; k == NodeKind::nic || k == NodeKind::switch_)
        throw TopologyError("active node \"" + id + "\" is a " + std::string(to_string(k)) +
                            ": a worker is a gpu or a cpu node (NICs and switches forward "
                            "traffic and run no plan program)");
      a[idx(n)] = true;
    }
    active = std::move(a);
  }
  // By index, for graphs the library builds (a hierarchy's machines, measured hosts), whose
  // active nodes are workers by construction.
  void set_active(const std::vector<int>& node_indices) {
    std::vector<bool> a(nodes.size(), false);
    for (int n : node_indices) {
      check_node(n, "active node");
      a[idx(n)] = true;
    }
    active = std::move(a);
  }

  // Index of the first link from->to, or -1. Constant time: an index over the links is kept as
  // they are added, and rebuilt when the list was shortened or an entry no longer matches.
  int link_between(int from, int to) const {
    if (links_indexed_ > links.size()) link_index_.clear(), links_indexed_ = 0;
    for (; links_indexed_ < links.size(); ++links_indexed_)
      link_index_.try_emplace(pair_key(links[links_indexed_].from, links[links_indexed_].to),
                              links_indexed_);
    const auto it = link_index_.find(pair_key(from, to));
    if (it == link_index_.end()) return -1;
    if (it->second < links.size() && links[it->second].from == from && links[it->second].to == to)
      return static_cast<int>(it->second);
    link_index_.clear();  // stale: rebuild
    links_indexed_ = 0;
    return link_between(from, to);
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
    std::vector<std::vector<int>> next(nodes.size());
    for (const auto& l : links)
      next[idx(reverse ? l.to : l.from)].push_back(reverse ? l.from : l.to);
    std::vector<bool> seen(nodes.size(), false);
    std::vector<int> stack{src};
    seen[idx(src)] = true;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (int b : next[idx(u)])
        if (!seen[idx(b)]) seen[idx(b)] = true, stack.push_back(b);
    }
    return seen;
  }

  static std::size_t idx(int i) { return static_cast<std::size_t>(i); }

 private:
  mutable std::unordered_map<std::string, std::size_t> index_;
  mutable std::size_t indexed_ = 0;
  mutable std::unordered_map<std::uint64_t, std::size_t> link_index_;  // (from, to) -> link
  mutable std::size_t links_indexed_ = 0;

  static std::uint64_t pair_key(int from, int to) {
    return (std::uint64_t{static_cast<std::uint32_t>(from)} << 32) |
           std::uint64_t{static_cast<std::uint32_t>(to)};
  }

  // Appends `l`, or merges it into the link already joining its pair in its direction.
  void join_link(Link l) {
    const int i = link_between(l.from, l.to);
    if (i < 0) {
      links.push_back(std::move(l));
      return;
    }
    Link& e = links[idx(i)];
    const double capacity = e.capacity_GBps() + l.capacity_GBps();
    if (e.bandwidth_GBps != l.bandwidth_GBps)
      e.bandwidth_GBps = capacity / static_cast<double>(e.count + l.count);
    e.count += l.count;
    e.latency_us = std::max(e.latency_us, l.latency_us);
    if (e.type.empty()) e.type = std::move(l.type);
  }

  void check_node(int n, const char* what) const {
    if (n < 0 || n >= node_count())
      throw TopologyError(std::string(what) + " index " + std::to_string(n) + " is not a node");
  }
};

// A route: the links a message from one compute node to another crosses, in order.
using Route = std::vector<int>;

// The links out of every node, for route searches that run many times on one graph.
struct Adjacency {
  std::vector<std::vector<int>> out;  // per node: link indices
  explicit Adjacency(const PhysicalTopology& t) : out(t.nodes.size()) {
    for (int i = 0; i < static_cast<int>(t.links.size()); ++i)
      out[PhysicalTopology::idx(t.links[PhysicalTopology::idx(i)].from)].push_back(i);
  }
};

namespace route_detail {

// The topology as physical::WidestRouteSearch reads it: compute nodes end routes, never forward.
struct GraphView {
  const PhysicalTopology& t;
  const Adjacency& adj;
  int node_count() const { return t.node_count(); }
  const std::vector<int>& out(int u) const { return adj.out[PhysicalTopology::idx(u)]; }
  int link_from(int l) const { return t.links[PhysicalTopology::idx(l)].from; }
  int link_to(int l) const { return t.links[PhysicalTopology::idx(l)].to; }
  double link_width(int l) const { return t.links[PhysicalTopology::idx(l)].capacity_GBps(); }
  // Seconds first, as sim::to_network converts them, so both compare the same picoseconds.
  std::int64_t link_latency_ps(int l) const {
    return latency_picoseconds(t.links[PhysicalTopology::idx(l)].latency_us * 1e-6);
  }
  bool forwards(int u) const { return !t.is_compute(u); }
};

}  // namespace route_detail

// All routes from compute node `src` to every node, following the rule in the header comment.
// Intermediate nodes are non-compute. Returns per node the link list (empty: unreachable or src).
inline std::vector<Route> routes_from(const PhysicalTopology& t, const Adjacency& adj, int src) {
  const route_detail::GraphView g{t, adj};
  WidestRouteSearch<route_detail::GraphView> search(g);
  search.from(src);
  std::vector<Route> routes(t.nodes.size());
  for (int v = 0; v < t.node_count(); ++v) routes[PhysicalTopology::idx(v)] = search.route(v);
  return routes;
}
inline std::vector<Route> routes_from(const PhysicalTopology& t, int src) {
  return routes_from(t, Adjacency(t), src);
}

// The route from `src` to `to` alone (the search stops when it is found): the same route as
// routes_from(t, src)[to].
inline Route route(const PhysicalTopology& t, const Adjacency& adj, int src, int to) {
  const route_detail::GraphView g{t, adj};
  WidestRouteSearch<route_detail::GraphView> search(g);
  search.from(src, to);
  return search.route(to);
}

// Whether a route joins compute nodes `from` and `to`, answered without searching routes: on a
// graph whose links all come in both directions, a route exists when the nodes are linked
// directly or touch the same connected group of non-compute nodes (switches, NICs, CPUs). Other
// graphs are searched. Built once per graph in linear time; the CLI and the relay planner ask it
// for every rank pair of a plan (a 10,000-GPU cluster's ring in milliseconds).
class Reachability {
 public:
  explicit Reachability(const PhysicalTopology& t) : t_(t), adj_(t), group_(t.nodes.size(), -1) {
    std::vector<std::pair<int, int>> pairs;
    pairs.reserve(t.links.size());
    for (const auto& l : t.links) pairs.emplace_back(l.from, l.to);
    std::sort(pairs.begin(), pairs.end());
    symmetric_ = std::all_of(pairs.begin(), pairs.end(), [&](const std::pair<int, int>& p) {
      return std::binary_search(pairs.begin(), pairs.end(), std::pair<int, int>{p.second, p.first});
    });
    direct_ = std::move(pairs);
    if (!symmetric_) return;
    int groups = 0;
    for (int s = 0; s < t.node_count(); ++s) {
      if (t.is_compute(s) || group_[PhysicalTopology::idx(s)] >= 0) continue;
      std::vector<int> stack{s};
      group_[PhysicalTopology::idx(s)] = groups;
      while (!stack.empty()) {
        const int u = stack.back();
        stack.pop_back();
        for (int li : adj_.out[PhysicalTopology::idx(u)]) {
          const int v = t.links[PhysicalTopology::idx(li)].to;
          if (!t.is_compute(v) && group_[PhysicalTopology::idx(v)] < 0)
            group_[PhysicalTopology::idx(v)] = groups, stack.push_back(v);
        }
      }
      ++groups;
    }
    touches_.resize(t.nodes.size());
    for (int c = 0; c < t.node_count(); ++c) {
      if (!t.is_compute(c)) continue;
      auto& g = touches_[PhysicalTopology::idx(c)];
      for (int li : adj_.out[PhysicalTopology::idx(c)])
        if (const int v = t.links[PhysicalTopology::idx(li)].to; !t.is_compute(v))
          g.push_back(group_[PhysicalTopology::idx(v)]);
      std::sort(g.begin(), g.end());
      g.erase(std::unique(g.begin(), g.end()), g.end());
    }
  }

  // Distinct compute nodes `from` and `to` are joined by a route.
  bool routable(int from, int to) const {
    if (std::binary_search(direct_.begin(), direct_.end(), std::pair<int, int>{from, to}))
      return true;
    if (!symmetric_) return !route(t_, adj_, from, to).empty();
    const auto& a = touches_[PhysicalTopology::idx(from)];
    const auto& b = touches_[PhysicalTopology::idx(to)];
    for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
      if (a[i] == b[j]) return true;
      a[i] < b[j] ? ++i : ++j;
    }
    return false;
  }
  // Every pair of distinct `nodes` (compute nodes) is joined by a route, by a sufficient test in
  // time linear in them: all of them link into one group of non-compute nodes (a machine's PCIe
  // tree joined to the cluster network, say). False means "not shown", not "disconnected".
  bool all_routable(const std::vector<int>& nodes) const {
    if (nodes.size() < 2) return true;
    if (!symmetric_) return false;
    std::vector<int> common = touches_[PhysicalTopology::idx(nodes.front())];
    for (std::size_t i = 1; i < nodes.size() && !common.empty(); ++i) {
      const auto& g = touches_[PhysicalTopology::idx(nodes[i])];
      std::vector<int> both;
      std::set_intersection(common.begin(), common.end(), g.begin(), g.end(),
                            std::back_inserter(both));
      common = std::move(both);
    }
    return !common.empty();
  }
  const Adjacency& adjacency() const { return adj_; }
  const PhysicalTopology& topology() const { return t_; }

 private:
  const PhysicalTopology& t_;
  Adjacency adj_;
  std::vector<int> group_;                 // non-compute node -> its connected group
  std::vector<std::vector<int>> touches_;  // compute node -> groups it links into
  std::vector<std::pair<int, int>> direct_;
  bool symmetric_ = true;
};

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
  const Adjacency adj(t);
  for (int s : t.compute_nodes()) r.table[PhysicalTopology::idx(s)] = routes_from(t, adj, s);
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
