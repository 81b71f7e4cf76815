// ccoll/topology/packed_forest.hpp: seed 001's reduce/broadcast tree packing on any physical graph.
//
// For every active worker v, reduce trees (data flows towards v) and broadcast trees (away from
// v) span the active workers; inactive compute nodes may be relays (directed Steiner trees). Tree
// weights w (GB/s) maximise sum_v chi(v) subject to link capacities, with chi(v) = the weight of
// v's reduce trees = the weight of v's broadcast trees (seed 001, problem (4)); each tree then
// carries a share of the elements proportional to its weight (Property 3).
//
// Logical graph. Trees are built over compute nodes (plan ranks). A tree edge a->b is a plan
// connection; it travels along the physical route a->b of physical.hpp (through switches, NICs,
// CPUs; never through another GPU) and uses one unit of its weight on every link of that route.
// Switches therefore route but never replicate or add: two tree edges through the same NIC cost
// that NIC twice, as they do on real hardware without in-network reduction.
//
// Schedules (which capacity a broadcast tree uses):
//   - phased: all reduces, then all broadcasts; each stage has the full link capacity
//     (problem (4), time 2|C| / sum chi).
//   - overlapped: seed 001 problem (8): a broadcast tree either runs during the reduce stage and
//     shares capacity with the reduce trees (K) or runs afterwards with the full capacity (J);
//     time 2|C| / sum chi.
//   - concurrent: reduce and broadcast of every chunk run at the same time for the whole
//     collective (the pipelined schedule of seed 004's C1 and of plan/tree.hpp with overlap):
//     one capacity pool, time |C| / sum chi.
// On a symmetric full-duplex graph the overlapped optimum equals the phased one (the reduce
// stage alone already bounds sum chi by the best reduce packing), and the concurrent optimum is
// at most about half the phased one, so none of them buys bandwidth there: overlap gains latency
// and earlier gradients, not throughput. The tests and docs/topology.md report the measured ratios.
//
// Solver. Column generation over pairs (reduce tree, broadcast tree) of one root: the restricted
// LP (lp.hpp) gives dual link prices; the pricing oracle finds, for every root, the cheapest
// reduce plus broadcast tree under those prices (Edmonds' algorithm when every compute node is
// active, which makes the result optimal; a directed Steiner routine otherwise, exact for few
// relays); trees priced below 1 enter the LP. This replaces the ellipsoid method of seed 001's
// Alg. 1 with the same primal-dual idea. With an exact oracle the final duals certify an upper
// bound (upper_bound_GBps). The LP's basic optimum keeps few trees (at most one per tight link);
// ForestOptions::max_pairs can cut further (keep the heaviest, re-solve).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/topology/arborescence.hpp"
#include "ccoll/topology/lp.hpp"
#include "ccoll/topology/physical.hpp"
#include "ccoll/topology/steiner.hpp"

namespace ccoll::topology {

enum class ForestSchedule : std::uint8_t { phased, overlapped, concurrent };

inline const char* to_string(ForestSchedule s) {
  switch (s) {
    case ForestSchedule::phased:
      return "phased";
    case ForestSchedule::overlapped:
      return "overlapped";
    case ForestSchedule::concurrent:
      return "concurrent";
  }
  return "?";
}

struct ForestOptions {
  ForestSchedule schedule = ForestSchedule::phased;
  SteinerOptions steiner{};
  int max_rounds = 500;     // column-generation rounds
  double tolerance = 1e-7;  // a tree enters when its price is below 1 - tolerance
  int max_pairs = 0;        // 0: keep the LP's basic solution; else keep the heaviest pairs
  // Drop light pairs while the total stays >= (1 - prune_loss) * optimum found (0: keep all).
  double prune_loss = 0.0;
};

using TreeEdge = std::pair<int, int>;  // (from node, to node): the direction data flows

enum class TreePhase : std::uint8_t { reduce, broadcast };

// One reduce tree and one broadcast tree of the same root carrying the same elements.
struct ForestPair {
  int root = 0;                                   // node index
  std::vector<TreeEdge> reduce_edges;             // child -> parent
  std::vector<TreeEdge> broadcast_edges;          // parent -> child
  bool broadcast_shares_reduce_capacity = false;  // overlapped: a K tree of problem (8)
  double weight_GBps = 0;
};

struct ForestTree {
  int root = 0;
  TreePhase phase = TreePhase::reduce;
  bool overlapped = false;  // a broadcast tree that runs during the reduce stage
  double weight_GBps = 0;
  std::vector<TreeEdge> edges;
};

struct PackedForest {
  ForestSchedule schedule = ForestSchedule::phased;
  std::vector<int> active;        // node indices
  std::vector<ForestPair> pairs;  // weight > 0
  double total_GBps = 0;          // sum_v chi(v)
  double optimum_found_GBps = 0;  // before pruning
  double upper_bound_GBps = -1;   // certified LP upper bound (exact oracle only), else -1
  bool exact_oracle = false;
  int rounds = 0;
  std::size_t columns = 0;  // trees priced into the LP
  double seconds = 0;       // planning time
  std::size_t pivots = 0;   // simplex pivots, all rounds
  std::size_t lp_rows = 0;

