// ccoll/forest/hierarchical.hpp: a packed forest for a large cluster of identical machines,
// composed from a forest over the machines and a forest inside one machine.
//
// Why. The flat LP (problem.hpp) has an oracle edge and a route per ordered pair of compute
// nodes: 10^6 of them on 1,024 GPUs, where every Edmonds run of the oracle touches them all. On a
// cluster whose machines meet only through a network of switches (NICs to a ToR, no GPU linked
// straight to another machine), the machines can be planned apart, as Blink's multi-server
// trees do ([TopoSync] Sec. II-D describes them; [TopoSync] Sec. IV's LP is solved twice, on
// small graphs):
//   1. Machine graph: every machine with active workers becomes one active node, linked to the
//      switches its boundary links reach. Such a link's capacity is the smaller of the boundary
//      links' and the machine's own cut between its active workers and the outside (max-flow on
//      the machine's nodes): a machine whose GPUs reach the NIC through one PCIe link of 12.5
//      GB/s has a 12.5 GB/s uplink however wide the NIC. The packed forest of that graph (flat,
//      reduced by the rotation of the machines, symmetry.hpp) gives machine-level pairs
//      (tau_R, tau_B) of weight alpha, sum A.
//   2. Machine forest: the packed forest of machine 0's own nodes and links gives pairs
//      (t_R, t_B) rooted at local workers g with weights beta, sum B; machine m uses its image
//      under the rotation.
//   3. Composition: a machine pair and a machine-local pair of root g make one global pair rooted
//      at g's image in the machine pair's root machine: every machine runs t_R / t_B rooted at its
//      own image of g, and every machine-level edge m -> m' becomes an edge between the two
//      machines' local trees (a rail): from the root of m's reduce tree to a leaf of m''s (data
//      reduced in m joins m''s tree where nothing else arrives yet), from a leaf of m's broadcast
//      tree to the root of m''s. Leaves take turns, so that a machine with many children in the
//      machine-level tree sends through several GPUs, and the GPU a rail lands on is one the
//      local tree does not already load (on a PCIe machine the rails share the GPUs' links with
//      the local trees). Weights couple the two lists by the north-west corner rule of a
//      transport problem: both orders are walked together and each global pair takes the overlap
//      of the two weight intervals (machine-local weights scaled to sum A), so that every machine
//      pair keeps its weight alpha, every machine-local pair a share beta / B, and there are at
//      most (machine pairs + machine-local pairs - 1) global pairs (each is a plan channel).
//      A GPU's links are only evenly loaded when every machine roots every machine-local pair
//      in its share (the rails load the local root's links where the tree does not), so a
//      balanced coupling is tried too, the machine-local list repeated per root machine (up to
//      machines x machine-local pairs global pairs, within ForestOptions::balanced_pairs), and
//      kept where step 4 leaves it more bandwidth.
//   4. Feasibility: the loads of the composed forest are summed over the real routes of its
//      edges and the weights scaled down by the largest congestion above 1 (a machine-local link
//      that also carries rail traffic, a rail GPU's PCIe link), so the result is feasible on the
//      full graph whatever the decomposition missed.
// Bound. Every tree rooted outside machine m enters m's active set (broadcast) and leaves it
// (reduce), so with in(m), out(m) the machine's cuts above and M' the machines with active
// workers, (M' - 1) sum chi <= sum_m in(m) and <= sum_m out(m) (phased, overlapped). Concurrent,
// one capacity pool carries both: a machine's cuts carry the reduce trees of the other roots and
// the broadcast trees of its own, so sum chi <= min_m in(m), out(m), and every tree crosses
// M' - 1 machine boundaries reducing and M' - 1 broadcasting, so 2 (M' - 1) sum chi <= sum_m
// in(m), out(m) (docs/topology.md derives both). upper_bound_GBps is this cut bound of the
// NIC layer; it ignores the links inside machines and between switches, so it may be loose when
// those bind.
// Scope. Machines must be identical (a rotation, symmetry.hpp), joined only through nodes that
// belong to no machine, and each machine's workers joined inside it; otherwise the flat planner
// answers. The overlapped schedule is planned phased (J trees only), which problem (8) allows.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ccoll/forest/symmetry.hpp"
#include "ccoll/forest/types.hpp"
#include "ccoll/physical/graph.hpp"

