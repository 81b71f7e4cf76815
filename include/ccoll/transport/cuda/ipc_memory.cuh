// ccoll/transport/cuda/ipc_memory.cuh: device memory that other processes map: exported by its
// owner, imported by its peers.
//
// transport::CudaP2P's ranks may be processes, one per GPU, and each rank's FIFO slots and
// counters live in its own GPU's memory, written by its peers. Two ways to share it:
//   - cuMem (preferred): cuMemCreate with a POSIX file descriptor handle type, mapped with
//     cuMemMap and cuMemSetAccess; cuMemExportToShareableHandle gives a descriptor that the
//     rendezvous passes with SCM_RIGHTS (rendezvous.hpp), and a peer imports it with
//     cuMemImportFromShareableHandle and maps it for its own device.
//   - legacy CUDA IPC, when the device or driver refuses the descriptor handle type (no
//     CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, or cuMemCreate says no):
//     cudaMalloc and cudaIpcGetMemHandle, whose 64 bytes travel in the rendezvous record, and
//     cudaIpcOpenMemHandle on the peer, which enables peer access as it maps.
// The driver API is resolved at run time through cudaGetDriverEntryPointByVersion, so the library
// stays header-only and programs link only the CUDA runtime.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "ccoll/core/error.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/fd_passing.hpp"

namespace ccoll::transport::cuda {

// The driver entry points cuMem sharing needs; each null when the driver lacks it.
struct DriverApi {
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) import_handle = nullptr;

  bool complete() const {
    return get_error_string && device_get && device_get_attribute && granularity && create &&
           release && reserve && address_free && map && unmap && set_access && export_handle &&
           import_handle;
  }

  // Resolved once per process (the CUDA runtime must be usable: after fork, never before).
  static const DriverApi& get() {
    static const DriverApi api = [] {
      DriverApi a;
      auto resolve = [](const char* name, auto& fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
        // 12000: the entry points' CUDA 12.0 signatures, which the declarations above have.
        if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status) ==
                cudaSuccess &&
            status == cudaDriverEntryPointSuccess)
          fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
      };
      resolve("cuGetErrorString", a.get_error_string);
      resolve("cuDeviceGet", a.device_get);
      resolve("cuDeviceGetAttribute", a.device_get_attribute);
      resolve("cuMemGetAllocationGranularity", a.granularity);
      resolve("cuMemCreate", a.create);
      resolve("cuMemRelease", a.release);
      resolve("cuMemAddressReserve", a.reserve);
      resolve("cuMemAddressFree", a.address_free);
      resolve("cuMemMap", a.map);
      resolve("cuMemUnmap", a.unmap);
      resolve("cuMemSetAccess", a.set_access);
      resolve("cuMemExportToShareableHandle", a.export_handle);
      resolve("cuMemImportFromShareableHandle", a.import_handle);
      return a;
    }();
    return api;
  }

  void check(CUresult r, const std::string& what, int rank = -1) const {
    if (r == CUDA_SUCCESS) return;
    const char* text = nullptr;
    if (get_error_string != nullptr) get_error_string(r, &text);
    throw Error(ErrorCode::System, rank,
                what + ": CUresult " + std::to_string(static_cast<int>(r)) + " (" +
                    (text != nullptr ? text : "?") + ")");
  }
};

enum class IpcKind : std::uint32_t { none = 0, cumem_fd = 1, legacy = 2 };

// What a peer needs, besides the descriptor (cumem_fd), to map an export: it travels in the
// rendezvous record, so it is plain bytes.
struct IpcDescription {
  IpcKind kind = IpcKind::none;
  std::uint32_t reserved = 0;
  std::uint64_t bytes = 0;        // mapped size (a multiple of the granularity for cuMem)
  std::uint64_t granularity = 0;  // cuMem: the alignment of the mapping
  cudaIpcMemHandle_t legacy{};    // legacy: the handle
};

