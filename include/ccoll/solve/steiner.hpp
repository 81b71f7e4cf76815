// ccoll/solve/steiner.hpp: minimum-cost directed Steiner arborescence, exact when there are
// few relays, otherwise the cheapest of a few fast heuristics.
//
// With inactive workers, [TopoSync]'s reduce and broadcast trees are directed Steiner trees: they
// must span the active workers (terminals) and may pass through inactive ones (relays). Finding
// the cheapest is NP-hard (and has no constant-factor approximation in directed graphs); the
// packed-forest solvers need it as their pricing oracle, called thousands of times per plan by the
// multiplicative-weights packer, so every heuristic here is a handful of Edmonds runs
// (arborescence.hpp) on node subsets:
//   - exact: when there are at most `exact_limit` relays, every subset S of them is tried and
//     Edmonds gives the cheapest arborescence spanning exactly terminals + S; the cheapest over
//     all S is the optimum (costs are >= 0). 2^relays Edmonds runs: the exact reference only.
//   - heuristics otherwise, keeping the cheapest:
//     (1) Edmonds over every node reachable from the root, then drop relay leaves, then Edmonds
//         again over the nodes left (the re-run may drop further relays; repeated to a fixed
//         point). Spanning all relays first lets the tree pick any relay that shortens a path.
//     (2) terminals only (no relay), when that is possible.
//     (3) optionally (shortest_paths), the directed shortest-path heuristic (grow the tree from the
//         root by the cheapest path to a missing terminal), re-optimised by Edmonds on its nodes.
//         One Dijkstra per terminal: worth it on small graphs only.
//     On the machine graphs ccoll plans for these find trees within a few percent of the optimum;
//     forest_test.cpp compares them and the forests they lead to with exact optima.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "ccoll/solve/arborescence.hpp"

