// Device copies of the collectives' host reference buffers (host_side.hpp's check_collective):
// every rank's regions copied to its device, the call made on the copies, and the regions copied
// back, guards included, so that the host reference checks what the GPU wrote. Errors throw
// std::runtime_error: the call runs inside check_collective, which reports them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_side.hpp"

namespace gpu_test {

inline void cuda_or_throw(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// `devices[r]`: rank r's device. `call(sends, recvs)` makes the call on the device buffers.
inline void on_device_copies(
    const std::vector<RankBuffers>& host, const std::vector<int>& devices,
    const std::function<void(const std::vector<const void*>&, const std::vector<void*>&)>& call) {
  std::vector<std::vector<std::byte*>> regions(host.size());
  std::vector<const void*> sends(host.size(), nullptr);
  std::vector<void*> recvs(host.size(), nullptr);
  auto release = [&] {
    for (std::size_t r = 0; r < host.size(); ++r)
      for (std::byte* d : regions[r]) {
        cudaSetDevice(devices[r]);
        cudaFree(d);
      }
  };
  try {
    for (std::size_t r = 0; r < host.size(); ++r) {
      cuda_or_throw(cudaSetDevice(devices[r]), "cudaSetDevice");
      for (const HostRegion& h : host[r].regions) {
        void* d = nullptr;
        cuda_or_throw(cudaMalloc(&d, h.bytes), "cudaMalloc");
        regions[r].push_back(static_cast<std::byte*>(d));
        cuda_or_throw(cudaMemcpy(d, h.data, h.bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      }
      if (host[r].send_region >= 0)
        sends[r] = regions[r][static_cast<std::size_t>(host[r].send_region)] + host[r].send_at;
      if (host[r].recv_region >= 0)
        recvs[r] = regions[r][static_cast<std::size_t>(host[r].recv_region)] + host[r].recv_at;
      // A pageable cudaMemcpy may return before its data lands; kernels on other streams read it.
      cuda_or_throw(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    call(sends, recvs);
    for (std::size_t r = 0; r < host.size(); ++r) {
      cuda_or_throw(cudaSetDevice(devices[r]), "cudaSetDevice");
      for (std::size_t i = 0; i < regions[r].size(); ++i)
        cuda_or_throw(cudaMemcpy(host[r].regions[i].data, regions[r][i], host[r].regions[i].bytes,
                                 cudaMemcpyDeviceToHost),
                      "cudaMemcpy");
    }
  } catch (...) {
    release();
    throw;
  }
  release();
}

}  // namespace gpu_test
