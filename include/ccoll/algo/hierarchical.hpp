// ccoll/algo/hierarchical.hpp: two-level baselines for clusters of machines, the schemes that
// [TopoSync] (Sec. VI-A) compares its forests with: a Blink-like scheme and NCCL 2.4's double
// binary tree across machines.
//
// Machines are the hosts of the active nodes (physical::Node::host; nodes without a host form one
// machine). Ranks are the active nodes in node order; neither scheme uses inactive GPUs as relays,
// which is the weakness [TopoSync] points out with partial active workers.
//
// Blink-like. [TopoSync] (Sec. II-D) describes Blink as: "packs spanning trees in the intra-machine
// topology for parameter reduce, synchronizes locally-reduced parameters through ring Allreduce
// among machines, and then broadcasts updated parameters within each machine". Here:
//   - each machine's first active GPU is its root; spanning in-trees over the machine's active
//     GPUs rooted there are packed by multiplicative weights with Edmonds' algorithm as the oracle
//     (pack_single_root), Blink's packing of trees from one root;
//   - the ring all-reduce of the roots is written as trees: the part of the data that ring position
//     j owns is reduced along j+1 -> j+2 -> ... -> j (reduce-scatter) and sent on along
//     j -> j+1 -> ... -> j-1 (all-gather);
//   - machine j's part therefore has one global reduce tree (every machine's intra tree into its
//     root, then the chain of roots) and one broadcast tree (the all-gather chain, then the intra
//     trees reversed). Machines whose packings differ (partial active workers) are combined by
//     cutting the data at every machine's cumulative tree fractions.
// Built with the phased schedule this is Blink's intra reduce, inter all-reduce and intra
// broadcast, pipelined chunk by chunk. What it leaves out: Blink's own code generation, and its
// use of several roots per machine on some topologies.
//
// NCCL 2.4 across machines ([TopoSync] baseline (iv), its ref. [20]): inside a machine a chain of
// its active GPUs ending at the first one (the machine's head); across machines NCCL's double
// binary tree over the heads (plan/double_binary_tree.hpp); each tree carries half of the data.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/algo/registered.hpp"
#include "ccoll/forest/to_plan.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/solve/arborescence.hpp"

