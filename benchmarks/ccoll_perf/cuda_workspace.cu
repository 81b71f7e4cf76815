// ccoll_perf/cuda_workspace.cu: every rank's buffers on the GPU, the output check and the peer
// registry of ccoll_perf's CUDA transports (cuda_workspace.cuh).
#include "cuda_workspace.cuh"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "perf_data.hpp"

namespace ccoll_perf::cuda {

namespace {
// The host runner's poison byte (runner.cpp): an executor that skips elements cannot pass on a
// previous size's result.
constexpr int kPoison = 0x7b;
}  // namespace

void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  throw std::runtime_error(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

double elapsed_s(cudaEvent_t start, cudaEvent_t stop) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e-3;
}

std::string describe_device(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  char text[512];
  std::snprintf(text, sizeof text,
                "device %d: %s (sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB); driver %d.%d, runtime %d.%d",
                device, p.name, p.major, p.minor, p.multiProcessorCount,
                static_cast<double>(p.totalGlobalMem) / (1u << 30), p.l2CacheSize >> 20,
                driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  return text;
}

Workspace::Workspace(int device, const DeviceRunSpec& spec) : device_(device), spec_(spec) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    for (int r = 0; r < spec_.nranks; ++r) {
      sends_.push_back(allocate_filled(r, true));
      recvs_.push_back(allocate_filled(r, false));
    }
  } catch (...) {
    release();  // a constructor that throws gets no destructor call
    throw;
  }
}

Workspace::~Workspace() {
  release();
}

