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

#include <algorithm>
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/relay_routing.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/placement.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::algo {

struct AlgorithmRequest {
  const physical::PhysicalTopology* topology = nullptr;  // null: nranks abstract ranks
  int nranks = 0;
  int split = 0;  // tree algorithms on a graph: cut trees into about this many equal-rate channels
  // On a graph: relays run inside the ranks on their GPUs (host_relays); false keeps every relay
  // a rank of its own.
  bool host_relays = true;
};

// A logical topology chosen at run time: a name, a plan builder and, when planned on a physical
// topology, the rank count it was planned for and the physical node of each rank.
class Registered {
 public:
  std::string name;
  // Relay ranks whose programs run inside other ranks (host_relays): the plans had this many
  // more ranks before placement.
  int hosted_relays = 0;
  // Counts (elements) at which the plans for a request differ in kind from its plans at large
  // counts, one per kind: those of a policy that chooses among algorithms by size
  // (algo/by_size.hpp). What must know every program a communicator's plans may run (the
  // channels of relays placed in their hosts: host_relays) builds plans there too. Empty or
  // unset: the plans differ by the sizes of their pieces only.
  std::function<std::vector<std::uint64_t>(const plan::PlanRequest&)> size_classes;

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

// Whether `reg` plans collective `c`: a probe of 64 elements a rank, on the ranks it was planned
// for, or on `nranks` abstract ones when any number will do, builds a plan of `c` (an algorithm
// without such plans throws, or builds its allreduce). What runs a list of algorithms for one
// collective (ccoll_perf's `-a all`, the tests' sweeps) asks the algorithms themselves, so a new
// algorithm needs no entry in a table.
inline bool plans_collective(const Registered& reg, plan::Collective c, int nranks = 4) {
  plan::PlanRequest probe;
  probe.nranks = reg.nranks() > 0 ? reg.nranks() : nranks;
  probe.count = static_cast<std::uint64_t>(probe.nranks) * 64;
  probe.collective = c;
  try {
    return reg.build(probe).collective == c;
  } catch (const Error&) {
    return false;
  }
}

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

namespace detail {

// inner's size classes for a wrapper whose requests name more or fewer ranks than inner plans
// for (relays added or placed): asked with inner's own rank count, as its plans are built.
inline std::function<std::vector<std::uint64_t>(const plan::PlanRequest&)> size_classes_on(
    const Registered& inner, int inner_ranks) {
  if (!inner.size_classes) return {};
  return [classes = inner.size_classes, inner_ranks](const plan::PlanRequest& req) {
    plan::PlanRequest q = req;
    q.nranks = inner_ranks;
    return classes(q);
  };
}

}  // namespace detail

// `inner` on `topology` with relay ranks (algo/relay_routing.hpp) for the rank pairs its plans
// connect and no route joins; `inner` itself when there are none. The pairs are read from
// reference plans (one and two channels, every piece non-empty) of every collective, broadcast
// and reduce from every root, which cover the pairs of the algorithms here: their pairs depend on
// the rank count, the collective, the root and the channels' directions, not on the element
// count. A plan outside them is refused by route_through_relays, naming the pair.
inline Registered with_relays(const Registered& inner, const physical::PhysicalTopology& topology) {
  if (inner.rank_node().empty() || inner.nranks() < 2) return inner;
  // Graphs whose GPUs all hang off one network need no relays, whatever the plans connect.
  if (physical::Reachability(topology).all_routable(inner.rank_node())) return inner;
  std::vector<plan::Plan> refs;
  std::vector<bool> active;
  for (plan::Collective c :
       {plan::Collective::allreduce, plan::Collective::reduce_scatter, plan::Collective::all_gather,
        plan::Collective::broadcast, plan::Collective::reduce})
    for (plan::Rank root = 0; root < (plan::has_root(c) ? inner.nranks() : 1); ++root) {
      if (plan::has_root(c) && (active.empty() || !active[static_cast<std::size_t>(root)]))
        continue;
      for (std::uint32_t nch : {1u, 2u}) {
        plan::PlanRequest r;
        r.nranks = inner.nranks();
        r.nchannels = nch;
        r.count = static_cast<std::uint64_t>(inner.nranks()) * nch * 4096;
        r.slot_bytes = std::uint64_t{1} << 40;
        r.collective = c;
        r.root = root;
        try {
          refs.push_back(inner.build(r));
        } catch (const Error& e) {
          if (e.code() != ErrorCode::Unsupported && e.code() != ErrorCode::InvalidArgument) throw;
          break;  // the algorithm plans no such collective (or not from this root)
        }
        if (refs.back().collective != c) {  // it built its allreduce instead: pairs known
          refs.pop_back();
          break;
        }
        if (active.empty()) active = refs.back().active;
      }
    }
  std::vector<const plan::Plan*> pointers;
  pointers.reserve(refs.size());
  for (const auto& p : refs) pointers.push_back(&p);
  auto routing =
      std::make_shared<const RelayRouting>(plan_relays(topology, inner.rank_node(), pointers));
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
  Registered out(inner.name, build, routing->nranks(), routing->rank_node, inner.details());
  out.size_classes = detail::size_classes_on(inner, routing->base_ranks);
  return out;
}

// Each rank hosted by the first rank on its node. Every algorithm numbers its active ranks before
// its relays and puts one active rank on a node, so a relay's host is the active rank on its node
// where there is one (place_programs refuses a placement that would host an active rank); relays
// on a node without one (an inactive GPU the forest routes through) share the first one's rank.
inline plan::Placement relay_placement(const std::vector<int>& rank_node) {
  plan::Placement placement;
  placement.host.resize(rank_node.size());
  for (std::size_t r = 0; r < rank_node.size(); ++r) {
    std::size_t first = r;
    for (std::size_t q = 0; q < r; ++q)
      if (rank_node[q] == rank_node[r]) {
        first = q;
        break;
      }
    placement.host[r] = static_cast<plan::Rank>(first);
  }
  return placement;
}

namespace detail {

// The programs that `inner`'s plans for a request leave non-empty at any count and root: the union
// of its plans at a reference count (a multiple of the active ranks at which every piece of every
// channel is non-empty, as the communicator's reference plans: runtime/plan_cache.hpp) and at
// each of its size classes (Registered::size_classes), over every active root. Memoised per
// request (its count and root aside): a communicator asks for one shape per protocol, and each
// takes a build per size class and root.
class ReferenceShapes {
 public:
  plan::ProgramShape shape(const Registered& inner, const plan::PlanRequest& req,
                           const plan::Plan& built) {
    plan::PlanRequest key = req;
    key.count = 0;
    key.root = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [k, s] : shapes_)
        if (k == key) return s;
    }
    std::uint64_t nactive = 0;
    for (const bool a : built.active) nactive += a ? 1 : 0;
    plan::PlanRequest ref = req;
    ref.count =
        std::max<std::uint64_t>(1, nactive) * std::max<std::uint32_t>(1, req.nchannels) * 4096;
    std::vector<std::uint64_t> counts{ref.count};
    if (inner.size_classes)
      for (const std::uint64_t c : inner.size_classes(ref)) counts.push_back(c);
    plan::ProgramShape shape;
    const bool rooted = plan::has_root(req.collective);
    for (const std::uint64_t count : counts)
      for (plan::Rank root = 0; root < (rooted ? req.nranks : 1); ++root) {
        if (rooted && !built.active.at(static_cast<std::size_t>(root))) continue;
        ref.count = count;
        ref.root = root;
        try {
          shape.add(inner.build(ref));
        } catch (const Error& e) {
          // A reference the algorithm does not plan adds nothing: the plan's programs outside the
          // shape still run, after the shape's channels.
          if (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Unsupported) throw;
        } catch (const physical::TopologyError&) {
          // Likewise a size class whose plans the graph cannot route: they fail when asked for.
        }
      }
    std::lock_guard<std::mutex> lock(mutex_);
    if (shapes_.size() >= kKept) shapes_.erase(shapes_.begin());
    shapes_.emplace_back(key, shape);
    return shape;
  }

 private:
  static constexpr std::size_t kKept = 8;
  std::mutex mutex_;
  std::vector<std::pair<plan::PlanRequest, plan::ProgramShape>> shapes_;
};

}  // namespace detail

