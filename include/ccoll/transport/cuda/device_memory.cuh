// ccoll/transport/cuda/device_memory.cuh: owning handles for device memory and host memory that
// the GPU maps.
//
// DeviceMemory holds a plan's tables, FIFO slots and counters; MappedHostMemory holds the words a
// kernel and the host both touch while the kernel runs (the abort word, failure records, the
// persistent session's queue), which must not sit in device memory: the host could reach them only
// through copies that are ordered behind the very kernel it is trying to stop or feed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "ccoll/transport/cuda/check.cuh"

namespace ccoll::transport::cuda {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    check(cudaMalloc(&ptr_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  }
  ~DeviceMemory() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceMemory(DeviceMemory&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  std::byte* get() const { return static_cast<std::byte*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory mapped into the device's address space; zeroed.
class MappedHostMemory {
 public:
  MappedHostMemory() = default;
  explicit MappedHostMemory(std::size_t bytes) : bytes_(bytes) {
    check(cudaHostAlloc(&host_, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc(" + std::to_string(bytes) + " bytes, mapped)");
    std::memset(host_, 0, bytes);
    const cudaError_t e = cudaHostGetDevicePointer(&device_, host_, 0);
    if (e != cudaSuccess) {
      cudaFreeHost(host_);
      check(e, "cudaHostGetDevicePointer");
    }
  }
  ~MappedHostMemory() {
    if (host_ != nullptr) cudaFreeHost(host_);
  }
  MappedHostMemory(MappedHostMemory&& o) noexcept
      : host_(std::exchange(o.host_, nullptr)),
        device_(std::exchange(o.device_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  MappedHostMemory& operator=(MappedHostMemory&& o) noexcept {
    std::swap(host_, o.host_);
    std::swap(device_, o.device_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  MappedHostMemory(const MappedHostMemory&) = delete;
  MappedHostMemory& operator=(const MappedHostMemory&) = delete;

  std::byte* host() const { return static_cast<std::byte*>(host_); }
  std::byte* device() const { return static_cast<std::byte*>(device_); }
  std::size_t size() const { return bytes_; }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ccoll::transport::cuda
