// ccoll/transport/cuda/p2p.cuh: transport::CudaP2P, one GPU per rank: the ranks' kernels exchange
// messages directly through each other's GPU memory (NVLink or PCIe peer access).
//
// Each rank's call is one kernel on a stream of its own GPU, one thread block per channel of its
// program (p2p_kernel.cuh), so nothing runs on the host between steps and calls are stream-ordered
// like NCCL's:
//
//   ccoll::Allreduce<transport::CudaP2P, algo::Ring> ar(config, algo::Ring{}, options);
//   ar.executor().run(rank, send, recv, count, DataType::f32, ReduceOp::sum, stream);  // async
//   ar.executor().synchronize(rank, stream);  // waits, and throws the failure of any call
//
// ar.rank(r).run(...) (the calling convention of the host transports) launches on the rank's own
// stream and waits for it. The other collectives (ccoll/collective.hpp) run the same way, with
// their own arguments mapped onto the plan's index space and a CallShape naming the root:
//
//   ccoll::ReduceScatter<transport::CudaP2P, algo::Ring> rs(config, algo::Ring{}, options);
//   rs.executor().run(rank, send, recv, recvcount, DataType::bf16, ReduceOp::sum, stream,
//                     runtime::CallShape{plan::Collective::reduce_scatter, 0});
//
// Sessions (p2p_session.cuh) enqueue allreduces only.
//
// Two modes (cuda::P2POptions::mode):
//   - threads: every rank is a thread of this process and drives the device P2POptions::devices
//     names for it. Several ranks may share a device; their kernels are on different streams of
//     one context, and all must be resident at once, which the executor checks (see below).
//   - processes: one rank per process, on P2POptions::device. Each rank's FIFO memory is exported
//     (ipc_memory.cuh: cuMem with a POSIX file descriptor, else legacy CUDA IPC) and the processes
//     meet through a rendezvous on a path-named Unix socket (rendezvous.hpp), which passes the
//     descriptors with SCM_RIGHTS. Rank, size and session come from Config or the environment, as
//     for transport::SharedMemory.
// How the ranks find each other's memory in either mode: p2p_bootstrap.cuh; where a rank's FIFO
// memory keeps what: p2p_options.hpp.
//
// Memory: a connection u->v of the plan's connection set has its slots and its tail counter in
// the receiver v's memory (the sender writes them over the interconnect, the receiver polls its
// own memory) and its head counter in the sender u's memory (the receiver posts it remotely, the
// sender polls locally): every waiter spins on local memory. The plan's ports are renumbered onto
// the connection set when a plan is uploaded, so the counters and the blocks' message bases
// outlive any one plan: calls of different counts follow each other on the same counters.
//
// Protocols (protocol/protocol.hpp): each connection also has LowLatency slots in the receiver's
// memory (p2p_options.hpp: 64 KiB each, none when Config::protocol is
// "simple"), zeroed with the FIFO memory and shared by every plan, since the message numbers are
// the connection set's. A LowLatency plan whose messages fit them runs on the LowLatency kernel as
// flagged lines; a larger one runs as Simple. Sessions run each call in its plan's protocol.
//
// Residency: blocks of different ranks wait for each other, so they must run at the same time.
// With one rank per GPU that holds whenever one rank's blocks fit its GPU. Ranks that share a GPU
// in threads mode need all their blocks resident at once: (ranks on the device) x (channels) <=
// (SMs) x (resident blocks per SM at the launch's threads), checked at every launch, and streams
// that do not serialise each other (the legacy default stream is refused when a device is shared).
// Ranks that are processes sharing a GPU are time-sliced by the driver (without MPS): correct, but
// each wait may last a time slice. What the user leaves open is chosen so that the blocks fit
// (launch_fit.hpp): by default as many channels as the SMs hold for the ranks that share the
// busiest device (at most kMaxDefaultP2PChannels), and per launch the most threads per block, up to
// 512, at which they fit; a request that does not fit is refused with Unsupported.
//
// Agreement: every block first checks that its peers make the same call (count, element type,
// op, root: call_record.hpp, through the job's control page); a mismatch fails every rank with
// ErrorCode::Mismatch naming both ranks' arguments (P2POptions::check_calls turns it off).
//
// Failure: every wait has Config::timeout (on %globaltimer) and polls the job's abort word
// (control_page.cuh); a block that gives up records rank, channel, step and peer there. The next
// call or synchronize() of any rank throws ccoll::Error naming the root cause: a block waiting
// for a peer that has no failure of its own (a rank that did not call is named as such, a rank
// whose process exited too: synchronize() watches the peers' processes while it waits, and stops
// the job as soon as one is gone). An executor that failed stays failed. abort() cancels every
// rank's kernels from the host.
//
// Leaving: a process rank's executor, when destroyed, waits for its kernels, then (bounded by
// Config::timeout) for every connected peer to have left or exited (peer_presence.hpp), so that no
// peer kernel writes into its memory after it is freed.
//
// Persistent sessions (p2p_session.cuh) and gradient queuing (layer_readiness()) work as on
// CudaVirtualRanks, per rank.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/sync/poll.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/cuda/block_tables.hpp"
#include "ccoll/transport/cuda/call_buffers.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/control_page.cuh"
#include "ccoll/transport/cuda/device_fit.cuh"
#include "ccoll/transport/cuda/device_memory.cuh"
#include "ccoll/transport/cuda/device_plan_cache.hpp"
#include "ccoll/transport/cuda/failure_record.hpp"
#include "ccoll/transport/cuda/fd_passing.hpp"
#include "ccoll/transport/cuda/ipc_memory.cuh"
#include "ccoll/transport/cuda/p2p_bootstrap.cuh"
#include "ccoll/transport/cuda/p2p_kernel.cuh"
#include "ccoll/transport/cuda/p2p_options.hpp"
#include "ccoll/transport/cuda/peer_presence.hpp"
#include "ccoll/transport/cuda/rendezvous.hpp"
#include "ccoll/transport/job.hpp"

namespace ccoll::transport {

namespace cuda {

// The default channels' cap for ranks on GPUs of their own: NCCL's most channels per GPU. Each
// channel is one block per rank, and NVLink saturates with far fewer blocks than HBM.
inline constexpr std::uint32_t kMaxDefaultP2PChannels = 32;

// The ranks that share the busiest device, and that device (threads mode; -1: unknown).
inline int busiest_device(const P2POptions& options, int nranks, int* sharing) {
  *sharing = 1;
  int count = 0;
  if (options.mode == P2POptions::Mode::processes) return options.device;
  if (options.devices.empty() && cudaGetDeviceCount(&count) != cudaSuccess) return -1;
  std::map<int, int> per_device;
  int best = -1;
  for (int r = 0; r < nranks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const int d = i < options.devices.size() ? options.devices[i] : count > 0 ? r % count : 0;
    if (++per_device[d] > *sharing || best < 0) {
      *sharing = per_device[d];
      best = d;
    }
  }
  return best;
}

}  // namespace cuda

struct CudaP2P {
  static constexpr std::string_view name = "cuda-p2p";
  using connection_type = sync::ConnectionRef;

