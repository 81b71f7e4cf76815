// Tests for the packed-forest planners ([TopoSync]) and their parts: Edmonds' arborescences (heap
// and matrix forms), the directed Steiner oracle, the packing simplex, the multiplicative-weights
// packer, the fast planner's quality against independent exact optima (every tree of small graphs
// enumerated; exact column generation on the presets), the physics of overlap, and plans from
// forests run on host threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/collective.hpp"
#include "ccoll/forest/equal_share.hpp"
#include "ccoll/forest/exact.hpp"
#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/forest/to_plan.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/rooted.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/solve/arborescence.hpp"
#include "ccoll/solve/lp.hpp"
#include "ccoll/solve/mwu_packing.hpp"
#include "ccoll/solve/steiner.hpp"
#include "ccoll/sync/connection.hpp"
#include "collective_reference.hpp"
#include "forest_harness.hpp"
#include "sweep.hpp"
#include "topology_plan_runner.hpp"

namespace forest_test {
using namespace ccoll::physical;
using namespace ccoll::forest;
using namespace ccoll::solve;
using namespace forest_test;

TEST_CASE("arborescence: heap and matrix forms of Edmonds equal brute force, node subsets too") {
  std::mt19937 rng(7);
  ArborescenceSolver solver;
  for (int iter = 0; iter < 400; ++iter) {
    const int n = 2 + iter % 6;
    std::vector<ArcEdge> edges;
    std::uniform_real_distribution<double> cost(0, 10);
    std::bernoulli_distribution coin(iter % 3 == 0 ? 0.9 : 0.5);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && coin(rng)) edges.push_back(ArcEdge{a, b, std::floor(cost(rng))});
    std::vector<char> keep(static_cast<std::size_t>(n), 1);
    const bool subset = iter % 4 == 1;
    if (subset)
      for (int v = 1; v < n; ++v) keep[static_cast<std::size_t>(v)] = coin(rng) ? 1 : 0;
    // Brute force over the kept nodes only.
    std::vector<int> local(static_cast<std::size_t>(n), -1), orig;
    int k = 0;
    for (int v = 0; v < n; ++v)
      if (keep[static_cast<std::size_t>(v)]) local[static_cast<std::size_t>(v)] = k++;
    std::vector<ArcEdge> sub;
    for (int i = 0; i < static_cast<int>(edges.size()); ++i) {
      const auto& e = edges[static_cast<std::size_t>(i)];
      const int a = local[static_cast<std::size_t>(e.from)],
                b = local[static_cast<std::size_t>(e.to)];
      if (a >= 0 && b >= 0) sub.push_back(ArcEdge{a, b, e.cost}), orig.push_back(i);
    }
    const auto all =
        all_arborescences(k, sub, 0, std::vector<bool>(static_cast<std::size_t>(k), true));
    double best = 1e18;
    for (const auto& t : all) {
      double c = 0;
      for (int i : t) c += sub[static_cast<std::size_t>(i)].cost;
      best = std::min(best, c);
    }
    CAPTURE(iter);
    for (int form = 0; form < 2; ++form) {
      std::vector<int> out;
      const auto* mask = subset ? &keep : nullptr;
      const bool ok = form == 0 ? solver.solve_sparse(n, edges, 0, out, mask)
                                : solver.solve_dense(n, edges, 0, out, mask);
      REQUIRE(ok == !all.empty());
      if (!ok) continue;
      CHECK(out.size() == static_cast<std::size_t>(k - 1));
      double c = 0;
      std::vector<int> parent(static_cast<std::size_t>(n), -1);
      for (int i : out) {
        const auto& e = edges[static_cast<std::size_t>(i)];
        CHECK(keep[static_cast<std::size_t>(e.from)]);
        CHECK(keep[static_cast<std::size_t>(e.to)]);
        CHECK(parent[static_cast<std::size_t>(e.to)] == -1);
        parent[static_cast<std::size_t>(e.to)] = e.from;
        c += e.cost;
      }
      CHECK(c == doctest::Approx(best));
      for (int v = 1; v < n; ++v) {  // every kept node reaches the root
        if (!keep[static_cast<std::size_t>(v)]) continue;
        int w = v;
        for (int steps = 0; w != 0; ++steps) {
          REQUIRE(steps <= n);
          w = parent[static_cast<std::size_t>(w)];
          REQUIRE(w >= 0);
        }
      }
    }
    if (!subset) {
      const auto got = min_arborescence(n, edges, 0);
      CHECK(got.has_value() == !all.empty());
    }
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

namespace {

std::vector<LpColumn> random_lp(std::mt19937& rng, int m, int n, std::vector<double>& b) {
  std::uniform_real_distribution<double> u(0, 1);
  b.resize(static_cast<std::size_t>(m));
  for (auto& v : b) v = std::floor(u(rng) * 10) + 1;
  std::vector<LpColumn> cols(static_cast<std::size_t>(n));
  for (auto& c : cols) {
    c.objective = std::floor(u(rng) * 5) + 1;
    for (int r = 0; r < m; ++r)
      if (u(rng) < 0.5) c.entries.emplace_back(r, std::floor(u(rng) * 3) + 1);
    if (c.entries.empty()) c.entries.emplace_back(0, 1.0);
  }
  return cols;
}

}  // namespace

TEST_CASE("lp: optimality certified by duality on random packing LPs") {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 100; ++iter) {
    const int m = 2 + iter % 9, n = 1 + iter % 13;
    std::vector<double> b;
    const auto cols = random_lp(rng, m, n, b);
    const auto res = solve_packing_lp(b, cols);
    CAPTURE(iter);
    CHECK(res.status == LpStatus::optimal);
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

TEST_CASE("lp: warm starts after new columns and rows, removal by objective, bad results throw") {
  std::mt19937 rng(4);
  for (int iter = 0; iter < 60; ++iter) {
    const int m = 3 + iter % 7, n = 4 + iter % 11;
    std::vector<double> b;
    auto cols = random_lp(rng, m, n, b);
    CAPTURE(iter);
    // First half of the rows and columns, solve, then the rest: same optimum as one fresh solve.
    const int m0 = m / 2 + 1;
    PackingSimplex lp;
    for (int r = 0; r < m0; ++r) lp.add_row(b[static_cast<std::size_t>(r)]);
    std::vector<LpColumn> first;
    for (const auto& c : cols) {
      bool inside = true;
      for (auto [r, a] : c.entries) inside &= r < m0;
      if (inside) first.push_back(c);
    }
    for (const auto& c : first) lp.add_column(c);
    const auto r0 = lp.solve();
    CHECK(r0.status == LpStatus::optimal);
    for (int r = m0; r < m; ++r) lp.add_row(b[static_cast<std::size_t>(r)]);
    std::vector<LpColumn> order = first;
    for (const auto& c : cols) {
      bool inside = true;
      for (auto [r, a] : c.entries) inside &= r < m0;
      if (!inside) lp.add_column(c), order.push_back(c);
    }
    const auto warm = lp.solve();
    const auto fresh = solve_packing_lp(b, order);
    CHECK(warm.status == LpStatus::optimal);
    CHECK(warm.objective == doctest::Approx(fresh.objective).epsilon(1e-9));
    CHECK(warm.objective >= r0.objective - 1e-9);
    // A column with a negative objective leaves the solution; the rest is re-optimised.
    lp.set_objective(0, -1.0);
    const auto removed = lp.solve();
    CHECK(removed.status == LpStatus::optimal);
    CHECK(removed.x[0] == doctest::Approx(0.0));
    auto without = order;
    without[0].objective = 0.0;
    without[0].entries = {{0, 1e9}};  // cannot carry weight
    CHECK(removed.objective ==
          doctest::Approx(solve_packing_lp(b, without).objective).epsilon(1e-9));
  }
  // A result that fails its certificate is never silently used.
  LpResult bad;
  bad.status = LpStatus::numerical_error;
  CHECK_THROWS_AS(check_optimal(bad, "test"), std::runtime_error);
  std::vector<double> b{1.0};
  std::vector<LpColumn> cols{{1.0, {{0, 1.0}}}};
  LpResult wrong;
  wrong.x = {2.0};  // infeasible
  wrong.dual = {1.0};
  certify_packing_lp(b, cols, wrong);
  CHECK(wrong.status == LpStatus::numerical_error);
}

namespace {

// An explicit column list as an MWU oracle: group g owns the columns j with j % groups == g.
struct ListOracle {
  const std::vector<LpColumn>& cols;
  int groups;
  std::vector<double> y;
  struct Col {
    std::vector<std::pair<int, double>> usage;
  };
  void set_prices(const std::vector<double>& prices) { y = prices; }
  double price(int g, Col& out) {
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t j = static_cast<std::size_t>(g); j < cols.size();
         j += static_cast<std::size_t>(groups)) {
      double c = 0;
      for (auto [r, a] : cols[j].entries) c += a * y[static_cast<std::size_t>(r)];
      if (c < best) best = c, out.usage = cols[j].entries;
    }
    return best;
  }
  bool exact() const { return true; }
};

}  // namespace

TEST_CASE("mwu: feasible, below and near the LP optimum, certified bound above it") {
  std::mt19937 rng(21);
  double worst = 1;
  for (int iter = 0; iter < 40; ++iter) {
    const int m = 3 + iter % 6, n = 6 + iter % 17, groups = 1 + iter % 3;
    std::vector<double> b;
    auto cols = random_lp(rng, m, n, b);
    for (auto& c : cols) c.objective = 1.0;  // the packer maximises the sum of weights
    const double opt = solve_packing_lp(b, cols).objective;
    ListOracle oracle{cols, groups, {}};
    std::vector<ListOracle::Col> found;
    MwuOptions mo;
    mo.epsilon = 0.05;
    mo.max_phases = 400;
    const auto r = mwu_pack(b, groups, oracle, found, mo);
    CAPTURE(iter);
    REQUIRE(r.no_column < 0);
    std::vector<double> use(b.size(), 0.0);
    double sum = 0;
    for (std::size_t j = 0; j < found.size(); ++j) {
      CHECK(r.x[j] >= 0);
      sum += r.x[j];
      for (auto [row, a] : found[j].usage) use[static_cast<std::size_t>(row)] += a * r.x[j];
    }
    for (std::size_t i = 0; i < b.size(); ++i) CHECK(use[i] <= b[i] * (1 + 1e-9));
    CHECK(sum == doctest::Approx(r.value));
    CHECK(r.value <= opt * (1 + 1e-9));
    CHECK(r.upper_bound >= opt * (1 - 1e-9));
    CHECK(r.value >= 0.85 * opt);
    worst = std::min(worst, r.value / opt);
  }
  MESSAGE("worst MWU value / LP optimum (epsilon 0.05, 400 phases): " << worst);
}

TEST_CASE("forest: all active, the fast planner is within 1% of the exact optimum over all trees") {
  std::mt19937 rng(5);
  double worst = 1;
  ccoll::testing::Sweep sweep;
  for (int iter = 0; iter < 90; ++iter) {
    const bool sym = iter % 2 == 0;
    const auto topo = random_small(rng, 3 + iter % 3, iter % 3 == 0, sym);
    for (auto sched : kSchedules) {
      if (!sweep.take()) continue;  // after the draw: the cases taken are the same graphs
      CAPTURE(iter);
      const std::string sched_name = to_string(sched);
      CAPTURE(sched_name);
      const double opt = exact_forest_optimum(topo, sched);
      const auto f = solve_packed_forest(topo, options(sched));
      check_forest(topo, f);
      CHECK(f.method == ForestMethod::mwu);
      CHECK(f.exact_oracle);
      CHECK(f.total_GBps >= 0.99 * opt);
      CHECK(f.total_GBps <= opt * (1 + 1e-6));
      CHECK(f.total_GBps >= (1 - 0.005) * f.optimum_found_GBps - 1e-12);  // default prune_loss
      REQUIRE(f.upper_bound_GBps > 0);
      CHECK(f.upper_bound_GBps >= opt * (1 - 1e-6));
      CHECK(f.upper_bound_GBps >= f.total_GBps);
      worst = std::min(worst, f.total_GBps / opt);
      // The reference reaches the optimum and certifies it.
      const auto e = solve_packed_forest(topo, options(sched, ForestMethod::column_generation));
      check_forest(topo, e);
      CHECK(e.total_GBps == doctest::Approx(opt).epsilon(1e-6));
      CHECK(e.upper_bound_GBps == doctest::Approx(opt).epsilon(1e-6));
    }
  }
  MESSAGE("worst fast/optimum ratio, all active: " << worst);
}

TEST_CASE("forest: parallel links add up; within 1% of the exact optimum over them") {
  // Five GPUs, g0-g4 joined twice (as a file listing a doubled NVLink twice does): an exact LP
  // over both links reaches 44.5 GB/s phased; planning over one of them gave 26.
  PhysicalTopology five;
  for (int i = 0; i < 5; ++i) five.add_node("g" + std::to_string(i), NodeKind::gpu);
  five.add_link(0, 1, 3);
  five.add_link(1, 2, 25);
  five.add_link(2, 3, 3);
  five.add_link(3, 4, 25);
  five.add_link(4, 0, 10);
  five.add_link(0, 4, 10);
  five.add_link(1, 4, 10);
  five.add_link(2, 4, 50);
  CHECK(five.links.size() == 14);
  CHECK(five.direct_capacity_GBps(0, 4) == doctest::Approx(20));
  CHECK(exact_forest_optimum(five, ForestSchedule::phased) == doctest::Approx(44.5));
  for (auto sched : kSchedules) {
    const std::string sched_name = to_string(sched);
    CAPTURE(sched_name);
    const double opt = exact_forest_optimum(five, sched);
    const auto f = solve_packed_forest(five, options(sched));
    check_forest(five, f);
    CHECK(f.total_GBps >= 0.99 * opt);
  }
  // Random graphs whose pairs are listed up to three times, with unequal lanes, against the
  // exact optimum of the same graph with each pair listed once at the summed capacity.
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> bw(1, 8), copies(1, 3);
  std::bernoulli_distribution coin(0.6), both_ways(0.5);
  double worst = 1;
  ccoll::testing::Sweep sweep;
  for (int iter = 0; iter < 30; ++iter) {
    const int n = 3 + iter % 3;
    PhysicalTopology multi, summed;
    for (int i = 0; i < n; ++i) {
      multi.add_node("gpu" + std::to_string(i), NodeKind::gpu);
      summed.add_node("gpu" + std::to_string(i), NodeKind::gpu);
    }
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) {
        if (j != i + 1 && !coin(rng)) continue;
        double ij = 0, ji = 0;
        for (int c = copies(rng); c > 0; --c) {
          const double b = bw(rng);
          const bool duplex = both_ways(rng);
          multi.add_link(i, j, b, 1, 0, "x", duplex);
          ij += b;
          ji += duplex ? b : 0;
        }
        if (ji == 0) multi.add_link(j, i, ji = bw(rng), 1, 0, "x", false);
        summed.add_link(i, j, ij, 1, 0, "x", false);
        summed.add_link(j, i, ji, 1, 0, "x", false);
      }
    REQUIRE(multi.links.size() == summed.links.size());
    for (auto sched : kSchedules) {
      if (!sweep.take()) continue;
      CAPTURE(iter);
      const double opt = exact_forest_optimum(summed, sched);
      const auto f = solve_packed_forest(multi, options(sched));
      check_forest(multi, f);
      CHECK(f.total_GBps >= 0.99 * opt);
      CHECK(f.total_GBps <= opt * (1 + 1e-6));
      worst = std::min(worst, f.total_GBps / opt);
    }
  }
  MESSAGE("worst fast/optimum ratio, parallel links: " << worst);
}

TEST_CASE("forest: some inactive, heuristic Steiner oracle within 95% of the exact optimum") {
  std::mt19937 rng(9);
  double worst = 1;
  ccoll::testing::Sweep sweep;
  for (int iter = 0; iter < 72; ++iter) {
    const int n = 4 + iter % 2;
    auto topo = random_small(rng, n, iter % 2 == 0, iter % 4 < 2);
    std::vector<std::string> act;
    for (int i = 0; i < n; ++i)
      if (i != iter % n && (n == 4 || i != (iter + 2) % n))
        act.push_back("gpu" + std::to_string(i));
    topo.set_active(act);
    for (auto sched : kSchedules) {
      if (!sweep.take()) continue;
      CAPTURE(iter);
      const std::string sched_name = to_string(sched);
      CAPTURE(sched_name);
      const double opt = exact_forest_optimum(topo, sched);
      auto o = options(sched);
      o.steiner.exact_limit = 0;  // force the heuristics
      o.mwu_exact_relays = 0;
      const auto f = solve_packed_forest(topo, o);
      check_forest(topo, f);
      CHECK_FALSE(f.exact_oracle);
      CHECK(f.upper_bound_GBps < 0);  // no certificate without an exact oracle
      CHECK(f.total_GBps <= opt * (1 + 1e-6));
      CHECK(f.total_GBps >= 0.95 * opt);
      worst = std::min(worst, f.total_GBps / opt);
      // Exact Steiner pricing: the reference reaches the optimum.
      const auto e = solve_packed_forest(topo, options(sched, ForestMethod::column_generation));
      CHECK(e.exact_oracle);
      CHECK(e.total_GBps == doctest::Approx(opt).epsilon(1e-6));
    }
  }
  MESSAGE("worst heuristic/optimum ratio with one or two inactive: " << worst);
}

TEST_CASE("forest: presets, all active and random active subsets, against the exact reference") {
  std::mt19937 rng(13);
  struct Case {
    const char* preset;
    int subsets;  // random active subsets to try
  };
  const Case cases[] = {{"dgx1p", 3},
                        {"dgx1v", 3},
                        {"pcie4", 2},
                        {"pcie8", 2},
                        {"full8", 1},
                        {"cluster:2x4:pcie:10", 2},
                        {"cluster:2x4:nvlink:100", 2},
                        {"cluster:4x4:pcie:25", 1}};
  double worst_all = 1, worst_some = 1;
  ccoll::testing::Sweep sweep;
  for (const auto& c : cases) {
    const std::string preset_name = c.preset;
    CAPTURE(preset_name);
    for (int k = 0; k <= c.subsets; ++k) {
      auto topo = preset(c.preset);
      const int ngpu = static_cast<int>(topo.gpus().size());
      if (k > 0) {
        const int keep = std::max(2, ngpu - 1 - static_cast<int>(rng() % 4));
        topo.set_active(random_active(rng, topo, keep));
      }
      for (auto sched : kSchedules) {
        if (!sweep.take()) continue;  // after the draw: the cases taken are the same graphs
        CAPTURE(k);
        const std::string sched_name = to_string(sched);
        CAPTURE(sched_name);
        const auto e = solve_packed_forest(topo, options(sched, ForestMethod::column_generation));
        const auto f = solve_packed_forest(topo, options(sched));
        check_forest(topo, f);
        CHECK(f.total_GBps <= e.optimum_found_GBps * (1 + 1e-6) + 1e-9);
        if (e.exact_oracle) CHECK(e.upper_bound_GBps == doctest::Approx(e.optimum_found_GBps));
        if (k == 0) {
          REQUIRE(e.exact_oracle);
          CHECK(f.total_GBps >= 0.99 * e.optimum_found_GBps);
          CHECK(f.upper_bound_GBps >= e.optimum_found_GBps * (1 - 1e-6));
          worst_all = std::min(worst_all, f.total_GBps / e.optimum_found_GBps);
        } else {
          CHECK(f.total_GBps >= 0.95 * e.optimum_found_GBps);
          worst_some = std::min(worst_some, f.total_GBps / e.optimum_found_GBps);
          // Few relays: the fast planner's final exact pricing certifies a bound.
          const int relays = ngpu - static_cast<int>(topo.active_nodes().size());
          if (relays <= ForestOptions{}.steiner.exact_limit) {
            CHECK(f.upper_bound_GBps >= f.total_GBps);
            if (e.exact_oracle) CHECK(f.upper_bound_GBps >= e.optimum_found_GBps * (1 - 1e-6));
          }
        }
      }
    }
  }
  MESSAGE("presets: worst fast/exact, all active " << worst_all << ", some inactive "
                                                   << worst_some);
}

TEST_CASE("forest: overlap buys no bandwidth on symmetric full-duplex graphs; concurrent bounds") {
  // Facts of the model, checked on exact optima:
  //  - overlapped (problem (8)) >= phased always (J trees alone are a phased forest), and equal
  //    on a symmetric graph: the reduce stage alone bounds sum chi, and mirroring the best reduce
  //    packing gives a broadcast packing as good;
  //  - concurrent sum chi is in [phased / 2, phased] always (half a phased forest fits in one
  //    pool; a concurrent forest fits in both pools), i.e. its bandwidth-only time is between
  //    the phased time and half of it.
  std::mt19937 rng(17);
  const auto exact = [](const PhysicalTopology& t, ForestSchedule s) {
    return solve_packed_forest(t, options(s, ForestMethod::column_generation)).total_GBps;
  };
  for (int iter = 0; iter < 16; ++iter) {
    const bool sym = iter % 2 == 0;
    const auto topo = random_small(rng, 3 + iter % 3, iter % 4 < 2, sym);
    CAPTURE(iter);
    const double ph = exact(topo, ForestSchedule::phased);
    const double ov = exact(topo, ForestSchedule::overlapped);
    const double cc = exact(topo, ForestSchedule::concurrent);
    CHECK(ov >= ph * (1 - 1e-6));
    if (sym) CHECK(ov == doctest::Approx(ph).epsilon(1e-6));
    CHECK(cc >= ph / 2 * (1 - 1e-6));
    CHECK(cc <= ph * (1 + 1e-6));
  }
  // The machines ccoll ships presets for: no bandwidth from any overlap (concurrent is exactly
  // half of phased, so the bandwidth-only times are equal).
  for (const char* name :
       {"dgx1p", "dgx1v", "pcie8", "cluster:2x4:pcie:10", "cluster:2x4:nvlink:100"}) {
    const std::string topo_name = name;
    CAPTURE(topo_name);
    const auto topo = preset(name);
    const double ph = exact(topo, ForestSchedule::phased);
    CHECK(exact(topo, ForestSchedule::overlapped) == doctest::Approx(ph).epsilon(1e-6));
    CHECK(exact(topo, ForestSchedule::concurrent) == doctest::Approx(ph / 2).epsilon(1e-6));
  }
  // But not a law: a star whose hub is a GPU (a worker that forwards) lets the concurrent schedule
  // keep both directions of every link busy while a phased stage cannot: with 3 leaves, phased
  // sum chi = 3/2 (the up-links bound every reduce stage) and concurrent 1 > 3/4.
  PhysicalTopology star;
  for (int i = 0; i < 4; ++i) star.add_node("gpu" + std::to_string(i), NodeKind::gpu);
  for (int i = 1; i < 4; ++i) star.add_link(0, i, 1.0);
  CHECK(exact(star, ForestSchedule::phased) == doctest::Approx(1.5));
  CHECK(exact(star, ForestSchedule::overlapped) == doctest::Approx(1.5));
  CHECK(exact(star, ForestSchedule::concurrent) == doctest::Approx(1.0));
  CHECK(solve_packed_forest(star, options(ForestSchedule::concurrent)).total_GBps ==
        doctest::Approx(1.0));
}

TEST_CASE("forest: pruning keeps the loss it is given; caps on pairs") {
  const auto topo = dgx1v();
  auto o = options(ForestSchedule::phased);
  o.prune_loss = 0;
  o.max_pairs = 0;
  const auto full = solve_packed_forest(topo, o);
  CHECK(full.prune_loss() == doctest::Approx(0.0));
  for (double loss : {0.005, 0.02, 0.05}) {
    o.prune_loss = loss;
    const auto f = solve_packed_forest(topo, o);
    check_forest(topo, f);
    CAPTURE(loss);
    CHECK(f.total_GBps >= (1 - loss) * f.optimum_found_GBps - 1e-9);
    CHECK(f.prune_loss() <= loss + 1e-9);
    CHECK(f.pairs.size() <= full.pairs.size());
  }
  o.prune_loss = 0;
  o.max_pairs_per_root = 2;
  const auto per = solve_packed_forest(topo, o);
  check_forest(topo, per);
  std::map<int, int> count;
  for (const auto& p : per.pairs) ++count[p.root];
  for (const auto& [root, k] : count) CHECK(k <= 2);
  o.max_pairs_per_root = 0;
  o.max_pairs = 12;
  const auto capped = solve_packed_forest(topo, o);
  check_forest(topo, capped);
  CHECK(capped.pairs.size() <= 12);
  CHECK(capped.total_GBps <= capped.optimum_found_GBps * (1 + 1e-9));
  MESSAGE("dgx1v phased: " << full.pairs.size() << " pairs at the optimum " << full.total_GBps
                           << ", 2 per root " << per.total_GBps << ", 12 pairs "
                           << capped.total_GBps);
  // Column generation restricted to the survivors of a cap never loses (it keeps the best).
  const auto p1 = preset("dgx1p");
  auto c = options(ForestSchedule::phased);
  c.max_pairs = 16;
  c.swap_rounds = 0;
  const auto no_swap = solve_packed_forest(p1, c);
  c.swap_rounds = 20;
  const auto swap = solve_packed_forest(p1, c);
  check_forest(p1, swap);
  CHECK(swap.pairs.size() <= 16);
  CHECK(swap.total_GBps >= no_swap.total_GBps * (1 - 1e-9));
  MESSAGE("dgx1p phased, 16 pairs: " << no_swap.total_GBps / no_swap.optimum_found_GBps
                                     << " of the optimum without swap rounds, "
                                     << swap.total_GBps / swap.optimum_found_GBps << " with");
}

TEST_CASE("forest: few channels can be worth more than the pruned optimum suggests") {
  // On 8 x 8 GPUs behind one PCIe switch per machine at 100 Gbps, the optimum (64 * 12.5 / 63
  // GB/s: every GPU's PCIe link is a bottleneck) needs every root; pruning the LP's pairs to a few
  // loses a lot (docs/results/forest-planner.md), yet one pair of chains through all 64 GPUs (a
  // ring cut open) carries 12.5 GB/s, 98.4 % of the optimum: every link is crossed once.
  const auto topo = preset("cluster:8x8:pcie:100");
  const auto p = make_forest_problem(topo, ForestSchedule::phased);
  const auto edge = [&](int a, int b) {
    for (std::size_t e = 0; e < p.fwd.size(); ++e)
      if (p.fwd[e].from == a && p.fwd[e].to == b) return static_cast<int>(e);
    return -1;
  };
  ForestColumn chain;
  chain.root = 0;
  chain.bpool = 1;
  for (int i = 1; i < p.n; ++i) {
    chain.reduce.push_back(edge(i, i - 1));
    chain.broadcast.push_back(edge(i - 1, i));
  }
  ForestOracle(p, SteinerOptions{}).finish(chain);
  const std::vector<ForestColumn> cols{chain};
  CHECK(refit(p, cols, {0}).value == doctest::Approx(12.5));
  CHECK(12.5 / (64 * 12.5 / 63) == doctest::Approx(0.984375));
}

TEST_CASE("forest: deterministic (every rank that plans gets the same forest)") {
  for (const char* name : {"dgx1v", "cluster:2x4:pcie:10"}) {
    auto topo = preset(name);
    for (auto sched : kSchedules) {
      const std::string topo_name = name;
      CAPTURE(topo_name);
      const auto a = solve_packed_forest(topo, options(sched));
      const auto b = solve_packed_forest(topo, options(sched));
      REQUIRE(a.pairs.size() == b.pairs.size());
      for (std::size_t i = 0; i < a.pairs.size(); ++i) {
        CHECK(a.pairs[i].root == b.pairs[i].root);
        CHECK(a.pairs[i].reduce_edges == b.pairs[i].reduce_edges);
        CHECK(a.pairs[i].broadcast_edges == b.pairs[i].broadcast_edges);
        CHECK(a.pairs[i].weight_GBps == b.pairs[i].weight_GBps);
      }
    }
  }
}

TEST_CASE("forest: a single worker, and a disconnected active set, are handled") {
  auto topo = dgx1v();
  topo.set_active(std::vector<std::string>{"gpu3"});
  const auto f = solve_packed_forest(topo);
  REQUIRE(f.pairs.size() == 1);
  CHECK(f.pairs[0].reduce_edges.empty());
  PhysicalTopology split;
  for (int i = 0; i < 4; ++i) split.add_node("gpu" + std::to_string(i), NodeKind::gpu);
  split.add_link(0, 1, 1.0);
  split.add_link(2, 3, 1.0);
  CHECK_THROWS_AS(solve_packed_forest(split), TopologyError);
  CHECK_THROWS_AS(
      solve_packed_forest(split, options(ForestSchedule::phased, ForestMethod::column_generation)),
      TopologyError);
}

TEST_CASE("hierarchical forest: machines whose workers meet only outside them plan flat") {
  // A NIC per GPU and nothing else inside a machine (its GPUs meet at the ToR): the machine's
  // own graph is disconnected, and the hierarchical planner threw "active node m0.gpu1 is
  // disconnected" for a graph the flat planner plans.
  PhysicalTopology t;
  const int tor = t.add_node("tor", NodeKind::switch_);
  for (int m = 0; m < 3; ++m)
    for (int g = 0; g < 2; ++g) {
      const std::string h = "m" + std::to_string(m);
      const int gpu = t.add_node(h + ".gpu" + std::to_string(g), NodeKind::gpu, h);
      const int nic = t.add_node(h + ".nic" + std::to_string(g), NodeKind::nic, h);
      t.add_link(gpu, nic, 16.0);
      t.add_link(nic, tor, 12.5);
    }
  const PackedForest flat = solve_packed_forest(t);
  ForestOptions o;
  o.hierarchical_above = 4;
  const PackedForest h = solve_packed_forest(t, o);
  CHECK_FALSE(h.hierarchical);
  CHECK(h.total_GBps == doctest::Approx(flat.total_GBps).epsilon(1e-3));
  CHECK(h.total_GBps > 0);
}

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
    const std::string preset_name = c.preset;
    CAPTURE(preset_name);
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

namespace {

// A tree over P ranks: rank r's parent is (r - 1) / fanout (root 0), the broadcast its mirror.
ccoll::plan::TreeSpec fan_tree(int P, int fanout, double share) {
  ccoll::plan::TreeSpec t;
  t.root = 0;
  t.reduce_parent.assign(static_cast<std::size_t>(P), -1);
  for (int r = 1; r < P; ++r) t.reduce_parent[static_cast<std::size_t>(r)] = (r - 1) / fanout;
  t.share = share;
  return t;
}

std::uint64_t steps_of(const ccoll::plan::Plan& p) {
  std::uint64_t n = 0;
  for (const auto& ch : p.channels)
    for (const auto& pr : ch.programs) n += pr.steps.size();
  return n;
}

}  // namespace

TEST_CASE("tree_plan_shape: channels in proportion to the trees, chunks within the step budget") {
  ccoll::plan::PlanRequest req;
  req.nranks = 8;
  req.count = 16u << 20;
  req.overlap = false;
  req.slot_bytes = std::uint64_t{1} << 40;
  req.alpha_s = 1e-12;  // no latency: the model's optimum is its cap of 4096 chunks
  req.beta_s_per_byte = 1 / 12.5e9;
  const std::vector<bool> active(8, true);
  // Two trees of equal weight: one channel each, the fewest chunks within 1% of the model.
  const std::vector<ccoll::plan::TreeSpec> equal{fan_tree(8, 2, 0.5), fan_tree(8, 3, 0.5)};
  auto s = tree_plan_shape(equal, req, kAutoSplit);
  CHECK(s.channels == 2);
  CHECK(s.split == 2);
  CHECK_FALSE(s.limited);
  CHECK(s.chunks >= 100);
  CHECK(s.chunks < 4096);
  CHECK(s.steps <= kDefaultPlanSteps);
  CHECK(s.cost <= 1 + kChunkTimeSlack + 1e-9);
  auto plan = tree_set_plan(req, equal, active, kAutoSplit);
  CHECK(plan.channels.size() == 2);
  CHECK(static_cast<double>(steps_of(plan)) == doctest::Approx(s.steps).epsilon(0.02));
  // Shares 1/3 and 4 x 1/6: the heavy tree in two channels, every channel 1/6.
  std::vector<ccoll::plan::TreeSpec> unequal{fan_tree(8, 2, 2)};
  for (int i = 0; i < 4; ++i) unequal.push_back(fan_tree(8, 2 + i, 1));
  s = tree_plan_shape(unequal, req, kAutoSplit);
  CHECK(s.channels == 6);
  plan = tree_set_plan(req, unequal, active, kAutoSplit);
  CHECK(plan.channels.size() == 6);
  // The overlapped schedule: two channels per tree, the same steps.
  req.overlap = true;
  s = tree_plan_shape(equal, req, kAutoSplit);
  CHECK(s.channels == 4);
  plan = tree_set_plan(req, equal, active, kAutoSplit);
  CHECK(plan.channels.size() == 4);
  CHECK(static_cast<double>(steps_of(plan)) <= kDefaultPlanSteps);
  req.overlap = false;
  // A small budget sets the chunks and says so; the cost it reports is above the slack.
  s = tree_plan_shape(equal, req, kAutoSplit, 2048);
  CHECK(s.limited);
  CHECK(s.chunks == 2048 / (2 * 2 * 8));
  CHECK(s.wanted_chunks > s.chunks);
  CHECK(s.cost > 1 + kChunkTimeSlack);
  plan = tree_set_plan(req, equal, active, kAutoSplit, 2048);
  CHECK(steps_of(plan) <= 2048);
  // Explicit choices are kept: a split, and chunks.
  s = tree_plan_shape(unequal, req, 0);
  CHECK(s.channels == 5);
  req.nchunks = 7;
  s = tree_plan_shape(equal, req, kAutoSplit);
  CHECK(s.chunks == 7);
  CHECK_FALSE(s.limited);
  plan = tree_set_plan(req, equal, active, 64);
  CHECK(plan.channels.size() == 64);
  req.nchunks = 0;
  // Shares that only many channels make equal (39 here): that many channels of one chunk each
  // take about 39 x 2 x 8 steps, more than a budget of 256; the shape keeps the most channels
  // that fit, and one channel per tree where none fits.
  const std::vector<ccoll::plan::TreeSpec> irrational{fan_tree(8, 2, 1.0), fan_tree(8, 3, 1.4142),
                                                      fan_tree(8, 4, 3.1416)};
  const auto free_shape = tree_plan_shape(irrational, req, kAutoSplit);
  CHECK(free_shape.split > 16);
  s = tree_plan_shape(irrational, req, kAutoSplit, 256);
  CHECK(s.steps <= 256);
  CHECK(s.split < free_shape.split);
  CHECK(s.split > 3);
  plan = tree_set_plan(req, irrational, active, kAutoSplit, 256);
  CHECK(steps_of(plan) <= 256);
  s = tree_plan_shape(irrational, req, kAutoSplit, 10);
  CHECK(s.steps <= tree_plan_shape(irrational, req, 3, 10).steps);  // one channel per tree
  CHECK(s.split <= 4);
}

// ---- Reduce-scatter and all-gather: the equal-share forest (forest/equal_share.hpp) ----

namespace {

// Hosts on one switch, host i's link at bandwidth[i] GB/s each way.
PhysicalTopology switch_star(const std::vector<double>& bandwidth) {
  PhysicalTopology t;
  t.name = "star";
  const int sw = t.add_node("sw", NodeKind::switch_);
  for (std::size_t i = 0; i < bandwidth.size(); ++i)
    t.add_link(t.add_node("h" + std::to_string(i), NodeKind::gpu), sw, bandwidth[i]);
  return t;
}

// Two racks of two hosts (10 GB/s to the rack's switch) joined by a 1 GB/s uplink.
PhysicalTopology two_racks() {
  PhysicalTopology t;
  t.name = "racks";
  const int a = t.add_node("swa", NodeKind::switch_);
  const int b = t.add_node("swb", NodeKind::switch_);
  t.add_link(a, b, 1.0);
  for (int h = 0; h < 4; ++h)
    t.add_link(t.add_node("h" + std::to_string(h), NodeKind::gpu), h < 2 ? a : b, 10.0);
  return t;
}

// Every root's rate, and that they are all equal.
double equal_rate(const PackedForest& f) {
  const auto chi = f.chi();
  REQUIRE(!chi.empty());
  const double t = chi.begin()->second;
  for (const auto& root_rate : chi) {
    CAPTURE(root_rate.first);
    CHECK(root_rate.second == doctest::Approx(t).epsilon(1e-9));
  }
  return t;
}

}  // namespace

TEST_CASE("equal-share forest: every root at the same rate, the optimum where it is known") {
  for (ShareStage stage : {ShareStage::reduce, ShareStage::broadcast}) {
    CAPTURE(static_cast<int>(stage));
    // A star: each host's contributions to the other P - 1 blocks leave through its own link
    // (reduce-scatter), or the P - 1 other blocks enter through it (all-gather): t = c / (P - 1)
    // for the slowest host's c, whatever the others have. The ring's rate is the same.
    for (const auto& bw : {std::vector<double>{4, 4, 4, 4}, std::vector<double>{1, 4, 4, 4},
                           std::vector<double>{2, 8, 8, 8, 8, 8}}) {
      const auto f = solve_equal_share_forest(switch_star(bw), stage);
      const double slowest = *std::min_element(bw.begin(), bw.end());
      CHECK(equal_rate(f) ==
            doctest::Approx(slowest / static_cast<double>(bw.size() - 1)).epsilon(1e-6));
      CHECK(f.upper_bound_GBps >= f.total_GBps * (1 - 1e-9));
    }
    // Two racks on a 1 GB/s uplink: each of the far rack's two blocks crosses it once per stage,
    // reduced (or gathered) in its rack first: 2 t <= 1. A ring crosses it with every block: the
    // forest is 1.5x the ring's reduce-scatter ((P - 1) / P B at 1 GB/s against B / P / 0.5).
    const auto racks = solve_equal_share_forest(two_racks(), stage);
    CHECK(equal_rate(racks) == doctest::Approx(0.5).epsilon(1e-6));
    // One root (a broadcast's or reduce's): its trees' packing, bounded by its cuts. On the racks
    // every tree crosses the uplink once (1 GB/s); on the star, the slow host's link (1 GB/s),
    // whichever end of the trees it is.
    const auto topo = two_racks();
    const auto one = solve_equal_share_forest(topo, stage, {}, topo.find("h0"));
    CHECK(one.total_GBps == doctest::Approx(1.0).epsilon(1e-6));
    const auto star = switch_star({1, 4, 4, 4});
    for (const char* root : {"h0", "h1"})
      CHECK(solve_equal_share_forest(star, stage, {}, star.find(root)).total_GBps ==
            doctest::Approx(1.0).epsilon(1e-6));
    CHECK_THROWS_AS(solve_equal_share_forest(star, stage, {}, star.find("sw")), ccoll::Error);
  }
  // Random graphs, some of them directed: equal rates, within 1% of the certified bound.
  std::mt19937 rng(4242);
  for (int trial = 0; trial < 12; ++trial) {
    const auto topo = random_small(rng, 3 + trial % 4, trial % 3 == 0, trial % 2 == 0);
    CAPTURE(trial);
    const auto f = solve_equal_share_forest(topo, ShareStage::reduce);
    const double t = equal_rate(f);
    CHECK(t > 0);
    CHECK(f.total_GBps <= f.upper_bound_GBps * (1 + 1e-6));
    CHECK(f.total_GBps >= f.upper_bound_GBps * (1 - 0.01));
  }
}

TEST_CASE(
    "block trees: the forest's reduce-scatter, all-gather, broadcast and reduce, verified and "
    "run") {
  using C = ccoll::plan::Collective;
  using ccoll::Config;
  struct Case {
    PhysicalTopology topo;
    std::vector<std::string> active;  // empty: every host
  };
  std::vector<Case> cases;
  cases.push_back({two_racks(), {}});
  cases.push_back({switch_star({1, 4, 4, 4, 4}), {}});
  cases.push_back({preset("dgx1v"), {}});
  cases.push_back({preset("dgx1v"), {"gpu0", "gpu2", "gpu5", "gpu7"}});  // relays
  // 3 active of 8 ranks, rank 0 a relay: the reference plans of every collective still build
  cases.push_back({preset("dgx1v"), {"gpu1", "gpu2", "gpu5"}});
  for (auto& c : cases) {
    if (!c.active.empty()) c.topo.set_active(c.active);
    CAPTURE(c.topo.name);
    CAPTURE(c.active.size());
    const ccoll::algo::PackedForest forest(c.topo);
    const auto& active = forest.ranks().active;
    const auto nactive = static_cast<std::uint64_t>(std::count(active.begin(), active.end(), true));
    const auto last_active = static_cast<int>(
        std::distance(active.begin(), std::find(active.rbegin(), active.rend(), true).base()) - 1);
    for (C coll : {C::reduce_scatter, C::all_gather, C::broadcast, C::reduce})
      for (const std::uint64_t block : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{4099}})
        for (std::uint32_t nslots : {1u, 3u}) {
          ccoll::plan::PlanRequest req;
          req.count = block * nactive;
          req.collective = coll;
          req.root = nslots == 1 ? 0 : last_active;
          if (ccoll::plan::has_root(coll) && !active[static_cast<std::size_t>(req.root)]) continue;
          req.nslots = nslots;
          req.slot_bytes = 1024;
          const ccoll::plan::Plan p = forest.build(req);
          CHECK(p.collective == coll);
          const auto report = ccoll::plan::verify(p);
          INFO(report.error);
          CHECK(report.ok);
        }
    if (!c.active.empty()) {
      // Relays: verified above (the reference needs every rank active). A communicator's
      // reference plans must still be built with 3 active ranks of 8 (runtime/plan_cache.hpp).
      Config config;
      config.nranks = forest.nranks();
      using RS = ccoll::ReduceScatter<ccoll::transport::HostThreads, ccoll::algo::PackedForest>;
      using AG = ccoll::AllGather<ccoll::transport::HostThreads, ccoll::algo::PackedForest>;
      CHECK_NOTHROW(RS{config, forest});
      CHECK_NOTHROW(AG{config, forest});
      if (!active[0]) {
        // A relay as the root: the error names the ranks that can be.
        ccoll::plan::PlanRequest req;
        req.count = 100;
        req.collective = C::broadcast;
        req.root = 0;
        CHECK_THROWS_WITH_AS(
            forest.build(req),
            doctest::Contains("broadcast, rank 0 (gpu0), is a relay; roots are "
                              "active workers: ranks 1 (gpu1), 2 (gpu2), 5 (gpu5)"),
            ccoll::Error);
      }
      // Broadcast and reduce from the last active rank, rank 0 a relay or not: the relays pass
      // their buffers through untouched, the active ranks get the root's data or the sum.
      ccoll::Broadcast<ccoll::transport::HostThreads, ccoll::algo::PackedForest> bc(config, forest);
      ccoll::Reduce<ccoll::transport::HostThreads, ccoll::algo::PackedForest> rd(config, forest);
      const std::size_t n = 5003;
      const auto nr = static_cast<std::size_t>(config.nranks);
      std::vector<std::vector<float>> in(nr), out(nr);
      std::vector<std::string> errors(nr);
      std::vector<std::thread> threads;
      const auto input = [](int r, std::size_t i) { return static_cast<float>((r + 1) * (i % 7)); };
      for (int pass = 0; pass < 2; ++pass) {
        for (std::size_t r = 0; r < nr; ++r) {
          in[r].resize(n);
          for (std::size_t i = 0; i < n; ++i) in[r][i] = input(static_cast<int>(r), i);
          out[r].assign(n, -7.0f);
        }
        threads.clear();
        for (int r = 0; r < config.nranks; ++r)
          threads.emplace_back([&, r] {
            const auto ur = static_cast<std::size_t>(r);
            try {
              if (pass == 0)
                bc.rank(r).run(in[ur].data(), out[ur].data(), n, ccoll::DataType::f32, last_active);
              else
                rd.rank(r).run(in[ur].data(), out[ur].data(), n, ccoll::DataType::f32,
                               ccoll::ReduceOp::sum, last_active);
            } catch (const std::exception& e) {
              errors[ur] = e.what();
            }
          });
        for (auto& t : threads) t.join();
        for (std::size_t r = 0; r < nr; ++r) {
          CAPTURE(pass);
          CAPTURE(r);
          CHECK(errors[r] == "");
          std::vector<float> expect(n, -7.0f);
          const bool receives = pass == 0 || static_cast<int>(r) == last_active;
          if (active[r] && receives)
            for (std::size_t i = 0; i < n; ++i) {
              expect[i] = 0;
              for (std::size_t q = 0; q < nr; ++q)
                if (pass == 0 ? static_cast<int>(q) == last_active : active[q])
                  expect[i] += input(static_cast<int>(q), i);
            }
          CHECK(out[r] == expect);
        }
      }
      continue;
    }
    // On host threads through the collectives' template, against the reference.
    Config config;
    config.nranks = forest.nranks();
    config.slot_bytes = 4096;
    ccoll::ReduceScatter<ccoll::transport::HostThreads, ccoll::algo::PackedForest> rs(config,
                                                                                      forest);
    ccoll::AllGather<ccoll::transport::HostThreads, ccoll::algo::PackedForest> ag(config, forest);
    ccoll::Broadcast<ccoll::transport::HostThreads, ccoll::algo::PackedForest> bc(config, forest);
    ccoll::Reduce<ccoll::transport::HostThreads, ccoll::algo::PackedForest> rd(config, forest);
    std::vector<std::string> wrong(static_cast<std::size_t>(config.nranks));
    std::vector<std::thread> threads;
    threads.reserve(wrong.size());
    for (int r = 0; r < config.nranks; ++r)
      threads.emplace_back([&, r] {
        wrong[static_cast<std::size_t>(r)] =
            ccoll::testing::check_collective_cases(rs, rs.rank(r), config.nranks, {1, 33, 5003},
                                                   false) +
            ccoll::testing::check_collective_cases(ag, ag.rank(r), config.nranks, {1, 33, 5003},
                                                   false) +
            ccoll::testing::check_collective_cases(bc, bc.rank(r), config.nranks, {1, 5003},
                                                   false) +
            ccoll::testing::check_collective_cases(rd, rd.rank(r), config.nranks, {1, 5003}, false);
      });
    for (auto& t : threads) t.join();
    for (const auto& w : wrong) CHECK_MESSAGE(w.empty(), w);
  }
}

