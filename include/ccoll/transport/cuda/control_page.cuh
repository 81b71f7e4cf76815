// ccoll/transport/cuda/control_page.cuh: the host memory every rank of a GPU job maps, for the
// words the host and the kernels share while calls run.
//
// Such words cannot live in device memory: the host could reach them only through copies ordered
// behind the very kernels it wants to stop or diagnose. The page holds
//   - the abort word: a block that gives up raises it, every other block of every rank stops at
//     its next poll, and the host raises it to cancel (abort());
//   - per rank, the calls its host has launched, so that a failure can say which rank never came;
//   - per (rank, channel), where a block stopped (cuda::BlockFailure), written by the block before
//     it raises the abort word;
//   - per (rank, channel), a ring of the arguments of its latest calls and the mismatch a block
//     found, for the ranks' agreement on every call (call_record.hpp);
//   - per rank, its process id and its `left` word, for liveness and the leave barrier
//     (peer_presence.hpp).
// Ranks that are threads of one process share one cudaHostAlloc'd page. Ranks that are processes
// share a memfd that rank 0 creates and the rendezvous passes to the others (rendezvous.hpp);
// each maps it and registers it with CUDA (cudaHostRegister, mapped), so that its GPU reaches it.
#pragma once

#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "ccoll/core/error.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/transport/cuda/block_program.cuh"
#include "ccoll/transport/cuda/call_record.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/fd_passing.hpp"

namespace ccoll::transport::cuda {

struct ControlLayout {
  static constexpr std::size_t abort = 0;  // its own 128-byte line
  std::size_t launched = 0;                // std::uint64_t per rank
  std::size_t pids = 0;                    // std::int64_t per rank (processes; 0: unknown)
  std::size_t left = 0;                    // std::uint64_t per rank: 1 once it left
  std::size_t failures = 0;                // BlockFailure per (rank, channel), rank-major
  std::size_t mismatches = 0;              // CallMismatch per (rank, channel), rank-major
  std::size_t records = 0;                 // kCallRecordRing CallRecords per (rank, channel)
  std::size_t total = 0;                   // a whole number of pages
  int nranks = 0;
  std::uint32_t nchannels = 0;