  static Config resolve(Config c, const cuda::P2POptions& options = {}) {
    c = with_slot_bytes(c, cuda::kP2PSlotBytes);
    if (options.mode == cuda::P2POptions::Mode::processes) {
      c = transport::detail::resolve_job_config(c);
    } else {
      if (c.nranks < 1)
        throw_invalid_argument(-1, "Config::nranks", ">= 1 (the ranks, one thread each)",
                               std::to_string(c.nranks));
      c.rank = -1;
    }
    // By default as many channels as the SMs of the busiest device hold for its ranks (each
    // rank's FIFO memory: at most P - 1 incoming connections per channel), within
    // kMaxDefaultP2PChannels and a sixteenth of the device's memory.
    if (c.nchannels == 0) {
      int sharing = 1;
      const int device = cuda::busiest_device(options, c.nranks, &sharing);
      // A FIFO slot and, unless every plan is Simple, a LowLatency slot.
      const std::uint64_t stride =
          cuda::slot_stride(c.slot_bytes) +
          (c.protocol == "simple"
               ? 0
               : cuda::p2p_low_latency_slot_bytes(cuda::slot_stride(c.slot_bytes)));
      const std::uint64_t peers = static_cast<std::uint64_t>(std::max(1, c.nranks - 1));
      c.nchannels =
          cuda::default_channels(device, static_cast<std::uint32_t>(sharing), options.threads,
                                 static_cast<std::uint64_t>(sharing) * peers * c.nslots * stride,
                                 cuda::kMaxDefaultP2PChannels, 2);
    }
    return c;
  }

  class Executor {
   public:
    Executor(const Config& config, runtime::PlanSource source, std::string_view policy_id,
             const cuda::P2POptions& options = {})
        : config_(resolve(config, options)),
          options_(options),
          plans_(config_, config_.nranks, std::move(source), policy_id) {
      if (options_.threads > cuda::kMaxThreadsPerBlock || options_.threads % 32 != 0)
        throw_invalid_argument(-1, "cuda::P2POptions::threads",
                               "0 (chosen per launch) or a multiple of 32 in 32..1024",
                               std::to_string(options_.threads));
      slot_stride_ = cuda::slot_stride(config_.slot_bytes);
      // LowLatency slots unless every plan is forced into Simple.
      ll_slot_bytes_ =
          config_.protocol == "simple" ? 0 : cuda::p2p_low_latency_slot_bytes(slot_stride_);
      const auto& keys = plans_.keys();
      // As many blocks as any plan has channels (runtime::executor_channels).
      nchannels_ = runtime::executor_channels(plans_, config_);
      {
        // The threads at which the busiest device holds its ranks' blocks, against the kernels'
        // launch bounds (each launch fits its kernel's real occupancy).
        int sharing = 1;
        const int device = cuda::busiest_device(options_, config_.nranks, &sharing);
        const cuda::LaunchFit fit = cuda::bounded_fit(device, static_cast<std::uint32_t>(sharing),
                                                      nchannels_, options_.threads);
        if (fit.ok) default_threads_ = fit.threads;
      }
      for (int r = 0; r < config_.nranks; ++r)
        layouts_.push_back(
            cuda::P2PFifoLayout::make(keys, r, slot_stride_, config_.nslots, ll_slot_bytes_));
      bases_.assign(static_cast<std::size_t>(config_.nranks), nullptr);
      if (options_.mode == cuda::P2POptions::Mode::processes)
        join_processes();
      else
        start_threads();
      // Every rank's view of the connection set: plain pointers, valid in this process.
      std::vector<sync::ConnectionRef> refs = cuda::p2p_connection_refs(
          keys, layouts_, bases_, slot_stride_, config_.nslots, ll_slot_bytes_);
      refs_ = refs;
      plans_.set_connections(std::move(refs));
    }

    ~Executor() {
      // Kernels still running use this executor's memory.
      for (auto& s : states_) {
        if (s == nullptr) continue;
        cudaSetDevice(s->device);
        if (s->launched) cudaEventSynchronize(s->last_call);
      }
      // Peers' kernels may write into this rank's memory until they complete: the leave barrier.
      // (In threads mode every rank's kernels were waited for just now.)
      if (options_.mode == cuda::P2POptions::Mode::processes && control_.layout().nranks > 0) {
        const std::vector<int> peers(peers_.begin(), peers_.end());
        const auto present = cuda::leave(control_.left_host(), control_.pids_host(), config_.rank,
                                         peers, config_.timeout + std::chrono::milliseconds(1000));
        if (!present.empty()) {
          std::string names;
          for (int q : present) names += (names.empty() ? "" : ", ") + std::to_string(q);
          std::fprintf(stderr,
                       "ccoll: cuda-p2p rank %d leaves while rank(s) %s did not leave within "
                       "Config::timeout: their kernels may still write into its memory\n",
                       config_.rank, names.c_str());
        }
      }
      // Every kernel that used them has completed: stream-ordered frees, which wait for nothing.
      for (auto& s : states_) {
        if (s == nullptr) continue;
        cudaSetDevice(s->device);
        s->plans.for_each(
            [&](const runtime::PlanKey&, DevicePlan& dp) { cudaFreeAsync(dp.memory, s->upload); });
        cudaStreamSynchronize(s->upload);
        cudaEventDestroy(s->last_call);
        cudaStreamDestroy(s->stream);
        cudaStreamDestroy(s->upload);
      }
    }
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    // Rank `rank`'s part of one call, enqueued on `stream` (a stream of the rank's device): `send`
    // and `recv` are device buffers with NCCL's arguments (allreduce: `count` elements each,
    // equal in place; the other collectives as ccoll/collective.hpp says). `shape` names the
    // executor's collective and, for broadcast and reduce, the root; by default the executor's
    // collective, which must then have no root. Returns at once; errors of the arguments throw
    // here, failures of the kernel at the rank's next call or synchronize(). Every rank must make
    // the same calls in the same order: a call whose count, dtype, op or root differs from a
    // peer's fails every rank with Mismatch (P2POptions::check_calls).
    //
    // A template only so that a program that never calls it does not compile its 35 kernels.
    template <int = 0>
    void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
             cudaStream_t stream, std::optional<runtime::CallShape> shape = std::nullopt) {
      dispatch_data_type(dtype, [&](auto t) {
        dispatch_reduce_op(op, [&](auto tag) {
          run<decltype(t), decltype(tag)::value>(rank, send, recv, count, stream, shape);
        });
      });
    }

