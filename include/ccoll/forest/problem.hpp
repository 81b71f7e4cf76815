// ccoll/forest/problem.hpp: [TopoSync]'s tree packing as a packing LP over a physical
// graph, with its pricing oracle; shared by the multiplicative-weights solver (packed_forest.hpp)
// and the exact column-generation reference (exact.hpp).
//
// Logical graph. Trees are built over compute nodes (plan ranks). A tree edge a->b is a plan
// connection; it travels along the physical route a->b of physical/graph.hpp (through switches,
// NICs, CPUs; never through another GPU) and uses one unit of its weight on every link of that
// route. Switches therefore route but never replicate or add: two tree edges through the same NIC
// cost that NIC twice, as they do on real hardware without in-network reduction.
//
// Rows and columns. A row is (pool, physical link) with the link's capacity; the phased and
// overlapped schedules have two pools (the reduce stage's capacity and the pure-broadcast stage's,
// [TopoSync] problems (4) and (8): constraints (4c)/(4d), (8d)/(8e)), the concurrent schedule one.
// A column is a pair (reduce tree, broadcast tree) of one root carrying the same elements, so
// chi(v) = its reduce weight = its broadcast weight holds by construction ((4a)/(4b), (8a)/(8b);
// (8c) too: a K tree is paired with a reduce tree of the same weight). The reduce tree uses pool 0;
// the broadcast tree pool 1 (phased; overlapped J trees) or pool 0 (concurrent; overlapped K
// trees). The LP is max sum of column weights subject to row loads <= capacities.
//
// Oracle. Under row prices y, the cheapest column of root v is the cheapest reduce tree under the
// pool-0 prices plus the cheapest broadcast tree under its pool's prices: two (three, overlapped)
// minimum arborescences, Edmonds' algorithm when every compute node is active (exact), a directed
// Steiner routine otherwise (steiner.hpp). A tree's price is the sum over its edges of the prices
// of the links on the edge's route (a link used twice is paid twice, matching its load).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/forest/types.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/solve/arborescence.hpp"
#include "ccoll/solve/steiner.hpp"

namespace ccoll::forest {

// A (reduce tree, broadcast tree) pair of one root: a column of the packing LP.
struct ForestColumn {
  int root = 0;                               // local compute index
  int bpool = 0;                              // pool of the broadcast tree
  std::vector<int> reduce, broadcast;         // logical edge indices, sorted
  std::vector<std::pair<int, double>> usage;  // (row, units per unit of weight), sorted by row
  std::uint64_t key = 0;                      // hash of (root, bpool, reduce, broadcast)

  bool same_trees(const ForestColumn& o) const {
    return root == o.root && bpool == o.bpool && reduce == o.reduce && broadcast == o.broadcast;
  }
};

struct ForestProblem {
  ForestSchedule schedule = ForestSchedule::phased;
  int n = 0;                   // compute nodes
  std::vector<int> node;       // local compute index -> node index
  std::vector<char> terminal;  // local: active
  std::vector<int> roots;      // local indices of the active nodes
  bool all_active = true;
  // Logical edges: fwd[e] = a->b, rev[e] = b->a (reduce trees are out-trees of the reversed
  // graph); route_links[route_begin[e] .. route_begin[e+1]) are the local links of a->b's route.
  std::vector<solve::ArcEdge> fwd, rev;
  std::vector<int> route_begin, route_links;
  std::vector<int> link;         // local link -> topology link index
  std::vector<double> link_cap;  // local link capacity, GB/s
  int pools = 2;