// `inner` with the programs of its relays run by the ranks on their nodes (plan/placement.hpp:
// [C-Cube] Sec. III-C's forwarding kernel in the process that owns the intermediate GPU), so that
// its plans need as many ranks as the graph has GPUs running ranks; `inner` itself when no two
// of its ranks share a node.
inline Registered host_relays(const Registered& inner) {
  auto placement = std::make_shared<const plan::Placement>(relay_placement(inner.rank_node()));
  if (placement->trivial()) return inner;
  std::vector<int> nodes;
  for (std::size_t r = 0; r < placement->host.size(); ++r)
    if (placement->host[r] == static_cast<plan::Rank>(r)) nodes.push_back(inner.rank_node()[r]);
  const int base_ranks = inner.nranks();
  auto shapes = std::make_shared<detail::ReferenceShapes>();
  auto build = [inner, placement, base_ranks, shapes](const plan::PlanRequest& req) {
    plan::PlanRequest base = req;
    base.nranks = base_ranks;
    const plan::Plan p = inner.build(base);
    const plan::ProgramShape reference = shapes->shape(inner, base, p);
    return plan::place_programs(p, *placement, &reference);
  };
  Registered out(inner.name, build, placement->nkept(), std::move(nodes), inner.details());
  out.hosted_relays = inner.hosted_relays + base_ranks - placement->nkept();
  out.size_classes = detail::size_classes_on(inner, base_ranks);
  return out;
}

// `inner` on `topology`: relays where its plans need them, run inside the ranks on their nodes
// unless `host` is false.
inline Registered on_graph(const Registered& inner, const physical::PhysicalTopology& topology,
                           bool host = true) {
  Registered r = with_relays(inner, topology);
  return host ? host_relays(r) : r;
}

inline Registered make_algorithm(const Algorithm& a, const AlgorithmRequest& req) {
  if (a.needs_topology && req.topology == nullptr)
    throw_invalid_argument(-1, "topology", "a physical topology (algorithm " + a.name + ")",
                           "none");
  if (req.topology == nullptr && req.nranks < 1)
    throw_invalid_argument(-1, "nranks", ">= 1", std::to_string(req.nranks));
  Registered r = a.make(req);
  if (req.topology == nullptr) return r;
  if (a.plans_on_routes) return req.host_relays ? host_relays(r) : r;
  return on_graph(r, *req.topology, req.host_relays);
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
