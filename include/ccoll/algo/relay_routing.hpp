// ccoll/algo/relay_routing.hpp: plans on graphs where some ranks have no route to each other,
// by forwarding through the GPUs in between.
//
// A route (physical/graph.hpp) passes only through switches, NICs and CPUs: compute nodes end
// routes and never forward in hardware. On a graph of GPUs wired to each other (a ring of four
// GPUs, a torus, accelerators joined across machines) most rank pairs therefore have no route,
// and a plan that connects them cannot run. Here such a connection becomes a chain of relay
// ranks: extra plan ranks, inactive, each placed on a compute node of the path, whose program on
// the connection's channel receives every message and sends it on unchanged (recv-copy-send).
// This is [C-Cube]'s detour (Sec. IV-A, a forwarding kernel on the intermediate GPU) generalised to
// any number of hops and any logical topology; the cost of forwarding (a step per hop and the
// relay GPU's links) is visible to the simulator and real on every executor.
//
// Each relayed rank pair gets relay ranks of its own, one per hop, shared by the pair's
// connections on every channel (a rank runs one program per channel). A relay program is a pure
// FIFO pipe, so the rewritten plan deadlocks exactly when the original one would with deeper
// connection buffers, that is never.
//
// Paths are chosen by link load ([TopoSync] Sec. IV-B's objective, the most-loaded link): the
// loads of the connections that do have routes are counted first (elements per call), then every
// relayed pair in decreasing volume takes the path over compute nodes that minimises the largest
// load-to-capacity ratio on its links after adding its volume, and among those paths one of fewest
// hops (each hop a relay: a step of latency and a copy on a GPU).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::algo {

// The relay chain of one rank pair: messages from `from` to `to` pass through `relays` in order,
// relay i running on node `nodes[i]`.
struct RelayPath {
  plan::Rank from = 0;
  plan::Rank to = 0;
  std::vector<plan::Rank> relays;
  std::vector<int> nodes;
};

// The relays of a logical topology on a physical graph: the algorithm's own ranks keep their
// numbers and nodes; relay ranks follow them.
struct RelayRouting {
  plan::Rank base_ranks = 0;
  std::vector<int> rank_node;  // base ranks, then relay ranks
  std::vector<RelayPath> paths;

  bool empty() const { return paths.empty(); }
  plan::Rank nranks() const { return static_cast<plan::Rank>(rank_node.size()); }
  const RelayPath* find(plan::Rank from, plan::Rank to) const {
    const auto it = index_.find({from, to});
    return it == index_.end() ? nullptr : &paths[it->second];
  }
  void add(RelayPath p) {
    index_[{p.from, p.to}] = paths.size();
    paths.push_back(std::move(p));
  }

 private:
  std::map<std::pair<plan::Rank, plan::Rank>, std::size_t> index_;
};

// Routes from compute nodes, computed on first use per source.
class RouteCache {
 public:
  explicit RouteCache(const physical::PhysicalTopology& t) : t_(t), adj_(t) {}
  const physical::Route& operator()(int from, int to) {
    auto it = from_.find(from);
    if (it == from_.end()) it = from_.emplace(from, physical::routes_from(t_, adj_, from)).first;
    return it->second[static_cast<std::size_t>(to)];
  }
  // Two different nodes that no route joins (the same node needs none).
  bool unroutable(int from, int to) { return from != to && (*this)(from, to).empty(); }

 private:
  const physical::PhysicalTopology& t_;
  physical::Adjacency adj_;
  std::unordered_map<int, std::vector<physical::Route>> from_;
};

namespace relay_detail {

// Elements per call each rank pair carries in `p` (every send port of a step carries the step).
inline std::map<std::pair<plan::Rank, plan::Rank>, double> pair_volumes(const plan::Plan& p) {
  std::map<std::pair<plan::Rank, plan::Rank>, double> v;
  for (const auto& ch : p.channels)
    for (const auto& prog : ch.programs)
      for (const auto& s : prog.steps)
        for (std::uint32_t k = 0; k < s.send_count; ++k) {
          const auto& c = p.connections[p.ports[s.send_begin + k].connection];
          v[{c.from, c.to}] += static_cast<double>(s.count);
        }
  for (const auto& c : p.connections) v.try_emplace({c.from, c.to}, 0.0);
  return v;
}

}  // namespace relay_detail

