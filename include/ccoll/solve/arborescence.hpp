// ccoll/solve/arborescence.hpp: minimum-cost spanning arborescence (Chu-Liu / Edmonds).
//
// The pricing oracle of the packed-forest solvers (packed_forest.hpp) when every node of the graph
// must be in the tree: with all workers active, the cheapest broadcast tree under the current
// link prices is a minimum out-arborescence rooted at the root, and the cheapest reduce tree is
// one in the reversed graph. The multiplicative-weights packer calls it thousands of times per
// plan (64 roots x 30 phases on a 64-GPU cluster), so this is Tarjan's walk-and-contract form of
// Edmonds' algorithm rather than the textbook O(VE) recursion: a walk from each node follows
// cheapest entering edges; a walk that closes a cycle merges the cycle into one super-node whose
// entering edges are shifted by the price of the member's chosen edge (Edmonds' reduced costs),
// which then picks its own cheapest entering edge. Two representations of the entering edges:
//   - sparse graphs: a leftist heap per node with a lazy offset, O(E log V);
//   - dense graphs (a machine's or cluster's logical graph joins every pair through switches): a
//     cost matrix, a step scans one row and a contraction folds rows and columns, O(V^2)
//     (17 us against the heaps' 94 us on 64 nodes: bench_forest_planner, edmonds/*).
// The arborescence is read back by expanding the super-nodes from the outermost in: the edge
// entering a super-node replaces the cycle edge of the member it enters. ArborescenceSolver keeps
// its buffers between calls.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace ccoll::solve {

struct ArcEdge {
  int from = 0;
  int to = 0;
  double cost = 0;
};

class ArborescenceSolver {
 public:
  // Minimum out-arborescence rooted at `root` over the nodes v in [0, n) with keep[v] (all nodes
  // when keep is null); edges with an endpoint outside are ignored. On success fills `out` with
  // one entering edge index per kept non-root node and returns true; returns false when a kept
  // node cannot be reached from the root.
  bool solve(int n, const std::vector<ArcEdge>& edges, int root, std::vector<int>& out,
             const std::vector<char>* keep = nullptr) {
    // Dense graphs (the logical graph of a machine or cluster joins every pair through switches)
    // are faster on a cost matrix, O(k^2) per contraction round; sparse ones on heaps.
    const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    if (n > 0 && edges.size() * 4 >= nn) return solve_dense(n, edges, root, out, keep);
    return solve_sparse(n, edges, root, out, keep);
  }

