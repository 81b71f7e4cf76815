// ccoll_perf/cuda_virtual_backend.cu: --transport cuda-virtual, every rank of a plan as thread
// blocks of one cooperative kernel on one GPU (transport::CudaVirtualRanks).
//
// The executor is built straight from the algorithm's plan source (device_sweep.cpp's
// plan_source: what ccoll::Allreduce<CudaVirtualRanks, algo::Registered, S> would build), so that
// nvcc compiles neither the registry nor the planners. A block is warm-up calls, then `iters`
// stream-ordered run_all<T, Op> calls between two CUDA events: the time is the device's, launch
// gaps included, as an application that enqueues its calls back to back sees it. Every collective
// runs this way (-C), its call carrying a CallShape. T and Op are
// dispatched once per block, so the calls are the typed run_all; a program that times every
// dtype and op compiles the 35 kernels either way.
#include <chrono>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/transport/cuda/virtual_ranks.cuh"
#include "cuda_workspace.cuh"

namespace ccoll_perf::cuda {

namespace {

using ccoll::transport::CudaVirtualRanks;

class VirtualRanksCollective final : public DeviceCollective {
 public:
  VirtualRanksCollective(Workspace& ws, const ccoll::Config& config,
                         std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> source,
                         const std::string& policy, const std::vector<bool>& active)
      : ws_(ws),
        policy_(policy),
        exec_(CudaVirtualRanks::resolve(config, launch_options(ws)), std::move(source), policy,
              launch_options(ws)) {
    for (int r = 0; r < ws.spec().nranks; ++r)
      if (active.empty() ||
          (static_cast<std::size_t>(r) < active.size() && active[static_cast<std::size_t>(r)]))
        active_.push_back(r);
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~VirtualRanksCollective() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  VirtualRanksCollective(const VirtualRanksCollective&) = delete;
  VirtualRanksCollective& operator=(const VirtualRanksCollective&) = delete;

  DeviceTimed time_block(std::uint64_t count, int warmup, int iters, bool check_results) override {
    DeviceTimed t;
    ccoll::dispatch_data_type(ws_.spec().dtype, [&](auto v) {
      ccoll::dispatch_reduce_op(ws_.spec().op, [&](auto tag) {
        t = timed<decltype(v), decltype(tag)::value>(count, warmup, iters, check_results);
      });
    });
    return t;
  }
  int nranks() const override { return static_cast<int>(active_.size()); }
  std::optional<ccoll::plan::Plan> plan(std::uint64_t count) override {
    return exec_.plan(count, ccoll::size_of(ws_.spec().dtype), ws_.spec().root);
  }
  std::string name() const override { return policy_; }
  bool one_memory() const override { return true; }
  std::string description() const override {
    return std::to_string(exec_.nranks()) + " virtual ranks on device " +
           std::to_string(exec_.device()) + ", " + std::to_string(exec_.config().nchannels) +
           " channels, slots of " + std::to_string(exec_.config().slot_bytes) + " B, " +
           (ws_.spec().threads != 0 ? std::to_string(ws_.spec().threads)
                                    : std::string("fitted (see # launch)")) +
           " threads per block";
  }

 private:
  // -T 0 (the default): the executor fits channels and threads to the GPU.
  static ccoll::transport::cuda::LaunchOptions launch_options(const Workspace& ws) {
    return ccoll::transport::cuda::LaunchOptions{ws.device(), ws.spec().threads, ws.stream()};
  }

  template <class T, ccoll::ReduceOp Op>
  DeviceTimed timed(std::uint64_t count, int warmup, int iters, bool check_results) {
    const auto& sends = ws_.sends();
    const auto& recvs = ws_.recvs();
    cudaStream_t stream = ws_.stream();
    const ccoll::runtime::CallShape shape{ws_.spec().collective, ws_.spec().root};
    const std::uint64_t n = ws_.spec().call_count(count, static_cast<int>(active_.size()));
    ws_.poison(count, active_, stream);
    for (int i = 0; i < warmup; ++i) exec_.run_all<T, Op>(sends, recvs, n, stream, shape);
    check(cudaEventRecord(start_, stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) exec_.run_all<T, Op>(sends, recvs, n, stream, shape);
    check(cudaEventRecord(stop_, stream), "cudaEventRecord");
    exec_.synchronize(stream);  // throws the failure of any call, naming rank, channel and step
    DeviceTimed t;
    t.time_s = elapsed_s(start_, stop_) / iters;
    t.launch = device_launch(exec_.launch_fit());
    if (check_results && shape.collective == ccoll::plan::Collective::allreduce) {
      std::vector<const void*> outputs;
      for (const int r : active_) outputs.push_back(recvs[static_cast<std::size_t>(r)]);
      t.wrong = ws_.count_wrong(outputs, count, active_);
    } else if (check_results) {
      std::vector<const void*> outputs;  // perf_prepare.hpp refuses these collectives with relays
      for (const int r : active_) outputs.push_back(recvs[static_cast<std::size_t>(r)]);
      t.wrong = ws_.count_wrong_call(outputs, count);
    }
    return t;
  }

  Workspace& ws_;
  std::string policy_;
  CudaVirtualRanks::Executor exec_;
  std::vector<int> active_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

class VirtualRanksTransport final : public WorkspaceTransport {
 public:
  explicit VirtualRanksTransport(const DeviceRunSpec& spec)
      : WorkspaceTransport(ccoll::transport::cuda::current_device(), spec) {}

  std::string description() const override {
    return std::to_string(ws_.spec().nranks) +
           " virtual ranks on one GPU, thread blocks of one cooperative kernel "
           "(CudaVirtualRanks); " +
           describe_device(ws_.device());
  }
  std::unique_ptr<DeviceCollective> ccoll(
      const ccoll::Config& config,
      std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> source,
      const std::string& policy_id, const std::vector<bool>& active) override {
    return std::make_unique<VirtualRanksCollective>(ws_, config, std::move(source), policy_id,
                                                    active);
  }
};

[[maybe_unused]] const bool registered = register_device_transport(
    {"cuda-virtual", [](const DeviceRunSpec& spec) -> std::unique_ptr<DeviceTransport> {
       return std::make_unique<VirtualRanksTransport>(spec);
     }});

}  // namespace

}  // namespace ccoll_perf::cuda