namespace ccoll::algo {

// One in-tree of a single-root packing: parent[i] is the position (in the node list given to
// pack_single_root) that position i sends to; -1 at the root.
struct RootedTree {
  std::vector<int> parent;
  double weight_GBps = 0;
};

struct SingleRootOptions {
  int iterations = 400;   // oracle calls
  double epsilon = 0.05;  // price growth per unit of capacity used
  int max_trees = 8;      // keep this many trees (each becomes plan channels); 0: all found
};

// Spanning in-trees over `nodes` (compute nodes; tree edges travel the routes of physical.hpp)
// into nodes[root], with weights that fit every link's capacity and approach the largest total.
// Multiplicative weights (Garg and Koenemann): route one tree at a time on the tree that is
// cheapest under link prices (Edmonds), raise the prices of the links it loads, and finally scale
// the accumulated weights down to the capacities. The scaling makes the result feasible whatever
// the iteration count; 400 iterations put it within a few percent of the optimum on machines of
// up to 8 GPUs (tests/topology_test.cpp compares with hand-computed optima). The loop visits many
// trees with small weights (210 on a DGX-1), and every tree costs plan channels, so the
// `max_trees` heaviest are kept and the same loop, with the oracle limited to them, sets their
// weights again.
inline std::vector<RootedTree> pack_single_root(const physical::PhysicalTopology& t,
                                                const physical::RouteTable& routes,
                                                const std::vector<int>& nodes, int root,
                                                const SingleRootOptions& opt = {}) {
  const int n = static_cast<int>(nodes.size());
  if (root < 0 || root >= n) throw physical::TopologyError("pack_single_root: root out of range");
  if (n == 1) return {RootedTree{{-1}, std::numeric_limits<double>::infinity()}};
  struct Edge {
    int from = 0, to = 0;  // positions; data flows from -> to
    const physical::Route* route = nullptr;
  };
  std::vector<Edge> edges;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) {
        const physical::Route& r =
            routes(nodes[static_cast<std::size_t>(a)], nodes[static_cast<std::size_t>(b)]);
        if (!r.empty()) edges.push_back(Edge{a, b, &r});
      }
  // The links each tree loads (a route never repeats a link), and one multiplicative-weights run
  // whose oracle is `cheapest`; it returns the trees found with feasible weights.
  using ParentPositions = std::vector<int>;
  const auto loads_of = [&](const ParentPositions& parent) {
    std::map<std::size_t, double> m;
    for (int i = 0; i < n; ++i)
      if (parent[static_cast<std::size_t>(i)] >= 0)
        for (int l : routes(nodes[static_cast<std::size_t>(i)],
                            nodes[static_cast<std::size_t>(parent[static_cast<std::size_t>(i)])]))
          m[physical::PhysicalTopology::idx(l)] += 1;
    return std::vector<std::pair<std::size_t, double>>(m.begin(), m.end());
  };
  const auto run = [&](const std::function<ParentPositions(const std::vector<double>&)>& cheapest) {
    std::vector<double> price(t.links.size());
    for (std::size_t l = 0; l < t.links.size(); ++l) price[l] = 1.0 / t.links[l].capacity_GBps();
    std::map<ParentPositions, double> found;
    std::vector<double> total(t.links.size(), 0.0);
    for (int it = 0; it < opt.iterations; ++it) {
      const ParentPositions parent = cheapest(price);
      const auto load = loads_of(parent);
      double w = std::numeric_limits<double>::infinity();
      for (const auto& [l, k] : load) w = std::min(w, t.links[l].capacity_GBps() / k);
      found[parent] += w;
      for (const auto& [l, k] : load) {
        total[l] += w * k;
        price[l] *= 1.0 + opt.epsilon * w * k / t.links[l].capacity_GBps();
      }
    }
    double over = 0;
    for (std::size_t l = 0; l < total.size(); ++l)
      over = std::max(over, total[l] / t.links[l].capacity_GBps());
    std::vector<RootedTree> out;
    out.reserve(found.size());
    for (const auto& [parent, w] : found) out.push_back(RootedTree{parent, w / over});
    std::sort(out.begin(), out.end(), [](const RootedTree& a, const RootedTree& b) {
      return a.weight_GBps > b.weight_GBps;
    });
    return out;
  };
  std::vector<solve::ArcEdge> arcs(edges.size());
  auto out = run([&](const std::vector<double>& price) {
    // An in-tree into the root is an out-arborescence of the reversed graph.
    for (std::size_t e = 0; e < edges.size(); ++e) {
      double c = 0;
      for (int l : *edges[e].route) c += price[physical::PhysicalTopology::idx(l)];
      arcs[e] = solve::ArcEdge{edges[e].to, edges[e].from, c};
    }
    const auto tree = solve::min_arborescence(n, arcs, root);
    if (!tree)
      throw physical::TopologyError(
          "pack_single_root: \"" +
          t.nodes[physical::PhysicalTopology::idx(nodes[static_cast<std::size_t>(root)])].id +
          "\" cannot be reached from every node of its machine");
    ParentPositions parent(static_cast<std::size_t>(n), -1);
    for (int e : *tree)
      parent[static_cast<std::size_t>(edges[static_cast<std::size_t>(e)].from)] =
          edges[static_cast<std::size_t>(e)].to;
    return parent;
  });
  if (opt.max_trees > 0 && static_cast<int>(out.size()) > opt.max_trees) {
    out.resize(static_cast<std::size_t>(opt.max_trees));
    std::vector<std::vector<std::pair<std::size_t, double>>> loads;
    loads.reserve(out.size());
    for (const auto& tr : out) loads.push_back(loads_of(tr.parent));
    const auto kept = out;
    out = run([&](const std::vector<double>& price) {
      std::size_t best = 0;
      double best_cost = std::numeric_limits<double>::infinity();
      for (std::size_t k = 0; k < kept.size(); ++k) {
        double c = 0;
        for (const auto& [l, u] : loads[k]) c += u * price[l];
        if (c < best_cost) best_cost = c, best = k;
      }
      return kept[best].parent;
    });
  }
  return out;
}

