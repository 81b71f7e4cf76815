// Tests for the packed-forest solver (seed 001) and its parts: Edmonds' arborescences, the packing
// simplex, the directed Steiner oracle, and the forest's optimality against independent exact LPs
// over every tree of small graphs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "ccoll/topology/arborescence.hpp"
#include "ccoll/topology/lp.hpp"
#include "ccoll/topology/packed_forest.hpp"
#include "ccoll/topology/presets.hpp"
#include "ccoll/topology/steiner.hpp"

using namespace ccoll::topology;

namespace {

// Every out-arborescence rooted at `root` that contains all terminals (optional nodes only as
// internal relays): lists of edge indices. Brute force over a parent choice per node.
std::vector<std::vector<int>> all_arborescences(int n, const std::vector<ArcEdge>& edges, int root,
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
double exact_forest_optimum(const PhysicalTopology& topo, ForestSchedule schedule) {
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
  return solve_packing_lp(cap, cols).objective;
}

// Link loads of a forest per pool; checks capacities, spanning and chi balance.
void check_forest(const PhysicalTopology& topo, const PackedForest& f) {
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

PhysicalTopology random_small(std::mt19937& rng, int ngpu, bool with_switch, bool symmetric) {
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

}  // namespace

TEST_CASE("arborescence: Edmonds equals brute force on random graphs") {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    const int n = 2 + iter % 5;
    std::vector<ArcEdge> edges;
    std::uniform_real_distribution<double> cost(0, 10);
    std::bernoulli_distribution coin(0.5);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && coin(rng)) edges.push_back(ArcEdge{a, b, std::floor(cost(rng))});
    const auto all =
        all_arborescences(n, edges, 0, std::vector<bool>(static_cast<std::size_t>(n), true));
    const auto got = min_arborescence(n, edges, 0);
    CAPTURE(iter);
    REQUIRE(got.has_value() == !all.empty());
    if (!got) continue;
    double best = 1e18;
    for (const auto& t : all) {
      double c = 0;
      for (int i : t) c += edges[static_cast<std::size_t>(i)].cost;
      best = std::min(best, c);
    }
    double c = 0;
    for (int i : *got) c += edges[static_cast<std::size_t>(i)].cost;
    CHECK(c == doctest::Approx(best));
    CHECK(got->size() == static_cast<std::size_t>(n - 1));
  }
}

TEST_CASE("steiner: exact mode equals brute force; heuristics are feasible and close") {
  std::mt19937 rng(11);
  int exact_hits = 0, heur_within_10pct = 0, cases = 0;
  for (int iter = 0; iter < 150; ++iter) {
    const int n = 3 + iter % 4;
    std::vector<ArcEdge> edges;
    std::uniform_real_distribution<double> cost(0, 10);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b &&
            (std::bernoulli_distribution(0.6)(rng) || b == a + 1 || (a == n - 1 && b == 0)))
          edges.push_back(ArcEdge{a, b, std::floor(cost(rng))});
    std::vector<bool> term(static_cast<std::size_t>(n), true);
    term[static_cast<std::size_t>(n - 1)] = false;
    if (n > 4) term[static_cast<std::size_t>(n - 2)] = false;
    const auto all = all_arborescences(n, edges, 0, term);
    if (all.empty()) continue;
    double best = 1e18;
    for (const auto& t : all) {
      double c = 0;
      for (int i : t) c += edges[static_cast<std::size_t>(i)].cost;
      best = std::min(best, c);
    }
    const auto tree_cost = [&](const std::vector<int>& t) {
      double c = 0;
      for (int i : t) c += edges[static_cast<std::size_t>(i)].cost;
      return c;
    };
    ++cases;
    const auto exact = steiner_arborescence(n, edges, 0, term, SteinerOptions{8});
    REQUIRE(exact);
    exact_hits += std::abs(tree_cost(*exact) - best) < 1e-9 ? 1 : 0;
    const auto heur = steiner_arborescence(n, edges, 0, term, SteinerOptions{0});
    REQUIRE(heur);
    CHECK(tree_cost(*heur) >= best - 1e-9);
    heur_within_10pct += tree_cost(*heur) <= best * 1.1 + 1e-9 ? 1 : 0;
  }
  CHECK(exact_hits == cases);
  CHECK(heur_within_10pct >= cases * 9 / 10);
}

