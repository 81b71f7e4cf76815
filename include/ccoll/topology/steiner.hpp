// ccoll/topology/steiner.hpp: minimum-cost directed Steiner arborescence, exact when small,
// otherwise the best of three heuristics.
//
// With inactive workers, seed 001's reduce and broadcast trees are directed Steiner trees: they
// must span the active workers (terminals) and may pass through inactive ones (relays). Finding
// the cheapest is NP-hard; the packed-forest solver needs it as its pricing oracle. We use:
//   - exact: when there are at most `exact_limit` Steiner nodes, every subset S of them is tried
//     and Edmonds' algorithm (arborescence.hpp) gives the cheapest arborescence spanning exactly
//     terminals + S; the cheapest over all S is the optimum (costs are >= 0).
//   - heuristics otherwise, keeping the cheapest: (1) Edmonds over every reachable node, then
//     pruning relay leaves; (2) the shortest-path heuristic (Takahashi-Matsuyama, directed: grow
//     the tree from the root by the cheapest path to a terminal not yet in it) followed by Edmonds
//     on the nodes it picked, then pruning. Each is within a factor of the optimum that is poor in
//     the worst case (the directed problem has no constant-factor approximation), but on the
//     machine graphs ccoll plans for they find trees within a few percent; the tests compare the
//     packed forests they lead to with exact optima (forest_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <vector>

#include "ccoll/topology/arborescence.hpp"

namespace ccoll::topology {

struct SteinerOptions {
  int exact_limit = 6;  // enumerate relay subsets when there are at most this many Steiner nodes
};

namespace steiner_detail {

inline double tree_cost(const std::vector<ArcEdge>& edges, const std::vector<int>& chosen) {
  double c = 0;
  for (int i : chosen) c += edges[static_cast<std::size_t>(i)].cost;
  return c;
}

// Removes edges into non-terminal leaves until none is left.
inline std::vector<int> prune(int n, const std::vector<ArcEdge>& edges, std::vector<int> chosen,
                              const std::vector<bool>& terminal) {
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<int> outdeg(static_cast<std::size_t>(n), 0);
    for (int i : chosen)
      ++outdeg[static_cast<std::size_t>(edges[static_cast<std::size_t>(i)].from)];
    std::vector<int> kept;
    for (int i : chosen) {
      const int v = edges[static_cast<std::size_t>(i)].to;
      if (!terminal[static_cast<std::size_t>(v)] && outdeg[static_cast<std::size_t>(v)] == 0)
        changed = true;
      else
        kept.push_back(i);
    }
    chosen.swap(kept);
  }
  return chosen;
}

// Edmonds restricted to the nodes in `keep` (root included); returns indices into `edges`.
inline std::optional<std::vector<int>> induced_arborescence(int n,
                                                            const std::vector<ArcEdge>& edges,
                                                            int root,
                                                            const std::vector<bool>& keep) {
  std::vector<int> local(static_cast<std::size_t>(n), -1);
  int k = 0;
  for (int v = 0; v < n; ++v)
    if (keep[static_cast<std::size_t>(v)]) local[static_cast<std::size_t>(v)] = k++;
  std::vector<ArcEdge> sub;
  std::vector<int> orig;
  for (int i = 0; i < static_cast<int>(edges.size()); ++i) {
    const ArcEdge& e = edges[static_cast<std::size_t>(i)];
    const int a = local[static_cast<std::size_t>(e.from)],
              b = local[static_cast<std::size_t>(e.to)];
    if (a < 0 || b < 0) continue;
    sub.push_back(ArcEdge{a, b, e.cost});
    orig.push_back(i);
  }
  auto r = min_arborescence(k, sub, local[static_cast<std::size_t>(root)]);
  if (!r) return std::nullopt;
  for (int& i : *r) i = orig[static_cast<std::size_t>(i)];
  return r;
}

// Directed shortest-path heuristic: returns the nodes of the tree it grows (nullopt: a terminal
// is unreachable).
inline std::optional<std::vector<bool>> shortest_path_nodes(int n,
                                                            const std::vector<ArcEdge>& edges,
                                                            int root,
                                                            const std::vector<bool>& terminal) {
  const auto N = static_cast<std::size_t>(n);
  std::vector<std::vector<int>> out(N);
  for (int i = 0; i < static_cast<int>(edges.size()); ++i)
    out[static_cast<std::size_t>(edges[static_cast<std::size_t>(i)].from)].push_back(i);
  std::vector<bool> in_tree(N, false);
  in_tree[static_cast<std::size_t>(root)] = true;
  int missing = 0;
  for (int v = 0; v < n; ++v) missing += terminal[static_cast<std::size_t>(v)] && v != root ? 1 : 0;
  constexpr double inf = std::numeric_limits<double>::infinity();
  while (missing > 0) {
    std::vector<double> dist(N, inf);
    std::vector<int> via(N, -1);
    using Item = std::pair<double, int>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
    for (int v = 0; v < n; ++v)
      if (in_tree[static_cast<std::size_t>(v)])
        dist[static_cast<std::size_t>(v)] = 0, pq.push({0.0, v});
    int target = -1;
    while (!pq.empty()) {
      const auto [d, u] = pq.top();
      pq.pop();
      if (d > dist[static_cast<std::size_t>(u)]) continue;
      if (!in_tree[static_cast<std::size_t>(u)] && terminal[static_cast<std::size_t>(u)]) {
        target = u;
        break;
      }
      for (int i : out[static_cast<std::size_t>(u)]) {
        const ArcEdge& e = edges[static_cast<std::size_t>(i)];
        const double nd = d + e.cost;
        if (nd < dist[static_cast<std::size_t>(e.to)]) {
          dist[static_cast<std::size_t>(e.to)] = nd;
          via[static_cast<std::size_t>(e.to)] = i;
          pq.push({nd, e.to});
        }
      }
    }
    if (target < 0) return std::nullopt;
    for (int v = target; !in_tree[static_cast<std::size_t>(v)];) {
      in_tree[static_cast<std::size_t>(v)] = true;
      if (terminal[static_cast<std::size_t>(v)]) --missing;
      v = edges[static_cast<std::size_t>(via[static_cast<std::size_t>(v)])].from;
    }
  }
  return in_tree;
}

}  // namespace steiner_detail

