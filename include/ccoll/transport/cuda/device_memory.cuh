// ccoll/transport/cuda/device_memory.cuh: owning handles for device memory and host memory that
// the GPU maps, and the one rule every CUDA executor follows when it allocates or frees.
//
// DeviceMemory holds what lives as long as an executor (FIFO slots, counters, bases);
// StreamMemory what comes and goes while calls run (a plan's tables, a layer table);
// MappedHostMemory the words a kernel and the host both touch while the kernel runs (the abort
// word, failure records, the persistent sessions' queues), which must not sit in device memory:
// the host could reach them only through copies ordered behind the very kernel it is trying to
// stop or feed.
//
// The rule. cudaMalloc, cudaFree, cudaHostAlloc, cudaFreeHost, cudaHostRegister and
// cudaHostUnregister, synchronous cudaMemcpy and cudaMemset, and cudaDeviceSynchronize may wait for
// every kernel of the device (the CUDA programming guide lists allocations among the operations
// that serialise streams; cudaFree and cudaFreeHost wait for the device). A ccoll kernel may be
// waiting for the host: another rank's kernel for this rank's next call (CudaP2P's ranks on one
// GPU), a session's kernel for its next item. Waiting for the device there never ends, or ends at
// Config::timeout with a failure. So:
//   - DeviceMemory and MappedHostMemory are allocated only when an executor is built, and freed
//     only when it is destroyed, after its kernels (every rank's, in a job) have completed;
//     sessions take their queues from memory the executor allocated then (SessionQueueMemory);
//   - everything allocated or freed while calls may run is StreamMemory: cudaMallocAsync on the
//     executor's own stream, cudaFreeAsync on the device's release stream, ordered behind the
//     executor's last call by an event, so that neither waits for other work;
//   - copies and zeroing are cudaMemcpyAsync / cudaMemsetAsync on the executor's own non-blocking
//     stream, waited for with cudaStreamSynchronize of that stream alone.
// What remains is the caller's: build and destroy an executor while no session of another
// executor on the same device is open (docs/gpu.md, "Allocation and synchronisation").
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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

// The device's stream for stream-ordered frees: non-blocking, created once per device and never
// destroyed, so a free queued on it outlives whichever executor queued it.
inline cudaStream_t release_stream(int device) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 0) device = current_device();
  if (streams.size() <= static_cast<std::size_t>(device))
    streams.resize(static_cast<std::size_t>(device) + 1, nullptr);
  cudaStream_t& s = streams[static_cast<std::size_t>(device)];
  if (s == nullptr) {
    int current = 0;
    check(cudaGetDevice(&current), "cudaGetDevice");
    check(cudaSetDevice(device), "cudaSetDevice");
    const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaSetDevice(current);
    check(e, "cudaStreamCreate(release)");
  }
  return s;
}

// Device memory allocated in stream order (cudaMallocAsync) on `stream`, a stream of `device`:
// usable by work on that stream at once, by other streams once the owner has synchronised it.
// Freed with cudaFreeAsync on the device's release stream, after the event given to
// release_after() (the owner's last use), if any: neither the allocation nor the free waits for
// the device.
class StreamMemory {
 public:
  StreamMemory() = default;
  StreamMemory(std::size_t bytes, cudaStream_t stream, int device)
      : bytes_(bytes), device_(device) {
    check(cudaMallocAsync(&ptr_, bytes == 0 ? 1 : bytes, stream),
          "cudaMallocAsync(" + std::to_string(bytes) + " bytes)");
  }
  ~StreamMemory() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, release_stream(device_));
  }
  StreamMemory(StreamMemory&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        device_(o.device_) {}
  StreamMemory& operator=(StreamMemory&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  StreamMemory(const StreamMemory&) = delete;
  StreamMemory& operator=(const StreamMemory&) = delete;

  // The free (whenever the last owner drops this) comes after the work `last_use` stands for as
  // recorded now: the release stream waits for it (stream order, not the host).
  void release_after(cudaEvent_t last_use) const {
    if (ptr_ != nullptr && last_use != nullptr)
      check(cudaStreamWaitEvent(release_stream(device_), last_use, 0),
            "cudaStreamWaitEvent(release)");
  }

  std::byte* get() const { return static_cast<std::byte*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
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