TEST_CASE("lp: optimality certified by duality on random packing LPs") {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 100; ++iter) {
    const int m = 2 + iter % 9, n = 1 + iter % 13;
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<double> b(static_cast<std::size_t>(m));
    for (auto& v : b) v = std::floor(u(rng) * 10) + 1;
    std::vector<LpColumn> cols(static_cast<std::size_t>(n));
    for (auto& c : cols) {
      c.objective = std::floor(u(rng) * 5) + 1;
      for (int r = 0; r < m; ++r)
        if (u(rng) < 0.5) c.entries.emplace_back(r, std::floor(u(rng) * 3) + 1);
      if (c.entries.empty()) c.entries.emplace_back(0, 1.0);
    }
    const auto res = solve_packing_lp(b, cols);
    CAPTURE(iter);
    // Primal feasible.
    std::vector<double> use(static_cast<std::size_t>(m), 0);
    double obj = 0;
    for (int j = 0; j < n; ++j) {
      CHECK(res.x[static_cast<std::size_t>(j)] >= -1e-9);
      obj += cols[static_cast<std::size_t>(j)].objective * res.x[static_cast<std::size_t>(j)];
      for (auto [r, a] : cols[static_cast<std::size_t>(j)].entries)
        use[static_cast<std::size_t>(r)] += a * res.x[static_cast<std::size_t>(j)];
    }
    for (int r = 0; r < m; ++r)
      CHECK(use[static_cast<std::size_t>(r)] <= b[static_cast<std::size_t>(r)] + 1e-7);
    // Dual feasible with the same objective: optimal.
    double dobj = 0;
    for (int r = 0; r < m; ++r)
      dobj += b[static_cast<std::size_t>(r)] * res.dual[static_cast<std::size_t>(r)];
    for (const auto& c : cols) {
      double lhs = 0;
      for (auto [r, a] : c.entries) lhs += a * res.dual[static_cast<std::size_t>(r)];
      CHECK(lhs >= c.objective - 1e-7);
    }
    CHECK(obj == doctest::Approx(dobj).epsilon(1e-9));
    CHECK(res.objective == doctest::Approx(obj));
  }
}

TEST_CASE("forest: all active reaches the exact optimum of every tree (small graphs)") {
  std::mt19937 rng(5);
  for (int iter = 0; iter < 24; ++iter) {
    const bool sym = iter % 2 == 0;
    const auto topo = random_small(rng, 3 + iter % 2, iter % 3 == 0, sym);
    for (auto sched :
         {ForestSchedule::phased, ForestSchedule::overlapped, ForestSchedule::concurrent}) {
      CAPTURE(iter);
      CAPTURE(to_string(sched));
      ForestOptions o;
      o.schedule = sched;
      const auto f = solve_packed_forest(topo, o);
      check_forest(topo, f);
      const double opt = exact_forest_optimum(topo, sched);
      CHECK(f.exact_oracle);
      CHECK(f.total_GBps >= 0.99 * opt);
      CHECK(f.total_GBps <= opt * (1 + 1e-6));
      CHECK(f.upper_bound_GBps == doctest::Approx(opt).epsilon(1e-6));
    }
  }
}

