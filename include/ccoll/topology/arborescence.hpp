// ccoll/topology/arborescence.hpp: minimum-cost spanning arborescence (Chu-Liu / Edmonds).
//
// The pricing oracle of the packed-forest solver (packed_forest.hpp) when every node of the graph
// must be in the tree: with all workers active, the cheapest broadcast tree under the current
// link prices is a minimum out-arborescence rooted at the root, and the cheapest reduce tree is
// one in the reversed graph. Edmonds' algorithm is exact, O(V E) with recursive contraction of
// the cycles that the greedy choice of cheapest incoming edges forms.
#pragma once

#include <limits>
#include <optional>
#include <vector>

namespace ccoll::topology {

struct ArcEdge {
  int from = 0;
  int to = 0;
  double cost = 0;
};

namespace arborescence_detail {

// Returns indices into `edges` of a minimum out-arborescence rooted at `root` spanning nodes
// [0, n), or nullopt when some node is unreachable.
inline std::optional<std::vector<int>> solve(int n, const std::vector<ArcEdge>& edges, int root) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto N = static_cast<std::size_t>(n);
  std::vector<int> in_edge(N, -1);
  std::vector<double> in_cost(N, inf);
  for (int i = 0; i < static_cast<int>(edges.size()); ++i) {
    const ArcEdge& e = edges[static_cast<std::size_t>(i)];
    if (e.from == e.to || e.to == root) continue;
    if (e.cost < in_cost[static_cast<std::size_t>(e.to)])
      in_cost[static_cast<std::size_t>(e.to)] = e.cost, in_edge[static_cast<std::size_t>(e.to)] = i;
  }
  for (int v = 0; v < n; ++v)
    if (v != root && in_edge[static_cast<std::size_t>(v)] < 0) return std::nullopt;
  // Find the cycles of the chosen in-edges.
  std::vector<int> comp(N, -1), mark(N, -1);
  int ncomp = 0;
  bool has_cycle = false;
  for (int s = 0; s < n; ++s) {
    int v = s;
    while (v != root && mark[static_cast<std::size_t>(v)] == -1 &&
           comp[static_cast<std::size_t>(v)] == -1) {
      mark[static_cast<std::size_t>(v)] = s;
      v = edges[static_cast<std::size_t>(in_edge[static_cast<std::size_t>(v)])].from;
    }
    if (v != root && mark[static_cast<std::size_t>(v)] == s &&
        comp[static_cast<std::size_t>(v)] == -1) {
      has_cycle = true;
      for (int w = v;;) {
        comp[static_cast<std::size_t>(w)] = ncomp;
        w = edges[static_cast<std::size_t>(in_edge[static_cast<std::size_t>(w)])].from;
        if (w == v) break;
      }
      ++ncomp;
    }
  }
  if (!has_cycle) {
    std::vector<int> out;
    for (int v = 0; v < n; ++v)
      if (v != root) out.push_back(in_edge[static_cast<std::size_t>(v)]);
    return out;
  }
  std::vector<bool> in_cycle(N, false);
  for (int v = 0; v < n; ++v)
    in_cycle[static_cast<std::size_t>(v)] = comp[static_cast<std::size_t>(v)] >= 0;
  const int ncycles = ncomp;
  for (int v = 0; v < n; ++v)
    if (comp[static_cast<std::size_t>(v)] < 0) comp[static_cast<std::size_t>(v)] = ncomp++;
  // Contract: an edge entering a cycle node v costs its excess over v's chosen in-edge.
  std::vector<ArcEdge> next;
  std::vector<int> orig;
  for (int i = 0; i < static_cast<int>(edges.size()); ++i) {
    const ArcEdge& e = edges[static_cast<std::size_t>(i)];
    const int cu = comp[static_cast<std::size_t>(e.from)],
              cv = comp[static_cast<std::size_t>(e.to)];
    if (cu == cv || e.to == root) continue;
    const double c = in_cycle[static_cast<std::size_t>(e.to)]
                         ? e.cost - in_cost[static_cast<std::size_t>(e.to)]
                         : e.cost;
    next.push_back(ArcEdge{cu, cv, c});
    orig.push_back(i);
  }
  const auto sub = solve(ncomp, next, comp[static_cast<std::size_t>(root)]);
  if (!sub) return std::nullopt;
  std::vector<int> entry(static_cast<std::size_t>(ncycles), -1);
  std::vector<int> out;
  for (int j : *sub) {
    const int i = orig[static_cast<std::size_t>(j)];
    out.push_back(i);
    const int v = edges[static_cast<std::size_t>(i)].to;
    if (in_cycle[static_cast<std::size_t>(v)])
      entry[static_cast<std::size_t>(comp[static_cast<std::size_t>(v)])] = v;
  }
  for (int v = 0; v < n; ++v)
    if (in_cycle[static_cast<std::size_t>(v)] &&
        entry[static_cast<std::size_t>(comp[static_cast<std::size_t>(v)])] != v)
      out.push_back(in_edge[static_cast<std::size_t>(v)]);
  return out;
}

}  // namespace arborescence_detail

// Minimum-cost out-arborescence rooted at `root` over nodes [0, n): indices into `edges` (one
// entering edge per non-root node), or nullopt when a node cannot be reached from the root.
inline std::optional<std::vector<int>> min_arborescence(int n, const std::vector<ArcEdge>& edges,
                                                        int root) {
  if (n <= 0 || root < 0 || root >= n) return std::nullopt;
  return arborescence_detail::solve(n, edges, root);
}

}  // namespace ccoll::topology
