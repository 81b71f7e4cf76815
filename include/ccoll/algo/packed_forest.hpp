// ccoll/algo/packed_forest.hpp: the packed forest of reduce/broadcast trees ([TopoSync] Sec. IV)
// as a stateful logical topology policy, built from a physical topology.
//
//   ccoll::algo::PackedForest forest(ccoll::physical::load("dgx1v"));
//   ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::PackedForest,
//   ccoll::schedule::Phased>
//       ar(config, forest);   // config.nranks 0: the forest's rank count
//
// Ranks are the graph's compute nodes in node order (forest::compute_ranks): active GPUs
// contribute and receive the result; inactive compute nodes that some tree routes through are
// relays, real ranks that receive, add nothing of their own, and forward. The forest is solved on
// first use for each schedule (phased when the request does not overlap the phases, the options'
// overlap schedule when it does), once per policy object and its copies. The solver is
// deterministic, so every process of a job that plans the same graph gets the same plan; the
// communicator's fingerprint (runtime/plan_cache.hpp) checks it.
//
// Reduce-scatter and all-gather (plan/collective.hpp) run on the reduce trees or the broadcast
// trees of the equal-share forest (forest/equal_share.hpp): every root's trees carry exactly its
// block, at the same rate for every root. Reduce and broadcast run on the packing of their root's
// reduce or broadcast trees alone.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/forest/equal_share.hpp"
#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/forest/to_plan.hpp"
#include "ccoll/forest/types.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/rooted.hpp"

namespace ccoll::algo {

struct PackedForestOptions {
  forest::ForestOptions solver{};  // its `schedule` is the one used without overlap
  forest::ForestSchedule overlap_schedule = forest::ForestSchedule::concurrent;
  // Cut trees into about this many equal-rate channels (forest::equal_rate_trees; 0: one per
  // tree; forest::kAutoSplit: the channels and chunks forest::tree_plan_shape chooses).
  int split = 0;
};

class PackedForest {
 public:
  std::string name = "forest";

  explicit PackedForest(physical::PhysicalTopology topology, PackedForestOptions options = {})
      : state_(std::make_shared<State>(std::move(topology), options)) {}

  plan::Plan build(const plan::PlanRequest& req) const {
    if (req.collective != plan::Collective::allreduce) {
      int root_node = -1;  // reduce-scatter and all-gather: every worker roots trees
      if (plan::has_root(req.collective)) {
        plan::PlanRequest checked = req;
        checked.nranks = nranks();
        plan::detail::check_root(checked);
        const auto root = static_cast<std::size_t>(req.root);
        root_node = state_->ranks.rank_node[root];
        if (!state_->ranks.active[root]) {
          const auto rank_named = [this](std::size_t r) {
            const int node = state_->ranks.rank_node[r];
            return std::to_string(r) + " (" +
                   state_->topology.nodes[physical::PhysicalTopology::idx(node)].id + ")";
          };
          std::string workers;
          for (std::size_t r = 0; r < state_->ranks.active.size(); ++r)
            if (state_->ranks.active[r]) workers += (workers.empty() ? "" : ", ") + rank_named(r);
          throw Error(ErrorCode::InvalidArgument, -1,
                      "the root of a forest's " +
                          std::string(plan::collective_name(req.collective)) + ", rank " +
                          rank_named(root) + ", is a relay; roots are active workers: ranks " +
                          workers);
        }
      }
      return forest::forest_block_plan(
          equal_share(plan::reduces(req.collective) ? forest::ShareStage::reduce
                                                    : forest::ShareStage::broadcast,
                      root_node),
          state_->ranks, req, req.collective, state_->options.split);
    }
    plan::Plan p =
        forest::forest_plan(forest(req.overlap), state_->ranks, req, state_->options.split);
    p.algorithm = req.overlap ? "forest-overlap" : "forest";
    return p;
  }
  int nranks() const { return static_cast<int>(state_->ranks.rank_node.size()); }
  // The physical node of each rank.
  const std::vector<int>& rank_node() const { return state_->ranks.rank_node; }
  const forest::RankMap& ranks() const { return state_->ranks; }
  const physical::PhysicalTopology& physical() const { return state_->topology; }
  // The forest planned for the phased (false) or overlapped (true) schedule.
  const forest::PackedForest& forest(bool overlap) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& slot = state_->forests[overlap ? 1 : 0];
    if (!slot) {
      forest::ForestOptions o = state_->options.solver;
      if (overlap) o.schedule = state_->options.overlap_schedule;
      slot = forest::solve_packed_forest(state_->topology, o);
    }
    return *slot;
  }
  // The equal-share forest of a reduce-scatter's reduce trees or an all-gather's broadcast trees
  // (root_node -1), or of the trees of one root (a reduce's or broadcast's, at that node).
  const forest::PackedForest& equal_share(forest::ShareStage stage, int root_node = -1) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& slot = state_->shares[{stage == forest::ShareStage::reduce ? 0 : 1, root_node}];
    if (!slot)
      slot = forest::solve_equal_share_forest(state_->topology, stage, state_->options.solver,
                                              root_node);
    return *slot;
  }

 private:
  struct State {
    State(physical::PhysicalTopology t, PackedForestOptions o)
        : topology(std::move(t)), options(o), ranks(forest::compute_ranks(topology)) {}
    physical::PhysicalTopology topology;
    PackedForestOptions options;
    forest::RankMap ranks;
    std::mutex mutex;
    std::optional<forest::PackedForest> forests[2];
    // By (stage: 0 reduce, 1 broadcast; root node, -1: every worker).
    std::map<std::pair<int, int>, std::optional<forest::PackedForest>> shares;
  };
  std::shared_ptr<State> state_;
};

static_assert(FixedRankTopology<PackedForest>);

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm packed_forest_algorithm() {
  return Algorithm{.name = "forest",
                   .description =
                       "[TopoSync]'s packed reduce/broadcast trees on the physical graph, rooted "
                       "at every worker, relays allowed; reduce-scatter and all-gather on "
                       "equal-share trees, broadcast and reduce on their root's trees",
                   .needs_topology = true,
                   .default_overlap = false,
                   .make =
                       [](const AlgorithmRequest& req) {
                         PackedForestOptions o;
                         o.split = req.split;
                         PackedForest f(*req.topology, o);
                         auto build = [f](const plan::PlanRequest& r) { return f.build(r); };
                         return Registered("forest", build, f.nranks(), f.rank_node(), f);
                       },
                   .plans_on_routes = true};
}

}  // namespace ccoll::algo