TEST_CASE("forest: some inactive, heuristic Steiner oracle within 95% of the exact optimum") {
  std::mt19937 rng(9);
  double worst = 1;
  for (int iter = 0; iter < 16; ++iter) {
    auto topo = random_small(rng, 5, iter % 2 == 0, iter % 4 < 2);
    std::vector<std::string> act;
    for (int i = 0; i < 5; ++i)
      if (i != (iter % 5)) act.push_back("gpu" + std::to_string(i));
    topo.set_active(act);
    for (auto sched : {ForestSchedule::phased, ForestSchedule::concurrent}) {
      CAPTURE(iter);
      ForestOptions o;
      o.schedule = sched;
      o.steiner.exact_limit = 0;  // force the heuristics
      const auto f = solve_packed_forest(topo, o);
      check_forest(topo, f);
      const double opt = exact_forest_optimum(topo, sched);
      CHECK(f.total_GBps <= opt * (1 + 1e-6));
      CHECK(f.total_GBps >= 0.95 * opt);
      worst = std::min(worst, f.total_GBps / opt);
      o.steiner.exact_limit = 6;  // exact oracle: the optimum
      const auto fe = solve_packed_forest(topo, o);
      CHECK(fe.total_GBps == doctest::Approx(opt).epsilon(1e-6));
    }
  }
  MESSAGE("worst heuristic/optimum ratio with one inactive of 5: " << worst);
}

TEST_CASE("forest: DGX-1V, all active, certified optimal; overlap buys no bandwidth") {
  const auto topo = dgx1v();
  ForestOptions o;
  const auto phased = solve_packed_forest(topo, o);
  check_forest(topo, phased);
  CHECK(phased.exact_oracle);
  CHECK(phased.total_GBps >= 0.99 * phased.upper_bound_GBps);
  o.schedule = ForestSchedule::overlapped;
  const auto ov = solve_packed_forest(topo, o);
  check_forest(topo, ov);
  CHECK(ov.total_GBps == doctest::Approx(phased.total_GBps).epsilon(1e-6));
  o.schedule = ForestSchedule::concurrent;
  const auto cc = solve_packed_forest(topo, o);
  check_forest(topo, cc);
  // Same allreduce time within the bandwidth model: 2|C|/chi_phased vs |C|/chi_concurrent.
  CHECK(cc.time_s(1e9) >= phased.time_s(1e9) * (1 - 1e-6));
  MESSAGE("dgx1v phased sum chi " << phased.total_GBps << " GB/s (bound " << phased.upper_bound_GBps
                                  << "), concurrent " << cc.total_GBps << ", pairs "
                                  << phased.pairs.size() << ", " << phased.seconds * 1e3 << " ms");
}

#include "ccoll/topology/forest_plan.hpp"
#include "topology_plan_runner.hpp"

TEST_CASE("forest plans: verified and correct on host threads, relays included") {
  struct Case {
    const char* preset;
    std::vector<std::string> active;  // empty: all GPUs
    ForestSchedule schedule;
  };
  const std::vector<Case> cases = {
      {"dgx1v", {}, ForestSchedule::phased},
      {"dgx1v", {"gpu0", "gpu2", "gpu5", "gpu7"}, ForestSchedule::phased},
      {"dgx1p", {"gpu1", "gpu2", "gpu4"}, ForestSchedule::concurrent},
      {"pcie4", {}, ForestSchedule::concurrent},
      {"cluster:2x4:pcie:10", {"m0.gpu0", "m0.gpu1", "m1.gpu3"}, ForestSchedule::phased},
      {"cluster:4x4:pcie:25", {}, ForestSchedule::overlapped},
  };
  for (const auto& c : cases) {
    CAPTURE(c.preset);
    auto topo = preset(c.preset);
    if (!c.active.empty()) topo.set_active(c.active);
    ForestOptions o;
    o.schedule = c.schedule;
    o.prune_loss = 0.005;
    const auto f = solve_packed_forest(topo, o);
    check_forest(topo, f);
    CHECK(f.total_GBps >= 0.995 * f.optimum_found_GBps - 1e-9);
    RankMap m = forest_ranks(topo, f);
    CHECK(m.rank_node.size() <= 16);
    for (bool overlap : {false, true}) {
      topology_test::verify_and_run(
          [&](const ccoll::plan::PlanRequest& r) {
            auto req = r;
            req.overlap = overlap;
            return forest_plan(topo, f, req);
          },
          3001);
    }
  }
}
