// ccoll_perf/device_backend.hpp: what ccoll_perf's host code knows of a transport whose ranks run
// on a GPU (--transport cuda-virtual), without a CUDA type in sight.
//
// A device transport is a file (cuda_virtual_backend.cu) that registers a DeviceTransportEntry
// under its --transport name; the host code finds it by that name and never names CUDA, so that
// ccoll_perf builds unchanged without a CUDA compiler and a new device transport is a new file.
// A DeviceTransport measures the GPU (calibrate), holds every rank's buffers on it, and makes the
// collectives to time on those buffers (-C: allreduce by default): ccoll's on one algorithm's
// plans, and the peer library's (--peer nccl). Each is a DeviceCollective: all ranks of this
// process at once, timed on the device. The sweep over sizes, the alternation with the peer and the
// rows are host code (device_sweep.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll_perf {

// The GPU measured before the sweep (bandwidths count bytes read plus bytes written, as STREAM
// does; times are medians of `reps` after warm-up, taken with CUDA events).
struct GpuCalibration {
  std::string device;             // name, compute capability, SMs, memory, L2
  std::uint64_t array_bytes = 0;  // each array of the bandwidth kernels
  int reps = 0;
  double memcpy_GBps = 0;            // cudaMemcpyAsync device to device (2 bytes per byte copied)
  double copy_kernel_GBps = 0;       // a kernel copying 16-byte vectors (2 bytes per byte copied)
  double add_kernel_GBps = 0;        // c = a + b over 16-byte vectors (3 bytes per byte of c)
  double launch_us = 0;              // an empty kernel, back-to-back launches on one stream
  double cooperative_launch_us = 0;  // the same with cudaLaunchCooperativeKernel (ccoll's launch)
};

// How a ccoll kernel was launched (cuda::LaunchFit): its channels, thread blocks and threads per
// block, and the blocks the device holds at once (SMs x blocks per SM at those threads).
struct DeviceLaunch {
  unsigned channels = 0;
  unsigned long long blocks = 0;
  unsigned threads = 0;
  int sms = 0;
  int blocks_per_sm = 0;
  std::string text;  // "33 channels x 8 blocks = 264 blocks of 512 threads (132 SMs x 2 resident)"
};

// One timed block of calls.
struct DeviceTimed {
  double time_s = 0;  // seconds per call (the slowest device's, where there are several)
  long wrong = -1;    // wrong elements of the last call over the contributing ranks; -1: unchecked
  std::optional<DeviceLaunch> launch;  // ccoll's transports: the block's launch (rank 0's)
};

// One implementation of the run's collective over every rank of this process, on device buffers.
class DeviceCollective {
 public:
  virtual ~DeviceCollective() = default;
  // Poisons the outputs, runs `warmup` untimed calls, then `iters` timed back-to-back calls of
  // `count` elements (the whole buffer, as the sweep counts: DeviceRunSpec::call_count gives
  // NCCL's count); with `check`, counts the wrong elements of the last call's outputs.
  virtual DeviceTimed time_block(std::uint64_t count, int warmup, int iters, bool check) = 0;
  // The ranks its bus bandwidth counts (those that contribute and receive).
  virtual int nranks() const = 0;
  // The plan a call of `count` elements runs (none: not a ccoll plan).
  virtual std::optional<ccoll::plan::Plan> plan(std::uint64_t /*count*/) { return std::nullopt; }
  // Do all its ranks' buffers and FIFOs lie in one GPU's memory? Then that memory's bandwidth
  // bounds a call (the HBM bounds of perf_report.hpp); ranks on several GPUs have no such bound.
  virtual bool one_memory() const { return false; }
  // The rows' algo column (ncclAllReduce) and the header's account of what ran.
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
};

// What a device transport's buffers hold: every rank's input and output of up to `max_count`
// elements, filled with perf_data.hpp's inputs; and the collective its calls make.
struct DeviceRunSpec {
  int nranks = 0;
  std::uint64_t max_count = 0;
  ccoll::DataType dtype = ccoll::DataType::f32;
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
  bool check = true;
  unsigned threads = 0;  // per thread block (0: the transport's default)
  ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce;
  int root = 0;  // broadcast and reduce

  // NCCL's count for a call over `count` elements of `ranks` ranks (the sweep counts whole
  // buffers, as the host runner does: reduce-scatter's recvcount and all-gather's sendcount are
  // a rank's block of it).
  std::uint64_t call_count(std::uint64_t count, int ranks) const {
    return ccoll::plan::has_blocks(collective) ? count / static_cast<std::uint64_t>(ranks) : count;
  }
};

class DeviceTransport {
 public:
  virtual ~DeviceTransport() = default;
  // The header's transport line.
  virtual std::string description() const = 0;
  virtual GpuCalibration calibrate() = 0;
  // ccoll's allreduce on the ranks' buffers: plans from `source` (an algorithm with its schedule),
  // `policy_id` naming them for the plan cache, `active` the contributing ranks (empty: all).
  virtual std::unique_ptr<DeviceCollective> ccoll(
      const ccoll::Config& config,
      std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> source,
      const std::string& policy_id, const std::vector<bool>& active) = 0;
  // The peer library `name` (--peer) on the same buffers; throws std::invalid_argument naming
  // the peers this build has when there is no such peer.
  virtual std::unique_ptr<DeviceCollective> peer(std::string_view name) = 0;
};

struct DeviceTransportEntry {
  std::string name;  // the --transport name
  std::function<std::unique_ptr<DeviceTransport>(const DeviceRunSpec&)> make;
};

// The registration point: a device transport's file calls this from a namespace-scope initializer.
bool register_device_transport(DeviceTransportEntry entry);
// Null when no transport of that name was built into this ccoll_perf.
const DeviceTransportEntry* find_device_transport(std::string_view name);

}  // namespace ccoll_perf