  // Tarjan's heap form, O(E log V).
  bool solve_sparse(int n, const std::vector<ArcEdge>& edges, int root, std::vector<int>& out,
                    const std::vector<char>* keep = nullptr) {
    out.clear();
    if (n <= 0 || root < 0 || root >= n) return false;
    const auto N = static_cast<std::size_t>(n);
    const auto kept = [&](int v) {
      return keep == nullptr || (*keep)[static_cast<std::size_t>(v)];
    };
    if (!kept(root)) return false;
    // Heap nodes are edge indices.
    const std::size_t E = edges.size();
    key_.resize(E);
    lazy_.assign(E, 0.0);
    left_.assign(E, -1);
    right_.assign(E, -1);
    rank_.assign(E, 1);
    // Super-nodes: 0..n-1 are the nodes, n.. the contracted cycles (at most n - 1 of them).
    heap_.assign(2 * N, -1);
    chosen_.assign(2 * N, -1);
    parent_.assign(2 * N, -1);
    members_begin_.assign(2 * N + 1, 0);
    members_.clear();
    uf_.resize(N);
    super_of_.resize(N);
    for (std::size_t v = 0; v < N; ++v)
      uf_[v] = static_cast<int>(v), super_of_[v] = static_cast<int>(v);
    for (std::size_t i = 0; i < E; ++i) {
      const ArcEdge& e = edges[i];
      if (e.from == e.to || e.to == root || e.from < 0 || e.to < 0 || e.from >= n || e.to >= n ||
          !kept(e.from) || !kept(e.to))
        continue;
      key_[i] = e.cost;
      auto& h = heap_[static_cast<std::size_t>(e.to)];
      h = merge(h, static_cast<int>(i));
    }
    // state: -1 unvisited, otherwise the walk that reached it.
    state_.assign(2 * N, -1);
    state_[static_cast<std::size_t>(root)] = n;  // done
    int next_super = n;
    for (int s = 0; s < n; ++s) {
      if (!kept(s)) continue;
      int u = super_of_[static_cast<std::size_t>(find(s))];
      path_.clear();
      while (state_[static_cast<std::size_t>(u)] == -1) {
        state_[static_cast<std::size_t>(u)] = s;
        path_.push_back(u);
        // Cheapest entering edge from outside u.
        int e = -1;
        auto& h = heap_[static_cast<std::size_t>(u)];
        while (h >= 0) {
          push_down(h);
          const int top = h;
          h = merge(left_[static_cast<std::size_t>(top)], right_[static_cast<std::size_t>(top)]);
          if (super_of_[static_cast<std::size_t>(
                  find(edges[static_cast<std::size_t>(top)].from))] != u) {
            e = top;
            break;
          }
        }
        if (e < 0) return false;  // nothing enters u: unreachable
        const double w = key_[static_cast<std::size_t>(e)];
        chosen_[static_cast<std::size_t>(u)] = e;
        if (h >= 0) lazy_[static_cast<std::size_t>(h)] -= w;  // Edmonds' reduced costs
        const int v =
            super_of_[static_cast<std::size_t>(find(edges[static_cast<std::size_t>(e)].from))];
        if (state_[static_cast<std::size_t>(v)] != s) {
          u = v;  // an earlier walk, the root, or an unvisited node: continue there
          continue;
        }
        // Cycle v -> ... -> u -> v: contract the path's tail from v into a new super-node.
        const int c = next_super++;
        int merged = -1;
        int rep = -1;
        members_begin_[static_cast<std::size_t>(c)] = static_cast<int>(members_.size());
        for (;;) {
          const int w2 = path_.back();
          path_.pop_back();
          members_.push_back(w2);
          parent_[static_cast<std::size_t>(w2)] = c;
          merged = merge(merged, heap_[static_cast<std::size_t>(w2)]);
          heap_[static_cast<std::size_t>(w2)] = -1;
          rep = rep < 0 ? rep_node(w2) : unite(rep, rep_node(w2));
          if (w2 == v) break;
        }
        members_begin_[static_cast<std::size_t>(c) + 1] = static_cast<int>(members_.size());
        super_of_[static_cast<std::size_t>(find(rep))] = c;
        heap_[static_cast<std::size_t>(c)] = merged;
        u = c;  // unvisited: the walk continues from the new super-node
      }
    }
    expand(n, edges, root, next_super, out, keep);
    return true;
  }