namespace detail {

inline CUmemAllocationProp cumem_properties(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

inline void cumem_allow(const DriverApi& api, CUdeviceptr ptr, std::size_t bytes, int device,
                        int rank) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  api.check(api.set_access(ptr, bytes, &access, 1),
            "cuMemSetAccess(device " + std::to_string(device) + ")", rank);
}

}  // namespace detail

// Device memory of `device` that peers can import; zeroed on `stream` (a non-blocking stream of
// the device), which is waited for, and nothing else: the zeros are there before the peers see
// the memory. Chooses cuMem with a descriptor where the driver allows it (prefer_cumem), legacy
// IPC otherwise. The device must be current. Built before any kernel of its executor, destroyed
// after them (device_memory.cuh).
class ExportedMemory {
 public:
  ExportedMemory() = default;
  ExportedMemory(int device, std::size_t bytes, bool prefer_cumem, cudaStream_t stream, int rank) {
    const DriverApi& api = DriverApi::get();
    if (!(prefer_cumem && api.complete() && try_cumem(api, device, bytes, rank))) {
      desc_.kind = IpcKind::legacy;
      desc_.bytes = bytes;
      check(cudaMalloc(&ptr_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)", rank);
      check(cudaIpcGetMemHandle(&desc_.legacy, ptr_), "cudaIpcGetMemHandle", rank);
    }
    check(cudaMemsetAsync(ptr_, 0, desc_.bytes, stream), "cudaMemsetAsync(exported memory)", rank);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(exported memory)", rank);
  }
  ~ExportedMemory() { reset(); }
  ExportedMemory(ExportedMemory&& o) noexcept { *this = std::move(o); }
  ExportedMemory& operator=(ExportedMemory&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      handle_ = std::exchange(o.handle_, 0);
      fd_ = std::move(o.fd_);
      desc_ = std::exchange(o.desc_, IpcDescription{});
    }
    return *this;
  }
  ExportedMemory(const ExportedMemory&) = delete;
  ExportedMemory& operator=(const ExportedMemory&) = delete;

  std::byte* get() const { return static_cast<std::byte*>(ptr_); }
  const IpcDescription& description() const { return desc_; }
  int fd() const { return fd_.get(); }  // cuMem: the descriptor to pass; -1 otherwise

