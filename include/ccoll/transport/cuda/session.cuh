// ccoll/transport/cuda/session.cuh: cuda::Session, one resident kernel that runs a sequence of
// allreduces of a CudaVirtualRanks executor (a whole backward pass) without a launch per call.
//
//   cuda::Session<Half, ReduceOp::sum> s(ar.executor(), stream);
//   for (auto& layer : layers) tickets.push_back(s.enqueue(sends, recvs, layer.count));
//   s.wait(tickets.back());   // or s.done(ticket) to poll; s.close() ends the kernel
//
// The kernel (virtual_ranks_kernel.cuh, session_kernel) polls a ring of work items in host-mapped
// memory: enqueue() writes item j and publishes it with one release store of `posted`; the blocks
// run it as soon as they see it, and the last block to finish it publishes `completed`. So a call
// costs the host a few hundred bytes of stores and the device one poll of host memory, instead of
// a kernel launch. Back-pressure: enqueue() waits while `depth` items are outstanding.
//
// One element type and op per session, as template arguments: the kernel is compiled for them
// alone (a run-time choice would compile all 35 pairs into every program that opens a session). Its
// grid is the largest plan's block count given at construction (default: Config::nranks x
// Config::nchannels); an item whose plan needs more blocks is refused. While a session is open its
// executor refuses run_all(): both would use the same FIFO slots. Failures (a timeout, abort()) end
// the kernel and are thrown by the next enqueue(), wait() or close(), naming rank, channel and step
// like the executor's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/device_memory.cuh"
#include "ccoll/transport/cuda/virtual_ranks.cuh"
#include "ccoll/transport/cuda/virtual_ranks_kernel.cuh"

namespace ccoll::transport::cuda {

template <class T, ReduceOp Op>
class Session {
  static constexpr DataType dtype_ = data_type_of<T>();

 public:
  Session(CudaVirtualRanks::Executor& executor, cudaStream_t stream, std::uint32_t depth = 16,
          unsigned nblocks = 0)
      : ex_(executor), stream_(stream), depth_(depth) {
    if (depth_ == 0) throw_invalid_argument(-1, "depth", ">= 1", "0");
    const std::uint32_t nch = ex_.config().nchannels == 0 ? 1 : ex_.config().nchannels;
    nblocks_ = nblocks != 0 ? nblocks : static_cast<unsigned>(ex_.nranks()) * nch;
    items_ = MappedHostMemory(sizeof(WorkItem) * depth_);
    control_ = MappedHostMemory(sizeof(SessionControl));
    words_ = DeviceMemory(sizeof(std::uint64_t) * (depth_ + 1));
    // On the session's stream: the kernel launched there next must see the zeros.
    check(cudaMemsetAsync(words_.get(), 0, words_.size(), stream_), "cudaMemsetAsync(session)");
    SessionArgs args;
    args.items = reinterpret_cast<WorkItem*>(items_.device());
    args.depth = depth_;
    args.control = reinterpret_cast<SessionControl*>(control_.device());
    args.arrivals = reinterpret_cast<std::uint64_t*>(words_.get());
    args.completed = args.arrivals + depth_;
    args.timeout_ns = ex_.timeout_ns();
    args.abort = ex_.abort_word_on_device();
    ex_.launch_session(session_kernel<T, Op>, nblocks_, args, stream_);
    open_ = true;
  }
  ~Session() {
    try {
      close();
    } catch (...) {  // a destructor cannot throw; the executor keeps the failure
    }
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Queues one allreduce of every rank's buffers; returns its ticket (1, 2, ...).
  std::uint64_t enqueue(std::span<const void* const> sends, std::span<void* const> recvs,
                        std::size_t count) {
    if (!open_) throw Error(ErrorCode::InvalidArgument, -1, "the session is closed");
    const CallBuffers buffers = checked_buffers(ex_.nranks(), sends, recvs, count, dtype_, Op);
    // The item's slot must be free before the plan counts the call.
    if (posted_ >= depth_) wait(posted_ - depth_ + 1);
    const auto plan = ex_.session_plan(count, sizeof(T), nblocks_);
    WorkItem& item = reinterpret_cast<WorkItem*>(items_.host())[posted_ % depth_];
    item.tables = plan.tables;
    item.buffers = buffers;
    ++posted_;
    sync::AtomicWord<std::uint64_t>(&control()->posted).store_release(posted_);
    return posted_;
  }

  // Has call `ticket` completed on every rank?
  bool done(std::uint64_t ticket) {
    if (ticket > posted_)
      throw_invalid_argument(-1, "ticket", "<= " + std::to_string(posted_) + " (calls enqueued)",
                             std::to_string(ticket));
    if (sync::AtomicWord<std::uint64_t>(&control()->completed).load_acquire() >= ticket)
      return true;
    ex_.check_failures();
    // A kernel that ended (a fault, say) without raising the abort word would never complete it.
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e != cudaErrorNotReady) {
      check(e, "the session kernel");
      if (sync::AtomicWord<std::uint64_t>(&control()->completed).load_acquire() >= ticket)
        return true;
      ex_.check_failures();
      throw Error(ErrorCode::System, -1,
                  "the session kernel ended before call " + std::to_string(ticket) + " completed");
    }
    return false;
  }

  // Waits for call `ticket` (a host spin with backoff: the kernel never returns to the host).
  void wait(std::uint64_t ticket) {
    sync::Backoff backoff;
    while (!done(ticket)) backoff.pause();
  }

  // Lets the queued calls finish, ends the kernel and waits for it.
  void close() {
    if (!open_) return;
    open_ = false;
    struct Closed {
      CudaVirtualRanks::Executor& ex;
      ~Closed() { ex.session_closed(); }
    } closed{ex_};
    // On a failure the kernel has ended already, and wait() throws it.
    if (posted_ >= depth_) wait(posted_ - depth_ + 1);
    WorkItem& stop = reinterpret_cast<WorkItem*>(items_.host())[posted_ % depth_];
    stop.tables = nullptr;
    sync::AtomicWord<std::uint64_t>(&control()->posted).store_release(posted_ + 1);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(session)");
    ex_.check_failures();
  }

  std::uint64_t posted() const { return posted_; }

 private:
  SessionControl* control() const { return reinterpret_cast<SessionControl*>(control_.host()); }

  CudaVirtualRanks::Executor& ex_;
  cudaStream_t stream_;
  std::uint32_t depth_;
  unsigned nblocks_ = 0;
  MappedHostMemory items_;
  MappedHostMemory control_;
  DeviceMemory words_;
  std::uint64_t posted_ = 0;
  bool open_ = false;
};

}  // namespace ccoll::transport::cuda
