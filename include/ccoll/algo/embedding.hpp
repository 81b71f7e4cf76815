// ccoll/algo/embedding.hpp: rings and double binary trees embedded in a physical graph.
//
// Rings: Hamiltonian cycles over the active nodes chosen greedily by bottleneck bandwidth. Each
// ring is used in both directions (two plan channels, as NCCL does), so it consumes its bandwidth
// on both directions of every link on its routes; the next ring is searched on what is left. On a
// DGX-1V this finds three rings on disjoint NVLink lanes (six channels at 25 GB/s per direction),
// the NVLink rings NCCL builds there. Rings whose bottleneck falls below `min_fraction` of the
// first one's are not kept: plan/ring.hpp gives every channel an equal share, so a slow ring would
// set the pace of all.
//
// Double binary tree with detours ([C-Cube] Sec. IV-A): NCCL's two trees over the active nodes in
// node order; a tree edge whose route is slower than a two-hop path through another compute node
// m (say GPU2 -> GPU4 on a DGX-1, which has no NVLink and would cross PCIe and the CPUs) is
// replaced by child -> relay -> parent, where the relay is an extra inactive plan rank that runs on
// m and forwards ([C-Cube]'s separate forwarding kernel on GPU0). The relay costs a step (latency)
// and shares m's links, which the simulator charges; it never adds to the data. Widths count the
// links both trees already use (they run at the same time), so a relay whose links carry another
// tree edge loses to one whose links are free.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/all_gather.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/reduce_scatter.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/rooted.hpp"
#include "ccoll/plan/tree.hpp"

namespace ccoll::algo {

struct RingOptions {
  int max_rings = 8;           // distinct rings (each gives two channels)
  double min_fraction = 0.5;   // keep rings at least this fraction of the first one's bottleneck
  long search_limit = 200000;  // DFS expansions per ring search before falling back
  // Above this many active nodes no cycle is searched: one ring in node order (the presets number
  // GPUs machine by machine, so it crosses each machine boundary once), or in walk order when
  // node order has pairs no route joins.
  int max_search_ranks = 32;
};

struct EmbeddedRings {
  std::vector<int> nodes;               // rank -> node (the active nodes, in node order)
  std::vector<std::vector<int>> rings;  // each a cyclic order of ranks
  std::vector<double> bandwidth_GBps;   // bottleneck of each ring (per direction)
};

namespace embedding_detail {

// Uses of each link by a cyclic order of nodes (and by its reverse when both_directions).
inline std::vector<int> ring_link_uses(const physical::PhysicalTopology& t,
                                       const physical::RouteTable& routes,
                                       const std::vector<int>& order) {
  std::vector<int> uses(t.links.size(), 0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int a = order[i], b = order[(i + 1) % order.size()];
    for (int li : routes(a, b)) ++uses[physical::PhysicalTopology::idx(li)];
    for (int li : routes(b, a)) ++uses[physical::PhysicalTopology::idx(li)];
  }
  return uses;
}

inline double ring_bottleneck(const std::vector<double>& residual, const std::vector<int>& uses) {
  double w = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < uses.size(); ++i)
    if (uses[i] > 0) w = std::min(w, residual[i] / uses[i]);
  return std::isfinite(w) ? w : 0.0;
}

// The active nodes (as indices into `nodes`) in the order a depth-first walk over compute nodes
// first meets them, widest direct link first, then the compute nodes a switch reaches: consecutive
// ones are neighbours of the walk's tree, so a ring in this order crosses every edge of that tree
// at most twice per direction once its gaps are relayed (algo/relay_routing.hpp). The ring of last
// resort when no Hamiltonian cycle of routes exists. Linear in the graph on GPU-only graphs.
inline std::vector<int> walk_order(const physical::PhysicalTopology& t,
                                   const std::vector<int>& nodes) {
  const physical::Adjacency adj(t);
  std::vector<int> position(t.nodes.size(), -1);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    position[physical::PhysicalTopology::idx(nodes[i])] = static_cast<int>(i);
  // Compute nodes one route away from u: over a direct link, or through non-compute nodes.
  const auto neighbours = [&](int u, const std::vector<bool>& seen) {
    std::vector<std::pair<double, int>> direct;  // (-capacity, node)
    std::vector<int> switched;
    std::vector<bool> visited(t.nodes.size(), false);
    std::vector<int> stack;
    for (int li : adj.out[physical::PhysicalTopology::idx(u)]) {
      const auto& l = t.links[physical::PhysicalTopology::idx(li)];
      if (t.is_compute(l.to))
        direct.emplace_back(-l.capacity_GBps(), l.to);
      else if (!visited[physical::PhysicalTopology::idx(l.to)])
        visited[physical::PhysicalTopology::idx(l.to)] = true, stack.push_back(l.to);
    }
    while (!stack.empty()) {
      const int w = stack.back();
      stack.pop_back();
      for (int li : adj.out[physical::PhysicalTopology::idx(w)]) {
        const int v = t.links[physical::PhysicalTopology::idx(li)].to;
        if (visited[physical::PhysicalTopology::idx(v)]) continue;
        visited[physical::PhysicalTopology::idx(v)] = true;
        if (t.is_compute(v))
          switched.push_back(v);
        else
          stack.push_back(v);
      }
    }
    std::sort(direct.begin(), direct.end());
    std::sort(switched.begin(), switched.end());
    std::vector<int> out;
    for (const auto& [negc, v] : direct)
      if (!seen[physical::PhysicalTopology::idx(v)]) out.push_back(v);
    for (int v : switched)
      if (v != u && !seen[physical::PhysicalTopology::idx(v)]) out.push_back(v);
    return out;
  };
  std::vector<bool> seen(t.nodes.size(), false);
  std::vector<int> order;
  std::vector<int> stack{nodes.front()};
  while (!stack.empty()) {
    const int u = stack.back();
    stack.pop_back();
    if (seen[physical::PhysicalTopology::idx(u)]) continue;
    seen[physical::PhysicalTopology::idx(u)] = true;
    if (const int p = position[physical::PhysicalTopology::idx(u)]; p >= 0) order.push_back(p);
    const auto next = neighbours(u, seen);
    for (auto it = next.rbegin(); it != next.rend(); ++it) stack.push_back(*it);  // first on top
  }
  for (std::size_t i = 0; i < nodes.size(); ++i)  // unreachable ones: relay planning names them
    if (!seen[physical::PhysicalTopology::idx(nodes[i])]) order.push_back(static_cast<int>(i));
  return order;
}

}  // namespace embedding_detail

