// ccoll/transport/cuda/device_memory.cuh: owning handles for device memory and host memory that
// the GPU maps, and the one rule every CUDA executor follows when it allocates or frees.
//
// DeviceMemory holds what lives as long as an executor (FIFO slots, counters, bases);
// StreamMemory what comes and goes while calls run (a plan's tables, a layer table);
// MappedHostMemory the words a kernel and the host both touch while the kernel runs (the abort
// word, failure records, the persistent sessions' queues), which must not sit in device memory
// alone: the host could reach them only through copies, which other work can hold up behind the
// very kernel it is trying to stop or feed. (cuda-virtual's calls watch a device copy of the
// abort word as well, block_program.cuh's AbortWords: the host-mapped word stays the one the host
// reads and that stops an idle session.)
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
//   - everything allocated or freed while calls may run is StreamMemory: allocated from ccoll's
//     stream-ordered pool on the executor's own stream, freed with cudaFreeAsync on the device's
//     release stream, ordered behind the executor's last call by an event, so that neither waits
//     for other work (stream_order());
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

// What stream-ordered memory of one device needs: a pool of ccoll's own and a stream for frees.
//   - The pool may not add stream dependencies of its own when it reuses a block
//     (cudaMemPoolReuseAllowInternalDependencies off): a block freed behind one rank's kernel,
//     reused by an allocation on another rank's upload stream, would make that upload, and the
//     host waiting for it, wait for the first rank's kernel, which may be waiting for this very
//     upload's call. Blocks whose free has completed are still reused.
//   - The release stream is non-blocking, and neither it nor the pool is ever destroyed, so a free
//     queued on it outlives whichever executor queued it.
// Created on first use; executors call it when they are built, so that later calls only look it
// up.
struct StreamOrder {
  cudaMemPool_t pool = nullptr;
  cudaStream_t release = nullptr;
};
inline StreamOrder stream_order(int device) {
  static std::mutex mutex;
  static std::vector<StreamOrder> per_device;
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 0) device = current_device();
  if (per_device.size() <= static_cast<std::size_t>(device))
    per_device.resize(static_cast<std::size_t>(device) + 1);
  StreamOrder& o = per_device[static_cast<std::size_t>(device)];
  if (o.pool != nullptr) return o;
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  check(cudaSetDevice(device), "cudaSetDevice");
  StreamOrder made;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaError_t e = cudaMemPoolCreate(&made.pool, &props);
  int off = 0;
  if (e == cudaSuccess)
    e = cudaMemPoolSetAttribute(made.pool, cudaMemPoolReuseAllowInternalDependencies, &off);
  // Plan and layer tables are small: kept rather than returned to the driver at every
  // synchronisation.
  std::uint64_t keep = std::uint64_t{64} << 20;
  if (e == cudaSuccess)
    e = cudaMemPoolSetAttribute(made.pool, cudaMemPoolAttrReleaseThreshold, &keep);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&made.release, cudaStreamNonBlocking);
  cudaSetDevice(current);
  check(e, "the stream-ordered memory pool of device " + std::to_string(device));
  o = made;
  return o;
}
inline cudaStream_t release_stream(int device) {
  return stream_order(device).release;
}

// Stream-ordered allocation from ccoll's pool of `device` on `stream` (a stream of that device).
inline void* allocate_in_stream_order(std::size_t bytes, cudaStream_t stream, int device,
                                      int rank = -1) {
  void* p = nullptr;
  check(cudaMallocFromPoolAsync(&p, bytes == 0 ? 1 : bytes, stream_order(device).pool, stream),
        "cudaMallocFromPoolAsync(" + std::to_string(bytes) + " bytes)", rank);
  return p;
}

// Device memory allocated in stream order (ccoll's pool, stream_order()) on `stream`, a stream of
// `device`: usable by work on that stream at once, by other streams once the owner has
// synchronised it.
// Freed with cudaFreeAsync on the device's release stream, after the event given to
// release_after() (the owner's last use), if any: neither the allocation nor the free waits for
// the device.
class StreamMemory {
 public:
  StreamMemory() = default;
  StreamMemory(std::size_t bytes, cudaStream_t stream, int device)
      : bytes_(bytes), device_(device) {
    ptr_ = allocate_in_stream_order(bytes, stream, device);
  }
  ~StreamMemory() {
    if (ptr_ == nullptr) return;
    try {
      cudaFreeAsync(ptr_, release_stream(device_));
    } catch (...) {  // no pool for the device (it was made when the memory was): nothing to free
    }
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
