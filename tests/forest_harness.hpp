// Test helper for the packed-forest tests: independent exact optima by brute force (every tree of
// a small graph enumerated into one LP), forest checks (capacities, spanning), random graphs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/solve/arborescence.hpp"
#include "ccoll/solve/lp.hpp"

namespace forest_test {

using namespace ccoll::physical;
using namespace ccoll::forest;
using namespace ccoll::solve;

// Every out-arborescence rooted at `root` that contains all terminals (optional nodes only as
// internal relays): lists of edge indices. Brute force over a parent choice per node.
inline std::vector<std::vector<int>> all_arborescences(int n, const std::vector<ArcEdge>& edges,
                                                       int root,
                                                       const std::vector<bool>& terminal) {
  std::vector<std::vector<int>> in(static_cast<std::size_t>(n));
  for (int i = 0; i < static_cast<int>(edges.size()); ++i)
    in[static_cast<std::size_t>(edges[static_cast<std::size_t>(i)].to)].push_back(i);
  std::vector<std::vector<int>> out;
  std::vector<int> choice(static_cast<std::size_t>(n), -1);
  std::function<void(int)> rec = [&](int v) {
    if (v == n) {
      // Check: chosen parents form a tree rooted at root; optional nodes are not leaves.
      std::vector<int> parent(static_cast<std::size_t>(n), -2);
      for (int u = 0; u < n; ++u)
        if (u != root && choice[static_cast<std::size_t>(u)] >= 0)
          parent[static_cast<std::size_t>(u)] =
              edges[static_cast<std::size_t>(choice[static_cast<std::size_t>(u)])].from;
      std::vector<int> children(static_cast<std::size_t>(n), 0);
      for (int u = 0; u < n; ++u) {
        if (u == root || parent[static_cast<std::size_t>(u)] == -2) continue;
        if (parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(u)])] == -2 &&
            parent[static_cast<std::size_t>(u)] != root)
          return;
        ++children[static_cast<std::size_t>(parent[static_cast<std::size_t>(u)])];
        int w = u;
        for (int steps = 0; w != root; ++steps) {
          if (steps > n) return;  // cycle
          w = parent[static_cast<std::size_t>(w)];
          if (w == -2) return;
        }
      }
      for (int u = 0; u < n; ++u)
        if (u != root && !terminal[static_cast<std::size_t>(u)] &&
            parent[static_cast<std::size_t>(u)] != -2 && children[static_cast<std::size_t>(u)] == 0)
          return;
      std::vector<int> t;
      for (int u = 0; u < n; ++u)
        if (u != root && choice[static_cast<std::size_t>(u)] >= 0)
          t.push_back(choice[static_cast<std::size_t>(u)]);
      out.push_back(t);
      return;
    }
    if (v == root) return rec(v + 1);
    if (!terminal[static_cast<std::size_t>(v)]) {
      choice[static_cast<std::size_t>(v)] = -1;
      rec(v + 1);
    }
    for (int e : in[static_cast<std::size_t>(v)]) {
      choice[static_cast<std::size_t>(v)] = e;
      rec(v + 1);
    }
    choice[static_cast<std::size_t>(v)] = -1;
  };
  rec(0);
  return out;
}

// Independent exact optimum of problem (4) / (8) / concurrent: every (reduce, broadcast) pair of
// every root as an LP column.
inline double exact_forest_optimum(const PhysicalTopology& topo, ForestSchedule schedule) {
  const auto compute = topo.compute_nodes();
  const int n = static_cast<int>(compute.size());
  const auto routes = all_routes(topo);
  std::vector<bool> terminal(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    terminal[static_cast<std::size_t>(i)] = topo.is_active(compute[static_cast<std::size_t>(i)]);
  std::vector<ArcEdge> fwd, rev;
  std::vector<Route> route_of;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const auto& r =
          routes(compute[static_cast<std::size_t>(a)], compute[static_cast<std::size_t>(b)]);
      if (r.empty()) continue;
      fwd.push_back(ArcEdge{a, b, 0});
      rev.push_back(ArcEdge{b, a, 0});
      route_of.push_back(r);
    }
  const int L = static_cast<int>(topo.links.size());
  const int pools = schedule == ForestSchedule::concurrent ? 1 : 2;
  std::vector<double> cap;
  for (int p = 0; p < pools; ++p)
    for (const auto& l : topo.links) cap.push_back(l.capacity_GBps());
  std::vector<LpColumn> cols;
  for (int root = 0; root < n; ++root) {
    if (!terminal[static_cast<std::size_t>(root)]) continue;
    const auto ins = all_arborescences(n, rev, root, terminal);
    const auto outs = all_arborescences(n, fwd, root, terminal);
    for (const auto& I : ins)
      for (const auto& J : outs)
        for (int bpool = (schedule == ForestSchedule::phased ? 1 : 0);
             bpool <= (schedule == ForestSchedule::concurrent ? 0 : 1); ++bpool) {
          std::map<int, double> use;
          for (int e : I)
            for (int li : route_of[static_cast<std::size_t>(e)]) use[li] += 1;
          for (int e : J)
            for (int li : route_of[static_cast<std::size_t>(e)]) use[bpool * L + li] += 1;
          LpColumn c;
          c.objective = 1;
          for (auto [r, a] : use) c.entries.emplace_back(r, a);
          cols.push_back(std::move(c));
        }
  }
  const auto r = solve_packing_lp(cap, cols);
  check_optimal(r, "exact_forest_optimum");
  return r.objective;
}

