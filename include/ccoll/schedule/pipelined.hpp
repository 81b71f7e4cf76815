// ccoll/schedule/pipelined.hpp: schedule policies for one allreduce, the third parameter of
// ccoll::Allreduce.
//
// A schedule decides how a logical topology's plan is pipelined: whether a tree's reduce and
// broadcast phases overlap ([C-Cube]'s C1: the broadcast of chunk k starts as soon as chunk k is
// reduced at the root, so the two phases run at the same time on different links) or run one
// after the other ([C-Cube]'s baseline B). It does so by filling the PlanRequest before the
// topology builds the plan. Ring plans have no separate phases to overlap; both schedules give the
// same ring.
#pragma once

#include <concepts>
#include <string_view>

#include "ccoll/plan/plan.hpp"

namespace ccoll::schedule {

enum class Overlap : unsigned char {
  None,             // reduce, then broadcast (pipelined by chunks within each phase)
  ReduceBroadcast,  // reduce and broadcast of different chunks run concurrently ([C-Cube]'s C1)
};

template <class S>
concept Schedule = requires(plan::PlanRequest& req) {
  { S::configure(req) } -> std::same_as<void>;
  { S::name } -> std::convertible_to<std::string_view>;
};

// Chunks are pipelined within each phase; the phases do not overlap.
struct Phased {
  static constexpr std::string_view name = "phased";
  static void configure(plan::PlanRequest& req) { req.overlap = false; }
};

template <Overlap O>
struct Pipelined {
  static constexpr std::string_view name =
      O == Overlap::ReduceBroadcast ? "pipelined-overlap" : "pipelined";
  static void configure(plan::PlanRequest& req) { req.overlap = O == Overlap::ReduceBroadcast; }
};

static_assert(Schedule<Phased> && Schedule<Pipelined<Overlap::ReduceBroadcast>> &&
              Schedule<Pipelined<Overlap::None>>);

}  // namespace ccoll::schedule