  // Reduce and broadcast trees, identical trees of one root merged (weights added).
  std::vector<ForestTree> trees() const {
    std::vector<ForestTree> out;
    const auto add = [&](int root, TreePhase ph, bool ov, const std::vector<TreeEdge>& e,
                         double w) {
      auto sorted = e;
      std::sort(sorted.begin(), sorted.end());
      for (auto& t : out)
        if (t.root == root && t.phase == ph && t.overlapped == ov && t.edges == sorted) {
          t.weight_GBps += w;
          return;
        }
      out.push_back(ForestTree{root, ph, ov, w, std::move(sorted)});
    };
    for (const auto& p : pairs)
      add(p.root, TreePhase::reduce, false, p.reduce_edges, p.weight_GBps);
    for (const auto& p : pairs)
      add(p.root, TreePhase::broadcast, p.broadcast_shares_reduce_capacity, p.broadcast_edges,
          p.weight_GBps);
    return out;
  }

  // chi(v) per node index.
  std::map<int, double> chi() const {
    std::map<int, double> c;
    for (int v : active) c[v] = 0;
    for (const auto& p : pairs) c[p.root] += p.weight_GBps;
    return c;
  }

  // Bandwidth-only time of an allreduce of `bytes` (Property 2: pipelined, latency ignored).
  double time_s(double bytes) const {
    if (!(total_GBps > 0)) return std::numeric_limits<double>::infinity();
    const double stages = schedule == ForestSchedule::concurrent ? 1.0 : 2.0;
    return stages * bytes / (total_GBps * 1e9);
  }
};

namespace forest_detail {

struct LogicalEdge {
  int a = 0, b = 0;        // local compute indices
  std::vector<int> links;  // local link indices along the route
};

struct Column {
  int root = 0;                        // local
  std::vector<int> reduce, broadcast;  // logical edge indices
  int bpool = 0;
  LpColumn lp;
};

}  // namespace forest_detail

inline PackedForest solve_packed_forest(const PhysicalTopology& topo,
                                        const ForestOptions& opt = {}) {
  using namespace forest_detail;
  const auto t0 = std::chrono::steady_clock::now();
  topo.validate();
  const auto compute = topo.compute_nodes();
  const int n = static_cast<int>(compute.size());
  std::vector<int> local(topo.nodes.size(), -1);
  for (int i = 0; i < n; ++i)
    local[PhysicalTopology::idx(compute[static_cast<std::size_t>(i)])] = i;
  std::vector<bool> terminal(static_cast<std::size_t>(n));
  std::vector<int> roots;
  for (int i = 0; i < n; ++i) {
    terminal[static_cast<std::size_t>(i)] = topo.is_active(compute[static_cast<std::size_t>(i)]);
    if (terminal[static_cast<std::size_t>(i)]) roots.push_back(i);
  }
  const bool all_active = static_cast<int>(roots.size()) == n;
  PackedForest out;
  out.schedule = opt.schedule;
  for (int r : roots) out.active.push_back(compute[static_cast<std::size_t>(r)]);
  out.exact_oracle = all_active || n - static_cast<int>(roots.size()) <= opt.steiner.exact_limit;
  if (roots.size() == 1) {  // a single worker: nothing to send
    out.pairs.push_back(
        ForestPair{out.active[0], {}, {}, false, std::numeric_limits<double>::infinity()});
    out.total_GBps = std::numeric_limits<double>::infinity();
    return out;
  }

  // Logical edges along routes; physical links that some route uses become LP rows.
  const auto routes = all_routes(topo);
  std::vector<LogicalEdge> ledges;
  std::vector<int> link_local(topo.links.size(), -1);
  std::vector<double> caps;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const Route& r =
          routes(compute[static_cast<std::size_t>(a)], compute[static_cast<std::size_t>(b)]);
      if (r.empty()) continue;
      LogicalEdge e{a, b, {}};
      for (int li : r) {
        auto& l = link_local[PhysicalTopology::idx(li)];
        if (l < 0) {
          l = static_cast<int>(caps.size());
          caps.push_back(topo.links[PhysicalTopology::idx(li)].capacity_GBps());
        }
        e.links.push_back(l);
      }
      ledges.push_back(std::move(e));
    }
  const int L = static_cast<int>(caps.size());
  const int npools = opt.schedule == ForestSchedule::concurrent ? 1 : 2;
  std::vector<double> b;
  for (int p = 0; p < npools; ++p) b.insert(b.end(), caps.begin(), caps.end());

