// ccoll/algo/concepts.hpp: what a logical topology policy is, the second parameter of
// ccoll::Allreduce.
//
// A logical topology (ring, tree, double binary tree, packed forest ...) turns a PlanRequest into a
// Plan. The Allreduce holds an instance, so a policy is either a stateless class whose build() and
// name are static (Ring, Tree, ...) or an object constructed from a physical topology and options
// (algo/packed_forest.hpp, algo/registered.hpp's Registered). A policy whose plans need a fixed
// number of ranks (a forest's ranks are the machines' GPUs and its relays) says so with nranks().
//
// PlanRequest::collective names the collective to plan. A policy builds the plans of the
// collectives it knows and, for the others, whatever it builds (its allreduce): the plan cache
// (runtime/plan_cache.hpp) compares Plan::collective with the request and refuses the policy
// (ErrorCode::Unsupported) when they differ, so no executor runs one collective's plan for
// another's call.
#pragma once

#include <concepts>
#include <string_view>

#include "ccoll/plan/plan.hpp"

namespace ccoll::algo {

template <class L>
concept LogicalTopology = requires(const L& l, const plan::PlanRequest& req) {
  { l.build(req) } -> std::same_as<plan::Plan>;
  { l.name } -> std::convertible_to<std::string_view>;
};

// Topologies planned for a fixed set of ranks report it; the others plan for any count.
template <class L>
concept FixedRankTopology = LogicalTopology<L> && requires(const L& l) {
  { l.nranks() } -> std::convertible_to<int>;
};

}  // namespace ccoll::algo
