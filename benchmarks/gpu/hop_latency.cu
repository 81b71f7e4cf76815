// ccoll_gpu_hop: the time of one FIFO hop between two thread blocks of one GPU, measured on the
// GPU's own clock (%globaltimer), with the counters and waits the executors use.
//
// A hop is a post by one block (the step's fence, then a release store of the message number,
// sync/counter.hpp) and the acquire poll of another block that sees it. Two figures per scope:
//   - one way: block A reads %globaltimer, writes the stamp, fences and posts; block B's wait
//     returns and it reads %globaltimer; the difference, per message, median and 99th percentile;
//   - round trip / 2: A posts, B answers, over many messages, the whole loop timed once, so the
//     clock's granularity does not matter.
// Scopes: device (CudaVirtualRanks: __threadfence, release at GPU scope) and system (CudaP2P:
// __threadfence_system, release at system scope), both with the counters in device memory.
//
//   build/benchmarks/ccoll_gpu_hop [messages=20000]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

namespace {

using ccoll::sync::BasicCounter;
using ccoll::sync::Scope;
using ccoll::sync::WaitResult;

constexpr std::uint64_t kTimeoutNs = 5'000'000'000ull;
// Words 256 bytes apart: the two counters and the stamp never share a cache line or sector.
constexpr int kStride = 32;

struct HopResult {
  std::uint64_t loop_ns;
  std::uint32_t failed;
};

template <Scope S>
__device__ void fence_before_post() {
  if constexpr (S == Scope::system)
    __threadfence_system();
  else
    __threadfence();
}

// Block 0 pings, block 1 pongs; thread 0 of each does the work, as the block leader does in the
// interpreter. one_way_ns[i]: the delay of ping i, stamped by block 0 and read by block 1.
template <Scope S>
__global__ void ping_pong(std::uint64_t* words, int messages, std::uint64_t* one_way_ns,
                          HopResult* result) {
  if (threadIdx.x != 0) return;
  const BasicCounter<S> ping(words), pong(words + kStride);
  volatile std::uint64_t* stamp = words + 2 * kStride;
  const std::uint64_t start = ccoll::sync::now_ns();
  const std::uint64_t deadline = start + kTimeoutNs;
  if (blockIdx.x == 0) {
    for (int i = 1; i <= messages; ++i) {
      *stamp = ccoll::sync::now_ns();
      fence_before_post<S>();
      ping.post_value(static_cast<std::uint64_t>(i));
      if (pong.wait(static_cast<std::uint64_t>(i), nullptr, deadline) != WaitResult::Ok) {
        result->failed = 1;
        return;
      }
    }
    result->loop_ns = ccoll::sync::now_ns() - start;
  } else {
    for (int i = 1; i <= messages; ++i) {
      if (ping.wait(static_cast<std::uint64_t>(i), nullptr, deadline) != WaitResult::Ok) {
        result->failed = 1;
        return;
      }
      one_way_ns[i - 1] = ccoll::sync::now_ns() - *stamp;
      fence_before_post<S>();
      pong.post_value(static_cast<std::uint64_t>(i));
    }
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "ccoll_gpu_hop: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <Scope S>
void measure(const char* name, int messages) {
  std::uint64_t* words = nullptr;
  std::uint64_t* one_way = nullptr;
  HopResult* result = nullptr;
  check(cudaMalloc(&words, 3 * kStride * sizeof(std::uint64_t)), "cudaMalloc");
  check(cudaMalloc(&one_way, static_cast<std::size_t>(messages) * sizeof(std::uint64_t)),
        "cudaMalloc");
  check(cudaMalloc(&result, sizeof(HopResult)), "cudaMalloc");
  std::vector<double> loop_ns;
  std::vector<std::uint64_t> all_one_way;
  for (int rep = 0; rep < 6; ++rep) {  // the first is a warm-up
    check(cudaMemset(words, 0, 3 * kStride * sizeof(std::uint64_t)), "cudaMemset");
    check(cudaMemset(result, 0, sizeof(HopResult)), "cudaMemset");
    void* args[] = {&words, &messages, &one_way, &result};
    // Cooperative: both blocks are resident, so the ping-pong cannot hang on scheduling.
    check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(ping_pong<S>), dim3(2), dim3(32),
                                      args, 0, nullptr),
          "cudaLaunchCooperativeKernel");
    check(cudaDeviceSynchronize(), "ping_pong");
    HopResult r{};
    check(cudaMemcpy(&r, result, sizeof(r), cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (r.failed != 0) {
      std::fprintf(stderr, "ccoll_gpu_hop: %s: a wait timed out\n", name);
      std::exit(1);
    }
    if (rep == 0) continue;
    loop_ns.push_back(static_cast<double>(r.loop_ns));
    std::vector<std::uint64_t> host(static_cast<std::size_t>(messages));
    check(cudaMemcpy(host.data(), one_way, host.size() * sizeof(std::uint64_t),
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    all_one_way.insert(all_one_way.end(), host.begin(), host.end());
  }
  std::sort(loop_ns.begin(), loop_ns.end());
  std::sort(all_one_way.begin(), all_one_way.end());
  const double rt_half = loop_ns[loop_ns.size() / 2] / (2.0 * messages);
  const auto pct = [&](double p) {
    return static_cast<double>(all_one_way[static_cast<std::size_t>(p * (all_one_way.size() - 1))]);
  };
  std::printf("%-8s %10d %14.0f %14.0f %14.0f %14.0f\n", name, messages, rt_half, pct(0.5),
              pct(0.99), pct(0.0));
  cudaFree(words);
  cudaFree(one_way);
  cudaFree(result);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run stopped by a time limit keeps its rows
  const int messages = argc > 1 ? std::atoi(argv[1]) : 20000;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("ccoll_gpu_hop: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# %s, %d SMs; one hop between two blocks, %d messages x 5 runs\n", prop.name,
              prop.multiProcessorCount, messages);
  std::printf("%-8s %10s %14s %14s %14s %14s\n", "scope", "messages", "rt/2_ns", "one_way_p50",
              "one_way_p99", "one_way_min");
  measure<Scope::device>("device", messages);
  measure<Scope::system>("system", messages);
  return 0;
}