  std::vector<Column> cols;
  std::map<std::vector<int>, bool> seen;
  const auto make_column = [&](int root, std::vector<int> red, std::vector<int> bc, int bpool) {
    std::sort(red.begin(), red.end());
    std::sort(bc.begin(), bc.end());
    std::vector<int> key{root, bpool, static_cast<int>(red.size())};
    key.insert(key.end(), red.begin(), red.end());
    key.insert(key.end(), bc.begin(), bc.end());
    if (seen.count(key)) return false;
    seen[key] = true;
    Column c{root, std::move(red), std::move(bc), bpool, {}};
    std::map<int, double> use;
    for (int e : c.reduce)
      for (int l : ledges[static_cast<std::size_t>(e)].links) use[l] += 1;
    for (int e : c.broadcast)
      for (int l : ledges[static_cast<std::size_t>(e)].links) use[bpool * L + l] += 1;
    c.lp.objective = 1.0;
    for (const auto& [row, a] : use) c.lp.entries.emplace_back(row, a);
    cols.push_back(std::move(c));
    return true;
  };

  // Pricing: the cheapest (reduce, broadcast) pair of `root` under row prices y.
  struct Priced {
    double cost = std::numeric_limits<double>::infinity();
    std::vector<int> reduce, broadcast;
    int bpool = 0;
  };
  std::vector<ArcEdge> fwd(ledges.size()), rev(ledges.size());
  const auto price_root = [&](int root, const std::vector<double>& y) {
    Priced best;
    const auto edge_cost = [&](const LogicalEdge& e, int pool) {
      double c = 0;
      for (int l : e.links) c += y[static_cast<std::size_t>(pool * L + l)];
      return c;
    };
    // Reduce: an in-tree is an out-tree of the reversed graph.
    for (std::size_t i = 0; i < ledges.size(); ++i)
      rev[i] = ArcEdge{ledges[i].b, ledges[i].a, edge_cost(ledges[i], 0)};
    const auto red = steiner_arborescence(n, rev, root, terminal, opt.steiner);
    if (!red) return best;
    double cr = 0;
    for (int i : *red) cr += rev[static_cast<std::size_t>(i)].cost;
    const int first_pool = opt.schedule == ForestSchedule::phased ? 1 : 0;
    const int last_pool = opt.schedule == ForestSchedule::concurrent ? 0 : 1;
    for (int pool = first_pool; pool <= last_pool; ++pool) {
      for (std::size_t i = 0; i < ledges.size(); ++i)
        fwd[i] = ArcEdge{ledges[i].a, ledges[i].b, edge_cost(ledges[i], pool)};
      const auto bc = steiner_arborescence(n, fwd, root, terminal, opt.steiner);
      if (!bc) continue;
      double cb = 0;
      for (int i : *bc) cb += fwd[static_cast<std::size_t>(i)].cost;
      if (cr + cb < best.cost) best = Priced{cr + cb, *red, *bc, pool};
    }
    return best;
  };

