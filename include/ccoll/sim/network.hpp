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

namespace detail {

// Widest routes from one source at a time over adjacency lists built once: the simulator asks for
// the routes from every rank's node, and on 1,024 GPUs rebuilding the lists per source and scanning
// all nodes for the next one to settle (quadratic per source) would be a tenth of `ccoll plan`'s
// time (docs/results/simulator-scale-2026-11-24.md).
class WidestRouter {
 public:
  explicit WidestRouter(const Network& net) : net_(net), out_(net.nodes.size()) {
    for (std::size_t l = 0; l < net.links.size(); ++l)
      out_[static_cast<std::size_t>(net.links[l].from)].push_back(static_cast<int>(l));
    const auto n = net.nodes.size();
    best_.resize(n);
    reached_.resize(n);
    done_.resize(n);
    via_.resize(n);
  }

  // Settles every node reachable from `src` (see the header comment for the rule).
  void from(int src) {
    src_ = src;
    std::fill(reached_.begin(), reached_.end(), false);
    std::fill(done_.begin(), done_.end(), false);
    std::fill(via_.begin(), via_.end(), -1);
    const auto us = static_cast<std::size_t>(src);
    best_[us] = Label{std::numeric_limits<double>::infinity(), 0, 0};
    reached_[us] = true;
    heap_.clear();
    push(src);
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), later_);
      const int u = heap_.back().node;
      heap_.pop_back();
      const auto uu = static_cast<std::size_t>(u);
      // Labels only improve, so an entry for a settled node is an outdated copy.
      if (done_[uu]) continue;
      done_[uu] = true;
      if (u != src && !net_.nodes[uu].forwards) continue;  // endpoints only
      for (int l : out_[uu]) {
        const NetLink& link = net_.links[static_cast<std::size_t>(l)];
        const auto v = static_cast<std::size_t>(link.to);
        if (done_[v]) continue;
        const Label cand{std::min(best_[uu].width, link.capacity_Bps), best_[uu].hops + 1,
                         best_[uu].latency + link.latency_s};
        if (!reached_[v] || better(cand, best_[v])) {
          best_[v] = cand;
          reached_[v] = true;
          via_[v] = l;
          push(link.to);
        }
      }
    }
  }

  // The route from the last from()'s source to `v`. Unreachable: no links and bottleneck 0.
  Route route_to(int v) const {
    Route r;
    const auto uv = static_cast<std::size_t>(v);
    if (v == src_) return r;
    if (!reached_[uv]) {
      r.bottleneck_Bps = 0;
      return r;
    }
    for (int at = v; at != src_;) {
      const int l = via_[static_cast<std::size_t>(at)];
      r.links.push_back(l);
      at = net_.links[static_cast<std::size_t>(l)].from;
    }
    std::reverse(r.links.begin(), r.links.end());
    r.latency_s = best_[uv].latency;
    r.bottleneck_Bps = best_[uv].width;
    return r;
  }

 private:
  // Label: (bottleneck desc, hops asc, latency asc) -- isotone under extension, so Dijkstra holds.
  struct Label {
    double width = 0;
    int hops = 0;
    double latency = 0;
  };
  static bool better(const Label& a, const Label& b) {
    if (a.width != b.width) return a.width > b.width;
    if (a.hops != b.hops) return a.hops < b.hops;
    return a.latency < b.latency;
  }
  struct Entry {
    Label label;
    int node = 0;
  };
  // Among equal labels the smaller node settles first, so the routes (which predecessor a node
  // keeps on ties) are those of settling nodes in index order.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      if (better(b.label, a.label)) return true;
      if (better(a.label, b.label)) return false;
      return b.node < a.node;
    }
  };
  void push(int v) {
    heap_.push_back(Entry{best_[static_cast<std::size_t>(v)], v});
    std::push_heap(heap_.begin(), heap_.end(), later_);
  }

  const Network& net_;
  std::vector<std::vector<int>> out_;
  std::vector<Label> best_;
  std::vector<bool> reached_, done_;
  std::vector<int> via_;
  std::vector<Entry> heap_;
  Later later_;
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