// Link loads of a forest per pool; checks capacities, spanning and chi balance.
inline void check_forest(const PhysicalTopology& topo, const PackedForest& f) {
  const auto routes = all_routes(topo);
  std::vector<double> load_r(topo.links.size(), 0), load_b(topo.links.size(), 0);
  for (const auto& p : f.pairs) {
    CHECK(p.weight_GBps > 0);
    for (const auto& [phase, edges] :
         {std::pair{0, &p.reduce_edges}, std::pair{1, &p.broadcast_edges}}) {
      // Spans every active node, reaches the root.
      std::map<int, int> next;
      for (auto [a, b] : *edges) {
        const int child = phase == 0 ? a : b, parent = phase == 0 ? b : a;
        CHECK(next.count(child) == 0);
        next[child] = parent;
        const bool to_b =
            phase == 1 &&
            (f.schedule == ForestSchedule::phased ||
             (f.schedule == ForestSchedule::overlapped && !p.broadcast_shares_reduce_capacity));
        for (int li : routes(a, b))
          (to_b ? load_b : load_r)[PhysicalTopology::idx(li)] += p.weight_GBps;
      }
      for (int v : f.active) {
        int w = v;
        for (int s = 0; w != p.root; ++s) {
          REQUIRE(s <= topo.node_count());
          REQUIRE(next.count(w) == 1);
          w = next[w];
        }
      }
    }
  }
  for (std::size_t i = 0; i < topo.links.size(); ++i) {
    CHECK(load_r[i] <= topo.links[i].capacity_GBps() * (1 + 1e-6) + 1e-9);
    CHECK(load_b[i] <= topo.links[i].capacity_GBps() * (1 + 1e-6) + 1e-9);
  }
}

inline PhysicalTopology random_small(std::mt19937& rng, int ngpu, bool with_switch,
                                     bool symmetric) {
  PhysicalTopology t;
  t.name = "random";
  for (int i = 0; i < ngpu; ++i) t.add_node("gpu" + std::to_string(i), NodeKind::gpu);
  std::uniform_int_distribution<int> bw(1, 8);
  std::bernoulli_distribution coin(0.6);
  for (int i = 0; i < ngpu; ++i)
    for (int j = i + 1; j < ngpu; ++j)
      if (j == i + 1 || coin(rng)) {
        if (symmetric) {
          t.add_link(i, j, bw(rng));
        } else {
          t.add_link(i, j, bw(rng), 1, 0, "x", false);
          t.add_link(j, i, bw(rng), 1, 0, "x", false);
        }
      }
  if (with_switch) {
    const int sw = t.add_node("sw", NodeKind::switch_);
    for (int i = 0; i < ngpu; i += 2) t.add_link(i, sw, 2.0);
  }
  return t;
}

inline std::vector<std::string> random_active(std::mt19937& rng, const PhysicalTopology& topo,
                                              int keep) {
  auto gpus = topo.gpus();
  std::shuffle(gpus.begin(), gpus.end(), rng);
  gpus.resize(static_cast<std::size_t>(keep));
  std::vector<std::string> ids;
  ids.reserve(gpus.size());
  for (int g : gpus) ids.push_back(topo.nodes[static_cast<std::size_t>(g)].id);
  return ids;
}

// The reference runs unpruned: its total is the optimum.
inline ForestOptions options(ForestSchedule s, ForestMethod m = ForestMethod::mwu) {
  ForestOptions o;
  o.schedule = s;
  o.method = m;
  if (m == ForestMethod::column_generation) o.prune_loss = 0, o.max_pairs = 0;
  return o;
}

constexpr ForestSchedule kSchedules[] = {ForestSchedule::phased, ForestSchedule::overlapped,
                                         ForestSchedule::concurrent};

}  // namespace forest_test