namespace ccoll::forest {

namespace hier_detail {

// Dinic's max-flow on a small graph (a machine's nodes plus two terminals).
class MaxFlow {
 public:
  explicit MaxFlow(int n) : head_(static_cast<std::size_t>(n), -1) {}
  void add(int a, int b, double cap) {
    edges_.push_back({b, head_[static_cast<std::size_t>(a)], cap});
    head_[static_cast<std::size_t>(a)] = static_cast<int>(edges_.size()) - 1;
    edges_.push_back({a, head_[static_cast<std::size_t>(b)], 0.0});
    head_[static_cast<std::size_t>(b)] = static_cast<int>(edges_.size()) - 1;
  }
  double run(int s, int t) {
    double flow = 0;
    const auto n = head_.size();
    for (;;) {
      level_.assign(n, -1);
      std::vector<int> queue{s};
      level_[static_cast<std::size_t>(s)] = 0;
      for (std::size_t q = 0; q < queue.size(); ++q)
        for (int e = head_[static_cast<std::size_t>(queue[q])]; e >= 0;
             e = edges_[static_cast<std::size_t>(e)].next) {
          const Edge& E = edges_[static_cast<std::size_t>(e)];
          if (E.cap > 1e-12 && level_[static_cast<std::size_t>(E.to)] < 0) {
            level_[static_cast<std::size_t>(E.to)] = level_[static_cast<std::size_t>(queue[q])] + 1;
            queue.push_back(E.to);
          }
        }
      if (level_[static_cast<std::size_t>(t)] < 0) return flow;
      it_ = head_;
      for (double f; (f = push(s, t, std::numeric_limits<double>::infinity())) > 1e-12;) flow += f;
    }
  }

 private:
  struct Edge {
    int to, next;
    double cap;
  };
  double push(int u, int t, double f) {
    if (u == t) return f;
    for (int& e = it_[static_cast<std::size_t>(u)]; e >= 0;
         e = edges_[static_cast<std::size_t>(e)].next) {
      Edge& E = edges_[static_cast<std::size_t>(e)];
      if (E.cap <= 1e-12 ||
          level_[static_cast<std::size_t>(E.to)] != level_[static_cast<std::size_t>(u)] + 1)
        continue;
      const double d = push(E.to, t, std::min(f, E.cap));
      if (d > 0) {
        E.cap -= d;
        edges_[static_cast<std::size_t>(e ^ 1)].cap += d;
        return d;
      }
    }
    return 0;
  }
  std::vector<int> head_, level_, it_;
  std::vector<Edge> edges_;
};

}  // namespace hier_detail

// The machines of a cluster: nodes grouped by host, in order of first appearance.
struct Machines {
  std::vector<std::vector<int>> nodes;  // per machine, node indices in node order
  std::vector<int> of_node;             // node -> machine, -1 outside every machine
  std::vector<double> in_cut, out_cut;  // GB/s between the machine's active nodes and the rest
  std::vector<char> has_active;
  int active_machines = 0;
};

inline Machines find_machines(const physical::PhysicalTopology& topo) {
  using physical::PhysicalTopology;
  Machines m;
  m.of_node.assign(topo.nodes.size(), -1);
  std::unordered_map<std::string, int> index;
  for (int v = 0; v < topo.node_count(); ++v) {
    const std::string& h = topo.nodes[PhysicalTopology::idx(v)].host;
    if (h.empty()) continue;
    const auto [it, fresh] = index.emplace(h, static_cast<int>(m.nodes.size()));
    if (fresh) m.nodes.emplace_back();
    m.nodes[static_cast<std::size_t>(it->second)].push_back(v);
    m.of_node[PhysicalTopology::idx(v)] = it->second;
  }
  const auto M = m.nodes.size();
  m.in_cut.assign(M, 0.0);
  m.out_cut.assign(M, 0.0);
  m.has_active.assign(M, 0);
  std::vector<int> local(topo.nodes.size(), -1);
  for (std::size_t k = 0; k < M; ++k) {
    const auto& ns = m.nodes[k];
    for (std::size_t i = 0; i < ns.size(); ++i)
      local[PhysicalTopology::idx(ns[i])] = static_cast<int>(i);
    const int n = static_cast<int>(ns.size()), outside = n, active = n + 1;
    hier_detail::MaxFlow in(n + 2), out(n + 2);
    for (const auto& l : topo.links) {
      const bool fi = m.of_node[PhysicalTopology::idx(l.from)] == static_cast<int>(k);
      const bool ti = m.of_node[PhysicalTopology::idx(l.to)] == static_cast<int>(k);
      if (!fi && !ti) continue;
      const int a = fi ? local[PhysicalTopology::idx(l.from)] : outside;
      const int b = ti ? local[PhysicalTopology::idx(l.to)] : outside;
      in.add(a, b, l.capacity_GBps());
      out.add(a, b, l.capacity_GBps());
    }
    for (int v : ns)
      if (topo.is_active(v)) {
        m.has_active[k] = 1;
        in.add(local[PhysicalTopology::idx(v)], active, std::numeric_limits<double>::infinity());
        out.add(active, local[PhysicalTopology::idx(v)], std::numeric_limits<double>::infinity());
      }
    if (m.has_active[k]) {
      ++m.active_machines;
      m.in_cut[k] = in.run(outside, active);
      m.out_cut[k] = out.run(active, outside);
    }
    for (int v : ns) local[PhysicalTopology::idx(v)] = -1;
  }
  return m;
}

// The cut bound of the header comment (+infinity with fewer than two machines holding workers).
inline double machine_cut_bound(const Machines& m, ForestSchedule s) {
  if (m.active_machines < 2) return std::numeric_limits<double>::infinity();
  double in = 0, out = 0, lo = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < m.nodes.size(); ++k)
    if (m.has_active[k]) {
      in += m.in_cut[k];
      out += m.out_cut[k];
      lo = std::min({lo, m.in_cut[k], m.out_cut[k]});
    }
  const double summed = std::min(in, out) / (m.active_machines - 1);
  return s == ForestSchedule::concurrent ? std::min(lo, summed / 2) : summed;
}

