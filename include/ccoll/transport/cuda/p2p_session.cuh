// ccoll/transport/cuda/p2p_session.cuh: cuda::P2PSession, one resident kernel per rank of a
// CudaP2P executor that runs a sequence of that rank's allreduces (a whole backward pass) without
// a launch per call.
//
//   cuda::P2PSession<Half, ReduceOp::sum> s(ar.executor(), rank, stream);
//   for (auto& layer : layers) ticket = s.enqueue(layer.send, layer.recv, layer.count);
//   s.wait(ticket);   // or s.done(ticket) to poll; s.close() ends the kernel
//
// Each rank opens its own session (a thread per rank, or one thread for all: enqueue never waits
// for the peers); the ranks' session kernels then exchange messages as their launched kernels do.
// The queue is session_queue.cuh's, shared with CudaVirtualRanks' session (session.cuh): enqueue()
// writes the call's record in host-mapped memory (its plan, buffers and count, each word tagged
// with its ticket, which publishes it); the kernel's blocks (one per channel of the communicator)
// read it whole in one PCIe round trip and run it as soon as they see it, each after agreeing
// with its peers on the call (call_record.hpp), and the last block to finish it publishes its
// completion. Back-pressure: enqueue() waits while `depth` items are outstanding.
//
// Every rank must enqueue the same calls in the same order, in sessions or launched, mixed as it
// likes: a rank's calls are numbered in one sequence. While a rank's session is open, its
// executor refuses that rank's run(): both would use its FIFOs. One element type and op per
// session (template arguments: the kernel is compiled for them alone). Failures (a timeout, a
// mismatch, abort()) end every rank's kernels and are thrown by the next enqueue(), done(), wait()
// or close(), as the executor's synchronize() throws them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/transport/cuda/p2p.cuh"
#include "ccoll/transport/cuda/p2p_kernel.cuh"
#include "ccoll/transport/cuda/session_queue.cuh"

namespace ccoll::transport::cuda {

template <class T, ReduceOp Op>
class P2PSession {
 public:
  // `stream`: a stream of the rank's device (one of its own when ranks share a device); `depth`:
  // 1..kMaxSessionDepth.
  P2PSession(CudaP2P::Executor& executor, int rank, cudaStream_t stream, std::uint32_t depth = 16)
      : ex_(executor), rank_(rank), queue_(checked(executor, rank), depth, 1, stream) {
    P2PSessionArgs args;
    args.queue = queue_.view();
    args.dtype = data_type_of<T>();
    ex_.launch_session(rank_, p2p_session_kernel<T, Op>, args, stream);
    open_ = true;
  }
  ~P2PSession() {
    try {
      close();
    } catch (...) {  // a destructor cannot throw; the executor keeps the failure
    }
  }
  P2PSession(const P2PSession&) = delete;
  P2PSession& operator=(const P2PSession&) = delete;

  // Queues the rank's part of one allreduce of `count` elements (device buffers of the rank's
  // device; equal: in place); returns its ticket (1, 2, ...).
  std::uint64_t enqueue(const void* send, void* recv, std::size_t count) {
    if (!open_) throw Error(ErrorCode::InvalidArgument, rank_, "the session is closed");
    // The item's slot must be free before the call is counted.
    queue_.next(failures());
    const SessionWork w = ex_.session_call(rank_, send, recv, count, data_type_of<T>(), Op);
    return queue_.post(std::span<const SessionWork>(&w, 1));
  }

  // Has call `ticket` completed on this rank?
  bool done(std::uint64_t ticket) { return queue_.done(ticket, failures()); }

  // Waits for call `ticket` (a host spin with backoff: the kernel never returns to the host).
  void wait(std::uint64_t ticket) { queue_.wait(ticket, failures()); }

  // Lets the queued calls finish, ends the kernel and waits for it.
  void close() {
    if (!open_) return;
    open_ = false;
    struct Closed {
      CudaP2P::Executor& ex;
      int rank;
      ~Closed() { ex.session_closed(rank); }
    } closed{ex_, rank_};
    queue_.close(failures());
  }

  std::uint64_t posted() const { return queue_.posted(); }
  int rank() const { return rank_; }

 private:
  // The rank's queue memory, which the executor allocated with itself (session_queue.cuh), once
  // no session of the rank is open.
  static const SessionQueueMemory& checked(CudaP2P::Executor& ex, int rank) {
    ex.check_session_allowed(rank);
    return ex.session_memory(rank);
  }
  auto failures() {
    return [this] { ex_.check_session(rank_); };
  }

  CudaP2P::Executor& ex_;
  int rank_;
  SessionQueue queue_;
  bool open_ = false;
};

}  // namespace ccoll::transport::cuda