    // The same for an element type and op known at compile time: only their kernel is compiled.
    template <class T, ReduceOp Op>
    void run(int rank, const void* send, void* recv, std::size_t count, cudaStream_t stream,
             std::optional<runtime::CallShape> shape = std::nullopt) {
      RankState& st = state(rank);
      throw_if_failed(st);
      if (st.session_open)
        throw Error(ErrorCode::InvalidArgument, rank,
                    "a cuda::P2PSession of rank " + std::to_string(rank) +
                        " is open: enqueue the call there, or close the session first");
      const runtime::CallShape s = cuda::call_shape(shape, plans_.collective());
      const runtime::CallArgs a = runtime::check_call_arguments(
          send, recv, count, data_type_of<T>(), Op, s, rank, plans_.active());
      if (!a.ok()) throw Error(a.error, rank, a.reason);
      const runtime::CallLayout layout = runtime::call_layout(s, count, rank, plans_.active());
      cuda::check(cudaSetDevice(st.device), "cudaSetDevice", rank);
      if (ranks_on_device(st.device) > 1 && (stream == nullptr || stream == cudaStreamLegacy))
        throw Error(ErrorCode::InvalidArgument, rank,
                    "rank " + std::to_string(rank) + " shares device " + std::to_string(st.device) +
                        " with other ranks: the legacy default stream would serialise their "
                        "kernels, which wait for each other; pass a stream of its own "
                        "(cudaStreamNonBlocking)");
      DevicePlan& dp = call_plan(st, layout.plan_count, sizeof(T), s.root);
      const auto kernel =
          dp.low_latency ? cuda::p2p_kernel<T, Op, true> : cuda::p2p_kernel<T, Op, false>;
      const unsigned threads = fit_threads(st, kernel, dp.nblocks);
      if (st.launched && stream != st.last_stream)
        cuda::check(cudaStreamWaitEvent(stream, st.last_call, 0), "cudaStreamWaitEvent", rank);
      cuda::P2PKernelArgs args;
      args.plan = dp.plan;
      // Progress words only for a plan some consumer reads (layer_readiness): otherwise the
      // blocks store none (block_program.cuh).
      if (!dp.progress_read) args.plan.tables.progress = nullptr;
      args.agreement = agreement(rank);
      args.abort = control_.abort_device();
      args.abort_watch = abort_watch(st);
      args.timeout_ns = timeout_ns();
      args.call = make_call(st, count, data_type_of<T>(), Op, s,
                            runtime::index_bases(layout, send, recv, sizeof(T)));
      kernel<<<dp.nblocks, threads, 0, stream>>>(args);
      cuda::check(cudaGetLastError(),
                  "launching p2p_kernel (" + std::to_string(dp.nblocks) + " blocks)", rank);
      cuda::check(cudaEventRecord(st.last_call, stream), "cudaEventRecord", rank);
      st.last_stream = stream;
      st.launched = true;
      ++dp.calls;
      control_.set_launched(rank, ++st.calls);
    }

    // Waits for every call enqueued on `stream`; throws the first failure of any rank's call.
    // Process ranks watch their peers' processes meanwhile: a peer that exited stops the job at
    // once, named as the cause, instead of at Config::timeout.
    void synchronize(int rank, cudaStream_t stream) {
      RankState& st = state(rank);
      cuda::check(cudaSetDevice(st.device), "cudaSetDevice", rank);
      if (options_.mode == cuda::P2POptions::Mode::processes) {
        sync::Backoff backoff;
        auto next_look = std::chrono::steady_clock::now();
        for (;;) {
          const cudaError_t e = cudaStreamQuery(stream);
          if (e != cudaErrorNotReady) {
            cuda::check(e, "cudaStreamQuery", rank);
            break;
          }
          if (std::chrono::steady_clock::now() >= next_look) {
            check_peers_alive(st);
            next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
          }
          backoff.pause();
        }
      }
      cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", rank);
      throw_if_failed(st);
    }

    // The ccoll::Transport calling convention: rank r's call on its own stream, waited for
    // (`shape` as for the asynchronous run). (A template for the reason given there.)
    template <int = 0>
    void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
             std::optional<runtime::CallShape> shape = std::nullopt) {
      RankState& st = state(rank);
      run(rank, send, recv, count, dtype, op, st.stream, shape);
      synchronize(rank, st.stream);
    }

    // The collective this executor's plans compute (its plan source's: ccoll/collective.hpp).
    plan::Collective collective() const { return plans_.collective(); }

    // Raises the job's abort word: every rank's running blocks give up at their next poll, and
    // the executor (every rank's, in a process job) fails.
    void abort() { control_.raise_abort(); }

    int nranks() const { return config_.nranks; }
    std::span<const int> local_ranks() const { return local_; }
    const Config& config() const { return config_; }
    // The threads per block asked for, or (0) chosen for a plan of one block per channel on every
    // rank: launch_fit(rank) says what rank `rank`'s latest launch was.
    unsigned threads() const { return options_.threads != 0 ? options_.threads : default_threads_; }
    const cuda::LaunchFit& launch_fit(int rank) const { return state_of(rank).launch_fit; }
    // The device local rank `rank` runs on.
    int device(int rank) const { return state_of(rank).device; }
    // The stream blocking calls of local rank `rank` use.
    cudaStream_t stream(int rank) const { return state_of(rank).stream; }
    // processes: how this rank's FIFO memory is shared (cuMem descriptor or legacy IPC).
    cuda::IpcKind ipc_kind() const { return exported_.description().kind; }
    // The plan of `count` elements of the plan's index space (reduce-scatter and all-gather:
    // nranks x NCCL's count) from `root` (broadcast and reduce).
    plan::Plan plan(std::size_t count, std::size_t elem_size, int root = 0) {
      return plans_.prepared(count, elem_size, root)->plan;
    }

