// ccoll/algo/parameter_server.hpp: the sharded parameter server on the workers, [TopoSync]'s
// baseline (Sec. VI-A): worker j owns 1/P of the elements; every worker pushes that shard to j
// and j pushes the sum back (one one-hop star per worker, rooted at it).
#pragma once

#include <string_view>
#include <vector>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/tree.hpp"

namespace ccoll::algo {

struct ParameterServer {
  static constexpr std::string_view name = "ps";
  // The P stars, one per root.
  static std::vector<plan::TreeSpec> stars(plan::Rank nranks) {
    std::vector<plan::TreeSpec> specs;
    for (plan::Rank j = 0; j < nranks; ++j) {
      plan::TreeSpec t;
      t.root = j;
      t.reduce_parent.assign(static_cast<std::size_t>(nranks), j);
      t.reduce_parent[static_cast<std::size_t>(j)] = -1;
      t.share = 1.0;
      specs.push_back(std::move(t));
    }
    return specs;
  }
  static plan::Plan build(const plan::PlanRequest& req) {
    plan::Plan p = plan::build_trees(req, stars(req.nranks),
                                     std::vector<bool>(static_cast<std::size_t>(req.nranks), true));
    p.algorithm = "ps";
    return p;
  }
};

static_assert(LogicalTopology<ParameterServer>);

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm parameter_server_algorithm() {
  return Algorithm{.name = "ps",
                   .description =
                       "sharded parameter server on the workers: one one-hop star per rank "
                       "([TopoSync] Sec. VI-A baseline)",
                   .make = &registered_stateless<ParameterServer>};
}

}  // namespace ccoll::algo