TEST_CASE("reference plans: a rooted collective whose rank 0 cannot be its root") {
  // PlanCache builds reference plans before any call: of a broadcast or reduce, for its first
  // root that plans (a forest's relays cannot be roots), and an error that is not about the root
  // comes back as root 0's after one more build.
  using Cache = ccoll::runtime::PlanCache<ccoll::sync::ConnectionRef>;
  ccoll::Config config;
  config.nranks = 4;
  int builds = 0;
  int relays = 1;  // ranks below this cannot be the root
  const ccoll::runtime::PlanSource rooted = [&](const ccoll::plan::PlanRequest& req) {
    ++builds;
    if (req.root < relays)
      throw ccoll::Error(ccoll::ErrorCode::InvalidArgument, -1,
                         "rank " + std::to_string(req.root) + " is a relay");
    ccoll::plan::PlanRequest r = req;
    r.collective = ccoll::plan::Collective::broadcast;
    ccoll::plan::Plan p = ccoll::plan::build_chain_broadcast(r);
    for (int q = 0; q < relays; ++q) p.active[static_cast<std::size_t>(q)] = false;
    return p;
  };
  const Cache first_root_2 = [&] {
    relays = 2;
    return Cache(config, 4, rooted, "stub");
  }();
  CHECK(first_root_2.collective() == ccoll::plan::Collective::broadcast);
  CHECK(first_root_2.active() == std::vector<bool>{false, false, true, true});
  relays = 4;  // no rank plans as the root: root 0's error
  CHECK_THROWS_WITH_AS(Cache(config, 4, rooted, "stub"), doctest::Contains("rank 0 is a relay"),
                       ccoll::Error);
  // Without a root: every count fails alike, and the retry stops after one root. The error is
  // the first that does not name the count argument (here the full count's).
  const ccoll::runtime::PlanSource no_count =
      [&](const ccoll::plan::PlanRequest& req) -> ccoll::plan::Plan {
    ++builds;
    throw ccoll::Error(ccoll::ErrorCode::InvalidArgument, -1,
                       "no plan of " + std::to_string(req.count / 4096) + " x 4096 elements");
  };
  builds = 0;
  CHECK_THROWS_WITH_AS(Cache(config, 4, no_count, "stub"),
                       doctest::Contains("no plan of 4 x 4096 elements"), ccoll::Error);
  CHECK(builds == 4 + 1);  // counts m = 4, 3, 2, 1 at root 0; root 1 at m = 4
}
}  // namespace forest_test
