// ccoll_perf/nccl_peer.cu: --peer nccl, NCCL's ncclAllReduce on the buffers of a CUDA transport's
// workspace (built only where CMake found NCCL).
//
// NCCL runs one rank per GPU per communicator, so it cannot run the P ranks that ccoll's virtual
// ranks put on one GPU. The peer is one communicator over the visible GPUs (ncclCommInitAll), its
// rank 0 on the workspace's GPU with the workspace's rank-0 buffers, every other rank on its own
// GPU with buffers holding the inputs of the rank of the same number. On a machine with one GPU
// that is a one-rank allreduce: NCCL's floor for a call on that GPU (a launch and a copy of the
// buffer), against which ccoll_perf sets ccoll's P-rank time (docs/benchmark.md says what the
// ratio compares). Times are CUDA events on every rank's stream, the slowest rank's kept.
#include <nccl.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_workspace.cuh"

namespace ccoll_perf::cuda {

namespace {

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r == ncclSuccess) return;
  throw std::runtime_error(what + ": " + ncclGetErrorString(r));
}

ncclDataType_t nccl_type(ccoll::DataType d) {
  switch (d) {
    case ccoll::DataType::f32:
      return ncclFloat32;
    case ccoll::DataType::f64:
      return ncclFloat64;
    case ccoll::DataType::f16:
      return ncclFloat16;
    case ccoll::DataType::bf16:
      return ncclBfloat16;
    case ccoll::DataType::i32:
      return ncclInt32;
    case ccoll::DataType::i64:
      return ncclInt64;
    case ccoll::DataType::u8:
      return ncclUint8;
  }
  throw std::invalid_argument("--peer nccl: no NCCL type for this dtype");
}

ncclRedOp_t nccl_op(ccoll::ReduceOp op) {
  switch (op) {
    case ccoll::ReduceOp::sum:
      return ncclSum;
    case ccoll::ReduceOp::prod:
      return ncclProd;
    case ccoll::ReduceOp::min:
      return ncclMin;
    case ccoll::ReduceOp::max:
      return ncclMax;
    case ccoll::ReduceOp::avg:
      return ncclAvg;
  }
  throw std::invalid_argument("--peer nccl: no NCCL op for this op");
}

// What one NCCL rank holds.
struct NcclRank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
};

class NcclPeer final : public DeviceCollective {
 public:
  explicit NcclPeer(Workspace& ws) : ws_(ws) {
    int ndev = 0;
    check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
    // The workspace's GPU first, so that NCCL's rank 0 shares ccoll's rank-0 buffers.
    std::vector<int> devices{ws.device()};
    for (int d = 0; d < ndev; ++d)
      if (d != ws.device()) devices.push_back(d);
    ranks_.resize(devices.size());
    std::vector<ncclComm_t> comms(devices.size());
    check_nccl(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()),
               "ncclCommInitAll");
    for (std::size_t g = 0; g < devices.size(); ++g) {
      ranks_[g].device = devices[g];
      ranks_[g].comm = comms[g];
    }
    try {
      for (std::size_t g = 0; g < devices.size(); ++g) {
        NcclRank& r = ranks_[g];
        check(cudaSetDevice(r.device), "cudaSetDevice");
        check(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate");
        check(cudaEventCreate(&r.start), "cudaEventCreate");
        check(cudaEventCreate(&r.stop), "cudaEventCreate");
        if (g == 0) {
          r.send = ws.sends()[0];
          r.recv = ws.recvs()[0];
        } else {
          std::tie(r.send, r.recv) = ws.buffers_on(r.device, static_cast<int>(g));
        }
      }
    } catch (...) {
      release();
      throw;
    }
    check(cudaSetDevice(ws.device()), "cudaSetDevice");
    if (ccoll::plan::has_root(ws.spec().collective) && ws.spec().root >= nranks()) {
      release();
      throw std::invalid_argument("--root " + std::to_string(ws.spec().root) +
                                  ": NCCL runs one rank per GPU, " + std::to_string(nranks()) +
                                  " here; --peer nccl needs a root below that");
    }
    int version = 0;
    ncclGetVersion(&version);
    version_ = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
               std::to_string(version % 100);
  }
  ~NcclPeer() override { release(); }
  NcclPeer(const NcclPeer&) = delete;
  NcclPeer& operator=(const NcclPeer&) = delete;

