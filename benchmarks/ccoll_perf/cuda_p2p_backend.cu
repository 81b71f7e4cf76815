// ccoll_perf/cuda_p2p_backend.cu: --transport cuda-p2p, one rank per GPU as threads of this
// process (transport::CudaP2P in threads mode).
//
// Rank r runs on device r % (visible GPUs) when every pair of those GPUs has peer access; with one
// GPU, or without peer access, every rank runs on device 0, where the executor admits them only if
// all their blocks fit at once. The executor is built straight from the algorithm's plan source,
// as cuda_virtual_backend.cu builds its own. A block is warm-up calls, then `iters` calls of every
// rank, each rank's on its own stream between two CUDA events of that stream: the time is the
// slowest rank's, launch gaps included, as an application that enqueues allreduces back to back
// sees it.
//
// Only the element types and ops a sweep uses by default are compiled (f32, bf16, f16 with sum
// and avg): each CudaP2P kernel instantiation costs compile time, and the run-time form would
// compile all 35. Others are refused before the sweep starts.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/p2p.cuh"
#include "cuda_workspace.cuh"

namespace ccoll_perf::cuda {

namespace {

using ccoll::transport::CudaP2P;

// The pairs this backend compiles.
bool supported(ccoll::DataType dtype, ccoll::ReduceOp op) {
  using ccoll::DataType;
  return (dtype == DataType::f32 || dtype == DataType::bf16 || dtype == DataType::f16) &&
         (op == ccoll::ReduceOp::sum || op == ccoll::ReduceOp::avg);
}

// Calls f.template operator()<T, Op>() for the pairs this backend compiles; false for the others.
template <class F>
bool dispatch_supported(ccoll::DataType dtype, ccoll::ReduceOp op, F&& f) {
  using ccoll::DataType;
  using ccoll::ReduceOp;
  auto with_op = [&](auto t) {
    using T = decltype(t);
    if (op == ReduceOp::sum) return f.template operator()<T, ReduceOp::sum>(), true;
    if (op == ReduceOp::avg) return f.template operator()<T, ReduceOp::avg>(), true;
    return false;
  };
  switch (dtype) {
    case DataType::f32:
      return with_op(float{});
    case DataType::bf16:
      return with_op(ccoll::BFloat16{});
    case DataType::f16:
      return with_op(ccoll::Half{});
    default:
      return false;
  }
}

// One device per rank where every pair of visible devices reaches each other, else device 0.
std::vector<int> place_ranks(int nranks) {
  (void)ccoll::transport::cuda::current_device();  // "no CUDA device: ...", as cuda-virtual says
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  bool all_pairs = n > 1;
  for (int a = 0; all_pairs && a < n; ++a)
    for (int b = 0; all_pairs && b < n; ++b) {
      int can = 1;
      if (a != b) check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      all_pairs = can != 0;
    }
  std::vector<int> devices;
  for (int r = 0; r < nranks; ++r) devices.push_back(all_pairs ? r % n : 0);
  return devices;
}

class P2PCollective final : public DeviceCollective {
 public:
  P2PCollective(Workspace& ws, const std::vector<int>& devices, const ccoll::Config& config,
                std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> source,
                const std::string& policy, const std::vector<bool>& active)
      : ws_(ws), policy_(policy), exec_(config, std::move(source), policy, options(ws, devices)) {
    const int p = ws.spec().nranks;
    for (int r = 0; r < p; ++r) {
      if (active.empty() ||
          (static_cast<std::size_t>(r) < active.size() && active[static_cast<std::size_t>(r)]))
        active_.push_back(r);
      Rank k;
      k.device = devices[static_cast<std::size_t>(r)];
      if (k.device == ws.device()) {
        k.send = ws.sends()[static_cast<std::size_t>(r)];
        k.recv = ws.recvs()[static_cast<std::size_t>(r)];
      } else {
        std::tie(k.send, k.recv) = ws.buffers_on(k.device, r);
      }
      check(cudaSetDevice(k.device), "cudaSetDevice");
      check(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreate(&k.start), "cudaEventCreate");
      check(cudaEventCreate(&k.stop), "cudaEventCreate");
      ranks_.push_back(k);
    }
    check(cudaSetDevice(ws.device()), "cudaSetDevice");
  }
  ~P2PCollective() override {
    for (auto& k : ranks_) {
      cudaSetDevice(k.device);
      cudaStreamSynchronize(k.stream);
      cudaEventDestroy(k.start);
      cudaEventDestroy(k.stop);
      cudaStreamDestroy(k.stream);
    }
    cudaSetDevice(ws_.device());
  }
  P2PCollective(const P2PCollective&) = delete;
  P2PCollective& operator=(const P2PCollective&) = delete;

  DeviceTimed time_block(std::uint64_t count, int warmup, int iters, bool check_results) override {
    DeviceTimed t;
    dispatch_supported(ws_.spec().dtype, ws_.spec().op, [&]<class T, ccoll::ReduceOp Op>() {
      t = timed<T, Op>(count, warmup, iters, check_results);
    });
    return t;
  }
  int nranks() const override { return static_cast<int>(active_.size()); }
  std::optional<ccoll::plan::Plan> plan(std::uint64_t count) override {
    return exec_.plan(count, ccoll::size_of(ws_.spec().dtype), ws_.spec().root);
  }
  std::string name() const override { return policy_; }
  std::string description() const override {
    std::string where;
    for (const auto& k : ranks_) where += (where.empty() ? "" : ",") + std::to_string(k.device);
    return std::to_string(exec_.nranks()) + " ranks on devices " + where + ", " +
           std::to_string(exec_.config().nchannels) + " channels, slots of " +
           std::to_string(exec_.config().slot_bytes) + " B, " +
           (ws_.spec().threads != 0 ? std::to_string(ws_.spec().threads)
                                    : std::string("fitted (see # launch)")) +
           " threads per block";
  }

