// ccoll/transport/concept.hpp: what a transport is, the first parameter of ccoll::Allreduce.
//
// A transport says where the ranks live and how bytes move between them. It supplies:
//   - bootstrap: resolve(Config) fills in rank, size and whatever names the rendezvous (from the
//     Config or the launcher's environment); the executor's constructor is the rendezvous;
//   - connection_type: the connection the interpreter runs over (runtime/connection.hpp);
//   - a control plane for cross-rank agreement and abort propagation (runtime/control_plane.hpp),
//     used inside its executor;
//   - Executor: constructed from the resolved Config, a plan source and the policies' identity; it
//     hosts one or more ranks of this process (local_ranks()) and runs a call for one of them.
// Each transport is one header (or folder) under transport/; ccoll::Allreduce composes any model
// of this concept with a logical topology and a schedule, so adding a transport adds files only.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/runtime/connection.hpp"
#include "ccoll/runtime/plan_cache.hpp"

namespace ccoll::transport {

template <class E>
concept Executor =
    std::constructible_from<E, const Config&, runtime::PlanSource, std::string_view> &&
    requires(E& e, const E& ce, int rank, const void* send, void* recv, std::size_t count,
             DataType dtype, ReduceOp op) {
  { ce.nranks() } -> std::same_as<int>;
  { ce.local_ranks() } -> std::same_as<std::span<const int>>;
  { ce.config() } -> std::same_as<const Config&>;
  e.run(rank, send, recv, count, dtype, op);  // a collective call by local rank `rank`
  { e.plan(count, std::size_t{4}) } -> std::same_as<plan::Plan>;  // a copy of the cached plan
};

template <class T>
concept Transport = requires(const Config& c) {
  { T::name } -> std::convertible_to<std::string_view>;
  { T::resolve(c) } -> std::same_as<Config>;
  typename T::connection_type;
  typename T::Executor;
}
&&runtime::Connection<typename T::connection_type>&& Executor<typename T::Executor>;

}  // namespace ccoll::transport
