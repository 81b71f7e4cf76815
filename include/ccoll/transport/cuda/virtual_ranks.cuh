// ccoll/transport/cuda/virtual_ranks.cuh: transport::CudaVirtualRanks, every rank of a plan on one
// GPU, each (rank, channel) program a thread block of one cooperative kernel.
//
// It is the single-GPU vehicle for every plan (relays and detours included): the ranks' buffers,
// FIFO slots and counters are in device memory, a call is one kernel launch on a CUDA stream, and
// nothing runs on the host between steps. Calls are stream-ordered like NCCL's:
//
//   ccoll::Allreduce<transport::CudaVirtualRanks, algo::Ring> ar(config);    // config.nranks = P
//   ar.executor().run_all(sends, recvs, count, DataType::f32, ReduceOp::sum, stream);  // async
//   ar.executor().synchronize(stream);  // waits, and throws the failure of any call it ran
//
// ar.rank(r).run(...) also works (for code written against the other transports): each rank's
// call records its buffers and the last rank's call launches the kernel and waits for it.
//
// The other collectives (ccoll/collective.hpp) run the same way, with their own arguments mapped
// onto the plan's index space (call_buffers.hpp) and a CallShape naming the root:
//
//   ccoll::Broadcast<transport::CudaVirtualRanks, algo::DoubleBinaryTree> bc(config);
//   bc.executor().run_all(sends, recvs, count, DataType::bf16, ReduceOp::sum, stream,
//                         runtime::CallShape{plan::Collective::broadcast, root});
//   bc.rank(r).run(send, recv, count, DataType::bf16, root);  // blocking, as on host threads
//
// Sessions (session.cuh) enqueue allreduces only.
//
// Launch: cudaLaunchCooperativeKernel, so either all nranks x nchannels blocks are resident or the
// launch is refused. What the user leaves open is chosen so that they are (launch_fit.hpp): by
// default as many channels as the SMs hold, and per launch the most threads per block, up to 512,
// at which the plan's blocks fit (a forest's plan has a channel per tree). A request that does not
// fit throws ccoll::Error(Unsupported) naming the blocks needed and the blocks this GPU holds.
// Memory: one pool of FIFO slots for the connection set (shared by the plans of all counts: calls
// of one executor are ordered, see below), and per cached plan its tables, counters and the blocks'
// message bases.
//
// Protocols (protocol/protocol.hpp): a LowLatency plan (Config::protocol "ll", or one that `auto`
// chose) runs on a kernel of its own, which moves every message as flagged lines in LL slots that
// belong to the plan (sized to its largest message, zeroed when it is uploaded); Simple plans, and
// LowLatency plans whose messages are too large for LowLatency on a GPU (block_tables.hpp,
// kMaxLowLatencySlotBytes), run on a kernel without that path. A session's kernel has both paths
// and runs each call's plan in its own protocol.
//
// Ordering: calls of one executor must not overlap, since they share the slot pool. Calls on one
// stream are ordered by the stream; when a call comes on another stream than the previous one, the
// executor makes the new stream wait for the previous call (an event), so any mix of streams is
// safe.
//
// Failure: a block that gives up (Config::timeout on the GPU clock, or the abort word) records
// rank, channel, step and peer; the next call, synchronize() or a blocking run() throws
// ccoll::Error naming the block stuck on a peer that did not fail (failure_record.hpp).
// abort() raises the abort words from the host (block_program.cuh, AbortWords), to stop a kernel
// whose peers will never come. An executor that failed stays failed.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/cuda/block_tables.hpp"
#include "ccoll/transport/cuda/call_buffers.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/device_fit.cuh"
#include "ccoll/transport/cuda/device_memory.cuh"
#include "ccoll/transport/cuda/device_plan_cache.hpp"
#include "ccoll/transport/cuda/failure_record.hpp"
#include "ccoll/transport/cuda/session_queue.cuh"
#include "ccoll/transport/cuda/virtual_ranks_kernel.cuh"

namespace ccoll::transport {

// How the kernel is launched (an optional argument after the topology:
// Allreduce<CudaVirtualRanks, L> ar(config, L{}, cuda::LaunchOptions{...})).
namespace cuda {
struct LaunchOptions {
  int device = -1;  // -1: the current device
  // Per block: a multiple of 32, at most 1024; 0: per launch, the most up to 512 at which the
  // plan's blocks fit (cuda::fit_launch).
  unsigned threads = 0;
  cudaStream_t stream = nullptr;  // the stream of blocking calls (rank(r).run)
};

}  // namespace cuda

struct CudaVirtualRanks {
  static constexpr std::string_view name = "cuda-virtual";
  using connection_type = sync::DeviceConnectionRef;

