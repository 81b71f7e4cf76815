// ccoll_perf/device_sweep.hpp: the sweep of a GPU transport, on the host side of
// device_backend.hpp's interface.
//
// The shape is runner.hpp's: per size, rounds of a peer block then a ccoll block, the best of each
// kept, so that both libraries see the same state of the GPU and of the machine; here every rank
// is in this process and the times are the device's. Each ccoll row also carries its plan's HBM
// bound (device_bound_time_s) against the calibrated copy-kernel bandwidth.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "ccoll/plan/plan.hpp"
#include "device_backend.hpp"
#include "perf_prepare.hpp"
#include "perf_report.hpp"
#include "runner.hpp"

namespace ccoll_perf {

// Every size of `spec` on `ours` (null: the peer alone, whose rows then go to on_row) and, when
// given, `peer` in alternating blocks: our rows to on_row carry the peer's algbw (the ratio of
// times; the peer may run another rank count), the peer's rows go to on_peer_row. copy_GBps > 0:
// each of our rows gets its plan's bound. on_launch (may be empty) hears how each of our rows'
// calls were launched (DeviceLaunch::text), before the row.
void run_device_sweep(const SweepSpec& spec, DeviceCollective* ours, DeviceCollective* peer,
                      double copy_GBps, const std::function<void(const Row&)>& on_row,
                      const std::function<void(const Row&)>& on_peer_row,
                      const std::function<void(const std::string&)>& on_launch = {});

// The plans of `algo` with its schedule (what ccoll::Allreduce<T, algo::Registered, S> builds),
// and the plan cache's name for them on transport `transport`.
std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> plan_source(
    const PreparedAlgorithm& algo,
    ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce);
std::string policy_id(std::string_view transport, const PreparedAlgorithm& algo);

}  // namespace ccoll_perf