using FlatSolver =
    std::function<PackedForest(const physical::PhysicalTopology&, const ForestOptions&)>;

// The hierarchical forest of the header comment; `flat` solves the two small problems (and the
// whole graph when the hierarchy does not apply: machines that differ, machines linked to each
// other directly, compute nodes outside every machine, fewer than two machines with workers).
inline PackedForest solve_packed_forest_hierarchical(const physical::PhysicalTopology& topo,
                                                     const ForestOptions& opt,
                                                     const FlatSolver& flat) {
  using physical::PhysicalTopology;
  const auto t0 = std::chrono::steady_clock::now();
  ForestOptions sub = opt;
  sub.hierarchical_above = std::numeric_limits<int>::max();
  const auto fallback = [&] { return flat(topo, sub); };
  const MachineRotation rot = find_machine_rotation(topo);
  if (!rot) return fallback();
  Machines ms = find_machines(topo);
  if (ms.active_machines < 2 || ms.active_machines != static_cast<int>(ms.nodes.size()))
    return fallback();
  for (int v = 0; v < topo.node_count(); ++v)
    if (topo.is_compute(v) && ms.of_node[PhysicalTopology::idx(v)] < 0) return fallback();
  for (const auto& l : topo.links) {
    const int a = ms.of_node[PhysicalTopology::idx(l.from)];
    const int b = ms.of_node[PhysicalTopology::idx(l.to)];
    if (a >= 0 && b >= 0 && a != b) return fallback();
  }
  const int M = static_cast<int>(ms.nodes.size());
  // The overlapped schedule's phased forests are feasible for its problem (8) and as good on
  // full-duplex graphs (docs/topology.md): both levels are solved phased.
  sub.schedule = opt.schedule == ForestSchedule::overlapped ? ForestSchedule::phased : opt.schedule;

  // The two levels planned in `levels` and composed; the weights are not yet scaled to the
  // congestion their loads in opt.schedule reach on the whole graph.
  struct Composed {
    PackedForest top, inner;
    std::vector<ForestPair> pairs;
    double A = 0, congestion = 0;
    double carried() const { return congestion > 1 ? A / congestion : A; }
  };
  // The two graphs the levels are planned on, whatever the schedule. 1. The machine graph.
  physical::PhysicalTopology mg;
  mg.name = topo.name + "-machines";
  std::vector<int> mg_node(topo.nodes.size(), -1), machine_of_mg;
  for (int k = 0; k < M; ++k) {
    const int first = ms.nodes[static_cast<std::size_t>(k)].front();
    const std::string& host = topo.nodes[PhysicalTopology::idx(first)].host;
    machine_of_mg.push_back(k);
    mg.add_node(host + ".workers", physical::NodeKind::gpu, host);
  }
  for (int v = 0; v < topo.node_count(); ++v)
    if (ms.of_node[PhysicalTopology::idx(v)] < 0) {
      mg_node[PhysicalTopology::idx(v)] = mg.node_count();
      machine_of_mg.push_back(-1);
      mg.add_node(topo.nodes[PhysicalTopology::idx(v)].id,
                  topo.nodes[PhysicalTopology::idx(v)].kind);
    }
  // Boundary capacity per (machine node, switch, direction), then capped by the machine's cut.
  std::map<std::pair<int, int>, double> boundary;
  for (const auto& l : topo.links) {
    const int a = ms.of_node[PhysicalTopology::idx(l.from)];
    const int b = ms.of_node[PhysicalTopology::idx(l.to)];
    const int fa = a >= 0 ? a : mg_node[PhysicalTopology::idx(l.from)];
    const int fb = b >= 0 ? b : mg_node[PhysicalTopology::idx(l.to)];
    if (a >= 0 && b >= 0) continue;  // inside a machine
    if (a < 0 && b < 0) {
      mg.add_link(fa, fb, l.bandwidth_GBps, l.count, l.latency_us, l.type, false);
      continue;
    }
    boundary[{fa, fb}] += l.capacity_GBps();
  }
  for (const auto& [ends, cap] : boundary) {
    const int k = ends.first < M ? ends.first : ends.second;
    const double cut = ends.first < M ? ms.out_cut[static_cast<std::size_t>(k)]
                                      : ms.in_cut[static_cast<std::size_t>(k)];
    mg.add_link(ends.first, ends.second, std::min(cap, cut), 1, 1.0, "machine", false);
  }
  {
    std::vector<int> act;
    act.reserve(static_cast<std::size_t>(M));
    for (int k = 0; k < M; ++k) act.push_back(k);
    mg.set_active(act);
  }
  // 2. Machine 0's graph.
  physical::PhysicalTopology one;
  one.name = topo.name + "-machine0";
  const auto& m0 = ms.nodes[0];
  std::vector<int> local(topo.nodes.size(), -1);
  std::vector<int> m0_active;
  for (int v : m0) {
    local[PhysicalTopology::idx(v)] = one.node_count();
    if (topo.is_active(v)) m0_active.push_back(one.node_count());
    one.add_node(topo.nodes[PhysicalTopology::idx(v)].id, topo.nodes[PhysicalTopology::idx(v)].kind,
                 topo.nodes[PhysicalTopology::idx(v)].host);
  }
  for (const auto& l : topo.links)
    if (local[PhysicalTopology::idx(l.from)] >= 0 && local[PhysicalTopology::idx(l.to)] >= 0)
      one.add_link(local[PhysicalTopology::idx(l.from)], local[PhysicalTopology::idx(l.to)],
                   l.bandwidth_GBps, l.count, l.latency_us, l.type, false);
  one.set_active(m0_active);
  // A machine whose workers meet only outside it (a NIC per GPU, no switch inside) has no forest
  // of its own: its graph would fail validate() as disconnected, so the flat planner answers.
  if (!m0_active.empty()) {
    const auto fwd = one.reach(m0_active.front(), false), bwd = one.reach(m0_active.front(), true);
    for (int a : m0_active)
      if (!fwd[PhysicalTopology::idx(a)] || !bwd[PhysicalTopology::idx(a)]) return fallback();
  }
  const auto compose_levels = [&](ForestSchedule levels) {
    ForestOptions level_opt = sub;
    level_opt.schedule = levels;
    // 1. The machine graph's forest.
    PackedForest top = flat(mg, level_opt);

    // 2. Machine 0's own forest.
    PackedForest inner = flat(one, level_opt);

    // 3. Composition. Machine-local pairs in machine 0's node indices, shares summing to 1.
    struct Local {
      int root;
      std::vector<TreeEdge> red, bc;
      double share;
      std::vector<int> red_leaves, bc_leaves;  // where rails from other machines land / leave
    };
    std::vector<Local> locals;
    {
      double B = 0;
      for (const auto& p : inner.pairs) B += std::isfinite(p.weight_GBps) ? p.weight_GBps : 1.0;
      const auto back = [&](const std::vector<TreeEdge>& es) {
        std::vector<TreeEdge> o;
        o.reserve(es.size());
        for (auto [a, b] : es)
          o.emplace_back(m0[PhysicalTopology::idx(a)], m0[PhysicalTopology::idx(b)]);
        return o;
      };
      // Where rails attach: the local tree's active leaves (nodes no tree edge leaves, broadcast,
      // or enters, reduce), then its other active nodes but the root, then the root: a machine with
      // more children than its tree has leaves spreads them over its other GPUs.
      const auto leaves = [&](const std::vector<TreeEdge>& es, int root, bool reduce) {
        std::vector<char> inner_node(m0.size(), 0);
        for (auto [a, b] : es) inner_node[PhysicalTopology::idx(reduce ? b : a)] = 1;
        std::vector<int> o;
        for (int pass = 0; pass < 2; ++pass)
          for (std::size_t v = 0; v < m0.size(); ++v)
            if (static_cast<bool>(inner_node[v]) == (pass == 1) && topo.is_active(m0[v]) &&
                static_cast<int>(v) != root)
              o.push_back(m0[v]);
        o.push_back(m0[PhysicalTopology::idx(root)]);
        return o;
      };
      for (const auto& p : inner.pairs)
        locals.push_back(
            Local{m0[PhysicalTopology::idx(p.root)], back(p.reduce_edges), back(p.broadcast_edges),
                  (std::isfinite(p.weight_GBps) ? p.weight_GBps : 1.0) / B,
                  leaves(p.reduce_edges, p.root, true), leaves(p.broadcast_edges, p.root, false)});
    }
    double A = 0;
    for (const auto& p : top.pairs) A += p.weight_GBps;
    // The machine-local forest can carry at most B per machine; the coupling below assumes A <= B
    // and step 4 scales down whatever exceeds a capacity.
    const auto img = [&](int v, int machine) { return rot.node_image(v, machine); };
    const double tiny = 1e-12 * std::max(1.0, A);
    // The global pair of machine pair tp and machine-local pair lp, of weight w.
    const auto compose = [&](const ForestPair& tp, const Local& lp, double w) {
      ForestPair g;
      const int rm = machine_of_mg[static_cast<std::size_t>(tp.root)];
      g.root = img(lp.root, rm);
      for (int k = 0; k < M; ++k) {
        for (auto [a, b] : lp.red) g.reduce_edges.emplace_back(img(a, k), img(b, k));
        for (auto [a, b] : lp.bc) g.broadcast_edges.emplace_back(img(a, k), img(b, k));
      }
      // A rail leaves a machine at its local tree's root (reduce) or at a leaf (broadcast) and
      // lands at a leaf (reduce) or the root (broadcast); a machine's rails to its children in
      // the machine-level tree take the attachment points in turn.
      std::vector<int> rails(static_cast<std::size_t>(M), 0);
      const auto attach = [&](const std::vector<int>& at, int machine) {
        const std::size_t usable = at.size() > 1 ? at.size() - 1 : 1;
        return at[static_cast<std::size_t>(rails[static_cast<std::size_t>(machine)]++) % usable];
      };
      for (auto [a, b] : tp.reduce_edges) {
        const int ma = machine_of_mg[static_cast<std::size_t>(a)];
        const int mb = machine_of_mg[static_cast<std::size_t>(b)];
        g.reduce_edges.emplace_back(img(lp.root, ma), img(attach(lp.red_leaves, mb), mb));
      }
      std::fill(rails.begin(), rails.end(), 0);
      for (auto [a, b] : tp.broadcast_edges) {
        const int ma = machine_of_mg[static_cast<std::size_t>(a)];
        const int mb = machine_of_mg[static_cast<std::size_t>(b)];
        g.broadcast_edges.emplace_back(img(attach(lp.bc_leaves, ma), ma), img(lp.root, mb));
      }
      g.weight_GBps = w;
      return g;
    };
    // North-west corner rule over two weighted lists (index, weight) of equal sums.
    using Weighted = std::vector<std::pair<std::size_t, double>>;
    struct Link {
      std::size_t top, local;
      double w;
    };
    const auto couple = [&](const Weighted& tops, const Weighted& lows) {
      std::vector<Link> pairs;
      std::size_t i = 0, j = 0;
      double ra = tops.empty() ? 0 : tops[0].second;
      double rb = lows.empty() ? 0 : lows[0].second;
      while (i < tops.size() && j < lows.size()) {
        const double w = std::min(ra, rb);
        if (w > tiny) pairs.push_back(Link{tops[i].first, lows[j].first, w});
        ra -= w;
        rb -= w;
        if (ra <= tiny && ++i < tops.size()) ra = tops[i].second;
        if (rb <= tiny && ++j < lows.size()) rb = lows[j].second;
      }
      return pairs;
    };
    // Plain coupling: the fewest global pairs. Within a machine, a GPU a tree does not cross
    // (the local root, in its own machine) is the one whose links the rails load instead, so the
    // links of a GPU are only evenly loaded when every machine roots every local pair in its
    // share. The balanced coupling does that: the machine pairs grouped by root machine, and the
    // machine-local list repeated for each root machine, scaled to that machine's weight (at most
    // machines x local pairs more global pairs). With a relay per machine the plain coupling
    // leaves the GPUs' own links unevenly loaded (89% of the exact optimum on 3 x 4 PCIe, phased).
    Weighted tops, lows;
    for (std::size_t k = 0; k < top.pairs.size(); ++k)
      tops.emplace_back(k, top.pairs[k].weight_GBps);
    for (std::size_t k = 0; k < locals.size(); ++k) lows.emplace_back(k, locals[k].share * A);
    const std::vector<Link> plain = couple(tops, lows);
    const auto root_machine = [&](std::size_t k) {
      return machine_of_mg[static_cast<std::size_t>(top.pairs[k].root)];
    };
    std::stable_sort(tops.begin(), tops.end(), [&](const auto& a, const auto& b) {
      return root_machine(a.first) < root_machine(b.first);
    });
    lows.clear();
    for (std::size_t k = 0; k < tops.size();) {
      double Am = 0;
      std::size_t e = k;
      for (; e < tops.size() && root_machine(tops[e].first) == root_machine(tops[k].first); ++e)
        Am += tops[e].second;
      for (std::size_t l = 0; l < locals.size(); ++l) lows.emplace_back(l, locals[l].share * Am);
      k = e;
    }
    const std::vector<Link> balanced = couple(tops, lows);
    const auto build = [&](const std::vector<Link>& links) {
      std::vector<ForestPair> pairs;
      pairs.reserve(links.size());
      for (const Link& l : links) pairs.push_back(compose(top.pairs[l.top], locals[l.local], l.w));
      return pairs;
    };

    // 4. Loads over the real routes, per pool.
    const int pools = opt.schedule == ForestSchedule::concurrent ? 1 : 2;
    const physical::Adjacency adj(topo);
    const auto congestion_of = [&](const std::vector<ForestPair>& pairs) {
      std::unordered_map<std::uint64_t, double> use[2];
      const auto key = [](int a, int b) {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
               static_cast<std::uint32_t>(b);
      };
      for (const auto& p : pairs) {
        for (auto [a, b] : p.reduce_edges) use[0][key(a, b)] += p.weight_GBps;
        for (auto [a, b] : p.broadcast_edges) use[pools - 1][key(a, b)] += p.weight_GBps;
      }
      std::vector<double> load(topo.links.size() * static_cast<std::size_t>(pools), 0.0);
      std::map<int, std::vector<std::pair<int, int>>> by_source;  // source -> (target, pool)
      for (int pool = 0; pool < pools; ++pool)
        for (const auto& [k, w] : use[pool])
          by_source[static_cast<int>(k >> 32)].emplace_back(static_cast<int>(k & 0xffffffffu),
                                                            pool);
      for (const auto& [src, targets] : by_source) {
        const auto routes = physical::routes_from(topo, adj, src);
        for (auto [dst, pool] : targets) {
          const auto& r = routes[PhysicalTopology::idx(dst)];
          if (r.empty())
            throw physical::TopologyError("hierarchical forest: no route from \"" +
                                          topo.nodes[PhysicalTopology::idx(src)].id + "\" to \"" +
                                          topo.nodes[PhysicalTopology::idx(dst)].id + "\"");
          const double w = use[pool].at(key(src, dst));
          for (int li : r)
            load[static_cast<std::size_t>(pool) * topo.links.size() + PhysicalTopology::idx(li)] +=
                w;
        }
      }
      double c = 0;
      for (std::size_t k = 0; k < load.size(); ++k)
        c = std::max(c, load[k] / topo.links[k % topo.links.size()].capacity_GBps());
      return c;
    };
    // Every pair is a plan channel, and a plan's size grows with channels x ranks: the balanced
    // coupling is tried while its pairs stay within balanced_pairs (or twice the plain coupling's)
    // and is kept where it carries more (by 0.1%).
    std::vector<ForestPair> plain_pairs = build(plain), balanced_pairs;
    const double c_plain = congestion_of(plain_pairs);
    double c_balanced = c_plain;
    const std::size_t cap =
        std::max(static_cast<std::size_t>(std::max(0, opt.balanced_pairs)), 2 * plain.size());
    const bool try_balanced =
        balanced.size() > plain.size() && balanced.size() <= cap &&
        (opt.max_pairs <= 0 || balanced.size() <= static_cast<std::size_t>(opt.max_pairs));
    if (try_balanced) balanced_pairs = build(balanced), c_balanced = congestion_of(balanced_pairs);
    const bool use_balanced =
        try_balanced && std::max(1.0, c_balanced) * 1.001 < std::max(1.0, c_plain);
    const double congestion = use_balanced ? c_balanced : c_plain;
    return Composed{std::move(top), std::move(inner),
                    use_balanced ? std::move(balanced_pairs) : std::move(plain_pairs), A,
                    congestion};
  };
  Composed best = compose_levels(sub.schedule);
  // Concurrent: the machine-local forest of the concurrent levels is sized without the rails
  // that share its GPUs' links, and the final scaling pays for that. The composition of the
  // phased levels, scaled to the single pool, keeps at least half of the phased total (a link
  // carries its reduce and its broadcast load at once), which on PCIe machines is more: 83%
  // instead of 67% of the exact optimum on 3 x 4 machines with a relay each, 98% instead of 72%
  // of the cut bound on 128 x 8 (docs/results/forest-planning-2026-11-25.md). Both are tried.
  if (opt.schedule == ForestSchedule::concurrent) {
    Composed phased = compose_levels(ForestSchedule::phased);
    if (phased.carried() > best.carried() * 1.001) best = std::move(phased);
  }
  const PackedForest& top = best.top;
  const PackedForest& inner = best.inner;
  PackedForest out;
  out.schedule = opt.schedule;
  out.method = opt.method;
  out.hierarchical = true;
  out.active = topo.active_nodes();
  out.rounds = top.rounds + inner.rounds;
  out.columns = top.columns + inner.columns;
  out.oracle_calls = top.oracle_calls + inner.oracle_calls;
  out.refits = top.refits + inner.refits;
  out.pivots = top.pivots + inner.pivots;
  out.symmetry_order = top.symmetry_order;
  out.pairs = std::move(best.pairs);
  const double congestion = best.congestion;
  const double A = best.A;
  out.optimum_found_GBps = A;
  const double scale = congestion > 1 ? 1 / congestion : 1.0;
  for (auto& p : out.pairs) {
    p.weight_GBps *= scale;
    out.total_GBps += p.weight_GBps;
  }
  out.optimum_found_GBps = out.total_GBps;
  out.mwu_GBps = top.mwu_GBps;
  const double bound = machine_cut_bound(ms, opt.schedule);
  if (std::isfinite(bound)) {
    if (out.total_GBps > bound * (1 + 1e-6))
      throw std::logic_error("hierarchical forest: " + std::to_string(out.total_GBps) +
                             " GB/s exceeds the machines' cut bound " + std::to_string(bound));
    out.upper_bound_GBps = bound;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace ccoll::forest