  static Config resolve(Config c, const cuda::LaunchOptions& options = {}) {
    if (c.nranks < 1 || c.nranks > cuda::kMaxVirtualRanks)
      throw_invalid_argument(
          -1, "Config::nranks",
          "1.." + std::to_string(cuda::kMaxVirtualRanks) + " (the virtual ranks on this GPU)",
          std::to_string(c.nranks));
    c.rank = -1;
    c = with_slot_bytes(c, cuda::kVirtualRanksSlotBytes);
    // By default as many channels as the SMs hold (cuda::fit_launch), within a sixteenth of the
    // device's memory for the FIFO slots of at most P(P-1) connections per channel.
    if (c.nchannels == 0) {
      c.nchannels = cuda::default_channels(
          options.device, static_cast<std::uint32_t>(c.nranks), options.threads,
          cuda::virtual_ranks_channel_fifo_bytes(static_cast<std::uint64_t>(c.nranks), c.nslots,
                                                 c.slot_bytes),
          cuda::kMaxDefaultChannels, 2);
    }
    return c;
  }

  class Executor {
   public:
    Executor(const Config& config, runtime::PlanSource source, std::string_view policy_id,
             const cuda::LaunchOptions& options = {})
        : config_(with_slot_bytes(config, cuda::kVirtualRanksSlotBytes)),
          options_(options),
          device_(options.device >= 0 ? options.device : cuda::current_device()),
          plans_(config_, config_.nranks, std::move(source), policy_id),
          local_(static_cast<std::size_t>(config.nranks)),
          pending_(static_cast<std::size_t>(config.nranks)) {
      std::iota(local_.begin(), local_.end(), 0);
      if (options_.threads > cuda::kMaxThreadsPerBlock || options_.threads % 32 != 0)
        throw_invalid_argument(-1, "cuda::LaunchOptions::threads",
                               "0 (chosen per launch) or a multiple of 32 in 32..1024",
                               std::to_string(options_.threads));
      cuda::check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
      int cooperative = 0;
      cuda::check(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device_),
                  "cudaDeviceGetAttribute(CooperativeLaunch)");
      if (cooperative == 0)
        throw Error(ErrorCode::Unsupported, -1,
                    "device " + std::to_string(device_) +
                        " does not support cooperative launches, which virtual ranks need");
      cuda::check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_),
                  "cudaDeviceGetAttribute(MultiProcessorCount)");
      // What a plan of nranks x nchannels blocks gets, against the kernels' launch bounds; each
      // launch fits its own plan to its kernel's occupancy (launch_fit_).
      launch_fit_ =
          cuda::bounded_fit(device_, static_cast<std::uint32_t>(config_.nranks),
                            std::max<std::uint32_t>(1, config_.nchannels), options_.threads);
      // One slot pool for the connection set: every plan's connection maps onto it.
      slot_stride_ = cuda::slot_stride(config_.slot_bytes);
      const std::size_t nkeys = plans_.keys().size();
      pool_ = cuda::DeviceMemory(std::max<std::size_t>(1, nkeys) * config_.nslots * slot_stride_);
      std::vector<sync::DeviceConnectionRef> refs(nkeys);
      for (std::size_t i = 0; i < nkeys; ++i) {
        refs[i].slots = pool_.get() + i * config_.nslots * slot_stride_;
        refs[i].slot_bytes = slot_stride_;
        refs[i].nslots = config_.nslots;
        refs[i].from = plans_.keys()[i].from;
        refs[i].to = plans_.keys()[i].to;
      }
      plans_.set_connections(std::move(refs));
      // The abort word, and a 1 in pinned memory that abort() copies to the blocks' word.
      status_ = cuda::MappedHostMemory(2 * sizeof(std::uint32_t));
      abort_host_word()[1] = 1;
      abort_watch_ = cuda::DeviceMemory(sizeof(std::uint32_t));
      // Allocated now, before any kernel: opening or closing a session later allocates nothing.
      session_memory_ = cuda::SessionQueueMemory(-1, static_cast<std::uint32_t>(config_.nranks));
      (void)cuda::stream_order(device_);  // the plan tables' pool, before any kernel
      cuda::check(cudaEventCreateWithFlags(&last_call_, cudaEventDisableTiming), "cudaEventCreate");
      cuda::check(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking),
                  "cudaStreamCreate");
      cuda::check(cudaStreamCreateWithFlags(&abort_stream_, cudaStreamNonBlocking),
                  "cudaStreamCreate");
      // Zeroed on abort()'s own stream, so that no raise can land before the zero, and waited
      // for, so that the first kernel reads it.
      cuda::check(cudaMemsetAsync(abort_watch_.get(), 0, sizeof(std::uint32_t), abort_stream_),
                  "cudaMemsetAsync(abort)");
      cuda::check(cudaStreamSynchronize(abort_stream_), "cudaStreamSynchronize(abort)");
    }
    ~Executor() {
      // Kernels still running use this executor's memory.
      cudaSetDevice(device_);
      if (launched_) cudaEventSynchronize(last_call_);
      device_plans_.clear();  // stream-ordered frees, while the device is current
      cudaEventDestroy(last_call_);
      cudaStreamDestroy(upload_stream_);
      cudaStreamSynchronize(abort_stream_);  // an abort()'s copy into abort_watch_
      cudaStreamDestroy(abort_stream_);
    }
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    // One call of all ranks, enqueued on `stream`: sends[r] and recvs[r] are rank r's device
    // buffers with NCCL's arguments (allreduce: `count` elements each, sends[r] == recvs[r] in
    // place; the other collectives as ccoll/collective.hpp says). `shape` names the executor's
    // collective and, for broadcast and reduce, the root; by default the executor's collective,
    // which must then have no root. Returns at once; errors of the arguments throw here, failures
    // of the kernel at the next call or synchronize().
    //
    // A template only so that a program that never calls it does not compile its 35 kernels (a
    // plain member function's body, and the kernels it names, are compiled wherever the header is).
    template <int = 0>
    void run_all(std::span<const void* const> sends, std::span<void* const> recvs,
                 std::size_t count, DataType dtype, ReduceOp op, cudaStream_t stream,
                 std::optional<runtime::CallShape> shape = std::nullopt) {
      dispatch_data_type(dtype, [&](auto t) {
        dispatch_reduce_op(op, [&](auto tag) {
          run_all<decltype(t), decltype(tag)::value>(sends, recvs, count, stream, shape);
        });
      });
    }

    // The same for an element type and op known at compile time: only their kernel is compiled
    // into the program (the run-time form above compiles all 35 pairs).
    template <class T, ReduceOp Op>
    void run_all(std::span<const void* const> sends, std::span<void* const> recvs,
                 std::size_t count, cudaStream_t stream,
                 std::optional<runtime::CallShape> shape = std::nullopt) {
      throw_if_failed();
      if (session_open_)
        throw Error(ErrorCode::InvalidArgument, -1,
                    "a cuda::Session of this executor is open: enqueue the call there, or close "
                    "the session first");
      const runtime::CallShape s = cuda::call_shape(shape, plans_.collective());
      cuda::KernelArgs args;
      args.buffers = cuda::checked_buffers(nranks(), sends, recvs, count, data_type_of<T>(), Op, s,
                                           plans_.active());
      const runtime::CallLayout layout = runtime::call_layout(s, count, 0, plans_.active());
      DevicePlan& dp = device_plan(layout.plan_count, sizeof(T), s.root);
      args.tables = dp.tables;
      // Progress words only for a plan some consumer reads (layer_readiness): otherwise the
      // blocks store none (block_program.cuh).
      if (!dp.progress_read) args.tables.progress = nullptr;
      args.timeout_ns = timeout_ns();
      args.abort = abort_words();
      if (dp.low_latency) {
        launch(cuda::virtual_ranks_kernel<T, Op, true>, dp.nblocks, args, stream,
               dp.tables.nchannels);
      } else {
        launch(cuda::virtual_ranks_kernel<T, Op, false>, dp.nblocks, args, stream,
               dp.tables.nchannels);
      }
      ++dp.calls;
    }

    // The collective this executor's plans compute (its plan source's: ccoll/collective.hpp).
    plan::Collective collective() const { return plans_.collective(); }

    // Waits for every call enqueued on `stream`; throws the first failure of any call.
    void synchronize(cudaStream_t stream) {
      cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      throw_if_failed();
    }

    // Raises the abort words, and this executor fails: the next call, synchronize() or blocking
    // run() throws Aborted. The host-mapped word stops an idle session at once. A running call's
    // waits watch the device copy, raised by a copy on a stream of its own, and give up within
    // DevicePollSchedule::kCheckNs of its landing. The copy can be held up where streams share a
    // hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) behind work that cannot start while the
    // kernel fills the GPU; the call then ends at Config::timeout. Never throws: the host word is
    // up whatever the copy does.
    void abort() noexcept {
      sync::AtomicWord<std::uint32_t>(abort_host_word()).store_release(1u);
      (void)cudaMemcpyAsync(abort_watch_.get(), abort_host_word() + 1, sizeof(std::uint32_t),
                            cudaMemcpyHostToDevice, abort_stream_);
    }

    // The ccoll::Transport calling convention: rank r's part of a call (`shape` as for run_all).
    // The last rank's call launches the kernel on LaunchOptions::stream and waits for it.
    // (A template for the reason given at run_all.)
    template <int = 0>
    void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
             std::optional<runtime::CallShape> shape = std::nullopt) {
      if (rank < 0 || rank >= nranks())
        throw_invalid_argument(rank, "rank", "0.." + std::to_string(nranks() - 1),
                               std::to_string(rank));
      Pending& p = pending_[static_cast<std::size_t>(rank)];
      if (p.given)
        throw Error(ErrorCode::InvalidArgument, rank,
                    "rank " + std::to_string(rank) +
                        " called twice before every rank called: virtual ranks launch one kernel "
                        "for all ranks once each has called");
      const runtime::CallShape s = cuda::call_shape(shape, plans_.collective());
      if (npending_ > 0 && (count != pending_count_ || dtype != pending_dtype_ ||
                            op != pending_op_ || !(s == pending_shape_))) {
        for (auto& q : pending_) q.given = false;
        npending_ = 0;
        throw Error(ErrorCode::Mismatch, rank,
                    "rank " + std::to_string(rank) + " called " + describe(s) + " with count " +
                        std::to_string(count) + ", " + std::string(to_string(dtype)) + ", " +
                        std::string(to_string(op)) + "; the ranks before it " +
                        describe(pending_shape_) + " with count " + std::to_string(pending_count_) +
                        ", " + std::string(to_string(pending_dtype_)) + ", " +
                        std::string(to_string(pending_op_)));
      }
      p = Pending{send, recv, true};
      pending_count_ = count;
      pending_dtype_ = dtype;
      pending_op_ = op;
      pending_shape_ = s;
      if (++npending_ < nranks()) return;
      std::vector<const void*> sends(pending_.size());
      std::vector<void*> recvs(pending_.size());
      for (std::size_t r = 0; r < pending_.size(); ++r) {
        sends[r] = pending_[r].send;
        recvs[r] = pending_[r].recv;
        pending_[r].given = false;
      }
      npending_ = 0;
      run_all(sends, recvs, count, dtype, op, options_.stream, s);
      synchronize(options_.stream);
    }

    int nranks() const { return config_.nranks; }
    std::span<const int> local_ranks() const { return local_; }
    const Config& config() const { return config_; }
    int device() const { return device_; }
    // The threads per block of the latest launch (before any: of a plan of nranks x nchannels
    // blocks), and what that launch was: channels, blocks, and the blocks the device holds.
    unsigned threads() const { return launch_fit_.threads; }
    const cuda::LaunchFit& launch_fit() const { return launch_fit_; }
    // The plan of `count` elements of the plan's index space (reduce-scatter and all-gather:
    // nranks x NCCL's count) from `root` (broadcast and reduce).
    plan::Plan plan(std::size_t count, std::size_t elem_size, int root = 0) {
      return plans_.prepared(count, elem_size, root)->plan;
    }
    // Thread blocks a call of `count` elements launches (plan ranks x channels).
    unsigned blocks(std::size_t count, std::size_t elem_size, int root = 0) {
      return device_plan(count, elem_size, root).nblocks;
    }

    // Gradient queuing on the GPU ([C-Cube] Sec. III-D): rank `rank`'s Layer-Chunk table for calls
    // of `count` elements in device memory, and its per-channel progress words. A consumer kernel
    // (the next forward pass, on another stream) calls runtime::layer_ready / wait_layer_ready
    // with them and the call base of the call it waits for: next_call_base() taken just before
    // that call is enqueued. Launched calls store progress only once this was taken for their
    // plan (sessions always do).
    // The table's memory is freed in stream order when this is destroyed: destroy it after the
    // consumer kernels that read it.
    struct DeviceLayerReadiness {
      cuda::StreamMemory memory;                              // owns the table
      std::shared_ptr<const cuda::StreamMemory> plan_memory;  // the progress words stay valid
      runtime::LayerTableView table;                          // device pointers
      const std::uint64_t* progress = nullptr;
    };
    DeviceLayerReadiness layer_readiness(int rank, std::size_t count, std::size_t elem_size,
                                         std::span<const std::uint64_t> layer_end) {
      DevicePlan& dp = device_plan(count, elem_size);
      dp.progress_read = true;  // calls launched from now on publish their progress
      const runtime::LayerChunkTable table(dp.prepared->plan, rank, layer_end);
      DeviceLayerReadiness r;
      r.memory = cuda::StreamMemory(std::max<std::size_t>(1, table.flat().size_bytes()),
                                    upload_stream_, device_);
      upload_bytes(r.memory.get(), table.flat().data(), table.flat().size_bytes());
      r.plan_memory = dp.memory;
      r.table = runtime::LayerTableView{reinterpret_cast<const std::uint32_t*>(r.memory.get()),
                                        table.nlayers(), table.nchannels()};
      r.progress = dp.tables.progress + static_cast<std::uint64_t>(rank) * dp.tables.nchannels;
      return r;
    }
    // The call base (runtime::progress_base_of_call) of the next call of `count` elements.
    std::uint64_t next_call_base(std::size_t count, std::size_t elem_size) {
      return runtime::progress_base_of_call(device_plan(count, elem_size).calls);
    }

    // For cuda::Session (transport/cuda/session.cuh).
    struct SessionPlan {
      const cuda::PlanTables* tables = nullptr;  // device memory
      unsigned nblocks = 0;
    };
    // The grid of a cuda::Session by default: every plan this executor may build fits it (plan
    // ranks x the most channels a plan of its policy has, Config::nchannels at least).
    unsigned session_blocks() const {
      return runtime::executor_channels(plans_, config_) * static_cast<unsigned>(config_.nranks);
    }
    // The plan of a call the session enqueues now (refused if it needs more than max_blocks).
    SessionPlan session_plan(std::size_t count, std::size_t elem_size, unsigned max_blocks) {
      if (plans_.collective() != plan::Collective::allreduce)
        throw Error(ErrorCode::Unsupported, -1,
                    "a cuda::Session enqueues allreduces; this executor's plans compute " +
                        std::string(plan::collective_name(plans_.collective())) +
                        ": call run_all instead");
      DevicePlan& dp = device_plan(count, elem_size);
      if (dp.nblocks > max_blocks)
        throw Error(ErrorCode::Unsupported, -1,
                    "the plan for count " + std::to_string(count) + " needs " +
                        std::to_string(dp.nblocks) + " blocks; the session runs " +
                        std::to_string(max_blocks) + " (its nblocks argument)");
      cuda::SessionWork w;
      w.plan = dp.device_tables;
      cuda::check_session_encodable(w, -1);
      ++dp.calls;
      return {dp.device_tables, dp.nblocks};
    }
    // Throws if a session may not start now; a Session checks this before it allocates its
    // queue, whose release would wait for the open session's resident kernel.
    void check_session_allowed() {
      throw_if_failed();
      if (session_open_)
        throw Error(ErrorCode::InvalidArgument, -1,
                    "a cuda::Session of this executor is open already (sessions share the FIFO "
                    "slots)");
    }
    template <class Kernel, class Args>
    void launch_session(Kernel kernel, unsigned nblocks, Args& args, cudaStream_t stream) {
      check_session_allowed();
      cuda::require_non_blocking_stream(stream, "a cuda::Session");
      launch(kernel, nblocks, args, stream);
      session_open_ = true;
    }
    void session_closed() { session_open_ = false; }
    // The memory of the session's queue, allocated with the executor.
    const cuda::SessionQueueMemory& session_memory() const { return session_memory_; }
    cuda::AbortWords abort_words() const {
      return cuda::AbortWords{reinterpret_cast<std::uint32_t*>(status_.device()),
                              reinterpret_cast<std::uint32_t*>(abort_watch_.get())};
    }
    std::uint64_t timeout_ns() const { return cuda::timeout_ns(config_.timeout); }
    void check_failures() { throw_if_failed(); }

   private:
    struct Pending {
      const void* send = nullptr;
      void* recv = nullptr;
      bool given = false;
    };

    static std::string describe(const runtime::CallShape& s) {
      return runtime::describe_shape(runtime::encode_shape(s));
    }

    // A cached plan in device memory: its tables, its counters and the blocks' message bases.
    struct DevicePlan {
      std::shared_ptr<const runtime::PreparedPlan<sync::DeviceConnectionRef>> prepared;
      std::shared_ptr<cuda::StreamMemory> memory;
      cuda::PlanTables tables;                          // pointers into memory
      const cuda::PlanTables* device_tables = nullptr;  // the same, in device memory
      unsigned nblocks = 0;
      std::uint64_t calls = 0;  // calls enqueued (run_all and sessions)
      // A consumer took layer_readiness: launched calls publish progress (sessions always do).
      bool progress_read = false;
      // A LowLatency plan: its connections have LL slots of their own, and launched calls run it
      // on the LowLatency kernel.
      bool low_latency = false;
    };

    std::uint32_t* abort_host_word() const {
      return reinterpret_cast<std::uint32_t*>(status_.host());
    }

    // Launches on `stream` after the previous call (which may be on another stream), with the
    // threads per block at which its nblocks blocks (nchannels channels; 0: unknown) fit.
    template <class Kernel, class Args>
    void launch(Kernel kernel, unsigned nblocks, Args& args, cudaStream_t stream,
                std::uint32_t nchannels = 0) {
      cuda::check(cudaSetDevice(device_), "cudaSetDevice");
      if (launched_ && stream != last_stream_)
        cuda::check(cudaStreamWaitEvent(stream, last_call_, 0), "cudaStreamWaitEvent");
      const std::uint32_t nch = nchannels != 0 && nblocks % nchannels == 0 ? nchannels : 1;
      cuda::FitRequest r;
      r.blocks_per_channel = nblocks / nch;
      r.channels = nch;
      r.sms = sms_;
      const cuda::LaunchFit fit = fits_.fit(kernel, options_.threads, r);
      if (!fit.ok)
        throw Error(ErrorCode::Unsupported, -1,
                    fit.refusal("the plan needs", "plan ranks x channels", device_,
                                "lower Config::nchannels or LaunchOptions::threads"));
      const void* key = reinterpret_cast<const void*>(kernel);
      void* params[] = {&args};
      cuda::check(
          cudaLaunchCooperativeKernel(key, dim3(nblocks), dim3(fit.threads), params, 0, stream),
          "cudaLaunchCooperativeKernel(" + std::to_string(nblocks) + " blocks)");
      cuda::check(cudaEventRecord(last_call_, stream), "cudaEventRecord");
      last_stream_ = stream;
      launched_ = true;
      launch_fit_ = fit;
    }

    // The plan for (count, elem_size, root) in device memory, built on first use.
    DevicePlan& device_plan(std::size_t count, std::size_t elem_size, int root = 0) {
      if (!plan::has_root(plans_.collective())) root = 0;
      const runtime::PlanKey key{count, elem_size, root};
      if (DevicePlan* cached = device_plans_.find(key)) return *cached;
      auto prepared = plans_.prepared(count, elem_size, root);
      const plan::Plan& p = prepared->plan;
      if (p.nranks > cuda::kMaxVirtualRanks)
        throw Error(ErrorCode::Unsupported, -1,
                    "plan '" + p.algorithm + "' has " + std::to_string(p.nranks) +
                        " ranks (relays included); virtual ranks serve at most " +
                        std::to_string(cuda::kMaxVirtualRanks));
      // The evicted plan's memory may be in use by a queued kernel: freed behind it.
      device_plans_.make_room(config_.max_cached_plans, session_open_, "an open cuda::Session", -1,
                              [this](DevicePlan& old) {
                                if (launched_) old.memory->release_after(last_call_);
                              });
      return device_plans_.insert(key, upload(std::move(prepared), elem_size));
    }

    DevicePlan upload(std::shared_ptr<const runtime::PreparedPlan<sync::DeviceConnectionRef>> pp,
                      std::size_t elem_size) {
      const plan::Plan& p = pp->plan;
      const auto nranks_plan = static_cast<std::uint32_t>(p.nranks);
      const std::uint32_t nch = p.channels_in_use();  // no blocks for trailing empty channels
      const std::size_t nconn = p.connections.size();
      DevicePlan dp;
      dp.nblocks = nch * nranks_plan;
      // Block c * nranks + r runs rank r's program of channel c, on the plan's own connections.
      cuda::BlockTablesImage image;
      for (std::uint32_t c = 0; c < nch; ++c)
        for (std::uint32_t r = 0; r < nranks_plan; ++r)
          image.add_block(p, c, static_cast<std::int32_t>(r), p.ports, nconn);
      // One allocation: programs, steps, ports, connections, counters, bases, advances, failures.
      cuda::TableSections sections;
      const std::size_t at_programs =
          sections.add(image.programs.size() * sizeof(cuda::BlockProgram));
      const std::size_t at_steps = sections.add(image.steps.size() * sizeof(plan::Step));
      const std::size_t at_ports = sections.add(p.ports.size() * sizeof(plan::Port));
      const std::size_t at_conns = sections.add(nconn * sizeof(sync::DeviceConnectionRef));
      const std::size_t at_counters = sections.add(nconn * sizeof(sync::ConnectionCounters));
      const std::size_t at_bases = sections.add(dp.nblocks * nconn * sizeof(std::uint64_t));
      const std::size_t at_advances =
          sections.add(image.advances.size() * sizeof(cuda::BaseAdvance));
      const std::size_t at_local_steps =
          sections.add(image.local_steps.size() * sizeof(plan::Step));
      const std::size_t at_local_ports =
          sections.add(image.local_ports.size() * sizeof(plan::Port));
      const std::size_t at_failures = sections.add(dp.nblocks * sizeof(cuda::BlockFailure));
      const std::size_t at_tables = sections.add(sizeof(cuda::PlanTables));
      const std::size_t at_progress = sections.add(dp.nblocks * sizeof(std::uint64_t));
      const std::size_t at_calls = sections.add(dp.nblocks * sizeof(std::uint64_t));
      const std::size_t uploaded = sections.total();
      // A LowLatency plan's LL slots, last: zeroed on the device rather than uploaded. They are
      // the plan's own, zero when it is built, so a line never holds a flag of a message number
      // the plan's counters (which also start at zero) have not reached yet, which LL slots that
      // plans of other counts had used could.
      // A LowLatency plan whose messages are too large for LowLatency on a GPU
      // (kMaxLowLatencySlotBytes) runs as Simple.
      const std::uint64_t ll_slot =
          protocol::is_low_latency(p) ? cuda::low_latency_slot_bytes(p, elem_size) : 0;
      dp.low_latency = ll_slot != 0 && ll_slot <= cuda::kMaxLowLatencySlotBytes;
      const std::size_t ll_bytes = dp.low_latency ? nconn * config_.nslots * ll_slot : 0;
      const std::size_t at_ll = sections.add(ll_bytes);
      const std::size_t total = sections.total();
      cuda::check(cudaSetDevice(device_), "cudaSetDevice");
      dp.memory = std::make_shared<cuda::StreamMemory>(total, upload_stream_, device_);
      std::byte* d = dp.memory->get();
      std::vector<sync::DeviceConnectionRef> refs = pp->connections;
      auto* counters = reinterpret_cast<sync::ConnectionCounters*>(d + at_counters);
      for (std::size_t i = 0; i < nconn; ++i) {
        refs[i].tail = &counters[i].tail;
        refs[i].head = &counters[i].head;
        if (dp.low_latency) {
          refs[i].ll_slots = d + at_ll + i * config_.nslots * ll_slot;
          refs[i].ll_slot_bytes = ll_slot;
        }
      }
      if (ll_bytes > 0)
        cuda::check(cudaMemsetAsync(d + at_ll, 0, ll_bytes, upload_stream_),
                    "cudaMemsetAsync(LowLatency slots)");
      std::vector<std::byte> host(uploaded, std::byte{0});  // counters and bases start at zero
      cuda::put_section(host, at_programs, image.programs);
      cuda::put_section(host, at_steps, image.steps);
      cuda::put_section(host, at_ports, p.ports);
      cuda::put_section(host, at_conns, refs);
      cuda::put_section(host, at_advances, image.advances);
      cuda::put_section(host, at_local_steps, image.local_steps);
      cuda::put_section(host, at_local_ports, image.local_ports);
      cuda::PlanTables& t = dp.tables;
      t.programs = reinterpret_cast<const cuda::BlockProgram*>(d + at_programs);
      t.steps = reinterpret_cast<const plan::Step*>(d + at_steps);
      t.ports = reinterpret_cast<const plan::Port*>(d + at_ports);
      t.connections = reinterpret_cast<const sync::DeviceConnectionRef*>(d + at_conns);
      t.bases = reinterpret_cast<std::uint64_t*>(d + at_bases);
      t.advances = reinterpret_cast<const cuda::BaseAdvance*>(d + at_advances);
      t.local_steps = reinterpret_cast<const plan::Step*>(d + at_local_steps);
      t.local_ports = reinterpret_cast<const plan::Port*>(d + at_local_ports);
      t.failures = reinterpret_cast<cuda::BlockFailure*>(d + at_failures);
      t.progress = reinterpret_cast<std::uint64_t*>(d + at_progress);
      t.calls = reinterpret_cast<std::uint64_t*>(d + at_calls);
      t.nconnections = static_cast<std::uint32_t>(nconn);
      t.nblocks = dp.nblocks;
      t.nchannels = nch;
      t.nactive = pp->nactive;
      // Every block of a call is in this one kernel: the signature need only be the same in all
      // of them (the ranks of separate processes compare their calls' arguments through it).
      t.ll_signature =
          protocol::LowLatency::signature(p.count, static_cast<std::uint32_t>(elem_size), 0);
      t.low_latency = dp.low_latency ? 1u : 0u;
      std::memcpy(host.data() + at_tables, &t, sizeof t);
      dp.device_tables = reinterpret_cast<const cuda::PlanTables*>(d + at_tables);
      upload_bytes(d, host.data(), uploaded);  // waits for the zeroing too
      dp.prepared = std::move(pp);
      return dp;
    }

    // Host to device on the executor's own non-blocking stream, waited for: a plain cudaMemcpy
    // would run on the legacy stream, behind a resident session kernel that waits for this very
    // upload, and from pageable memory it may return before the data has landed.
    void upload_bytes(void* dst, const void* src, std::size_t bytes) {
      if (bytes == 0) return;
      cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, upload_stream_),
                  "cudaMemcpyAsync(plan tables)");
      cuda::check(cudaStreamSynchronize(upload_stream_), "cudaStreamSynchronize(upload)");
    }

    // Throws the recorded failure if a block (or abort()) raised the abort word.
    void throw_if_failed() {
      if (failed_) throw Error(failure_code_, failure_rank_, failure_);
      if (sync::AtomicWord<std::uint32_t>(abort_host_word()).load_acquire() == 0) return;
      // The blocks that failed wrote their records before the word; the kernel must finish
      // before they can be read.
      if (launched_) cudaEventSynchronize(last_call_);
      failed_ = true;
      failure_code_ = ErrorCode::Aborted;
      failure_ = "cuda-virtual: aborted by abort() on the host";
      // A failed call's blocks hold the timeouts; calls queued after it only saw the word. They
      // may have run other plans, so every cached plan's records are read, plan by plan.
      std::vector<std::vector<cuda::BlockFailure>> all;
      device_plans_.for_each([&](const runtime::PlanKey&, const DevicePlan& dp) {
        std::vector<cuda::BlockFailure> f(dp.nblocks);
        cudaError_t e = cudaMemcpyAsync(f.data(), dp.tables.failures, f.size() * sizeof(f[0]),
                                        cudaMemcpyDeviceToHost, upload_stream_);
        if (e == cudaSuccess) e = cudaStreamSynchronize(upload_stream_);
        if (e != cudaSuccess) {
          failure_code_ = ErrorCode::System;
          failure_ = std::string("cuda-virtual: a call failed and its record could not be read: ") +
                     cudaGetErrorString(e);
          throw Error(failure_code_, failure_rank_, failure_);
        }
        all.push_back(std::move(f));
      });
      describe_failure(all);
      throw Error(failure_code_, failure_rank_, failure_);
    }

    // The root cause (failure_record.hpp): a block that stopped waiting for a peer that did not
    // fail itself (that peer is missing, or stuck outside the plan), in the plan of the earliest
    // timeout. Its neighbours stop too, each waiting for a failed block. Only aborts: the host's
    // abort(), as set already.
    void describe_failure(const std::vector<std::vector<cuda::BlockFailure>>& plans) {
      const cuda::RootCause root = cuda::find_root_cause_among_plans(plans);
      if (root.cause == nullptr) return;
      failure_code_ = ErrorCode::Timeout;
      failure_rank_ = root.cause->rank;
      failure_ = "cuda-virtual: " + cuda::describe_stop(*root.cause) +
                 (root.cause->step.result == sync::WaitResult::Timeout
                      ? " past Config::timeout ("
                      : " when another block timed out (Config::timeout ") +
                 std::to_string(config_.timeout.count()) + " ms); " + std::to_string(root.stopped) +
                 " blocks stopped";
    }

    Config config_;
    cuda::LaunchOptions options_;
    int device_ = 0;
    int sms_ = 0;
    runtime::PlanCache<sync::DeviceConnectionRef> plans_;
    std::vector<int> local_;
    std::uint64_t slot_stride_ = 0;
    cuda::DeviceMemory pool_;
    cuda::MappedHostMemory status_;   // the abort word (host-mapped), then a constant 1
    cuda::DeviceMemory abort_watch_;  // the word the blocks' waits watch (AbortWords)
    cuda::SessionQueueMemory session_memory_;
    cuda::DevicePlanCache<DevicePlan> device_plans_;
    cuda::KernelFits fits_;
    cuda::LaunchFit launch_fit_;
    cudaEvent_t last_call_ = nullptr;
    cudaStream_t upload_stream_ = nullptr;
    cudaStream_t abort_stream_ = nullptr;  // abort()'s copy, behind no kernel
    cudaStream_t last_stream_ = nullptr;
    bool launched_ = false;
    bool session_open_ = false;
    bool failed_ = false;
    ErrorCode failure_code_ = ErrorCode::Aborted;
    int failure_rank_ = -1;
    std::string failure_;
    std::vector<Pending> pending_;
    int npending_ = 0;
    std::size_t pending_count_ = 0;
    DataType pending_dtype_ = DataType::f32;
    ReduceOp pending_op_ = ReduceOp::sum;
    runtime::CallShape pending_shape_;
  };
};

static_assert(Transport<CudaVirtualRanks>);

}  // namespace ccoll::transport