  // Start from the trees that are cheapest under 1/capacity prices (wide links first).
  {
    std::vector<double> y(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) y[i] = 1.0 / b[i];
    for (int r : roots) {
      auto p = price_root(r, y);
      if (!std::isfinite(p.cost))
        throw TopologyError(
            "no tree rooted at \"" +
            topo.nodes[PhysicalTopology::idx(compute[static_cast<std::size_t>(r)])].id +
            "\" spans the active nodes");
      make_column(r, p.reduce, p.broadcast, p.bpool);
    }
  }
  LpResult lp;
  PackingLp master(b);
  std::size_t in_master = 0;
  const auto solve_lp = [&] {
    for (; in_master < cols.size(); ++in_master) master.add_column(cols[in_master].lp);
    lp = master.solve();
    out.pivots += lp.pivots;
    out.lp_rows = master.rows();
  };
  for (out.rounds = 0; out.rounds < opt.max_rounds; ++out.rounds) {
    solve_lp();
    bool added = false;
    double min_cost = std::numeric_limits<double>::infinity();
    for (int r : roots) {
      auto p = price_root(r, lp.dual);
      min_cost = std::min(min_cost, p.cost);
      if (p.cost < 1.0 - opt.tolerance) added |= make_column(r, p.reduce, p.broadcast, p.bpool);
    }
    if (out.exact_oracle && min_cost > 0) {
      // y / min_cost is dual feasible: every pair costs >= 1 under it.
      double dual_obj = 0;
      for (std::size_t i = 0; i < b.size(); ++i) dual_obj += b[i] * lp.dual[i];
      const double ub = dual_obj / std::min(1.0, min_cost);
      out.upper_bound_GBps = out.upper_bound_GBps < 0 ? ub : std::min(out.upper_bound_GBps, ub);
    }
    if (!added) {
      ++out.rounds;
      break;
    }
  }
  out.columns = cols.size();

  // Keep the LP's support, then drop the lightest pairs while the total stays within
  // prune_loss of the optimum found (fewer trees: fewer channels in the plan).
  std::vector<std::size_t> support;
  for (std::size_t j = 0; j < cols.size(); ++j)
    if (lp.x[j] > 1e-9 * std::max(1.0, lp.objective)) support.push_back(j);
  const double found = lp.objective;
  out.optimum_found_GBps = found;
  const auto resolve = [&](const std::vector<std::size_t>& keep) {
    std::vector<LpColumn> lc;
    for (std::size_t j : keep) lc.push_back(cols[j].lp);
    return solve_packing_lp(b, lc);
  };
  std::vector<double> weight(cols.size(), 0.0);
  for (std::size_t j : support) weight[j] = lp.x[j];
  const auto set_weights = [&](const std::vector<std::size_t>& keep, const LpResult& r) {
    std::fill(weight.begin(), weight.end(), 0.0);
    for (std::size_t k = 0; k < keep.size(); ++k) weight[keep[k]] = r.x[k];
  };
  if (opt.max_pairs > 0 && static_cast<int>(support.size()) > opt.max_pairs) {
    std::sort(support.begin(), support.end(),
              [&](std::size_t a, std::size_t c) { return weight[a] > weight[c]; });
    support.resize(static_cast<std::size_t>(opt.max_pairs));
    set_weights(support, resolve(support));
  }
  if (opt.prune_loss > 0) {
    for (bool progress = true; progress && support.size() > 1;) {
      progress = false;
      std::sort(support.begin(), support.end(),
                [&](std::size_t a, std::size_t c) { return weight[a] < weight[c]; });
      for (std::size_t k = 0; k < support.size() && k < 4; ++k) {  // try the lightest few
        auto keep = support;
        keep.erase(keep.begin() + static_cast<std::ptrdiff_t>(k));
        const auto r = resolve(keep);
        if (r.objective >= (1 - opt.prune_loss) * found) {
          support = std::move(keep);
          set_weights(support, r);
          progress = true;
          break;
        }
      }
    }
  }
  std::sort(support.begin(), support.end());
  const auto to_edges = [&](const std::vector<int>& es) {
    std::vector<TreeEdge> v;
    for (int e : es)
      v.emplace_back(compute[static_cast<std::size_t>(ledges[static_cast<std::size_t>(e)].a)],
                     compute[static_cast<std::size_t>(ledges[static_cast<std::size_t>(e)].b)]);
    return v;
  };
  for (std::size_t j : support) {
    if (!(weight[j] > 0)) continue;
    const Column& c = cols[j];
    out.pairs.push_back(ForestPair{
        compute[static_cast<std::size_t>(c.root)], to_edges(c.reduce), to_edges(c.broadcast),
        opt.schedule == ForestSchedule::overlapped && c.bpool == 0, weight[j]});
    out.total_GBps += weight[j];
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace ccoll::topology