  static ControlLayout make(int nranks, std::uint32_t nchannels) {
    ControlLayout l;
    l.nranks = nranks;
    l.nchannels = nchannels;
    const auto n = static_cast<std::size_t>(nranks);
    const std::size_t blocks = n * nchannels;
    std::size_t at = 128;
    auto section = [&at](std::size_t bytes) {
      const std::size_t s = at;
      at += (bytes + 127) / 128 * 128;
      return s;
    };
    l.launched = section(n * sizeof(std::uint64_t));
    l.pids = section(n * sizeof(std::int64_t));
    l.left = section(n * sizeof(std::uint64_t));
    l.failures = section(blocks * sizeof(BlockFailure));
    l.mismatches = section(blocks * sizeof(CallMismatch));
    l.records = section(blocks * kCallRecordRing * sizeof(CallRecord));
    l.total = (at + 4095) / 4096 * 4096;
    return l;
  }
};

class ControlPage {
 public:
  ControlPage() = default;
  // Threads of one process: page-locked, mapped for every device (portable); zeroed.
  static ControlPage allocate(const ControlLayout& layout) {
    ControlPage p;
    p.layout_ = layout;
    void* host = nullptr;
    check(cudaHostAlloc(&host, layout.total, cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc(control page)");
    p.host_ = static_cast<std::byte*>(host);
    p.allocated_ = true;
    std::memset(host, 0, layout.total);
    p.map_for_device();
    return p;
  }
  // A new memfd of layout.total zero bytes (rank 0 of a process job creates it).
  static UniqueFd create_shared(const ControlLayout& layout) {
    UniqueFd fd(::memfd_create("ccoll-cuda-p2p", MFD_CLOEXEC));
    if (!fd)
      throw Error(ErrorCode::System, 0, std::string("memfd_create: ") + std::strerror(errno));
    if (::ftruncate(fd.get(), static_cast<off_t>(layout.total)) != 0)
      throw Error(ErrorCode::System, 0, std::string("ftruncate(memfd): ") + std::strerror(errno));
    return fd;
  }
  // Processes: maps the job's memfd and registers it with CUDA for the current device.
  static ControlPage map_shared(const ControlLayout& layout, int fd, int rank) {
    ControlPage p;
    p.layout_ = layout;
    void* host = ::mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (host == MAP_FAILED)
      throw Error(ErrorCode::System, rank,
                  std::string("mmap of the job's control page: ") + std::strerror(errno));
    p.host_ = static_cast<std::byte*>(host);
    p.mapped_ = true;
    check(cudaHostRegister(host, layout.total, cudaHostRegisterMapped | cudaHostRegisterPortable),
          "cudaHostRegister(control page)", rank);
    p.registered_ = true;
    p.map_for_device();
    return p;
  }
  ~ControlPage() { reset(); }
  ControlPage(ControlPage&& o) noexcept { *this = std::move(o); }
  ControlPage& operator=(ControlPage&& o) noexcept {
    if (this != &o) {
      reset();
      layout_ = o.layout_;
      host_ = std::exchange(o.host_, nullptr);
      device_ = std::exchange(o.device_, nullptr);
      allocated_ = std::exchange(o.allocated_, false);
      mapped_ = std::exchange(o.mapped_, false);
      registered_ = std::exchange(o.registered_, false);
    }
    return *this;
  }
  ControlPage(const ControlPage&) = delete;
  ControlPage& operator=(const ControlPage&) = delete;

  const ControlLayout& layout() const { return layout_; }
  std::uint32_t* abort_host() const { return reinterpret_cast<std::uint32_t*>(host_); }
  std::uint32_t* abort_device() const { return reinterpret_cast<std::uint32_t*>(device_); }
  std::uint64_t* launched_host() const {
    return reinterpret_cast<std::uint64_t*>(host_ + layout_.launched);
  }
  const BlockFailure* failures_host() const {
    return reinterpret_cast<const BlockFailure*>(host_ + layout_.failures);
  }
  std::int64_t* pids_host() const { return reinterpret_cast<std::int64_t*>(host_ + layout_.pids); }
  std::uint64_t* left_host() const {
    return reinterpret_cast<std::uint64_t*>(host_ + layout_.left);
  }
  const CallMismatch* mismatches_host() const {
    return reinterpret_cast<const CallMismatch*>(host_ + layout_.mismatches);
  }
  // Rank r's row of mismatch records, as its kernels write them.
  CallMismatch* mismatches_device(int rank) const {
    return reinterpret_cast<CallMismatch*>(device_ + layout_.mismatches) +
           static_cast<std::size_t>(rank) * layout_.nchannels;
  }
  // Every (rank, channel)'s ring of call records (rank-major), as the kernels read them.
  CallRecord* records_device() const {
    return reinterpret_cast<CallRecord*>(device_ + layout_.records);
  }
  // Rank r's row of failure records, as its kernels write it.
  BlockFailure* failures_device(int rank) const {
    return reinterpret_cast<BlockFailure*>(device_ + layout_.failures) +
           static_cast<std::size_t>(rank) * layout_.nchannels;
  }

  bool aborted() const { return sync::AtomicWord<std::uint32_t>(abort_host()).load_acquire() != 0; }
  void raise_abort() const { sync::AtomicWord<std::uint32_t>(abort_host()).store_release(1u); }
  std::uint64_t launched(int rank) const {
    return sync::AtomicWord<std::uint64_t>(launched_host() + rank).load_acquire();
  }
  void set_launched(int rank, std::uint64_t calls) const {
    sync::AtomicWord<std::uint64_t>(launched_host() + rank).store_release(calls);
  }

 private:
  void map_for_device() {
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, host_, 0), "cudaHostGetDevicePointer(control page)");
    device_ = static_cast<std::byte*>(d);
  }
  void reset() {
    if (registered_) cudaHostUnregister(host_);
    if (allocated_) cudaFreeHost(host_);
    if (mapped_) ::munmap(host_, layout_.total);
    host_ = device_ = nullptr;
    allocated_ = mapped_ = registered_ = false;
  }

  ControlLayout layout_;
  std::byte* host_ = nullptr;
  std::byte* device_ = nullptr;
  bool allocated_ = false;   // cudaHostAlloc
  bool mapped_ = false;      // mmap of a memfd
  bool registered_ = false;  // cudaHostRegister
};

}  // namespace ccoll::transport::cuda