  DeviceTimed time_block(std::uint64_t count, int warmup, int iters, bool check_results) override {
    using C = ccoll::plan::Collective;
    const ncclDataType_t type = nccl_type(ws_.spec().dtype);
    const ncclRedOp_t op = nccl_op(ws_.spec().op);
    const int root = ws_.spec().root;
    const std::uint64_t n = ws_.spec().call_count(count, nranks());
    auto call = [&] {
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (const NcclRank& r : ranks_) {
        ncclResult_t e = ncclSuccess;
        switch (ws_.spec().collective) {
          case C::allreduce:
            e = ncclAllReduce(r.send, r.recv, n, type, op, r.comm, r.stream);
            break;
          case C::reduce_scatter:
            e = ncclReduceScatter(r.send, r.recv, n, type, op, r.comm, r.stream);
            break;
          case C::all_gather:
            e = ncclAllGather(r.send, r.recv, n, type, r.comm, r.stream);
            break;
          case C::broadcast:
            e = ncclBroadcast(r.send, r.recv, n, type, root, r.comm, r.stream);
            break;
          case C::reduce:
            e = ncclReduce(r.send, r.recv, n, type, op, root, r.comm, r.stream);
            break;
        }
        check_nccl(e, name());
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    };
    for (const NcclRank& r : ranks_) {
      check(cudaSetDevice(r.device), "cudaSetDevice");
      ws_.poison(r.recv, count, r.stream);
    }
    for (int i = 0; i < warmup; ++i) call();
    for (const NcclRank& r : ranks_) {
      check(cudaSetDevice(r.device), "cudaSetDevice");
      check(cudaEventRecord(r.start, r.stream), "cudaEventRecord");
    }
    for (int i = 0; i < iters; ++i) call();
    DeviceTimed t;
    for (const NcclRank& r : ranks_) {
      check(cudaSetDevice(r.device), "cudaSetDevice");
      check(cudaEventRecord(r.stop, r.stream), "cudaEventRecord");
    }
    for (const NcclRank& r : ranks_) {
      check(cudaEventSynchronize(r.stop), "cudaEventSynchronize");
      t.time_s = std::max(t.time_s, elapsed_s(r.start, r.stop) / iters);
    }
    check(cudaSetDevice(ws_.device()), "cudaSetDevice");
    if (check_results) {
      std::vector<const void*> outputs;
      for (const NcclRank& r : ranks_) outputs.push_back(r.recv);
      t.wrong = ws_.count_wrong_call(outputs, count);
    }
    return t;
  }
  int nranks() const override { return static_cast<int>(ranks_.size()); }
  std::string name() const override {
    switch (ws_.spec().collective) {
      case ccoll::plan::Collective::reduce_scatter:
        return "ncclReduceScatter";
      case ccoll::plan::Collective::all_gather:
        return "ncclAllGather";
      case ccoll::plan::Collective::broadcast:
        return "ncclBroadcast";
      case ccoll::plan::Collective::reduce:
        return "ncclReduce";
      default:
        return "ncclAllReduce";
    }
  }
  std::string description() const override {
    const std::size_t n = ranks_.size();
    return "NCCL " + version_ + ", " + std::to_string(n) + (n == 1 ? " rank on " : " ranks on ") +
           std::to_string(n) + (n == 1 ? " GPU" : " GPUs") +
           " (ncclCommInitAll over the visible GPUs: NCCL runs one rank per GPU)";
  }

 private:
  void release() {
    for (NcclRank& r : ranks_) {
      cudaSetDevice(r.device);
      if (r.comm != nullptr) ncclCommDestroy(r.comm);
      if (r.start != nullptr) cudaEventDestroy(r.start);
      if (r.stop != nullptr) cudaEventDestroy(r.stop);
      if (r.stream != nullptr) cudaStreamDestroy(r.stream);
      r = NcclRank{};
    }
    cudaSetDevice(ws_.device());
  }

  Workspace& ws_;
  std::vector<NcclRank> ranks_;
  std::string version_;
};

[[maybe_unused]] const bool registered =
    register_peer({"nccl", [](Workspace& ws) -> std::unique_ptr<DeviceCollective> {
                     return std::make_unique<NcclPeer>(ws);
                   }});

}  // namespace

}  // namespace ccoll_perf::cuda
