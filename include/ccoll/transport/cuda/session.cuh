// ccoll/transport/cuda/session.cuh: cuda::Session, one resident kernel that runs a sequence of
// allreduces of a CudaVirtualRanks executor (a whole backward pass) without a launch per call.
//
//   cuda::Session<Half, ReduceOp::sum> s(ar.executor(), stream);
//   for (auto& layer : layers) tickets.push_back(s.enqueue(sends, recvs, layer.count));
//   s.wait(tickets.back());   // or s.done(ticket) to poll; s.close() ends the kernel
//
// The kernel (virtual_ranks_kernel.cuh, session_kernel) polls a ring of work items in host-mapped
// memory, the queue every CUDA session shares (session_queue.cuh): enqueue() writes item j into its
// slot as one record per rank (the plan's tables and the rank's buffers, each word tagged with the
// item's ticket, which publishes it); each block's leader polls its rank's record until it reads
// whole, runs the item, and the last block to finish it publishes `completed`. So a call costs the
// host four stores per rank and each block one successful poll of host memory (one PCIe round
// trip), instead of a kernel launch. Back-pressure: enqueue() waits while `depth` items are
// outstanding. (CudaP2P's session: p2p_session.cuh.)
//
// One element type and op per session, as template arguments: the kernel is compiled for them
// alone (a run-time choice would compile all 35 pairs into every program that opens a session). Its
// grid is the largest plan's block count given at construction (default: the executor's
// session_blocks(), which every plan of its policy fits); an item whose plan needs more blocks is
// refused. The blocks hold their SMs until close(): a session that overlaps the program's own
// kernels needs a grid that leaves room (Config::nchannels, or a smaller grid). Its stream must be
// non-blocking (require_non_blocking_stream). While a session is open its executor refuses
// run_all(): both would use the same FIFO slots. Failures (a timeout, abort()) end the kernel and
// are thrown by the next enqueue(), wait() or close(), naming rank, channel and step like the
// executor's.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/device_memory.cuh"
#include "ccoll/transport/cuda/session_queue.cuh"
#include "ccoll/transport/cuda/virtual_ranks.cuh"
#include "ccoll/transport/cuda/virtual_ranks_kernel.cuh"

namespace ccoll::transport::cuda {

template <class T, ReduceOp Op>
class Session {
  static constexpr DataType dtype_ = data_type_of<T>();

 public:
  Session(CudaVirtualRanks::Executor& executor, cudaStream_t stream, std::uint32_t depth = 16,
          unsigned nblocks = 0)
      : ex_(executor),
        queue_(checked(executor), depth, static_cast<std::uint32_t>(executor.nranks()), stream),
        records_(static_cast<std::size_t>(executor.nranks())) {
    nblocks_ = nblocks != 0 ? nblocks : ex_.session_blocks();
    SessionArgs args;
    args.queue = queue_.view();
    args.timeout_ns = ex_.timeout_ns();
    args.abort = ex_.abort_words();
    args.nranks = static_cast<std::uint32_t>(ex_.nranks());
    ex_.launch_session(session_kernel<T, Op>, nblocks_, args, stream);
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
    // One record per rank; the plan is counted only for a call that will be posted.
    for (int r = 0; r < ex_.nranks(); ++r) {
      SessionWork& w = records_[static_cast<std::size_t>(r)];
      w.input = buffers.rank[r].input;
      w.output = buffers.rank[r].output;
      w.count = count;
      queue_.check_encodable(w);
    }
    // The item's slot must be free before the plan counts the call.
    queue_.next(failures());
    const auto plan = ex_.session_plan(count, sizeof(T), nblocks_);
    for (int r = 0; r < ex_.nranks(); ++r) records_[static_cast<std::size_t>(r)].plan = plan.tables;
    return queue_.post(std::span<const SessionWork>(records_.data(), records_.size()));
  }

  // Has call `ticket` completed on every rank?
  bool done(std::uint64_t ticket) { return queue_.done(ticket, failures()); }

  // Waits for call `ticket` (a host spin with backoff: the kernel never returns to the host).
  void wait(std::uint64_t ticket) { queue_.wait(ticket, failures()); }

  // Lets the queued calls finish, ends the kernel and waits for it.
  void close() {
    if (!open_) return;
    open_ = false;
    struct Closed {
      CudaVirtualRanks::Executor& ex;
      ~Closed() { ex.session_closed(); }
    } closed{ex_};
    queue_.close(failures());
  }

  std::uint64_t posted() const { return queue_.posted(); }

 private:
  // The executor's queue memory, allocated with it (session_queue.cuh), once no session is open.
  static const SessionQueueMemory& checked(CudaVirtualRanks::Executor& ex) {
    ex.check_session_allowed();
    return ex.session_memory();
  }
  auto failures() {
    return [this] { ex_.check_failures(); };
  }

  CudaVirtualRanks::Executor& ex_;
  SessionQueue queue_;
  std::vector<SessionWork> records_;  // the next item's, one per rank
  unsigned nblocks_ = 0;
  bool open_ = false;
};

}  // namespace ccoll::transport::cuda