  // Matrix form of the same walk (Tarjan's O(V^2) variant for dense graphs): inc_[v][u] is the
  // cheapest edge from super-node u into super-node v, both named by a representative node; a
  // step scans one row, a contraction folds the cycle's rows (shifted by their chosen edges'
  // prices) and columns into one. O(V^2) in all, no heap.
  bool solve_dense(int n, const std::vector<ArcEdge>& edges, int root, std::vector<int>& out,
                   const std::vector<char>* keep = nullptr) {
    out.clear();
    if (n <= 0 || root < 0 || root >= n) return false;
    constexpr double inf = std::numeric_limits<double>::infinity();
    const auto kept = [&](int v) {
      return keep == nullptr || (*keep)[static_cast<std::size_t>(v)];
    };
    if (!kept(root)) return false;
    const auto N = static_cast<std::size_t>(n);
    inc_.assign(N * N, inf);
    id_.assign(N * N, -1);
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const ArcEdge& e = edges[i];
      if (e.from == e.to || e.to == root || e.from < 0 || e.to < 0 || e.from >= n || e.to >= n ||
          !kept(e.from) || !kept(e.to))
        continue;
      const std::size_t k = static_cast<std::size_t>(e.to) * N + static_cast<std::size_t>(e.from);
      if (e.cost < inc_[k]) inc_[k] = e.cost, id_[k] = static_cast<int>(i);
    }
    // Active representatives, the super-node each stands for, its walk state.
    active_.clear();
    for (int v = 0; v < n; ++v)
      if (kept(v)) active_.push_back(v);
    pos_.assign(N, -1);
    for (std::size_t k = 0; k < active_.size(); ++k)
      pos_[static_cast<std::size_t>(active_[k])] = static_cast<int>(k);
    super_of_.resize(N);
    uf_.resize(N);
    for (std::size_t v = 0; v < N; ++v)
      super_of_[v] = static_cast<int>(v), uf_[v] = static_cast<int>(v);
    chosen_.assign(2 * N, -1);
    parent_.assign(2 * N, -1);
    members_begin_.assign(2 * N + 1, 0);
    members_.clear();
    state_.assign(N, -1);
    state_[static_cast<std::size_t>(root)] = n;
    cyc_cost_.assign(N, 0.0);
    int next_super = n;
    for (int s = 0; s < n; ++s) {
      if (!kept(s)) continue;
      int u = find(s);
      path_.clear();
      while (state_[static_cast<std::size_t>(u)] == -1) {
        state_[static_cast<std::size_t>(u)] = s;
        path_.push_back(u);
        // Cheapest edge into u from another super-node.
        const double* row = inc_.data() + static_cast<std::size_t>(u) * N;
        double w = inf;
        int from = -1;
        for (int x : active_)
          if (row[x] < w && x != u) w = row[x], from = x;
        if (from < 0) return false;  // nothing enters u: unreachable
        chosen_[static_cast<std::size_t>(super_of_[static_cast<std::size_t>(u)])] =
            id_[static_cast<std::size_t>(u) * N + static_cast<std::size_t>(from)];
        cyc_cost_[static_cast<std::size_t>(u)] = w;
        const int v = from;
        if (state_[static_cast<std::size_t>(v)] != s) {
          u = v;
          continue;
        }
        // Cycle v -> ... -> u -> v: fold it into v's row and column.
        const int c = next_super++;
        members_begin_[static_cast<std::size_t>(c)] = static_cast<int>(members_.size());
        cycle_.clear();
        for (;;) {
          const int x = path_.back();
          path_.pop_back();
          cycle_.push_back(x);
          members_.push_back(super_of_[static_cast<std::size_t>(x)]);
          parent_[static_cast<std::size_t>(super_of_[static_cast<std::size_t>(x)])] = c;
          if (x == v) break;
        }
        members_begin_[static_cast<std::size_t>(c) + 1] = static_cast<int>(members_.size());
        fold(v, N);
        super_of_[static_cast<std::size_t>(v)] = c;
        state_[static_cast<std::size_t>(v)] = -1;
        u = v;
      }
    }
    expand(n, edges, root, next_super, out, keep);
    return true;
  }

 private:
  // Merges the representatives in cycle_ into v (dense form): entering edges are shifted by the
  // price of the member's cycle edge (Edmonds' reduced costs); leaving edges keep their price.
  void fold(int v, std::size_t N) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    double* vrow = inc_.data() + static_cast<std::size_t>(v) * N;
    int* vid = id_.data() + static_cast<std::size_t>(v) * N;
    const double vshift = cyc_cost_[static_cast<std::size_t>(v)];
    for (int x : active_) {
      const auto X = static_cast<std::size_t>(x);
      if (vrow[X] < inf) vrow[X] -= vshift;
    }
    for (int m : cycle_) {
      if (m == v) continue;
      const double* mrow = inc_.data() + static_cast<std::size_t>(m) * N;
      const int* mid = id_.data() + static_cast<std::size_t>(m) * N;
      const double shift = cyc_cost_[static_cast<std::size_t>(m)];
      for (int x : active_) {
        const auto X = static_cast<std::size_t>(x);
        if (mrow[X] < inf && mrow[X] - shift < vrow[X]) vrow[X] = mrow[X] - shift, vid[X] = mid[X];
        // Edges leaving m into x become edges leaving v.
        double& out_v = inc_[X * N + static_cast<std::size_t>(v)];
        const double out_m = inc_[X * N + static_cast<std::size_t>(m)];
        if (out_m < out_v)
          out_v = out_m,
          id_[X * N + static_cast<std::size_t>(v)] = id_[X * N + static_cast<std::size_t>(m)];
      }
      uf_[static_cast<std::size_t>(m)] = v;
      // Drop m from the active list.
      const int k = pos_[static_cast<std::size_t>(m)];
      const int last = active_.back();
      active_[static_cast<std::size_t>(k)] = last;
      pos_[static_cast<std::size_t>(last)] = k;
      active_.pop_back();
      pos_[static_cast<std::size_t>(m)] = -1;
    }
    // Edges inside the cycle are now self-loops of v.
    for (int m : cycle_) vrow[static_cast<std::size_t>(m)] = inf;
  }

  // Reads the arborescence back from chosen_/parent_/members_: the outermost super-nodes take
  // their chosen edge; an edge entering a cycle replaces the cycle edge of the member it enters.
  void expand(int n, const std::vector<ArcEdge>& edges, int root, int next_super,
              std::vector<int>& out, const std::vector<char>* keep) {
    const auto kept = [&](int v) {
      return keep == nullptr || (*keep)[static_cast<std::size_t>(v)];
    };
    in_edge_.assign(static_cast<std::size_t>(n), -1);
    stack_.clear();
    for (int x = 0; x < next_super; ++x)
      if (parent_[static_cast<std::size_t>(x)] < 0 && x != root && (x >= n || kept(x)))
        stack_.emplace_back(x, chosen_[static_cast<std::size_t>(x)]);
    while (!stack_.empty()) {
      const auto [x, e] = stack_.back();
      stack_.pop_back();
      if (x < n) {
        in_edge_[static_cast<std::size_t>(x)] = e;
        continue;
      }
      int mem = edges[static_cast<std::size_t>(e)].to;  // the member of x that e enters
      while (parent_[static_cast<std::size_t>(mem)] != x)
        mem = parent_[static_cast<std::size_t>(mem)];
      for (int k = members_begin_[static_cast<std::size_t>(x)];
           k < members_begin_[static_cast<std::size_t>(x) + 1]; ++k) {
        const int y = members_[static_cast<std::size_t>(k)];
        stack_.emplace_back(y, y == mem ? e : chosen_[static_cast<std::size_t>(y)]);
      }
    }
    for (int v = 0; v < n; ++v)
      if (v != root && kept(v)) out.push_back(in_edge_[static_cast<std::size_t>(v)]);
  }
  void push_down(int x) {
    const auto X = static_cast<std::size_t>(x);
    const double d = lazy_[X];
    if (d == 0.0) return;
    key_[X] += d;
    if (left_[X] >= 0) lazy_[static_cast<std::size_t>(left_[X])] += d;
    if (right_[X] >= 0) lazy_[static_cast<std::size_t>(right_[X])] += d;
    lazy_[X] = 0.0;
  }
  // Leftist-heap merge, iterative along the right spines (depth O(log E)).
  int merge(int a, int b) {
    if (a < 0) return b;
    if (b < 0) return a;
    spine_.clear();
    int root = -1;
    for (;;) {
      if (a < 0 || b < 0) {
        const int rest = a < 0 ? b : a;
        if (spine_.empty()) return rest;
        right_[static_cast<std::size_t>(spine_.back())] = rest;
        break;
      }
      push_down(a);
      push_down(b);
      if (key_[static_cast<std::size_t>(b)] < key_[static_cast<std::size_t>(a)]) std::swap(a, b);
      if (spine_.empty())
        root = a;
      else
        right_[static_cast<std::size_t>(spine_.back())] = a;
      spine_.push_back(a);
      a = right_[static_cast<std::size_t>(a)];
    }
    // Restore the leftist property bottom-up.
    for (auto it = spine_.rbegin(); it != spine_.rend(); ++it) {
      const auto X = static_cast<std::size_t>(*it);
      const int l = left_[X], r = right_[X];
      const int rl = l < 0 ? 0 : rank_[static_cast<std::size_t>(l)];
      const int rr = r < 0 ? 0 : rank_[static_cast<std::size_t>(r)];
      if (rl < rr) std::swap(left_[X], right_[X]);
      rank_[X] = 1 + std::min(rl, rr);
    }
    return root;
  }
  int find(int v) {
    while (uf_[static_cast<std::size_t>(v)] != v) {
      auto& p = uf_[static_cast<std::size_t>(v)];
      p = uf_[static_cast<std::size_t>(p)];
      v = p;
    }
    return v;
  }
  int unite(int a, int b) {
    a = find(a), b = find(b);
    if (a != b) uf_[static_cast<std::size_t>(b)] = a;
    return a;
  }
  // Some original node inside super-node x.
  int rep_node(int x) const {
    while (x >= static_cast<int>(uf_.size()))
      x = members_[static_cast<std::size_t>(members_begin_[static_cast<std::size_t>(x)])];
    return x;
  }

  std::vector<double> key_, lazy_;
  std::vector<int> left_, right_, rank_;
  std::vector<int> heap_, chosen_, parent_, members_begin_, members_, uf_, super_of_, state_;
  std::vector<int> path_, spine_, in_edge_;
  std::vector<std::pair<int, int>> stack_;
  // Dense form.
  std::vector<double> inc_, cyc_cost_;
  std::vector<int> id_, active_, pos_, cycle_;
};

// Minimum-cost out-arborescence rooted at `root` over nodes [0, n): indices into `edges` (one
// entering edge per non-root node, in node order), or nullopt when a node cannot be reached from
// the root.
inline std::optional<std::vector<int>> min_arborescence(int n, const std::vector<ArcEdge>& edges,
                                                        int root) {
  ArborescenceSolver s;
  std::vector<int> out;
  if (!s.solve(n, edges, root, out)) return std::nullopt;
  return out;
}

}  // namespace ccoll::solve
