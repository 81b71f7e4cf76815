// ccoll/algo/registry.hpp: the algorithms by name, for code that chooses one at run time: the
// benchmark (ccoll_perf -a), the CLI (ccoll plan/simulate --algo) and the tests.
//
// An entry says what the algorithm is and how to make it, as a Registered logical topology, from
// an AlgorithmRequest: a physical topology (optional for algorithms that plan on abstract ranks,
// required for those planned on a graph) or a rank count. Entries register themselves from the
// header that defines the algorithm (CCOLL_REGISTER_ALGORITHM), so adding an algorithm adds a
// header and one include in algo/all.hpp; nothing else lists algorithm names.
//
// A name may carry a schedule suffix: "tree-overlap" is the tree with its reduce and broadcast
// overlapped ([C-Cube] Sec. 3), "tree-phased" without; a bare name takes the entry's default.
#pragma once

#include <algorithm>
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/relay_routing.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::algo {

struct AlgorithmRequest {
  const physical::PhysicalTopology* topology = nullptr;  // null: nranks abstract ranks
  int nranks = 0;
  int split = 0;  // tree algorithms on a graph: cut trees into about this many equal-rate channels
};

// A logical topology chosen at run time: a name, a plan builder and, when planned on a physical
// topology, the rank count it was planned for and the physical node of each rank.
class Registered {
 public:
  std::string name;

  Registered(std::string n, std::function<plan::Plan(const plan::PlanRequest&)> build,
             int fixed_nranks = 0, std::vector<int> rank_node = {}, std::any details = {})
      : name(std::move(n)),
        build_(std::make_shared<const std::function<plan::Plan(const plan::PlanRequest&)>>(
            std::move(build))),
        nranks_(fixed_nranks),
        rank_node_(std::make_shared<const std::vector<int>>(std::move(rank_node))),
        details_(std::move(details)) {}

  plan::Plan build(const plan::PlanRequest& req) const { return (*build_)(req); }
  // The ranks the plans need (0: any number).
  int nranks() const { return nranks_; }
  // The physical node of each rank (empty without a physical topology).
  const std::vector<int>& rank_node() const { return *rank_node_; }
  // The algorithm's own object (the PackedForest policy of "forest", say), for tools that report
  // more than the plan.
  const std::any& details() const { return details_; }

 private:
  std::shared_ptr<const std::function<plan::Plan(const plan::PlanRequest&)>> build_;
  int nranks_ = 0;
  std::shared_ptr<const std::vector<int>> rank_node_;
  std::any details_;
};

static_assert(FixedRankTopology<Registered>);

struct Algorithm {
  std::string name;
  std::string description;
  bool needs_topology = false;  // planned on a physical graph
  bool default_overlap = true;  // the schedule a bare name runs with
  std::function<Registered(const AlgorithmRequest&)> make;
  // Its plans only connect ranks that a route joins (it plans on the graph's routes itself), so
  // make_algorithm adds no relays.
  bool plans_on_routes = false;
};

inline std::vector<Algorithm>& algorithm_table() {
  static std::vector<Algorithm> table;
  return table;
}

// Adds an entry (once per name); returns true so that it can initialise a variable.
inline bool register_algorithm(Algorithm a) {
  auto& t = algorithm_table();
  if (std::none_of(t.begin(), t.end(), [&](const Algorithm& x) { return x.name == a.name; }))
    t.push_back(std::move(a));
  return true;
}

// The registered algorithms, sorted by name.
inline std::vector<Algorithm> algorithms() {
  auto t = algorithm_table();
  std::sort(t.begin(), t.end(),
            [](const Algorithm& a, const Algorithm& b) { return a.name < b.name; });
  return t;
}

inline std::string algorithm_names() {
  std::string s;
  for (const auto& a : algorithms()) s += (s.empty() ? "" : ", ") + a.name;
  return s;
}

// A parsed name: the entry and the schedule.
struct AlgorithmSpec {
  Algorithm algorithm;
  bool overlap = true;
  std::string name() const {
    return algorithm.name + (overlap == algorithm.default_overlap ? ""
                             : overlap                            ? "-overlap"
                                                                  : "-phased");
  }
};

inline AlgorithmSpec find_algorithm(std::string_view spec) {
  std::string base(spec);
  int suffix = -1;  // -1: none, 0: phased, 1: overlap
  for (auto [text, value] :
       {std::pair{std::string_view("-overlap"), 1}, std::pair{std::string_view("-phased"), 0}})
    if (base.size() > text.size() && base.ends_with(text)) {
      base.resize(base.size() - text.size());
      suffix = value;
    }
  for (const auto& a : algorithm_table())
    if (a.name == base) return AlgorithmSpec{a, suffix < 0 ? a.default_overlap : suffix == 1};
  throw_invalid_argument(-1, "algorithm",
                         "one of " + algorithm_names() + " (optionally -overlap or -phased)",
                         std::string(spec));
}

// `inner` on `topology` with relay ranks (algo/relay_routing.hpp) for the rank pairs its plans
// connect and no route joins; `inner` itself when there are none. The pairs are read from two
// reference plans (one and two channels, every piece non-empty), which cover the pairs of the
// algorithms here: their pairs depend on the rank count and the channels' directions, not on the
// element count. A plan outside them is refused by route_through_relays, naming the pair.
inline Registered with_relays(const Registered& inner, const physical::PhysicalTopology& topology) {
  if (inner.rank_node().empty() || inner.nranks() < 2) return inner;
  // Graphs whose GPUs all hang off one network need no relays, whatever the plans connect.
  if (physical::Reachability(topology).all_routable(inner.rank_node())) return inner;
  std::vector<plan::Plan> refs;
  for (std::uint32_t nch : {1u, 2u}) {
    plan::PlanRequest r;
    r.nranks = inner.nranks();
    r.nchannels = nch;
    r.count = static_cast<std::uint64_t>(inner.nranks()) * nch * 4096;
    r.slot_bytes = std::uint64_t{1} << 40;
    refs.push_back(inner.build(r));
  }
  auto routing = std::make_shared<const RelayRouting>(
      plan_relays(topology, inner.rank_node(), {&refs[0], &refs[1]}));
  if (routing->empty()) return inner;
  // The reachability index refers to the topology: both live as long as the closure.
  struct Graph {
    explicit Graph(const physical::PhysicalTopology& t) : topology(t), reach(topology) {}
    physical::PhysicalTopology topology;
    physical::Reachability reach;
  };
  auto graph = std::make_shared<const Graph>(topology);
  auto build = [inner, routing, graph](const plan::PlanRequest& req) {
    plan::PlanRequest base = req;
    base.nranks = routing->base_ranks;
    return route_through_relays(inner.build(base), *routing, graph->reach);
  };
  return Registered(inner.name, build, routing->nranks(), routing->rank_node, inner.details());
}

inline Registered make_algorithm(const Algorithm& a, const AlgorithmRequest& req) {
  if (a.needs_topology && req.topology == nullptr)
    throw_invalid_argument(-1, "topology", "a physical topology (algorithm " + a.name + ")",
                           "none");
  if (req.topology == nullptr && req.nranks < 1)
    throw_invalid_argument(-1, "nranks", ">= 1", std::to_string(req.nranks));
  Registered r = a.make(req);
  if (req.topology == nullptr || a.plans_on_routes) return r;
  return with_relays(r, *req.topology);
}

// The active nodes of a physical topology as ranks (algorithms on abstract ranks).
inline std::vector<int> active_rank_nodes(const AlgorithmRequest& req) {
  return req.topology == nullptr ? std::vector<int>{} : req.topology->active_nodes();
}

// A stateless policy L as a registered algorithm on nranks abstract ranks, or on the active nodes
// of a physical topology.
template <class L>
Registered registered_stateless(const AlgorithmRequest& req) {
  std::vector<int> nodes = active_rank_nodes(req);
  const int n = req.topology == nullptr ? req.nranks : static_cast<int>(nodes.size());
  return Registered(
      std::string(L::name), [](const plan::PlanRequest& r) { return L::build(r); },
      req.topology == nullptr ? 0 : n, std::move(nodes));
}

}  // namespace ccoll::algo

#define CCOLL_REGISTRY_CONCAT2(a, b) a##b
#define CCOLL_REGISTRY_CONCAT(a, b) CCOLL_REGISTRY_CONCAT2(a, b)
// Registers an algorithm from the header that defines it (an inline variable: once per program).
#define CCOLL_REGISTER_ALGORITHM(ident, ...)                                                       \
  namespace ccoll::algo::registered {                                                              \
  inline const bool CCOLL_REGISTRY_CONCAT(kRegistered_,                                            \
                                          ident) = ::ccoll::algo::register_algorithm(__VA_ARGS__); \
  }
