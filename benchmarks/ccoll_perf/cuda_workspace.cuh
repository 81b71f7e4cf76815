// ccoll_perf/cuda_workspace.cuh: what the CUDA files of ccoll_perf share: every rank's buffers on
// one GPU, the check of their outputs, the GPU calibration, and the registry of peers that run on
// those buffers (nccl_peer.cu registers NCCL there, so a peer is added by adding a file).
//
// The inputs are perf_data.hpp's (small integers, exact in every type and order), copied to the
// device once; a block's outputs are poisoned on the device before it and copied back after it to
// be compared with a reference computed on the host, as the host transports' runner does.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/transport/cuda/launch_fit.hpp"
#include "device_backend.hpp"

namespace ccoll_perf::cuda {

// A ccoll executor's launch as the report gives it.
inline DeviceLaunch device_launch(const ccoll::transport::cuda::LaunchFit& f) {
  DeviceLaunch d;
  d.channels = f.channels;
  d.blocks = f.blocks;
  d.threads = f.threads;
  d.sms = f.sms;
  d.blocks_per_sm = f.blocks_per_sm;
  d.text = f.describe();
  return d;
}

// Every rank's send and receive buffers on `device`, sized for the largest message.
class Workspace {
 public:
  Workspace(int device, const DeviceRunSpec& spec);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  int device() const { return device_; }
  const DeviceRunSpec& spec() const { return spec_; }
  cudaStream_t stream() const { return stream_; }
  const std::vector<const void*>& sends() const { return sends_; }
  const std::vector<void*>& recvs() const { return recvs_; }

  // Device buffers of rank `rank` on another device (for a peer with a rank per GPU), filled with
  // that rank's inputs; owned by the workspace.
  std::pair<const void*, void*> buffers_on(int device, int rank);

  // Poisons the first `count` output elements of `ranks` on their streams (`stream`: the
  // workspace's when null).
  void poison(std::uint64_t count, const std::vector<int>& ranks, cudaStream_t stream = nullptr);
  void poison(void* recv, std::uint64_t count, cudaStream_t stream);
  // Wrong elements among the first `count` of `outputs` (device pointers, one per contributing
  // rank) against the allreduce of the inputs of `contributors`. Synchronous.
  long count_wrong(const std::vector<const void*>& outputs, std::uint64_t count,
                   const std::vector<int>& contributors);
  // Wrong elements of a call of the run's collective over `count` elements (the whole buffer) by
  // every rank: outputs[r] is rank r's output (device memory); reduce-scatter's block r,
  // all-gather's blocks in rank order, broadcast's root input, reduce's root only. Synchronous.
  long count_wrong_call(const std::vector<const void*>& outputs, std::uint64_t count);

 private:
  const std::vector<std::byte>& expected(const std::vector<int>& contributors);
  void release();
  void* allocate_filled(int rank, bool input);

  int device_;
  DeviceRunSpec spec_;
  cudaStream_t stream_ = nullptr;
  std::vector<const void*> sends_;
  std::vector<void*> recvs_;
  std::vector<std::pair<int, void*>> owned_;  // (device, pointer)
  std::map<std::vector<int>, std::vector<std::byte>> expected_;
};

// The device's name, compute capability, SMs, memory and L2, for the header.
std::string describe_device(int device);

// Calibration of `device` (cuda_calibration.cu): bandwidths over arrays of `array_bytes`, median
// of `reps` after warm-up.
GpuCalibration calibrate(int device, std::uint64_t array_bytes, int reps);

// Seconds between two events recorded on one stream (after it has synchronized).
double elapsed_s(cudaEvent_t start, cudaEvent_t stop);

// Throws std::runtime_error naming `what` when e is not cudaSuccess.
void check(cudaError_t e, const std::string& what);

// A peer library on a workspace (--peer NAME on a CUDA transport).
struct PeerEntry {
  std::string name;
  std::function<std::unique_ptr<DeviceCollective>(Workspace&)> make;
};
bool register_peer(PeerEntry entry);
const PeerEntry* find_peer(std::string_view name);
// "nccl" or "none": the names registered, for an error message.
std::string peer_names();

// A device transport whose ranks' buffers are one Workspace. The calibration (a 256 MiB array,
// five times an H100's or H200's L2) and the peers run on that workspace, the same for every such
// transport; a transport adds its description and its ccoll collective.
class WorkspaceTransport : public DeviceTransport {
 public:
  WorkspaceTransport(int device, const DeviceRunSpec& spec) : ws_(device, spec) {}
  GpuCalibration calibrate() override;
  std::unique_ptr<DeviceCollective> peer(std::string_view name) override;

 protected:
  Workspace ws_;
};

}  // namespace ccoll_perf::cuda