// Plans relays for every rank pair that a reference plan connects and no route joins.
// `rank_node` is the node of each of the plans' ranks; the references are plans the algorithm
// builds (their union of rank pairs must cover every plan it will build).
inline RelayRouting plan_relays(const physical::PhysicalTopology& t,
                                const std::vector<int>& rank_node,
                                const std::vector<const plan::Plan*>& references) {
  RelayRouting out;
  out.base_ranks = static_cast<plan::Rank>(rank_node.size());
  out.rank_node = rank_node;
  std::map<std::pair<plan::Rank, plan::Rank>, double> volume;
  for (const plan::Plan* p : references)
    for (const auto& [pair, v] : relay_detail::pair_volumes(*p))
      volume[pair] = std::max(volume[pair], v);
  const auto node_of = [&](plan::Rank r) {
    if (r < 0 || r >= out.base_ranks)
      throw_invalid_argument(-1, "plan rank", "below " + std::to_string(out.base_ranks),
                             std::to_string(r));
    return rank_node[static_cast<std::size_t>(r)];
  };
  // Which pairs need relays is answered without route searches (fast on large clusters, where
  // none do); the loads that choose the relays' paths need the other pairs' routes.
  const physical::Reachability reach(t);
  std::vector<std::pair<double, std::pair<plan::Rank, plan::Rank>>> relayed;
  for (const auto& [pair, v] : volume) {
    const int a = node_of(pair.first), b = node_of(pair.second);
    if (a != b && !reach.routable(a, b)) relayed.emplace_back(v, pair);
  }
  if (relayed.empty()) return out;
  RouteCache routes(t);
  std::vector<double> load(t.links.size(), 0.0);
  for (const auto& [pair, v] : volume) {
    const int a = node_of(pair.first), b = node_of(pair.second);
    if (a != b)
      for (int l : routes(a, b)) load[static_cast<std::size_t>(l)] += v;
  }
  std::sort(relayed.begin(), relayed.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  const auto compute = t.compute_nodes();
  const auto n = static_cast<std::size_t>(t.node_count());
  for (const auto& relayed_pair : relayed) {
    const double v = relayed_pair.first;  // lambdas below capture it (not a structured binding)
    const auto pair = relayed_pair.second;
    const int src = node_of(pair.first), dst = node_of(pair.second);
    // The cost of a path is its largest (load + v) / capacity. Two searches over compute nodes:
    // the least cost (minimax Dijkstra), then the fewest hops among paths of that cost (Dijkstra
    // on (hops, cost) over the hops that cost no more). One search on (cost, hops) does not find
    // the second: its labels do not keep their order when extended (a partial path of lower cost
    // and more hops beats one of fewer hops whose cost the last hop raises to the same bottleneck).
    const auto hop_cost = [&](const physical::Route& r) {
      double c = 0;
      for (int l : r) {
        const auto li = static_cast<std::size_t>(l);
        c = std::max(c, (load[li] + std::max(v, 1.0)) / t.links[li].capacity_GBps());
      }
      return c;
    };
    std::vector<int> via(n, -1);
    // Labels (primary, secondary); cost_first: (cost, hops), else (hops, cost) within `limit`.
    const auto search = [&](bool cost_first, double limit) {
      using Label = std::pair<double, double>;
      const Label unreached{std::numeric_limits<double>::infinity(), 0};
      std::vector<Label> best(n, unreached);
      std::vector<double> cost_at(n, 0.0);
      std::fill(via.begin(), via.end(), -1);
      std::vector<bool> done(n, false);
      using Entry = std::tuple<double, double, int>;  // label, node
      std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
      best[static_cast<std::size_t>(src)] = {0.0, 0.0};
      queue.emplace(0.0, 0.0, src);
      while (!queue.empty()) {
        const auto [first, second, u] = queue.top();
        queue.pop();
        const auto ui = static_cast<std::size_t>(u);
        if (done[ui]) continue;
        done[ui] = true;
        if (u == dst) return cost_at[ui];
        const double hops = cost_first ? second : first;
        for (int w : compute) {
          const auto wi = static_cast<std::size_t>(w);
          if (w == u || done[wi]) continue;
          const auto& r = routes(u, w);
          if (r.empty()) continue;
          const double hop = hop_cost(r);
          if (hop > limit) continue;
          const double cost = std::max(cost_at[ui], hop);
          const Label cand = cost_first ? Label{cost, hops + 1} : Label{hops + 1, cost};
          if (cand < best[wi]) {
            best[wi] = cand;
            cost_at[wi] = cost;
            via[wi] = u;
            queue.emplace(cand.first, cand.second, w);
          }
        }
      }
      return std::numeric_limits<double>::infinity();
    };
    const double least = search(true, std::numeric_limits<double>::infinity());
    if (least < std::numeric_limits<double>::infinity()) search(false, least);
    if (via[static_cast<std::size_t>(dst)] < 0)
      throw physical::TopologyError("no path through compute nodes joins " +
                                    t.nodes[static_cast<std::size_t>(src)].id + " to " +
                                    t.nodes[static_cast<std::size_t>(dst)].id);
    std::vector<int> hops_nodes;
    for (int w = dst; w != src; w = via[static_cast<std::size_t>(w)]) hops_nodes.push_back(w);
    hops_nodes.push_back(src);
    std::reverse(hops_nodes.begin(), hops_nodes.end());
    for (std::size_t i = 0; i + 1 < hops_nodes.size(); ++i)
      for (int l : routes(hops_nodes[i], hops_nodes[i + 1])) load[static_cast<std::size_t>(l)] += v;
    RelayPath path;
    path.from = pair.first;
    path.to = pair.second;
    for (std::size_t i = 1; i + 1 < hops_nodes.size(); ++i) {
      path.relays.push_back(out.nranks());
      path.nodes.push_back(hops_nodes[i]);
      out.rank_node.push_back(hops_nodes[i]);
    }
    out.add(std::move(path));
  }
  return out;
}

// `p` with every connection of a relayed pair replaced by its chain through the relay ranks.
// Throws when `p` connects two ranks that no route joins and `routing` has no relays for.
inline plan::Plan route_through_relays(const plan::Plan& p, const RelayRouting& routing,
                                       const physical::Reachability& reach) {
  const physical::PhysicalTopology& t = reach.topology();
  if (routing.empty()) return p;
  if (p.nranks != routing.base_ranks)
    throw_invalid_argument(-1, "plan ranks", std::to_string(routing.base_ranks),
                           std::to_string(p.nranks));
  plan::Plan out = p;
  const plan::Rank nranks = routing.nranks();
  out.nranks = nranks;
  out.active.resize(static_cast<std::size_t>(nranks), false);
  for (auto& ch : out.channels) ch.programs.resize(static_cast<std::size_t>(nranks));
  // Per relayed connection: the connection the receiver now reads (the chain's last hop).
  std::vector<std::uint32_t> last_hop(p.connections.size());
  std::vector<const RelayPath*> path_of(p.connections.size(), nullptr);
  for (std::uint32_t c = 0; c < p.connections.size(); ++c) {
    last_hop[c] = c;
    const auto& conn = p.connections[c];
    const RelayPath* path = routing.find(conn.from, conn.to);
    if (path == nullptr) {
      const int a = routing.rank_node[static_cast<std::size_t>(conn.from)];
      const int b = routing.rank_node[static_cast<std::size_t>(conn.to)];
      if (a != b && !reach.routable(a, b))
        throw physical::TopologyError(
            "plan " + p.algorithm + " connects ranks " + std::to_string(conn.from) + " (" +
            t.nodes[static_cast<std::size_t>(a)].id + ") and " + std::to_string(conn.to) + " (" +
            t.nodes[static_cast<std::size_t>(b)].id +
            "), which no route joins and no relay was planned for");
      continue;
    }
    path_of[c] = path;
    // The first hop keeps the connection's index, so the sender's ports stay as they are.
    out.connections[c].to = path->relays.front();
    plan::Rank prev = path->relays.front();
    for (std::size_t i = 1; i <= path->relays.size(); ++i) {
      const plan::Rank next = i < path->relays.size() ? path->relays[i] : conn.to;
      out.connections.push_back(plan::Connection{prev, next, conn.channel, 0});
      last_hop[c] = static_cast<std::uint32_t>(out.connections.size() - 1);
      prev = next;
    }
  }
  // Receivers read the last hop; each relay forwards the sender's messages in order.
  for (std::size_t chi = 0; chi < out.channels.size(); ++chi) {
    auto& ch = out.channels[chi];
    for (plan::Rank r = 0; r < p.nranks; ++r)
      for (const auto& s : ch.programs[static_cast<std::size_t>(r)].steps)
        for (std::uint32_t k = 0; k < s.recv_count; ++k) {
          auto& port = out.ports[s.recv_begin + k];
          port.connection = last_hop[port.connection];
        }
    for (plan::Rank r = 0; r < p.nranks; ++r)
      for (const auto& s : p.channels[chi].programs[static_cast<std::size_t>(r)].steps)
        for (std::uint32_t k = 0; k < s.send_count; ++k) {
          const std::uint32_t c = p.ports[s.send_begin + k].connection;
          const RelayPath* path = path_of[c];
          if (path == nullptr) continue;
          // Hop i's connection: c for the first, then the ones appended for c in order.
          std::uint32_t in = c;
          for (std::size_t i = 0; i < path->relays.size(); ++i) {
            const std::uint32_t hop_out =
                i + 1 == path->relays.size()
                    ? last_hop[c]
                    : last_hop[c] - static_cast<std::uint32_t>(path->relays.size() - 1 - i);
            plan::Step f;
            f.offset = s.offset;
            f.count = s.count;
            f.src = plan::Source::None;
            f.recv_begin = static_cast<std::uint32_t>(out.ports.size());
            out.ports.push_back(plan::Port{in, 0});
            f.recv_count = 1;
            f.send_begin = static_cast<std::uint32_t>(out.ports.size());
            out.ports.push_back(plan::Port{hop_out, 0});
            f.send_count = 1;
            ch.programs[static_cast<std::size_t>(path->relays[i])].steps.push_back(f);
            in = hop_out;
          }
        }
  }
  out.finalize();
  return out;
}

}  // namespace ccoll::algo