  int links() const { return static_cast<int>(link_cap.size()); }
  // Inactive compute nodes (relays). Not n - roots: a quotient (symmetry.hpp) keeps one root per
  // orbit of roots.
  int relays() const {
    int r = 0;
    for (char t : terminal) r += t ? 0 : 1;
    return r;
  }
  int rows() const { return pools * links(); }
  double row_capacity(int row) const { return link_cap[static_cast<std::size_t>(row % links())]; }
  std::vector<double> capacities() const {
    std::vector<double> c;
    c.reserve(static_cast<std::size_t>(rows()));
    for (int p = 0; p < pools; ++p) c.insert(c.end(), link_cap.begin(), link_cap.end());
    return c;
  }
  // Broadcast pools a column of this schedule may use.
  int first_bpool() const { return schedule == ForestSchedule::phased ? 1 : 0; }
  int last_bpool() const { return schedule == ForestSchedule::concurrent ? 0 : 1; }
};

inline ForestProblem make_forest_problem(const physical::PhysicalTopology& topo,
                                         ForestSchedule schedule) {
  topo.validate();
  ForestProblem p;
  p.schedule = schedule;
  p.pools = schedule == ForestSchedule::concurrent ? 1 : 2;
  p.node = topo.compute_nodes();
  p.n = static_cast<int>(p.node.size());
  for (int i = 0; i < p.n; ++i) {
    const bool act = topo.is_active(p.node[static_cast<std::size_t>(i)]);
    p.terminal.push_back(static_cast<char>(act));
    if (act) p.roots.push_back(i);
  }
  p.all_active = static_cast<int>(p.roots.size()) == p.n;
  const auto routes = physical::all_routes(topo);
  std::vector<int> link_local(topo.links.size(), -1);
  p.route_begin.push_back(0);
  for (int a = 0; a < p.n; ++a)
    for (int b = 0; b < p.n; ++b) {
      if (a == b) continue;
      const physical::Route& r =
          routes(p.node[static_cast<std::size_t>(a)], p.node[static_cast<std::size_t>(b)]);
      if (r.empty()) continue;
      p.fwd.push_back(solve::ArcEdge{a, b, 0});
      p.rev.push_back(solve::ArcEdge{b, a, 0});
      for (int li : r) {
        auto& l = link_local[physical::PhysicalTopology::idx(li)];
        if (l < 0) {
          l = static_cast<int>(p.link_cap.size());
          p.link.push_back(li);
          p.link_cap.push_back(topo.links[physical::PhysicalTopology::idx(li)].capacity_GBps());
        }
        p.route_links.push_back(l);
      }
      p.route_begin.push_back(static_cast<int>(p.route_links.size()));
    }
  return p;
}

// Row prices of the cut bounds (Frank's subpartition bounds for packings of arborescences with
// any roots, [TopoSync] Sec. IV cites the spanning case [35]): 1 on the reduce pool's links out of
// every active compute node (each reduce tree leaves every active node but its root), 1 on the
// last broadcast pool's links into them, and the same two for the links that leave or enter a
// machine (nodes sharing a host). Priced by an exact oracle, any of them certifies a bound (the
// oracle finds how often the cheapest tree must cross the cut); the LP's own duals rarely land on
// them exactly on symmetric machines, where they are the optimum (every link of a pairwise
// cluster is saturated at it).
inline std::vector<std::vector<double>> cut_prices(const physical::PhysicalTopology& topo,
                                                   const ForestProblem& p) {
  using physical::PhysicalTopology;
  const int L = p.links();
  const auto host = [&](int v) -> const std::string& {
    return topo.nodes[PhysicalTopology::idx(v)].host;
  };
  std::vector<std::vector<double>> out;
  const int bpool = p.last_bpool();
  for (int kind = 0; kind < 2; ++kind) {  // 0: active nodes, 1: machines
    std::vector<double> red(static_cast<std::size_t>(p.rows()), 0.0);
    std::vector<double> bc(static_cast<std::size_t>(p.rows()), 0.0);
    bool any = false;
    for (int l = 0; l < L; ++l) {
      const auto& lk = topo.links[PhysicalTopology::idx(p.link[static_cast<std::size_t>(l)])];
      bool leaves = false, enters = false;
      if (kind == 0) {
        leaves = topo.is_active(lk.from);
        enters = topo.is_active(lk.to);
      } else {
        leaves = !host(lk.from).empty() && host(lk.from) != host(lk.to);
        enters = !host(lk.to).empty() && host(lk.from) != host(lk.to);
      }
      if (leaves) red[static_cast<std::size_t>(l)] = 1.0, any = true;
      const int bc_row = bpool * L + l;
      if (enters) bc[static_cast<std::size_t>(bc_row)] = 1.0, any = true;
    }
    if (!any) continue;
    out.push_back(std::move(red));
    out.push_back(std::move(bc));
  }
  return out;
}

// The pricing oracle, with its workspace. Not thread-safe; one per solver.
class ForestOracle {
 public:
  ForestOracle(const ForestProblem& p, const solve::SteinerOptions& steiner)
      : p_(p), steiner_(steiner), fwd_(p.fwd), rev_(p.rev) {
    acc_.assign(static_cast<std::size_t>(p.rows()), 0.0);
    edge_cost_.assign(static_cast<std::size_t>(p.pools), std::vector<double>(p.fwd.size(), 0.0));
  }

  // True when every call returns a cheapest column (no relay, or few enough to enumerate).
  bool exact() const { return p_.all_active || p_.relays() <= steiner_.exact_limit; }
  std::size_t calls() const { return calls_; }

  // Sets the row prices for the next price() calls (edge prices are cached per pool).
  void set_prices(const std::vector<double>& y) {
    const int L = p_.links();
    for (int pool = 0; pool < p_.pools; ++pool) {
      auto& ec = edge_cost_[static_cast<std::size_t>(pool)];
      const double* yp = y.data() + static_cast<std::size_t>(pool) * static_cast<std::size_t>(L);
      for (std::size_t e = 0; e < p_.fwd.size(); ++e) {
        double c = 0;
        for (int k = p_.route_begin[e]; k < p_.route_begin[e + 1]; ++k)
          c += yp[p_.route_links[static_cast<std::size_t>(k)]];
        ec[e] = c;
      }
    }
  }