// Trees over ranks (the active nodes in node order), ready for plan::build_trees.
struct HierarchicalTrees {
  std::vector<int> rank_node;                  // rank -> node
  std::vector<std::vector<int>> machines;      // ranks of each machine; the first is its root/head
  std::vector<plan::TreeSpec> trees;           // shares sum to 1
  std::vector<std::vector<RootedTree>> intra;  // Blink: each machine's packing (positions)
};

namespace hierarchical_detail {

inline HierarchicalTrees machines_of(const physical::PhysicalTopology& t) {
  t.validate();
  HierarchicalTrees h;
  h.rank_node = t.active_nodes();
  std::vector<std::string> hosts;
  for (std::size_t r = 0; r < h.rank_node.size(); ++r) {
    const std::string& host = t.nodes[physical::PhysicalTopology::idx(h.rank_node[r])].host;
    auto it = std::find(hosts.begin(), hosts.end(), host);
    if (it == hosts.end()) {
      hosts.push_back(host);
      h.machines.emplace_back();
      it = hosts.end() - 1;
    }
    h.machines[static_cast<std::size_t>(it - hosts.begin())].push_back(static_cast<int>(r));
  }
  return h;
}

}  // namespace hierarchical_detail

inline HierarchicalTrees blink_trees(const physical::PhysicalTopology& t,
                                     const SingleRootOptions& opt = {}) {
  auto h = hierarchical_detail::machines_of(t);
  const auto routes = physical::all_routes(t);
  const auto nranks = h.rank_node.size();
  const auto M = h.machines.size();
  // Each machine's packing, as cumulative fractions of its total weight.
  std::vector<std::vector<double>> cuts(M);
  std::vector<double> points{0.0, 1.0};
  for (std::size_t m = 0; m < M; ++m) {
    std::vector<int> nodes;
    for (int r : h.machines[m]) nodes.push_back(h.rank_node[static_cast<std::size_t>(r)]);
    h.intra.push_back(pack_single_root(t, routes, nodes, 0, opt));
    double sum = 0;
    for (const auto& tr : h.intra.back()) sum += std::isfinite(tr.weight_GBps) ? tr.weight_GBps : 1;
    double acc = 0;
    for (const auto& tr : h.intra.back()) {
      acc += (std::isfinite(tr.weight_GBps) ? tr.weight_GBps : 1) / sum;
      cuts[m].push_back(acc);
      points.push_back(std::min(1.0, acc));
    }
    cuts[m].back() = 1.0;
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end(),
                           [](double a, double b) { return std::abs(a - b) < 1e-12; }),
               points.end());
  for (std::size_t s = 0; s + 1 < points.size(); ++s) {
    const double lo = points[s], hi = points[s + 1], mid = (lo + hi) / 2;
    // The intra tree each machine uses for data in [lo, hi).
    std::vector<int> parent_in_machine(nranks, -1);
    for (std::size_t m = 0; m < M; ++m) {
      const auto k = static_cast<std::size_t>(
          std::upper_bound(cuts[m].begin(), cuts[m].end(), mid) - cuts[m].begin());
      const auto& tree = h.intra[m][std::min(k, h.intra[m].size() - 1)];
      for (std::size_t i = 0; i < tree.parent.size(); ++i)
        if (tree.parent[i] >= 0)
          parent_in_machine[static_cast<std::size_t>(h.machines[m][i])] =
              h.machines[m][static_cast<std::size_t>(tree.parent[i])];
    }
    for (std::size_t j = 0; j < M; ++j) {
      plan::TreeSpec spec;
      spec.root = h.machines[j].front();
      spec.reduce_parent.assign(parent_in_machine.begin(), parent_in_machine.end());
      spec.broadcast_parent = spec.reduce_parent;
      for (std::size_t k = 0; k < M; ++k) {
        if (k == j) continue;
        const auto root_k = static_cast<std::size_t>(h.machines[k].front());
        spec.reduce_parent[root_k] = h.machines[(k + 1) % M].front();         // reduce-scatter
        spec.broadcast_parent[root_k] = h.machines[(k + M - 1) % M].front();  // all-gather
      }
      spec.share = (hi - lo) / static_cast<double>(M);
      h.trees.push_back(std::move(spec));
    }
  }
  return h;
}

