// ccoll_perf/device_sweep.cpp: the sweep of a GPU transport (host code: no CUDA here).
#include "device_sweep.hpp"

#include <algorithm>
#include <numeric>

#include <ccoll/schedule/pipelined.hpp>

namespace ccoll_perf {

namespace {

struct Best {
  double time_s = 0;
  long wrong = -1;
  std::optional<DeviceLaunch> launch;
};

Row make_device_row(const SweepSpec& spec, const std::string& transport, const std::string& algo,
                    int nranks, std::uint64_t count, const Best& b) {
  const std::uint64_t bytes = count * ccoll::size_of(spec.dtype);
  return make_row(transport, algo, nranks, bytes, count, spec.dtype, spec.op, b.time_s, b.wrong,
                  spec.call.collective);
}

// The element count a size runs with (0: none): reduce-scatter and all-gather take a whole number
// of blocks for ccoll's ranks and the peer's alike (the host runner's sweep_count).
std::uint64_t device_count(const SweepSpec& spec, std::uint64_t size, const DeviceCollective* ours,
                           const DeviceCollective* peer) {
  std::uint64_t count = elements_for(size, spec.dtype);
  if (!ccoll::plan::has_blocks(spec.call.collective)) return count;
  std::uint64_t blocks = 1;
  for (const DeviceCollective* c : {ours, peer})
    if (c != nullptr) blocks = std::lcm(blocks, static_cast<std::uint64_t>(c->nranks()));
  return count / blocks * blocks;
}

}  // namespace

void run_device_sweep(const SweepSpec& spec, DeviceCollective* ours, DeviceCollective* peer,
                      double copy_GBps, const std::function<void(const Row&)>& on_row,
                      const std::function<void(const Row&)>& on_peer_row,
                      const std::function<void(const std::string&)>& on_launch) {
  const int rounds = std::max(1, spec.rounds);
  std::uint64_t last_count = 0;  // sizes of the same whole elements (-f 1.1) make one row
  for (const std::uint64_t size : spec.sizes) {
    const std::uint64_t count = device_count(spec, size, ours, peer);
    if (count == 0 || count == last_count) continue;
    last_count = count;
    Best best, peer_best;
    for (int r = 0; r < rounds; ++r) {
      const bool last = r == rounds - 1;
      const bool check = spec.check && last;
      if (peer != nullptr) {
        const DeviceTimed t = peer->time_block(count, spec.warmup, spec.iters, check);
        if (r == 0 || t.time_s < peer_best.time_s) peer_best.time_s = t.time_s;
        if (last) peer_best.wrong = t.wrong;
      }
      if (ours != nullptr) {
        const DeviceTimed t = ours->time_block(count, spec.warmup, spec.iters, check);
        if (r == 0 || t.time_s < best.time_s) best.time_s = t.time_s;
        if (last) best.wrong = t.wrong;
        if (t.launch) best.launch = t.launch;
      }
    }
    std::optional<Row> peer_row;
    if (peer != nullptr) {
      peer_row = make_device_row(spec, "nccl", peer->name(), peer->nranks(), count, peer_best);
      if (ours == nullptr) {
        on_row(*peer_row);
        continue;
      }
      peer_row->paired_with = spec.algo;
      on_peer_row(*peer_row);
    }
    Row row = make_device_row(spec, spec.transport, spec.algo, ours->nranks(), count, best);
    if (best.launch) {
      row.launch_channels = best.launch->channels;
      row.launch_blocks = best.launch->blocks;
      row.launch_threads = best.launch->threads;
      row.launch_sms = best.launch->sms;
      row.launch_blocks_per_sm = best.launch->blocks_per_sm;
      if (on_launch) on_launch(best.launch->text);
    }
    if (peer_row) {
      row.peer_busbw_GBps = peer_row->busbw_GBps;
      row.peer_algbw_GBps = peer_row->algbw_GBps;
      row.peer_wrong = peer_row->wrong;
    }
    // The bounds are allreduce's on one GPU's memory (docs/benchmark.md); the other collectives
    // have none here yet, and ranks on several GPUs none at all.
    if (copy_GBps > 0 && ours->one_memory() &&
        spec.call.collective == ccoll::plan::Collective::allreduce) {
      if (const auto p = ours->plan(count))
        set_device_bound(row, device_bound_time_s(*p, ccoll::size_of(spec.dtype), copy_GBps * 1e9));
      row.min_bound_time_us = device_min_bound_time_s(row.nranks, row.bytes, copy_GBps * 1e9) * 1e6;
    }
    on_row(row);
  }
}

std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> plan_source(
    const PreparedAlgorithm& algo, ccoll::plan::Collective collective) {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  const bool overlap = algo.spec.overlap;
  return [logical = algo.logical, overlap, collective](const ccoll::plan::PlanRequest& request) {
    ccoll::plan::PlanRequest req = request;
    req.collective = collective;
    if (overlap)
      Overlapped::configure(req);
    else
      ccoll::schedule::Phased::configure(req);
    return logical.build(req);
  };
}

std::string policy_id(std::string_view transport, const PreparedAlgorithm& algo) {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  const std::string_view schedule =
      algo.spec.overlap ? Overlapped::name : ccoll::schedule::Phased::name;
  return std::string(transport) + "/" + std::string(algo.logical.name) + "/" +
         std::string(schedule);
}

}  // namespace ccoll_perf