    // Gradient queuing on the GPU ([C-Cube] Sec. III-D): local rank `rank`'s Layer-Chunk table
    // for calls of `count` elements in device memory, and its per-channel progress words. A
    // consumer kernel (on another stream of the rank's device) calls runtime::layer_ready /
    // wait_layer_ready with them and the call base of the call it waits for, next_call_base()
    // taken just before that call is enqueued; launched calls store progress only once this was
    // taken for their plan (sessions always do). Valid while the plan stays cached (at most
    // Config::max_cached_plans counts per rank) and the executor lives.
    // The table's memory is freed in stream order when this is destroyed: destroy it after the
    // consumer kernels that read it.
    struct DeviceLayerReadiness {
      cuda::StreamMemory memory;      // owns the table
      runtime::LayerTableView table;  // device pointers
      const std::uint64_t* progress = nullptr;
    };
    DeviceLayerReadiness layer_readiness(int rank, std::size_t count, std::size_t elem_size,
                                         std::span<const std::uint64_t> layer_end) {
      RankState& st = state(rank);
      cuda::check(cudaSetDevice(st.device), "cudaSetDevice", rank);
      DevicePlan& dp = device_plan(st, count, elem_size);
      dp.progress_read = true;  // calls launched from now on publish their progress
      const runtime::LayerChunkTable table(dp.prepared->plan, rank, layer_end);
      DeviceLayerReadiness r;
      // On the rank's upload stream, waited for: no synchronous copy, which another rank's kernel
      // waiting for this thread could delay forever (device_memory.cuh).
      r.memory = cuda::StreamMemory(std::max<std::size_t>(1, table.flat().size_bytes()), st.upload,
                                    st.device);
      cuda::check(cudaMemcpyAsync(r.memory.get(), table.flat().data(), table.flat().size_bytes(),
                                  cudaMemcpyHostToDevice, st.upload),
                  "cudaMemcpyAsync(layer table)", rank);
      cuda::check(cudaStreamSynchronize(st.upload), "cudaStreamSynchronize(upload)", rank);
      r.table = runtime::LayerTableView{reinterpret_cast<const std::uint32_t*>(r.memory.get()),
                                        table.nlayers(), table.nchannels()};
      // This rank's row of the plan's progress words (the tables index them rank-major).
      r.progress =
          dp.plan.tables.progress + static_cast<std::uint64_t>(rank) * dp.plan.tables.nchannels;
      return r;
    }
    // The call base (runtime::progress_base_of_call) of rank `rank`'s next call of `count`.
    std::uint64_t next_call_base(int rank, std::size_t count, std::size_t elem_size) {
      RankState& st = state(rank);
      cuda::check(cudaSetDevice(st.device), "cudaSetDevice", rank);
      return runtime::progress_base_of_call(device_plan(st, count, elem_size).calls);
    }