inline EmbeddedRings embed_rings(const physical::PhysicalTopology& t, const RingOptions& opt = {}) {
  using namespace embedding_detail;
  t.validate();
  EmbeddedRings out;
  out.nodes = t.active_nodes();
  const int n = static_cast<int>(out.nodes.size());
  if (n <= 2) {
    std::vector<int> r(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) r[static_cast<std::size_t>(i)] = i;
    out.rings.push_back(r);
    out.bandwidth_GBps.push_back(
        n == 2
            ? physical::route_capacity_GBps(t, physical::all_routes(t)(out.nodes[0], out.nodes[1]))
            : 0);
    return out;
  }
  if (n > opt.max_search_ranks) {
    std::vector<int> ring(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) ring[static_cast<std::size_t>(i)] = i;
    const physical::Reachability reach(t);
    double w = std::numeric_limits<double>::infinity();
    for (int i = 0; i < n && w > 0; ++i) {
      const int a = out.nodes[static_cast<std::size_t>(i)];
      const int b = out.nodes[static_cast<std::size_t>((i + 1) % n)];
      w = reach.routable(a, b) ? std::min(w, physical::route_capacity_GBps(
                                                 t, physical::route(t, reach.adjacency(), a, b)))
                               : 0.0;
    }
    if (!(w > 0)) ring = walk_order(t, out.nodes);
    out.rings.push_back(std::move(ring));
    out.bandwidth_GBps.push_back(w > 0 ? w : 0.0);
    return out;
  }
  const auto routes = physical::all_routes(t);
  std::vector<double> residual(t.links.size());
  for (std::size_t i = 0; i < t.links.size(); ++i) residual[i] = t.links[i].capacity_GBps();
  const auto edge_width = [&](int a, int b) {
    const auto& r =
        routes(out.nodes[static_cast<std::size_t>(a)], out.nodes[static_cast<std::size_t>(b)]);
    const auto& rb =
        routes(out.nodes[static_cast<std::size_t>(b)], out.nodes[static_cast<std::size_t>(a)]);
    if (r.empty() || rb.empty()) return 0.0;
    double w = std::numeric_limits<double>::infinity();
    for (int li : r) w = std::min(w, residual[physical::PhysicalTopology::idx(li)]);
    for (int li : rb) w = std::min(w, residual[physical::PhysicalTopology::idx(li)]);
    return w;
  };
  // Hamiltonian cycle using only edges of width >= threshold (DFS, bounded).
  const auto find_cycle = [&](double threshold, std::vector<int>& cycle) {
    std::vector<bool> used(static_cast<std::size_t>(n), false);
    cycle.assign(1, 0);
    used[0] = true;
    long budget = opt.search_limit;
    std::function<bool()> dfs = [&]() -> bool {
      if (--budget < 0) return false;
      const int u = cycle.back();
      if (static_cast<int>(cycle.size()) == n) return edge_width(u, 0) >= threshold;
      std::vector<std::pair<double, int>> cand;
      for (int v = 1; v < n; ++v)
        if (!used[static_cast<std::size_t>(v)]) {
          const double w = edge_width(u, v);
          if (w >= threshold) cand.emplace_back(-w, v);
        }
      std::sort(cand.begin(), cand.end());
      for (auto [negw, v] : cand) {
        used[static_cast<std::size_t>(v)] = true;
        cycle.push_back(v);
        if (dfs()) return true;
        cycle.pop_back();
        used[static_cast<std::size_t>(v)] = false;
      }
      return false;
    };
    return dfs();
  };
  for (int k = 0; k < opt.max_rings; ++k) {
    // Candidate thresholds: the distinct edge widths, widest first.
    std::vector<double> widths;
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        if (const double w = edge_width(a, b); w > 1e-9) widths.push_back(w);
    std::sort(widths.begin(), widths.end(), std::greater<>());
    widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
    std::vector<int> best;
    for (double th : widths) {
      std::vector<int> cyc;
      if (find_cycle(th, cyc)) {
        best = cyc;
        break;
      }
    }
    // No Hamiltonian cycle of routes: one ring in walk order, its gaps relayed through GPUs.
    const bool relayed = best.empty();
    if (relayed) {
      if (k > 0) break;
      best = walk_order(t, out.nodes);
    }
    std::vector<int> order;
    order.reserve(best.size());
    for (int r : best) order.push_back(out.nodes[static_cast<std::size_t>(r)]);
    const auto uses = ring_link_uses(t, routes, order);
    const double w = relayed ? 0.0 : ring_bottleneck(residual, uses);
    if (k > 0 && (!(w > 1e-9) || w < opt.min_fraction * out.bandwidth_GBps.front())) break;
    for (std::size_t i = 0; i < uses.size(); ++i) residual[i] -= w * uses[i];
    out.rings.push_back(best);
    out.bandwidth_GBps.push_back(w);
    if (relayed) break;
  }
  // Equal channel shares: repeat each ring round(w / w_min) times so every channel carries about
  // w_min (a 50 GB/s ring on doubled NVLinks becomes two 25 GB/s channels).
  const double wmin = *std::min_element(out.bandwidth_GBps.begin(), out.bandwidth_GBps.end());
  EmbeddedRings rep;
  rep.nodes = out.nodes;
  for (std::size_t i = 0; i < out.rings.size(); ++i) {
    const auto k =
        wmin > 0 ? std::max<long>(1, std::lround(out.bandwidth_GBps[i] / wmin)) : long{1};
    for (long j = 0; j < k; ++j) {
      rep.rings.push_back(out.rings[i]);
      rep.bandwidth_GBps.push_back(out.bandwidth_GBps[i] / static_cast<double>(k));
    }
  }
  return rep;
}