 private:
  struct Rank {
    int device = 0;
    const void* send = nullptr;
    void* recv = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
  };

  static ccoll::transport::cuda::P2POptions options(const Workspace& ws,
                                                    const std::vector<int>& devices) {
    ccoll::transport::cuda::P2POptions o;
    o.mode = ccoll::transport::cuda::P2POptions::Mode::threads;
    o.devices = devices;
    if (ws.spec().threads != 0) o.threads = ws.spec().threads;
    return o;
  }

  template <class T, ccoll::ReduceOp Op>
  DeviceTimed timed(std::uint64_t count, int warmup, int iters, bool check_results) {
    const int p = static_cast<int>(ranks_.size());
    const ccoll::runtime::CallShape shape{ws_.spec().collective, ws_.spec().root};
    const std::uint64_t n = ws_.spec().call_count(count, static_cast<int>(active_.size()));
    auto call_all = [&] {
      try {
        for (int r = 0; r < p; ++r) {
          const Rank& k = ranks_[static_cast<std::size_t>(r)];
          exec_.run<T, Op>(r, k.send, k.recv, n, k.stream, shape);
        }
      } catch (...) {
        // A rank refused its call after its peers launched theirs: stop their kernels, which
        // would wait for it until the timeout (and the destructor's synchronisation with them).
        exec_.abort();
        throw;
      }
    };
    for (const int r : active_) {
      const Rank& k = ranks_[static_cast<std::size_t>(r)];
      check(cudaSetDevice(k.device), "cudaSetDevice");
      ws_.poison(k.recv, count, k.stream);
    }
    for (int i = 0; i < warmup; ++i) call_all();
    for (const auto& k : ranks_) check(cudaEventRecord(k.start, k.stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) call_all();
    for (const auto& k : ranks_) check(cudaEventRecord(k.stop, k.stream), "cudaEventRecord");
    // Throws the failure of any call, naming rank, channel and step.
    for (int r = 0; r < p; ++r) exec_.synchronize(r, ranks_[static_cast<std::size_t>(r)].stream);
    DeviceTimed t;
    for (const auto& k : ranks_) t.time_s = std::max(t.time_s, elapsed_s(k.start, k.stop) / iters);
    t.launch = device_launch(exec_.launch_fit(0));
    check(cudaSetDevice(ws_.device()), "cudaSetDevice");
    if (check_results && shape.collective == ccoll::plan::Collective::allreduce) {
      std::vector<const void*> outputs;
      for (const int r : active_) outputs.push_back(ranks_[static_cast<std::size_t>(r)].recv);
      t.wrong = ws_.count_wrong(outputs, count, active_);
    } else if (check_results) {
      std::vector<const void*> outputs;  // perf_prepare.hpp refuses these collectives with relays
      for (const int r : active_) outputs.push_back(ranks_[static_cast<std::size_t>(r)].recv);
      t.wrong = ws_.count_wrong_call(outputs, count);
    }
    return t;
  }

  Workspace& ws_;
  std::string policy_;
  CudaP2P::Executor exec_;
  std::vector<Rank> ranks_;
  std::vector<int> active_;
};

class P2PTransport final : public WorkspaceTransport {
 public:
  explicit P2PTransport(const DeviceRunSpec& spec)
      : P2PTransport(place_ranks(checked(spec).nranks), spec) {}

  std::string description() const override {
    const bool one =
        std::all_of(devices_.begin(), devices_.end(), [&](int d) { return d == devices_.front(); });
    return std::to_string(ws_.spec().nranks) +
           (one ? " ranks as threads, all on one GPU (one stream each)"
                : " ranks as threads, one GPU each") +
           ", one kernel per rank and call (CudaP2P); " + describe_device(ws_.device());
  }
  std::unique_ptr<DeviceCollective> ccoll(
      const ccoll::Config& config,
      std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)> source,
      const std::string& policy_id, const std::vector<bool>& active) override {
    return std::make_unique<P2PCollective>(ws_, devices_, config, std::move(source), policy_id,
                                           active);
  }

 private:
  static const DeviceRunSpec& checked(const DeviceRunSpec& spec) {
    if (!supported(spec.dtype, spec.op))
      throw std::invalid_argument(
          "--transport cuda-p2p: " + std::string(ccoll::to_string(spec.dtype)) + " " +
          std::string(ccoll::to_string(spec.op)) +
          " is not compiled into this backend (it has float, bfloat16 and half with sum and "
          "avg); --transport cuda-virtual runs every type and op");
    return spec;
  }

  P2PTransport(std::vector<int> devices, const DeviceRunSpec& spec)
      : WorkspaceTransport(devices.front(), spec), devices_(std::move(devices)) {}

  std::vector<int> devices_;
};

[[maybe_unused]] const bool registered = register_device_transport(
    {"cuda-p2p", [](const DeviceRunSpec& spec) -> std::unique_ptr<DeviceTransport> {
       return std::make_unique<P2PTransport>(spec);
     }});

}  // namespace

}  // namespace ccoll_perf::cuda