namespace ccoll::solve {

struct SteinerOptions {
  int exact_limit = 6;         // enumerate relay subsets when there are at most this many relays
  bool shortest_paths = true;  // heuristic (3); skipped above shortest_paths_max_nodes
  int shortest_paths_max_nodes = 24;
};

class SteinerSolver {
 public:
  // Cheapest out-arborescence rooted at `root` containing every node with terminal[v] (the others
  // are optional relays, never leaves): fills `out` with edge indices and returns true, or returns
  // false when a terminal is unreachable. Costs must be >= 0. `exact` (may be null) is set to
  // whether the result is certainly optimal.
  bool solve(int n, const std::vector<ArcEdge>& edges, int root, const std::vector<char>& terminal,
             const SteinerOptions& opt, std::vector<int>& out, bool* exact = nullptr) {
    const auto N = static_cast<std::size_t>(n);
    relays_.clear();
    for (int v = 0; v < n; ++v)
      if (!terminal[static_cast<std::size_t>(v)] && v != root) relays_.push_back(v);
    if (exact) *exact = true;
    if (relays_.empty()) return arb_.solve(n, edges, root, out);
    best_cost_ = std::numeric_limits<double>::infinity();
    out.clear();
    keep_.assign(terminal.begin(), terminal.end());
    keep_[static_cast<std::size_t>(root)] = 1;
    if (static_cast<int>(relays_.size()) <= opt.exact_limit) {
      for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << relays_.size()); ++mask) {
        for (std::size_t i = 0; i < relays_.size(); ++i)
          keep_[static_cast<std::size_t>(relays_[i])] = static_cast<char>((mask >> i) & 1);
        if (arb_.solve(n, edges, root, tree_, &keep_)) consider(n, edges, terminal, out);
      }
      return std::isfinite(best_cost_);
    }
    if (exact) *exact = false;
    // (2) terminals only.
    if (arb_.solve(n, edges, root, tree_, &keep_)) consider(n, edges, terminal, out);
    // (1) everything reachable, then shrink to the relays the tree keeps.
    const bool spans = reachable(n, edges, root, terminal);
    for (int round = 0; spans && round < 4; ++round) {
      if (!arb_.solve(n, edges, root, tree_, &keep_)) break;
      prune(n, edges, terminal);
      const double c = cost(edges, tree_);
      if (c < best_cost_) best_cost_ = c, out = tree_;
      // Nodes of the pruned tree.
      keep2_.assign(N, 0);
      keep2_[static_cast<std::size_t>(root)] = 1;
      for (int i : tree_)
        keep2_[static_cast<std::size_t>(edges[static_cast<std::size_t>(i)].to)] = 1;
      if (keep2_ == keep_) break;
      keep_.swap(keep2_);
    }
    // (3) shortest paths.
    if (opt.shortest_paths && n <= opt.shortest_paths_max_nodes &&
        shortest_path_nodes(n, edges, root, terminal) && arb_.solve(n, edges, root, tree_, &keep_))
      consider(n, edges, terminal, out);
    return std::isfinite(best_cost_);
  }

  static double cost(const std::vector<ArcEdge>& edges, const std::vector<int>& chosen) {
    double c = 0;
    for (int i : chosen) c += edges[static_cast<std::size_t>(i)].cost;
    return c;
  }

 private:
  void consider(int n, const std::vector<ArcEdge>& edges, const std::vector<char>& terminal,
                std::vector<int>& out) {
    prune(n, edges, terminal);
    const double c = cost(edges, tree_);
    if (c < best_cost_) best_cost_ = c, out = tree_;
  }

  // Removes edges into relay leaves of tree_ until none is left.
  void prune(int n, const std::vector<ArcEdge>& edges, const std::vector<char>& terminal) {
    for (bool changed = true; changed;) {
      changed = false;
      outdeg_.assign(static_cast<std::size_t>(n), 0);
      for (int i : tree_)
        ++outdeg_[static_cast<std::size_t>(edges[static_cast<std::size_t>(i)].from)];
      std::size_t k = 0;
      for (int i : tree_) {
        const int v = edges[static_cast<std::size_t>(i)].to;
        if (!terminal[static_cast<std::size_t>(v)] && outdeg_[static_cast<std::size_t>(v)] == 0)
          changed = true;
        else
          tree_[k++] = i;
      }
      tree_.resize(k);
    }
  }

  // keep_ = the nodes reachable from the root; false when a terminal is not among them.
  bool reachable(int n, const std::vector<ArcEdge>& edges, int root,
                 const std::vector<char>& terminal) {
    const auto N = static_cast<std::size_t>(n);
    keep_.assign(N, 0);
    keep_[static_cast<std::size_t>(root)] = 1;
    // Edge lists are small; a few sweeps reach the fixed point on machine graphs.
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& e : edges)
        if (keep_[static_cast<std::size_t>(e.from)] && !keep_[static_cast<std::size_t>(e.to)])
          keep_[static_cast<std::size_t>(e.to)] = 1, changed = true;
    }
    for (std::size_t v = 0; v < N; ++v)
      if (terminal[v] && !keep_[v]) return false;
    return true;
  }

  // Directed shortest-path heuristic: keep_ = the nodes of the tree it grows.
  bool shortest_path_nodes(int n, const std::vector<ArcEdge>& edges, int root,
                           const std::vector<char>& terminal) {
    const auto N = static_cast<std::size_t>(n);
    std::vector<std::vector<int>> out(N);
    for (int i = 0; i < static_cast<int>(edges.size()); ++i)
      out[static_cast<std::size_t>(edges[static_cast<std::size_t>(i)].from)].push_back(i);
    keep_.assign(N, 0);
    keep_[static_cast<std::size_t>(root)] = 1;
    int missing = 0;
    for (int v = 0; v < n; ++v)
      missing += terminal[static_cast<std::size_t>(v)] && v != root ? 1 : 0;
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> dist(N);
    std::vector<int> via(N);
    while (missing > 0) {
      std::fill(dist.begin(), dist.end(), inf);
      std::fill(via.begin(), via.end(), -1);
      using Item = std::pair<double, int>;
      std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
      for (int v = 0; v < n; ++v)
        if (keep_[static_cast<std::size_t>(v)])
          dist[static_cast<std::size_t>(v)] = 0, pq.push({0.0, v});
      int target = -1;
      while (!pq.empty()) {
        const auto [d, u] = pq.top();
        pq.pop();
        if (d > dist[static_cast<std::size_t>(u)]) continue;
        if (!keep_[static_cast<std::size_t>(u)] && terminal[static_cast<std::size_t>(u)]) {
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
      if (target < 0) return false;
      for (int v = target; !keep_[static_cast<std::size_t>(v)];) {
        keep_[static_cast<std::size_t>(v)] = 1;
        if (terminal[static_cast<std::size_t>(v)]) --missing;
        v = edges[static_cast<std::size_t>(via[static_cast<std::size_t>(v)])].from;
      }
    }
    return true;
  }

  ArborescenceSolver arb_;
  std::vector<int> relays_, tree_, outdeg_;
  std::vector<char> keep_, keep2_;
  double best_cost_ = 0;
};

// Cheapest out-arborescence rooted at `root` containing every node with terminal[v] (others are
// optional relays): indices into `edges`, or nullopt when a terminal is unreachable. Costs >= 0.
inline std::optional<std::vector<int>> steiner_arborescence(int n,
                                                            const std::vector<ArcEdge>& edges,
                                                            int root,
                                                            const std::vector<bool>& terminal,
                                                            const SteinerOptions& opt = {}) {
  SteinerSolver s;
  std::vector<char> term(terminal.begin(), terminal.end());
  std::vector<int> out;
  if (!s.solve(n, edges, root, term, opt, out)) return std::nullopt;
  return out;
}

}  // namespace ccoll::solve