  // The cheapest column of local root `root` under the prices of set_prices(): fills `out` (trees,
  // usage, key) and returns its price, or +infinity when no tree spans the active nodes.
  double price(int root, ForestColumn& out) {
    ++calls_;
    constexpr double inf = std::numeric_limits<double>::infinity();
    const auto& ec0 = edge_cost_[0];
    for (std::size_t e = 0; e < rev_.size(); ++e) rev_[e].cost = ec0[e];
    if (!tree(rev_, root, red_)) return inf;
    const double cr = solve::SteinerSolver::cost(rev_, red_);
    double best = inf;
    for (int pool = p_.first_bpool(); pool <= p_.last_bpool(); ++pool) {
      const auto& ec = edge_cost_[static_cast<std::size_t>(pool)];
      for (std::size_t e = 0; e < fwd_.size(); ++e) fwd_[e].cost = ec[e];
      if (!tree(fwd_, root, bc_)) continue;
      const double cb = solve::SteinerSolver::cost(fwd_, bc_);
      if (cr + cb < best) {
        best = cr + cb;
        out.bpool = pool;
        out.broadcast = bc_;
      }
    }
    if (!(best < inf)) return inf;
    out.root = root;
    out.reduce = red_;
    finish(out);
    return best;
  }

  // Sorts the trees and fills usage and key from them.
  void finish(ForestColumn& c) {
    std::sort(c.reduce.begin(), c.reduce.end());
    std::sort(c.broadcast.begin(), c.broadcast.end());
    touched_.clear();
    const auto add = [&](const std::vector<int>& edges, int pool) {
      const int base = pool * p_.links();
      for (int e : edges)
        for (int k = p_.route_begin[static_cast<std::size_t>(e)];
             k < p_.route_begin[static_cast<std::size_t>(e) + 1]; ++k) {
          const int row = base + p_.route_links[static_cast<std::size_t>(k)];
          if (acc_[static_cast<std::size_t>(row)] == 0.0) touched_.push_back(row);
          acc_[static_cast<std::size_t>(row)] += 1.0;
        }
    };
    add(c.reduce, 0);
    add(c.broadcast, c.bpool);
    std::sort(touched_.begin(), touched_.end());
    c.usage.clear();
    for (int row : touched_) {
      c.usage.emplace_back(row, acc_[static_cast<std::size_t>(row)]);
      acc_[static_cast<std::size_t>(row)] = 0.0;
    }
    std::uint64_t h = 1469598103934665603ull;
    const auto mix = [&](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(static_cast<std::uint64_t>(c.root));
    mix(static_cast<std::uint64_t>(c.bpool));
    for (int e : c.reduce) mix(static_cast<std::uint64_t>(e));
    mix(0xffffffffull);
    for (int e : c.broadcast) mix(static_cast<std::uint64_t>(e));
    c.key = h;
  }

 private:
  bool tree(const std::vector<solve::ArcEdge>& edges, int root, std::vector<int>& out) {
    if (p_.all_active) return arb_.solve(p_.n, edges, root, out);
    return steiner_solver_.solve(p_.n, edges, root, p_.terminal, steiner_, out);
  }

  const ForestProblem& p_;
  solve::SteinerOptions steiner_;
  solve::SteinerSolver steiner_solver_;
  solve::ArborescenceSolver arb_;
  std::vector<solve::ArcEdge> fwd_, rev_;
  std::vector<std::vector<double>> edge_cost_;
  std::vector<int> red_, bc_, touched_;
  std::vector<double> acc_;
  std::size_t calls_ = 0;
};

// The pairs of a packed forest from columns and their weights (weights <= 0 are skipped).
inline void add_pairs(const ForestProblem& p, const std::vector<ForestColumn>& cols,
                      const std::vector<double>& weight, PackedForest& out) {
  const auto to_edges = [&](const std::vector<int>& es) {
    std::vector<TreeEdge> v;
    v.reserve(es.size());
    for (int e : es)
      v.emplace_back(p.node[static_cast<std::size_t>(p.fwd[static_cast<std::size_t>(e)].from)],
                     p.node[static_cast<std::size_t>(p.fwd[static_cast<std::size_t>(e)].to)]);
    return v;
  };
  for (std::size_t j = 0; j < cols.size() && j < weight.size(); ++j) {
    if (!(weight[j] > 0)) continue;
    const ForestColumn& c = cols[j];
    out.pairs.push_back(ForestPair{
        p.node[static_cast<std::size_t>(c.root)], to_edges(c.reduce), to_edges(c.broadcast),
        p.schedule == ForestSchedule::overlapped && c.bpool == 0, weight[j]});
    out.total_GBps += weight[j];
  }
}

// Largest load / capacity over the rows for column weights x (1: exactly feasible).
inline double max_congestion(const ForestProblem& p, const std::vector<ForestColumn>& cols,
                             const std::vector<double>& x) {
  std::vector<double> load(static_cast<std::size_t>(p.rows()), 0.0);
  for (std::size_t j = 0; j < cols.size(); ++j)
    if (x[j] > 0)
      for (const auto& [r, a] : cols[j].usage) load[static_cast<std::size_t>(r)] += a * x[j];
  double m = 0;
  for (int r = 0; r < p.rows(); ++r)
    m = std::max(m, load[static_cast<std::size_t>(r)] / p.row_capacity(r));
  return m;
}

}  // namespace ccoll::forest
