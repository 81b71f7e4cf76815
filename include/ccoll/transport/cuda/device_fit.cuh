// ccoll/transport/cuda/device_fit.cuh: launch_fit.hpp's choice on a real device: the device's
// shape, the default channels of an executor, and a kernel's occupancy at each thread count.
//
// The default channels are chosen before any kernel is known, against the occupancy that the
// kernels' launch bounds guarantee (bounded_occupancy); every launch then fits its threads to the
// kernel's real occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/launch_fit.hpp"

namespace ccoll::transport::cuda {

// What the fit needs of a device.
struct DeviceShape {
  int sms = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  std::uint64_t shared_per_sm = 0;  // bytes of shared memory an SM holds
  std::uint64_t memory = 0;         // bytes
};

// False when the device cannot be queried (no GPU, or a bad index).
inline bool query_device_shape(int device, DeviceShape* shape) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return false;
  shape->sms = prop.multiProcessorCount;
  shape->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  shape->max_blocks_per_sm = prop.maxBlocksPerMultiProcessor;
  shape->shared_per_sm = prop.sharedMemPerMultiprocessor;
  shape->memory = prop.totalGlobalMem;
  return true;
}

// The default channels for `blocks_per_channel` blocks per channel on `device` (-1: the current
// one) at `threads` per block (0: the default), each channel taking at most `bytes_per_channel`
// of FIFO memory: within the cap, and within a sixteenth of the device's memory for the FIFOs.
// `fallback` when the device cannot be queried (the executor then reports why).
inline std::uint32_t default_channels(int device, std::uint32_t blocks_per_channel,
                                      unsigned threads, std::uint64_t bytes_per_channel,
                                      std::uint32_t cap, std::uint32_t fallback) {
  DeviceShape d;
  if (!query_device_shape(device, &d)) return fallback;
  const std::vector<Occupancy> occupancy =
      bounded_occupancy(threads, d.max_threads_per_sm, d.max_blocks_per_sm, d.shared_per_sm);
  FitRequest r;
  r.blocks_per_channel = blocks_per_channel;
  r.threads = threads;
  r.sms = d.sms;
  r.occupancy = occupancy;
  r.max_channels = channels_within_memory(d.memory, bytes_per_channel, cap);
  const LaunchFit f = fit_launch(r);
  return f.ok ? f.channels : 1;  // nothing fits: one channel, refused at launch with the figures
}

// What a launch of blocks_per_channel x channels blocks at `threads` per block (0: the default)
// gets on `device` against the kernels' launch bounds, before any kernel is known (each launch
// then fits its kernel's real occupancy: KernelFits). Not ok when the device cannot be queried.
inline LaunchFit bounded_fit(int device, std::uint32_t blocks_per_channel, std::uint32_t channels,
                             unsigned threads) {
  DeviceShape d;
  if (!query_device_shape(device, &d)) return LaunchFit{};
  const std::vector<Occupancy> occupancy =
      bounded_occupancy(threads, d.max_threads_per_sm, d.max_blocks_per_sm, d.shared_per_sm);
  FitRequest r;
  r.blocks_per_channel = blocks_per_channel;
  r.channels = channels;
  r.threads = threads;
  r.sms = d.sms;
  r.occupancy = occupancy;
  return fit_launch(r);
}

// Blocks per SM of `kernel` at the requested threads, or at every default choice.
template <class Kernel>
std::vector<Occupancy> kernel_occupancy(Kernel kernel, unsigned requested_threads) {
  std::vector<Occupancy> v;
  auto add = [&](unsigned t) {
    int per_sm = 0;
    // A kernel whose launch bounds allow fewer threads answers with an error: it holds none.
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(t), 0) !=
        cudaSuccess) {
      cudaGetLastError();
      per_sm = 0;
    }
    v.push_back({t, per_sm});
  };
  if (requested_threads != 0)
    add(requested_threads);
  else
    for (unsigned t : kThreadChoices) add(t);
  return v;
}

// Both executors' residency check: each kernel instantiation's occupancy, asked of the device once
// (at the executor's requested threads, or at every default choice), and the fit of a launch.
class KernelFits {
 public:
  // The fit of `r` (blocks and channels) for `kernel` at `threads` per block (0: the default).
  template <class Kernel>
  LaunchFit fit(Kernel kernel, unsigned threads, FitRequest r) {
    const Key key{reinterpret_cast<const void*>(kernel), threads};
    auto it = occupancy_.find(key);
    if (it == occupancy_.end())
      it = occupancy_.emplace(key, kernel_occupancy(kernel, threads)).first;
    r.threads = threads;
    r.occupancy = it->second;
    return fit_launch(r);
  }

 private:
  using Key = std::pair<const void*, unsigned>;  // a kernel instantiation, the threads asked for
  std::map<Key, std::vector<Occupancy>> occupancy_;
};

}  // namespace ccoll::transport::cuda