void Workspace::release() {
  for (auto& [dev, p] : owned_) {
    cudaSetDevice(dev);
    cudaFree(p);
  }
  owned_.clear();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

// Setup, before any executor of the run has a kernel (cudaMalloc may wait for the device). The
// contents go on a stream of the buffer's device, waited for: a synchronous cudaMemcpy from
// pageable memory may return before its data lands, and kernels on other streams read it.
void* Workspace::allocate_filled(int rank, bool input) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  const std::size_t bytes = std::max<std::size_t>(1, spec_.max_count * ccoll::size_of(spec_.dtype));
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  owned_.emplace_back(device, p);
  cudaStream_t s = stream_;
  if (device != device_)
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<std::byte> host;
  cudaError_t e = cudaSuccess;
  if (input) {
    host.resize(bytes);
    fill_input(host.data(), spec_.max_count, spec_.dtype, spec_.op, rank);
    e = cudaMemcpyAsync(p, host.data(), bytes, cudaMemcpyHostToDevice, s);
  } else {
    e = cudaMemsetAsync(p, kPoison, bytes, s);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (s != stream_) cudaStreamDestroy(s);
  check(e, input ? "cudaMemcpyAsync(inputs)" : "cudaMemsetAsync(outputs)");
  return p;
}

std::pair<const void*, void*> Workspace::buffers_on(int device, int rank) {
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  check(cudaSetDevice(device), "cudaSetDevice");
  const void* send = allocate_filled(rank, true);
  void* recv = allocate_filled(rank, false);
  check(cudaSetDevice(current), "cudaSetDevice");
  return {send, recv};
}

void Workspace::poison(void* recv, std::uint64_t count, cudaStream_t stream) {
  check(cudaMemsetAsync(recv, kPoison, count * ccoll::size_of(spec_.dtype), stream),
        "cudaMemsetAsync(poison)");
}

void Workspace::poison(std::uint64_t count, const std::vector<int>& ranks, cudaStream_t stream) {
  for (const int r : ranks)
    poison(recvs_[static_cast<std::size_t>(r)], count, stream != nullptr ? stream : stream_);
}

const std::vector<std::byte>& Workspace::expected(const std::vector<int>& contributors) {
  auto it = expected_.find(contributors);
  if (it != expected_.end()) return it->second;
  std::vector<std::byte> e(spec_.max_count * ccoll::size_of(spec_.dtype));
  fill_expected(e.data(), spec_.max_count, spec_.dtype, spec_.op, contributors);
  return expected_.emplace(contributors, std::move(e)).first->second;
}

long Workspace::count_wrong(const std::vector<const void*>& outputs, std::uint64_t count,
                            const std::vector<int>& contributors) {
  const std::vector<std::byte>& want = expected(contributors);
  std::vector<std::byte> got(count * ccoll::size_of(spec_.dtype));
  long wrong = 0;
  for (const void* out : outputs) {
    // On the workspace's stream, waited for: never the legacy stream, and never a wait for the
    // whole device (unified addressing: `out` may be on another device).
    check(cudaMemcpyAsync(got.data(), out, got.size(), cudaMemcpyDefault, stream_),
          "cudaMemcpyAsync(outputs)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(outputs)");
    wrong += ccoll_perf::count_wrong(got.data(), want.data(), count, spec_.dtype, spec_.op);
  }
  return wrong;
}

long Workspace::count_wrong_call(const std::vector<const void*>& outputs, std::uint64_t count) {
  using C = ccoll::plan::Collective;
  std::vector<int> all(outputs.size());
  for (std::size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
  const C c = spec_.collective;
  if (c == C::allreduce) return count_wrong(outputs, count, all);
  const std::size_t elem = ccoll::size_of(spec_.dtype);
  const std::uint64_t block = count / std::max<std::uint64_t>(1, outputs.size());
  const int root = spec_.root;
  const std::vector<std::byte>& reduced = expected(all);  // prefix: the allreduce of the inputs
  std::vector<std::byte> got(count * elem);
  long wrong = 0;
  for (std::size_t r = 0; r < outputs.size(); ++r) {
    if (c == C::reduce && static_cast<int>(r) != root) continue;
    const std::uint64_t n = c == C::reduce_scatter ? block : count;
    check(cudaMemcpyAsync(got.data(), outputs[r], n * elem, cudaMemcpyDefault, stream_),
          "cudaMemcpyAsync(outputs)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(outputs)");
    switch (c) {
      case C::reduce_scatter:
        wrong += ccoll_perf::count_wrong(got.data(), reduced.data() + r * block * elem, block,
                                         spec_.dtype, spec_.op);
        break;
      case C::reduce:
        wrong += ccoll_perf::count_wrong(got.data(), reduced.data(), count, spec_.dtype, spec_.op);
        break;
      case C::all_gather:
        wrong +=
            count_wrong_moved(got.data(), count, spec_.dtype, spec_.op, [block](std::uint64_t i) {
              return std::pair<int, std::uint64_t>{static_cast<int>(i / block), i % block};
            });
        break;
      case C::broadcast:
        wrong +=
            count_wrong_moved(got.data(), count, spec_.dtype, spec_.op, [root](std::uint64_t i) {
              return std::pair<int, std::uint64_t>{root, i};
            });
        break;
      default:
        break;
    }
  }
  return wrong;
}

namespace {
std::vector<PeerEntry>& peers() {
  static std::vector<PeerEntry> p;  // built on first use, whatever the initializers' order
  return p;
}
}  // namespace

bool register_peer(PeerEntry entry) {
  peers().push_back(std::move(entry));
  return true;
}

const PeerEntry* find_peer(std::string_view name) {
  for (const auto& p : peers())
    if (p.name == name) return &p;
  return nullptr;
}

std::string peer_names() {
  std::string s;
  for (const auto& p : peers()) s += (s.empty() ? "" : ", ") + p.name;
  return s.empty() ? "none" : s;
}

GpuCalibration WorkspaceTransport::calibrate() {
  constexpr std::uint64_t kCalibrationBytes = 256ull << 20;
  constexpr int kCalibrationReps = 20;
  return cuda::calibrate(ws_.device(), kCalibrationBytes, kCalibrationReps);
}

std::unique_ptr<DeviceCollective> WorkspaceTransport::peer(std::string_view name) {
  const PeerEntry* p = find_peer(name);
  if (p == nullptr)
    throw std::invalid_argument("--peer " + std::string(name) +
                                ": not built into this ccoll_perf (GPU peers: " + peer_names() +
                                ")");
  return p->make(ws_);
}

}  // namespace ccoll_perf::cuda