inline HierarchicalTrees nccl_hierarchical_trees(const physical::PhysicalTopology& t) {
  auto h = hierarchical_detail::machines_of(t);
  const auto nranks = h.rank_node.size();
  std::vector<plan::Rank> chain(nranks, -1);
  for (const auto& m : h.machines)
    for (std::size_t i = 1; i < m.size(); ++i) chain[static_cast<std::size_t>(m[i])] = m[i - 1];
  const auto M = static_cast<plan::Rank>(h.machines.size());
  if (M == 1) {
    h.trees.push_back(plan::TreeSpec{0, chain, {}, 1.0});
    return h;
  }
  const auto [p1, p2] = plan::double_binary_tree_parents(M);
  for (const auto* p : {&p1, &p2}) {
    plan::TreeSpec spec;
    spec.reduce_parent = chain;
    for (plan::Rank k = 0; k < M; ++k) {
      const auto head = static_cast<std::size_t>(h.machines[static_cast<std::size_t>(k)].front());
      const plan::Rank pk = (*p)[static_cast<std::size_t>(k)];
      if (pk < 0)
        spec.root = static_cast<plan::Rank>(head);
      else
        spec.reduce_parent[head] = h.machines[static_cast<std::size_t>(pk)].front();
    }
    spec.share = 0.5;
    h.trees.push_back(std::move(spec));
  }
  return h;
}

}  // namespace ccoll::algo

namespace ccoll::algo::hierarchical_detail {

template <HierarchicalTrees (*Make)(const physical::PhysicalTopology&)>
Registered registered(const AlgorithmRequest& req, const char* name) {
  auto h = std::make_shared<const HierarchicalTrees>(Make(*req.topology));
  std::vector<bool> active(h->rank_node.size(), true);
  const int split = req.split;
  const std::string n = name;
  auto build = [h, active, split, n](const plan::PlanRequest& r) {
    plan::Plan p = forest::tree_set_plan(r, h->trees, active, split);
    p.algorithm = n + (r.overlap ? "-overlap" : "");
    return p;
  };
  return Registered(n, build, static_cast<int>(h->rank_node.size()), h->rank_node, h);
}

inline HierarchicalTrees blink_default(const physical::PhysicalTopology& t) {
  return blink_trees(t);
}

}  // namespace ccoll::algo::hierarchical_detail

namespace ccoll::algo {

// The entries in the algorithm table (algo/registry.hpp).
inline Algorithm blink_algorithm() {
  return Algorithm{.name = "blink",
                   .description =
                       "Blink-like: trees packed inside each machine, a ring across machines "
                       "([TopoSync] Sec. VI-A baseline)",
                   .needs_topology = true,
                   .default_overlap = false,
                   .make = [](const AlgorithmRequest& req) {
                     return hierarchical_detail::registered<&hierarchical_detail::blink_default>(
                         req, "blink");
                   }};
}

inline Algorithm hierarchical_double_tree_algorithm() {
  return Algorithm{.name = "hdbtree",
                   .description =
                       "NCCL 2.4 across machines: a chain inside each machine, the double binary "
                       "tree over the machines' heads",
                   .needs_topology = true,
                   .default_overlap = false,
                   .make = [](const AlgorithmRequest& req) {
                     return hierarchical_detail::registered<&nccl_hierarchical_trees>(req,
                                                                                      "hdbtree");
                   }};
}

}  // namespace ccoll::algo