// Cheapest out-arborescence rooted at `root` containing every node with terminal[v] (others are
// optional relays): indices into `edges`, or nullopt when a terminal is unreachable. Costs >= 0.
inline std::optional<std::vector<int>> steiner_arborescence(int n,
                                                            const std::vector<ArcEdge>& edges,
                                                            int root,
                                                            const std::vector<bool>& terminal,
                                                            const SteinerOptions& opt = {}) {
  using namespace steiner_detail;
  std::vector<int> steiner;
  for (int v = 0; v < n; ++v)
    if (!terminal[static_cast<std::size_t>(v)] && v != root) steiner.push_back(v);
  if (steiner.empty()) return min_arborescence(n, edges, root);
  std::optional<std::vector<int>> best;
  double best_cost = std::numeric_limits<double>::infinity();
  const auto consider = [&](std::optional<std::vector<int>> t) {
    if (!t) return;
    auto pruned = prune(n, edges, std::move(*t), terminal);
    const double c = tree_cost(edges, pruned);
    if (c < best_cost) best_cost = c, best = std::move(pruned);
  };
  std::vector<bool> keep(terminal);
  keep[static_cast<std::size_t>(root)] = true;
  if (static_cast<int>(steiner.size()) <= opt.exact_limit) {
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << steiner.size()); ++mask) {
      for (std::size_t i = 0; i < steiner.size(); ++i)
        keep[static_cast<std::size_t>(steiner[i])] = (mask >> i) & 1;
      consider(induced_arborescence(n, edges, root, keep));
    }
    return best;
  }
  // (1) span everything reachable, prune relay leaves.
  const auto reach_nodes = [&] {
    std::vector<bool> seen(static_cast<std::size_t>(n), false);
    std::vector<int> stack{root};
    seen[static_cast<std::size_t>(root)] = true;
    std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
    for (const auto& e : edges) out[static_cast<std::size_t>(e.from)].push_back(e.to);
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (int v : out[static_cast<std::size_t>(u)])
        if (!seen[static_cast<std::size_t>(v)])
          seen[static_cast<std::size_t>(v)] = true, stack.push_back(v);
    }
    return seen;
  }();
  consider(induced_arborescence(n, edges, root, reach_nodes));
  // (2) shortest-path heuristic, re-optimised by Edmonds on its nodes.
  if (auto nodes = shortest_path_nodes(n, edges, root, terminal))
    consider(induced_arborescence(n, edges, root, *nodes));
  // (3) terminals only (no relay), when that is possible.
  consider(induced_arborescence(n, edges, root, keep));
  return best;
}

}  // namespace ccoll::topology