 private:
  // False when the device or driver refuses descriptor-shareable memory (then legacy IPC).
  bool try_cumem(const DriverApi& api, int device, std::size_t bytes, int rank) {
    CUdevice dev = 0;
    api.check(api.device_get(&dev, device), "cuDeviceGet", rank);
    int vmm = 0, fd_ok = 0;
    api.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    api.device_get_attribute(&fd_ok,
                             CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
    if (vmm == 0 || fd_ok == 0) return false;
    const CUmemAllocationProp prop = detail::cumem_properties(device);
    std::size_t gran = 0;
    api.check(api.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              "cuMemGetAllocationGranularity", rank);
    const std::size_t size = (bytes + gran - 1) / gran * gran;
    const CUresult created = api.create(&handle_, size, &prop, 0);
    if (created == CUDA_ERROR_NOT_SUPPORTED || created == CUDA_ERROR_INVALID_VALUE) return false;
    api.check(created, "cuMemCreate(" + std::to_string(size) + " bytes, POSIX fd)", rank);
    int fd = -1;
    const CUresult exported =
        api.export_handle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (exported != CUDA_SUCCESS) {
      api.release(handle_);
      handle_ = 0;
      if (exported == CUDA_ERROR_NOT_SUPPORTED || exported == CUDA_ERROR_NOT_PERMITTED)
        return false;
      api.check(exported, "cuMemExportToShareableHandle", rank);
    }
    fd_ = UniqueFd(fd);
    CUdeviceptr p = 0;
    api.check(api.reserve(&p, size, gran, 0, 0), "cuMemAddressReserve", rank);
    ptr_ = reinterpret_cast<void*>(p);
    desc_.kind = IpcKind::cumem_fd;
    desc_.bytes = size;
    desc_.granularity = gran;
    api.check(api.map(p, size, 0, handle_, 0), "cuMemMap", rank);
    detail::cumem_allow(api, p, size, device, rank);
    return true;
  }

  void reset() {
    if (ptr_ == nullptr && handle_ == 0) return;
    if (desc_.kind == IpcKind::cumem_fd) {
      const DriverApi& api = DriverApi::get();
      const auto p = reinterpret_cast<CUdeviceptr>(ptr_);
      if (p != 0) {
        api.unmap(p, desc_.bytes);
        api.address_free(p, desc_.bytes);
      }
      if (handle_ != 0) api.release(handle_);
    } else if (ptr_ != nullptr) {
      cudaFree(ptr_);
    }
    ptr_ = nullptr;
    handle_ = 0;
    fd_.reset();
  }

  void* ptr_ = nullptr;
  CUmemGenericAllocationHandle handle_ = 0;
  UniqueFd fd_;
  IpcDescription desc_;
};

// A peer's ExportedMemory mapped for `device` (the current device) in this process.
class ImportedMemory {
 public:
  ImportedMemory() = default;
  // fd: the descriptor received with a cumem_fd description (consumed), else -1.
  ImportedMemory(const IpcDescription& desc, UniqueFd fd, int device, int rank,
                 const std::string& whose)
      : desc_(desc) {
    if (desc.kind == IpcKind::legacy) {
      check(cudaIpcOpenMemHandle(&ptr_, desc.legacy, cudaIpcMemLazyEnablePeerAccess),
            "cudaIpcOpenMemHandle(" + whose + ")", rank);
      return;
    }
    if (desc.kind != IpcKind::cumem_fd || !fd)
      throw Error(ErrorCode::System, rank, whose + ": no memory handle arrived");
    const DriverApi& api = DriverApi::get();
    if (!api.complete())
      throw Error(ErrorCode::Unsupported, rank,
                  whose + " shares its memory through cuMem, which this process's driver lacks");
    const CUresult r =
        api.import_handle(&handle_, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get())),
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    api.check(r, "cuMemImportFromShareableHandle(" + whose + ")", rank);
    CUdeviceptr p = 0;
    api.check(api.reserve(&p, desc.bytes, desc.granularity, 0, 0), "cuMemAddressReserve", rank);
    ptr_ = reinterpret_cast<void*>(p);
    api.check(api.map(p, desc.bytes, 0, handle_, 0), "cuMemMap(" + whose + ")", rank);
    mapped_ = true;
    detail::cumem_allow(api, p, desc.bytes, device, rank);
  }
  ~ImportedMemory() { reset(); }
  ImportedMemory(ImportedMemory&& o) noexcept { *this = std::move(o); }
  ImportedMemory& operator=(ImportedMemory&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      handle_ = std::exchange(o.handle_, 0);
      mapped_ = std::exchange(o.mapped_, false);
      desc_ = std::exchange(o.desc_, IpcDescription{});
    }
    return *this;
  }
  ImportedMemory(const ImportedMemory&) = delete;
  ImportedMemory& operator=(const ImportedMemory&) = delete;

  std::byte* get() const { return static_cast<std::byte*>(ptr_); }

 private:
  void reset() {
    if (desc_.kind == IpcKind::legacy) {
      if (ptr_ != nullptr) cudaIpcCloseMemHandle(ptr_);
    } else if (desc_.kind == IpcKind::cumem_fd) {
      const DriverApi& api = DriverApi::get();
      const auto p = reinterpret_cast<CUdeviceptr>(ptr_);
      if (mapped_) api.unmap(p, desc_.bytes);
      if (p != 0) api.address_free(p, desc_.bytes);
      if (handle_ != 0) api.release(handle_);
    }
    ptr_ = nullptr;
    handle_ = 0;
    mapped_ = false;
    desc_ = IpcDescription{};
  }

  void* ptr_ = nullptr;
  CUmemGenericAllocationHandle handle_ = 0;
  bool mapped_ = false;
  IpcDescription desc_;
};

}  // namespace ccoll::transport::cuda
