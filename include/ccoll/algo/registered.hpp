// ccoll/algo/registered.hpp: what an algorithm offers for choice by name at run time, without
// the table that lists them (algo/registry.hpp).
//
// An entry (Algorithm) says what the algorithm is and how to make it, as a Registered logical
// topology, from an AlgorithmRequest: a physical topology (optional for algorithms that plan on
// abstract ranks, required for those planned on a graph) or a rank count. Each algorithm's header
// defines its entry as a function (ring_algorithm(), ...) from the pieces here; algo/registry.hpp
// alone collects the entries, so a program's table never depends on which algorithm headers it
// happened to include.
#pragma once

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