// Plan of the embedded rings, each in both directions (2 channels per ring); ranks as out.nodes;
// req.collective's ring form.
// At least req.nchannels channels: the rings' channels repeated in turn when it asks for more.
inline plan::Plan ring_plan(const EmbeddedRings& e, plan::PlanRequest req) {
  req.nranks = static_cast<plan::Rank>(e.nodes.size());
  std::vector<std::vector<plan::Rank>> orders;
  for (const auto& r : e.rings) {
    std::vector<plan::Rank> fwd(r.begin(), r.end());
    orders.push_back(fwd);
    if (r.size() > 2) {
      std::reverse(fwd.begin(), fwd.end());
      orders.push_back(fwd);
    }
  }
  for (std::size_t i = 0; orders.size() < req.nchannels; ++i) orders.push_back(orders[i]);
  // The other collectives' ring forms on the same rings: reduce-scatter and all-gather around
  // them, broadcast and reduce as chains along them from the root (plan/rooted.hpp).
  switch (req.collective) {
    case plan::Collective::reduce_scatter:
      return plan::build_ring_reduce_scatter_on(req, orders);
    case plan::Collective::all_gather:
      return plan::build_ring_all_gather_on(req, orders);
    case plan::Collective::broadcast:
      return plan::build_chain_broadcast_on(req, orders);
    case plan::Collective::reduce:
      return plan::build_chain_reduce_on(req, orders);
    case plan::Collective::allreduce:
      break;
  }
  return plan::build_ring(req, orders);
}