    // For cuda::P2PSession (transport/cuda/p2p_session.cuh): rank `rank`'s call that its session
    // enqueues now, counted like a launched call, as its session record (the kernel numbers its
    // items from the rank's count of calls when the session started: while it is open, the rank
    // makes no other call).
    cuda::SessionWork session_call(int rank, const void* send, void* recv, std::size_t count,
                                   DataType dtype, ReduceOp op) {
      RankState& st = state(rank);
      throw_if_failed(st);
      if (plans_.collective() != plan::Collective::allreduce)
        throw Error(ErrorCode::Unsupported, rank,
                    "a cuda::P2PSession enqueues allreduces; this executor's plans compute " +
                        std::string(plan::collective_name(plans_.collective())) +
                        ": call run instead");
      const runtime::CallArgs a = runtime::check_call_arguments(send, recv, count, dtype, op);
      if (!a.ok()) throw Error(a.error, rank, a.reason);
      cuda::check(cudaSetDevice(st.device), "cudaSetDevice", rank);
      DevicePlan& dp = call_plan(st, count, size_of(dtype));
      cuda::SessionWork w;
      w.plan = dp.device_plan;
      w.input = send;
      w.output = recv;
      w.count = count;
      cuda::check_session_encodable(w, rank);
      ++dp.calls;
      control_.set_launched(rank, ++st.calls);
      return w;
    }
    // Throws why rank `rank` cannot open a session now (failed, or one is open already).
    void check_session_allowed(int rank) {
      RankState& st = state(rank);
      throw_if_failed(st);
      if (st.session_open)
        throw Error(ErrorCode::InvalidArgument, rank,
                    "a cuda::P2PSession of rank " + std::to_string(rank) +
                        " is open already (sessions share the rank's FIFOs)");
    }
    // Launches rank `rank`'s session kernel (one block per channel of the communicator).
    template <class Kernel>
    void launch_session(int rank, Kernel kernel, cuda::P2PSessionArgs& args, cudaStream_t stream) {
      check_session_allowed(rank);
      RankState& st = state(rank);
      cuda::check(cudaSetDevice(st.device), "cudaSetDevice", rank);
      cuda::require_non_blocking_stream(stream, "a cuda::P2PSession", rank);
      const unsigned threads = fit_threads(st, kernel, nchannels_);
      if (st.launched && stream != st.last_stream)
        cuda::check(cudaStreamWaitEvent(stream, st.last_call, 0), "cudaStreamWaitEvent", rank);
      args.agreement = agreement(rank);
      args.abort = control_.abort_device();
      args.abort_watch = abort_watch(st);
      args.timeout_ns = timeout_ns();
      args.first_call = st.calls;
      kernel<<<nchannels_, threads, 0, stream>>>(args);
      cuda::check(cudaGetLastError(),
                  "launching p2p_session_kernel (" + std::to_string(nchannels_) + " blocks)", rank);
      cuda::check(cudaEventRecord(st.last_call, stream), "cudaEventRecord", rank);
      st.last_stream = stream;
      st.launched = true;
      st.session_open = true;
    }
    void session_closed(int rank) { state(rank).session_open = false; }
    // The memory of rank `rank`'s session queue, allocated with the executor.
    const cuda::SessionQueueMemory& session_memory(int rank) { return state(rank).session; }
    void check_failures(int rank) { throw_if_failed(state(rank)); }
    // What a session's waits check (p2p_session.cuh): the failures and, for process ranks, at
    // most every 20 ms whether the peers' processes still run, as synchronize() watches them: a
    // peer that exited stops the job at once instead of at Config::timeout.
    void check_session(int rank) {
      RankState& st = state(rank);
      if (options_.mode == cuda::P2POptions::Mode::processes) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= st.next_peer_look) {
          check_peers_alive(st);
          st.next_peer_look = now + std::chrono::milliseconds(20);
        }
      }
      throw_if_failed(st);
    }
    // The blocks of rank `rank`'s session kernel: one per channel of the communicator.
    unsigned session_blocks() const { return nchannels_; }

    std::uint64_t timeout_ns() const { return cuda::timeout_ns(config_.timeout); }

   private:
    // A cached plan of one rank in device memory (stream-ordered allocation: a plain cudaFree
    // would wait for the whole device, where another rank's kernel may be waiting for this one).
    struct DevicePlan {
      std::shared_ptr<const runtime::PreparedPlan<sync::ConnectionRef>> prepared;
      void* memory = nullptr;
      cuda::P2PPlan plan;                          // by value, for p2p_kernel's parameters
      const cuda::P2PPlan* device_plan = nullptr;  // in `memory`, for sessions' work items
      unsigned nblocks = 0;
      std::uint64_t calls = 0;  // calls of this plan enqueued (layer readiness' call base)
      // A consumer took layer_readiness: launched calls publish progress (sessions always do).
      bool progress_read = false;
      // A LowLatency plan whose messages fit the connections' LL slots: launched calls run it on
      // the LowLatency kernel (plan.tables.low_latency says so to sessions).
      bool low_latency = false;
      // Admitted by the rank's ConnectionBlocks (call_plan): at its first call, not at an upload
      // for one rank alone (layer_readiness), so that every rank admits plans in call order.
      bool admitted = false;
    };

    // What one local rank owns; touched only by the thread that calls for that rank.
    struct RankState {
      int rank = 0;
      int device = 0;
      int sms = 0;
      cudaStream_t stream = nullptr;  // blocking calls
      cudaStream_t upload = nullptr;  // plan uploads
      cudaEvent_t last_call = nullptr;
      cudaStream_t last_stream = nullptr;
      bool launched = false;
      bool session_open = false;
      std::uint64_t calls = 0;           // every call of the rank, launched or in a session
      cuda::DeviceMemory fifo;           // threads: the slots and counters peers write
      cuda::DeviceMemory bases;          // nchannels x connections, block c's row is channel c's
      cuda::DeviceMemory abort_relay;    // sync::RelayedAbortWord: what the step waits watch
      cuda::SessionQueueMemory session;  // the rank's session queue (one record per item)
      cuda::DevicePlanCache<DevicePlan> plans;
      cuda::ConnectionBlocks connection_blocks;  // every plan uploaded for this rank
      cuda::KernelFits fits;
      cuda::LaunchFit launch_fit;                              // of the latest launch
      std::chrono::steady_clock::time_point next_peer_look{};  // check_session's next look
    };

    const RankState& state_of(int rank) const {
      for (const auto& s : states_)
        if (s != nullptr && s->rank == rank) return *s;
      std::string locals;
      for (int l : local_) locals += (locals.empty() ? "" : ", ") + std::to_string(l);
      throw_invalid_argument(rank, "rank", "a rank of this process (" + locals + ")",
                             std::to_string(rank));
    }
    RankState& state(int rank) { return const_cast<RankState&>(state_of(rank)); }

    int ranks_on_device(int device) const {
      const auto it = per_device_.find(device);
      return it == per_device_.end() ? 1 : it->second;
    }

    // Where rank `rank`'s blocks publish and compare their calls (none: check_calls off).
    cuda::P2PAgreement agreement(int rank) const {
      cuda::P2PAgreement a;
      if (!options_.check_calls) return a;
      a.records = control_.records_device();
      a.mismatches = control_.mismatches_device(rank);
      a.nchannels = control_.layout().nchannels;
      return a;
    }

    // The rank's next call: its number (every call of the rank counts), its arguments (NCCL's
    // count) and its buffers as addresses of index 0 of the plan's space.
    static cuda::P2PCall make_call(const RankState& st, std::size_t count, DataType dtype,
                                   ReduceOp op, const runtime::CallShape& shape,
                                   const runtime::IndexBases& at) {
      cuda::P2PCall c;
      c.number = st.calls;
      c.args.count = count;
      c.args.dtype = dtype;
      c.args.op = op;
      c.args.root = plan::has_root(shape.collective) ? shape.root : -1;
      c.input = at.input;
      c.output = at.output;
      return c;
    }

    // Processes: a connected peer whose process has exited while this rank waits stops the job,
    // named as the cause (the waits would only time out).
    void check_peers_alive(RankState& st) {
      if (peers_.empty() || control_.aborted()) return;
      const std::vector<int> peers(peers_.begin(), peers_.end());
      const std::vector<int> gone = cuda::exited_peers(control_.pids_host(), peers);
      if (gone.empty()) return;
      {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        if (!failed_) {
          failed_ = true;
          failure_code_ = ErrorCode::Aborted;
          failure_rank_ = gone.front();
          failure_ = "cuda-p2p: rank " + std::to_string(st.rank) +
                     " stopped waiting for its peers: " +
                     cuda::describe_exited(control_.pids_host(), gone);
        }
      }
      control_.raise_abort();
    }

    // Streams, events, the bases, on the rank's device (current).
    std::unique_ptr<RankState> make_state(int rank, int device) {
      auto s = std::make_unique<RankState>();
      s->rank = rank;
      s->device = device;
      cuda::check(cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, device),
                  "cudaDeviceGetAttribute(MultiProcessorCount)", rank);
      cuda::check(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate",
                  rank);
      cuda::check(cudaStreamCreateWithFlags(&s->upload, cudaStreamNonBlocking), "cudaStreamCreate",
                  rank);
      cuda::check(cudaEventCreateWithFlags(&s->last_call, cudaEventDisableTiming),
                  "cudaEventCreate", rank);
      (void)cuda::stream_order(device);  // the pool and release stream, before any kernel
      const std::size_t nbases = std::size_t{nchannels_} * std::max<std::size_t>(1, refs_count());
      s->bases = cuda::DeviceMemory(nbases * sizeof(std::uint64_t));
      zero(*s, s->bases.get(), s->bases.size(), "bases");
      s->session = cuda::SessionQueueMemory(rank, 1);
      return s;
    }
    // The device copy of the job's abort word that rank st's step waits watch, relaying the
    // host-mapped word (sync::RelayedAbortWord): uploaded on the rank's upload stream and waited
    // for, once the control page is mapped and before the rank's first kernel. A block that fails
    // raises it as well as the host-mapped word; an abort from anywhere else (the host, another
    // rank's failure, a process found gone) reaches it, and then every wait, within about
    // RelayedAbortWord::kRelayNs + 2 DevicePollSchedule::kCheckNs.
    void make_abort_relay(RankState& st) {
      cuda::check(cudaSetDevice(st.device), "cudaSetDevice", st.rank);
      sync::RelayedAbortWord relay;
      relay.host = control_.abort_device();
      st.abort_relay = cuda::DeviceMemory(sizeof relay);
      cuda::check(cudaMemcpyAsync(st.abort_relay.get(), &relay, sizeof relay,
                                  cudaMemcpyHostToDevice, st.upload),
                  "cudaMemcpyAsync(abort relay)", st.rank);
      cuda::check(cudaStreamSynchronize(st.upload), "cudaStreamSynchronize(upload)", st.rank);
    }
    static std::uint32_t* abort_watch(const RankState& st) {
      return &reinterpret_cast<sync::RelayedAbortWord*>(st.abort_relay.get())->word;
    }
    // Zeroes device memory of the rank on its upload stream, waited for (not cudaMemset: it would
    // run on the legacy stream, and a ccoll kernel may be resident on the device).
    static void zero(RankState& st, void* at, std::size_t bytes, const char* what) {
      cuda::check(cudaMemsetAsync(at, 0, bytes, st.upload),
                  std::string("cudaMemsetAsync(") + what + ")", st.rank);
      cuda::check(cudaStreamSynchronize(st.upload), "cudaStreamSynchronize(upload)", st.rank);
    }
    std::size_t refs_count() const { return plans_.keys().size(); }

    // Threads: every rank's FIFO memory on its device, peer access between connected devices.
    void start_threads() {
      int count = 0;
      const cudaError_t e = cudaGetDeviceCount(&count);
      if (e != cudaSuccess || count == 0)
        throw Error(
            ErrorCode::System, -1,
            std::string("no CUDA device: ") +
                (e == cudaSuccess ? "cudaGetDeviceCount found none" : cudaGetErrorString(e)));
      const std::vector<int> devices = cuda::rank_devices(options_, config_.nranks, count);
      for (int d : devices) ++per_device_[d];
      cuda::enable_connected_peers(plans_.keys(), devices);
      control_ = cuda::ControlPage::allocate(cuda::ControlLayout::make(config_.nranks, nchannels_));
      for (int r = 0; r < config_.nranks; ++r) {
        const int d = devices[static_cast<std::size_t>(r)];
        cuda::check(cudaSetDevice(d), "cudaSetDevice(" + std::to_string(d) + ")", r);
        auto s = make_state(r, d);
        make_abort_relay(*s);
        s->fifo = cuda::DeviceMemory(layouts_[static_cast<std::size_t>(r)].total);
        // Zero before any rank's kernel can post to the counters: every rank's memory is built
        // and waited for here, before the constructor returns.
        zero(*s, s->fifo.get(), s->fifo.size(), "FIFO memory");
        bases_[static_cast<std::size_t>(r)] = s->fifo.get();
        states_.push_back(std::move(s));
        local_.push_back(r);
      }
    }

    // Processes: export this rank's FIFO memory, meet the others, map theirs.
    void join_processes() {
      const int me = config_.rank;
      const int device = options_.device >= 0 ? options_.device : cuda::current_device();
      cuda::check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")", me);
      per_device_[device] = 1;
      auto s = make_state(me, device);
      // Zeroed (and waited for) before the rendezvous shares it.
      exported_ = cuda::ExportedMemory(device, layouts_[static_cast<std::size_t>(me)].total,
                                       options_.prefer_cumem, s->upload, me);
      bases_[static_cast<std::size_t>(me)] = exported_.get();
      const cuda::ControlLayout control_layout =
          cuda::ControlLayout::make(config_.nranks, nchannels_);
      cuda::UniqueFd control_fd;
      if (me == 0) control_fd = cuda::ControlPage::create_shared(control_layout);
      cuda::P2PProcessRecord mine;
      mine.rank = me;
      mine.device = device;
      cuda::check(cudaDeviceGetPCIBusId(mine.bus_id, sizeof mine.bus_id - 1, device),
                  "cudaDeviceGetPCIBusId", me);
      mine.memory = exported_.description();
      std::vector<int> fds;
      if (exported_.fd() >= 0) {
        mine.memory_fds = 1;
        fds.push_back(exported_.fd());
      }
      if (me == 0) {
        mine.control_fds = 1;
        fds.push_back(control_fd.get());
      }
      const auto* raw = reinterpret_cast<const std::byte*>(&mine);
      auto all = cuda::rendezvous_all_gather(cuda::p2p_socket_path(options_, config_), me,
                                             config_.nranks, plans_.fingerprint(),
                                             std::span(raw, sizeof mine), fds, config_.timeout);
      std::vector<cuda::P2PProcessRecord> records(all.size());
      for (std::size_t q = 0; q < all.size(); ++q) {
        if (all[q].bytes.size() != sizeof(cuda::P2PProcessRecord))
          throw Error(
              ErrorCode::Mismatch, me,
              "cuda-p2p: rank " + std::to_string(q) + " sent a record of another ccoll version");
        std::memcpy(&records[q], all[q].bytes.data(), sizeof(cuda::P2PProcessRecord));
      }
      // The control page: rank 0's, passed with its record.
      if (me == 0) {
        control_ = cuda::ControlPage::map_shared(control_layout, control_fd.get(), me);
      } else {
        const cuda::P2PProcessRecord& r0 = records[0];
        auto& fds0 = all[0].fds;
        if (r0.control_fds != 1 || fds0.size() != r0.memory_fds + 1)
          throw Error(ErrorCode::System, me, "cuda-p2p: rank 0's control page did not arrive");
        control_ = cuda::ControlPage::map_shared(control_layout, fds0[r0.memory_fds].get(), me);
      }
      sync::AtomicWord<std::int64_t>(control_.pids_host() + me)
          .store_release(static_cast<std::int64_t>(::getpid()));
      make_abort_relay(*s);
      // The peers this rank has a connection with, and their memory.
      for (const auto& k : plans_.keys()) {
        if (k.from == me && k.to != me) peers_.insert(k.to);
        if (k.to == me && k.from != me) peers_.insert(k.from);
      }
      imported_.resize(static_cast<std::size_t>(config_.nranks));
      for (int q : peers_) {
        const cuda::P2PProcessRecord& r = records[static_cast<std::size_t>(q)];
        cuda::check_peer_path(me, device, mine.bus_id, q, r);
        auto& qfds = all[static_cast<std::size_t>(q)].fds;
        cuda::UniqueFd fd;
        if (r.memory_fds == 1 && !qfds.empty()) fd = std::move(qfds[0]);
        imported_[static_cast<std::size_t>(q)] = cuda::ImportedMemory(
            r.memory, std::move(fd), device, me, "rank " + std::to_string(q) + "'s FIFO memory");
        bases_[static_cast<std::size_t>(q)] = imported_[static_cast<std::size_t>(q)].get();
      }
      states_.push_back(std::move(s));
      local_.push_back(me);
    }

    // Blocks of all ranks sharing this device must be resident at once (see the header comment):
    // the threads per block at which they are, or Unsupported.
    template <class Kernel>
    unsigned fit_threads(RankState& st, Kernel kernel, unsigned nblocks) {
      const int sharing = ranks_on_device(st.device);
      cuda::FitRequest r;
      r.blocks_per_channel = static_cast<std::uint32_t>(sharing);
      r.channels = nblocks;
      r.sms = st.sms;
      const cuda::LaunchFit fit = st.fits.fit(kernel, options_.threads, r);
      if (!fit.ok)
        throw Error(
            ErrorCode::Unsupported, st.rank,
            fit.refusal("cuda-p2p: " + std::to_string(sharing) + " rank(s) on one device need",
                        "ranks x channels", st.device,
                        "lower Config::nchannels or P2POptions::threads, or put fewer "
                        "ranks on one device"));
      st.launch_fit = fit;
      return fit.threads;
    }

    // Rank st's tables for (count, elem_size, root) in device memory, built on first use.
    DevicePlan& device_plan(RankState& st, std::size_t count, std::size_t elem_size, int root = 0) {
      if (!plan::has_root(plans_.collective())) root = 0;
      const runtime::PlanKey key{count, elem_size, root};
      if (DevicePlan* cached = st.plans.find(key)) return *cached;
      auto prepared = plans_.prepared(count, elem_size, root);
      // An evicted plan may be in use by a queued kernel: freed behind that kernel, on the
      // device's release stream, so that the next upload's wait is not behind it too.
      st.plans.make_room(config_.max_cached_plans, st.session_open,
                         "an open cuda::P2PSession of rank " + std::to_string(st.rank), st.rank,
                         [&](DevicePlan& old) {
                           const cudaStream_t release = cuda::release_stream(st.device);
                           if (st.launched)
                             cuda::check(cudaStreamWaitEvent(release, st.last_call, 0),
                                         "cudaStreamWaitEvent", st.rank);
                           cuda::check(cudaFreeAsync(old.memory, release), "cudaFreeAsync",
                                       st.rank);
                         });
      return st.plans.insert(key, upload(st, std::move(prepared), elem_size));
    }

    // The plan of a call: device_plan, admitted beside the plans of the rank's earlier calls
    // (cuda::ConnectionBlocks). Every rank makes the same calls in the same order and decides
    // from the whole plan, so all refuse alike, before any launch.
    DevicePlan& call_plan(RankState& st, std::size_t count, std::size_t elem_size, int root = 0) {
      DevicePlan& dp = device_plan(st, count, elem_size, root);
      if (!dp.admitted) {
        const std::string why =
            st.connection_blocks.admit(dp.prepared->plan, dp.prepared->set_index);
        if (!why.empty()) throw Error(ErrorCode::Unsupported, st.rank, why);
        dp.admitted = true;
      }
      return dp;
    }

    DevicePlan upload(RankState& st,
                      std::shared_ptr<const runtime::PreparedPlan<sync::ConnectionRef>> pp,
                      std::size_t elem_size) {
      const plan::Plan& p = pp->plan;
      // No blocks for trailing channels empty on every rank (Plan::channels_in_use): every rank
      // launches as many, from the same plan.
      const std::uint32_t nch = p.channels_in_use();
      if (nch > nchannels_)
        throw Error(ErrorCode::Unsupported, st.rank,
                    "plan '" + p.algorithm + "' has " + std::to_string(nch) +
                        " channels; the communicator was set up for " + std::to_string(nchannels_) +
                        ", its reference plans' (a policy that chooses among plans must give "
                        "each as many channels as the most any has: algo/by_size.hpp)");
      const std::size_t nkeys = plans_.keys().size();
      DevicePlan dp;
      dp.nblocks = nch;
      // Ports renumbered onto the connection set: counters and bases are the set's. Block c runs
      // this rank's program of channel c.
      std::vector<plan::Port> ports = p.ports;
      for (auto& port : ports) port.connection = pp->set_index[port.connection];
      const auto& keys = plans_.keys();
      cuda::BlockTablesImage image;
      std::vector<std::int32_t> peers;  // per block: the ranks its connections join it to
      std::vector<std::uint32_t> peer_begin{0};
      for (std::uint32_t c = 0; c < nch; ++c) {
        const std::uint32_t b = image.add_block(p, c, st.rank, ports, nkeys);
        const std::vector<std::int32_t> block_peers = image.peers_of(b, keys);
        peers.insert(peers.end(), block_peers.begin(), block_peers.end());
        peer_begin.push_back(static_cast<std::uint32_t>(peers.size()));
      }
      // One allocation, sections on 128-byte lines.
      cuda::TableSections sections;
      const std::size_t at_programs =
          sections.add(image.programs.size() * sizeof(cuda::BlockProgram));
      const std::size_t at_steps = sections.add(image.steps.size() * sizeof(plan::Step));
      const std::size_t at_ports = sections.add(ports.size() * sizeof(plan::Port));
      const std::size_t at_conns = sections.add(nkeys * sizeof(sync::ConnectionRef));
      const std::size_t at_advances =
          sections.add(image.advances.size() * sizeof(cuda::BaseAdvance));
      const std::size_t at_local_steps =
          sections.add(image.local_steps.size() * sizeof(plan::Step));
      const std::size_t at_local_ports =
          sections.add(image.local_ports.size() * sizeof(plan::Port));
      const std::size_t at_progress =
          sections.add(static_cast<std::size_t>(p.nranks) * nch * sizeof(std::uint64_t));
      const std::size_t at_calls = sections.add(nch * sizeof(std::uint64_t));
      const std::size_t at_peers = sections.add(peers.size() * sizeof(std::int32_t));
      const std::size_t at_peer_begin = sections.add(peer_begin.size() * sizeof(std::uint32_t));
      const std::size_t at_plan = sections.add(sizeof(cuda::P2PPlan));
      std::vector<std::byte> host(std::max<std::size_t>(sections.total(), 128), std::byte{0});
      cuda::put_section(host, at_programs, image.programs);
      cuda::put_section(host, at_steps, image.steps);
      cuda::put_section(host, at_ports, ports);
      cuda::put_section(host, at_conns, refs_);
      cuda::put_section(host, at_advances, image.advances);
      cuda::put_section(host, at_local_steps, image.local_steps);
      cuda::put_section(host, at_local_ports, image.local_ports);
      cuda::put_section(host, at_peers, peers);
      cuda::put_section(host, at_peer_begin, peer_begin);
      dp.memory = cuda::allocate_in_stream_order(host.size(), st.upload, st.device, st.rank);
      auto* d = static_cast<std::byte*>(dp.memory);
      cuda::P2PPlanTables& t = dp.plan.tables;
      t.programs = reinterpret_cast<const cuda::BlockProgram*>(d + at_programs);
      t.steps = reinterpret_cast<const plan::Step*>(d + at_steps);
      t.ports = reinterpret_cast<const plan::Port*>(d + at_ports);
      t.connections = reinterpret_cast<const sync::ConnectionRef*>(d + at_conns);
      t.bases = reinterpret_cast<std::uint64_t*>(st.bases.get());
      t.advances = reinterpret_cast<const cuda::BaseAdvance*>(d + at_advances);
      t.local_steps = reinterpret_cast<const plan::Step*>(d + at_local_steps);
      t.local_ports = reinterpret_cast<const plan::Port*>(d + at_local_ports);
      t.failures = control_.failures_device(st.rank);
      t.progress = reinterpret_cast<std::uint64_t*>(d + at_progress);
      t.calls = reinterpret_cast<std::uint64_t*>(d + at_calls);
      t.nconnections = static_cast<std::uint32_t>(nkeys);
      t.nblocks = nch;
      t.nchannels = nch;
      t.nactive = pp->nactive;
      // Every rank decides the same from the same plan (the fingerprint) and element size (the
      // call agreement compares the element types before any step).
      dp.low_latency = cuda::p2p_runs_low_latency(p, elem_size, ll_slot_bytes_);
      t.low_latency = dp.low_latency ? 1u : 0u;
      t.ll_signature =
          protocol::LowLatency::signature(p.count, static_cast<std::uint32_t>(elem_size), 0);
      dp.plan.peers = reinterpret_cast<const std::int32_t*>(d + at_peers);
      dp.plan.peer_begin = reinterpret_cast<const std::uint32_t*>(d + at_peer_begin);
      dp.device_plan = reinterpret_cast<const cuda::P2PPlan*>(d + at_plan);
      std::memcpy(host.data() + at_plan, &dp.plan, sizeof dp.plan);
      cuda::check(
          cudaMemcpyAsync(dp.memory, host.data(), host.size(), cudaMemcpyHostToDevice, st.upload),
          "cudaMemcpyAsync(plan tables)", st.rank);
      // Waited for: the host buffer goes away, and kernels on other streams read the tables.
      cuda::check(cudaStreamSynchronize(st.upload), "cudaStreamSynchronize(upload)", st.rank);
      dp.prepared = std::move(pp);
      return dp;
    }

    // Throws the job's failure if any block (or abort()) raised the abort word.
    void throw_if_failed(RankState& st) {
      {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        if (failed_) throw Error(failure_code_, failure_rank_, failure_);
      }
      if (!control_.aborted()) return;
      // This rank's blocks write their records before they end; the others' records arrive
      // shortly after the word (each block stops at its next poll): give them a moment to land.
      if (st.launched) cudaEventSynchronize(st.last_call);
      std::string text;
      ErrorCode code = ErrorCode::Aborted;
      int who = -1;
      for (int i = 0; i < 200; ++i) {
        if (describe_failure(text, code, who)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::lock_guard<std::mutex> lock(failure_mutex_);
      if (!failed_) {
        failed_ = true;
        failure_code_ = code;
        failure_rank_ = who;
        failure_ = text;
      }
      throw Error(failure_code_, failure_rank_, failure_);
    }

    // The root cause from the failure records: a block that gave up waiting for a peer with no
    // failure of its own (that peer never came, or is stuck outside the plan), a timeout before
    // an abort, then the earliest. True when the records are conclusive: such a block was found,
    // or no block timed out at all (the host's abort()).
    bool describe_failure(std::string& text, ErrorCode& code, int& who) const {
      const cuda::ControlLayout& l = control_.layout();
      // Every failing block writes its record, fences at system scope and stores the word with
      // release: acquiring the word before each copy makes the records of the blocks that have
      // stored it visible.
      (void)control_.aborted();
      // A mismatch of the ranks' calls is the cause of whatever else stopped: the lowest call.
      {
        std::vector<cuda::CallMismatch> found(static_cast<std::size_t>(l.nranks) * l.nchannels);
        std::memcpy(found.data(), control_.mismatches_host(), found.size() * sizeof(found[0]));
        if (const cuda::CallMismatch* m = cuda::first_mismatch(found.data(), found.size())) {
          code = ErrorCode::Mismatch;
          who = std::max(m->rank, m->peer);
          text = cuda::describe_mismatch(*m);
          return true;
        }
      }
      std::vector<cuda::BlockFailure> board(static_cast<std::size_t>(l.nranks) * l.nchannels);
      std::memcpy(board.data(), control_.failures_host(), board.size() * sizeof(board[0]));
      const cuda::RootCause root = cuda::find_root_cause(board.data(), board.size());
      if (root.cause == nullptr) {
        // No timeout: the word was raised by the host. (A block that timed out writes its record
        // before the word, so its record would be here.)
        code = ErrorCode::Aborted;
        who = -1;
        text = "cuda-p2p: aborted by abort() on the host; " + std::to_string(root.stopped) +
               " blocks stopped";
        return true;
      }
      const cuda::BlockFailure* cause = root.cause;
      code = ErrorCode::Timeout;
      who = cause->rank;
      std::ostringstream os;
      os << "cuda-p2p: " << cuda::describe_stop(*cause)
         << (cause->step.result == sync::WaitResult::Timeout ? " past Config::timeout ("
                                                             : " when another block timed out (")
         << config_.timeout.count() << " ms)";
      const int peer = cause->step.peer;
      if (peer >= 0 && peer < l.nranks && cause->rank >= 0 && cause->rank < l.nranks) {
        const std::uint64_t theirs = control_.launched(peer);
        const std::uint64_t ours = control_.launched(cause->rank);
        if (theirs < ours)
          os << "; rank " << peer << " did not call (it launched " << theirs << " calls, rank "
             << cause->rank << " " << ours << ")";
        const int one[] = {peer};
        if (!cuda::exited_peers(control_.pids_host(), one).empty())
          os << "; " << cuda::describe_exited(control_.pids_host(), one);
      }
      os << "; " << root.stopped << " blocks stopped";
      text = os.str();
      return root.conclusive;
    }

    Config config_;
    cuda::P2POptions options_;
    runtime::PlanCache<sync::ConnectionRef> plans_;
    std::uint64_t slot_stride_ = 0;
    std::uint64_t ll_slot_bytes_ = 0;  // each connection's LowLatency slot (0: none)
    std::uint32_t nchannels_ = 1;
    unsigned default_threads_ = cuda::kDefaultThreads;
    std::vector<cuda::P2PFifoLayout> layouts_;
    std::vector<std::byte*> bases_;  // per rank: its FIFO memory in this process (or null)
    std::vector<sync::ConnectionRef> refs_;
    std::map<int, int> per_device_;  // ranks of this process per device
    std::set<int> peers_;            // processes: the ranks this one has connections with
    cuda::ControlPage control_;
    cuda::ExportedMemory exported_;               // processes: this rank's FIFO memory
    std::vector<cuda::ImportedMemory> imported_;  // processes: the peers'
    std::vector<std::unique_ptr<RankState>> states_;
    std::vector<int> local_;
    std::mutex failure_mutex_;
    bool failed_ = false;
    ErrorCode failure_code_ = ErrorCode::Aborted;
    int failure_rank_ = -1;
    std::string failure_;
  };
};

static_assert(Transport<CudaP2P>);

}  // namespace ccoll::transport
