// ccoll/topology/concepts.hpp: what a logical topology policy is.
//
// A logical topology (ring, tree, double binary tree, packed forest ...) turns a PlanRequest into a
// Plan. Allreduce<Transport, LogicalTopology, Schedule> holds it as a type, so the policy is a
// class with a static build() and a name for logs and benchmark tables.
#pragma once

#include <concepts>
#include <string_view>

#include "ccoll/plan/plan.hpp"

namespace ccoll::topology {

template <class T>
concept LogicalTopology = requires(const plan::PlanRequest& req) {
  { T::build(req) } -> std::same_as<plan::Plan>;
  { T::name } -> std::convertible_to<std::string_view>;
};

}  // namespace ccoll::topology