struct Detour {
  int tree = 0;        // 0 or 1
  int child = 0;       // rank (data flows child -> relay -> parent in the reduce)
  int parent = 0;      // rank
  int relay_rank = 0;  // the extra inactive rank
  int relay_node = 0;  // the GPU it runs on
};

struct DetourTrees {
  std::vector<int> rank_node;  // rank -> node; ranks >= nactive are detour relays
  int nactive = 0;
  std::vector<plan::TreeSpec> trees;  // two trees, half of the elements each
  std::vector<Detour> detours;
};

// NCCL's double binary tree over the active nodes, with detours where a two-hop path through
// another compute node is wider than the direct route, or where no route joins a tree edge's
// ends (a GPU-only graph). `order` lists the ranks (indices of the active nodes) in the order of
// the tree's positions, so that NCCL's trees, which join positions 2^k apart, follow an embedded
// ring (NCCL builds its trees on the ring's order too); empty: node order. Edges that no single
// relay can bridge are left to relay_routing.hpp's multi-hop chains.
inline DetourTrees double_binary_tree_with_detours(const physical::PhysicalTopology& t,
                                                   const std::vector<int>& order = {},
                                                   int max_search_ranks = 32) {
  t.validate();
  DetourTrees out;
  const auto act = t.active_nodes();
  out.rank_node = act;
  out.nactive = static_cast<int>(act.size());
  std::vector<int> rank_at(act.size());  // position -> rank
  for (std::size_t i = 0; i < act.size(); ++i) rank_at[i] = static_cast<int>(i);
  if (!order.empty()) {
    if (order.size() != act.size())
      throw physical::TopologyError("double_binary_tree_with_detours: the order has " +
                                    std::to_string(order.size()) + " ranks for " +
                                    std::to_string(act.size()) + " active nodes");
    rank_at = order;
  }
  const auto [p1, p2] = plan::double_binary_tree_parents(static_cast<plan::Rank>(act.size()));
  // One tree over the ranks from NCCL's tree over the positions.
  const auto tree_at = [&](const std::vector<plan::Rank>& parents) {
    plan::TreeSpec spec;
    spec.share = 0.5;
    spec.reduce_parent.assign(act.size(), -1);
    for (std::size_t c = 0; c < parents.size(); ++c) {
      const int p = parents[c];
      if (p < 0)
        spec.root = rank_at[c];
      else
        spec.reduce_parent[static_cast<std::size_t>(rank_at[c])] =
            rank_at[static_cast<std::size_t>(p)];
    }
    return spec;
  };
  // Large graphs: the trees on the order as they are, edges without routes left to the relay
  // planner (the search below compares every compute node as a relay for every edge).
  if (act.size() > static_cast<std::size_t>(max_search_ranks)) {
    out.trees = {tree_at(p1), tree_at(p2)};
    return out;
  }
  const auto routes = physical::all_routes(t);
  // physical::Link loads of both trees (they run at the same time): `up` in the reduce direction,
  // `down` in the broadcast direction. An option's width is its narrowest link's capacity divided
  // by the trees that would then share it, so a relay whose NVLinks another tree edge already uses
  // (a detour through GPU1 onto GPU1 -> GPU3, which carries GPU1's own edge) loses to a free one.
  std::vector<double> up(t.links.size(), 0.0), down(t.links.size(), 0.0);
  const auto add = [&](std::vector<double>& load, const physical::Route& r) {
    for (int l : r) load[physical::PhysicalTopology::idx(l)] += 1;
  };
  const auto width = [&](const std::vector<const physical::Route*>& ups,
                         const std::vector<const physical::Route*>& downs) {
    std::map<int, double> u, d;
    for (const physical::Route* r : ups)
      for (int l : *r) u[l] += 1;
    for (const physical::Route* r : downs)
      for (int l : *r) d[l] += 1;
    double w = std::numeric_limits<double>::infinity();
    for (const auto& [l, k] : u)
      w = std::min(w, t.links[physical::PhysicalTopology::idx(l)].capacity_GBps() /
                          (up[physical::PhysicalTopology::idx(l)] + k));
    for (const auto& [l, k] : d)
      w = std::min(w, t.links[physical::PhysicalTopology::idx(l)].capacity_GBps() /
                          (down[physical::PhysicalTopology::idx(l)] + k));
    return w;
  };
  const auto direct_link = [&](int cn, int pn) {
    return routes(cn, pn).size() == 1 && routes(pn, cn).size() == 1;
  };
  const auto routed = [&](int a, int b) { return !routes(a, b).empty() && !routes(b, a).empty(); };
  const auto node_at = [&](int position) {
    return act[static_cast<std::size_t>(rank_at[static_cast<std::size_t>(position)])];
  };
  for (const auto* parents : {&p1, &p2})
    for (std::size_t c = 0; c < parents->size(); ++c) {
      const int p = (*parents)[c];
      if (p < 0) continue;
      const int cn = node_at(static_cast<int>(c)), pn = node_at(p);
      if (!direct_link(cn, pn)) continue;
      add(up, routes(cn, pn));
      add(down, routes(pn, cn));
    }
  std::vector<int> relay_load(t.nodes.size(), 0);
  int tree_index = 0;
  for (const auto* parents : {&p1, &p2}) {
    plan::TreeSpec spec = tree_at(*parents);
    std::vector<std::pair<int, int>> replace;  // (child rank, relay rank)
    for (std::size_t c = 0; c < parents->size(); ++c) {
      const int p = (*parents)[c];
      if (p < 0) continue;
      const int cr = rank_at[c], pr = rank_at[static_cast<std::size_t>(p)];
      const int cn = act[static_cast<std::size_t>(cr)], pn = act[static_cast<std::size_t>(pr)];
      if (direct_link(cn, pn)) continue;
      // Both directions matter (reduce up, broadcast down). An edge without a route has width 0.
      const double direct = routed(cn, pn) ? width({&routes(cn, pn)}, {&routes(pn, cn)}) : 0.0;
      int best = -1;
      double best_w = direct;
      for (int m : t.compute_nodes()) {
        if (m == cn || m == pn || !routed(cn, m) || !routed(m, pn)) continue;
        const double w = width({&routes(cn, m), &routes(m, pn)}, {&routes(pn, m), &routes(m, cn)});
        if (w > best_w * (1 + 1e-9) || (best >= 0 && w >= best_w * (1 - 1e-9) &&
                                        relay_load[physical::PhysicalTopology::idx(m)] <
                                            relay_load[physical::PhysicalTopology::idx(best)]))
          best = m, best_w = w;
      }
      if (best < 0) {
        add(up, routes(cn, pn));
        add(down, routes(pn, cn));
        continue;
      }
      for (const physical::Route* r : {&routes(cn, best), &routes(best, pn)}) add(up, *r);
      for (const physical::Route* r : {&routes(pn, best), &routes(best, cn)}) add(down, *r);
      ++relay_load[physical::PhysicalTopology::idx(best)];
      const int relay_rank = static_cast<int>(out.rank_node.size());
      out.rank_node.push_back(best);
      out.detours.push_back(Detour{tree_index, cr, pr, relay_rank, best});
      replace.emplace_back(cr, relay_rank);
    }
    out.trees.push_back(std::move(spec));
    for (auto [c, r] : replace) {
      auto& s = out.trees.back();
      const int p = s.reduce_parent[static_cast<std::size_t>(c)];
      s.reduce_parent[static_cast<std::size_t>(c)] = r;
      if (s.reduce_parent.size() <= static_cast<std::size_t>(r))
        s.reduce_parent.resize(static_cast<std::size_t>(r) + 1, -1);
      s.reduce_parent[static_cast<std::size_t>(r)] = p;
    }
    ++tree_index;
  }
  for (auto& s : out.trees) s.reduce_parent.resize(out.rank_node.size(), -1);
  return out;
}

inline plan::Plan detour_tree_plan(const DetourTrees& d, plan::PlanRequest req) {
  req.nranks = static_cast<plan::Rank>(d.rank_node.size());
  std::vector<bool> active(d.rank_node.size(), false);
  for (int r = 0; r < d.nactive; ++r) active[static_cast<std::size_t>(r)] = true;
  auto plan = plan::build_trees(req, d.trees, active);
  plan.algorithm = req.overlap ? "dbtree-detour-overlap" : "dbtree-detour";
  return plan;
}

}  // namespace ccoll::algo
