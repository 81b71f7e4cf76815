// ccoll_gpu_latency: the latency of small allreduces on one GPU (transport::CudaVirtualRanks), with
// a kernel launch per call and inside a persistent session (transport::cuda::Session).
//
// Four figures per algorithm, protocol and size, float sum, every rank in place (a `+ll` row is the
// algorithm's LowLatency plan, Config::protocol "ll", which a launch runs on the LowLatency kernel
// and a session as Simple):
//   launch      back-to-back run_all calls between two CUDA events, per call: what an
//               application that enqueues allreduces sees (launch gaps included), as nccl-tests;
//   launch+sync run_all then cudaStreamSynchronize, host clock, median per call: one isolated call;
//   session     calls enqueued back to back into an open session, host clock from the first
//               enqueue to the last call's completion, per call;
//   session rt  enqueue then wait, one call at a time, host clock, median: one isolated call
//               with no launch;
//   enqueue     the host's own cost of an enqueue: a session as deep as the queue allows, that
//               many calls enqueued back to back (none waits for a free slot), host clock, per
//               call. Where it nears `session`, the host sets the pace of a session, not the GPU.
// Every output is checked after each figure (ranks hold r + 1, so element i sums to P(P+1)/2), but
// enqueue's, a cost of the host alone.
// Inputs are written and outputs read on a stream of their own (`io`), never on the stream where
// the session kernel stays resident: work queued there would wait for the session's end.
//
//   build/benchmarks/ccoll_gpu_latency [ranks=8] [channels=1] [calls=200] [max_bytes=65536]
//                                      [protocols=simple,ll]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/one_shot.hpp"
#include "ccoll/algo/recursive_doubling.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/transport/cuda/session.cuh"
#include "ccoll/transport/cuda/virtual_ranks.cuh"

namespace {

using Clock = std::chrono::steady_clock;
using ccoll::transport::CudaVirtualRanks;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "ccoll_gpu_latency: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Buffers {
  std::vector<float*> device;
  std::vector<const void*> sends;
  std::vector<void*> recvs;
};

// Ranks hold r + 1 in place; every element of every rank must equal P(P+1)/2 after one call. The
// inputs are reset before each figure, and one call is run on them before it is checked. `io`: a
// stream no kernel of the executor runs on, waited for alone.
void fill(const Buffers& b, std::size_t count, cudaStream_t io) {
  for (std::size_t r = 0; r < b.device.size(); ++r) {
    const std::vector<float> v(count, static_cast<float>(r + 1));
    check(cudaMemcpyAsync(b.device[r], v.data(), count * sizeof(float), cudaMemcpyHostToDevice, io),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(io), "cudaStreamSynchronize(io)");
  }
}

long count_wrong(const Buffers& b, std::size_t count, cudaStream_t io) {
  const auto p = static_cast<float>(b.device.size());
  const float expected = p * (p + 1) / 2;
  long wrong = 0;
  std::vector<float> host(count);
  for (float* d : b.device) {
    check(cudaMemcpyAsync(host.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost, io),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(io), "cudaStreamSynchronize(io)");
    for (const float x : host) wrong += x != expected ? 1 : 0;
  }
  return wrong;
}

struct Row {
  double launch_us, launch_sync_us, session_us, session_rt_us, enqueue_us;
  long wrong;
};

template <class Algo>
Row measure(const ccoll::Config& config, const Buffers& b, std::size_t count, int calls,
            cudaStream_t stream, cudaStream_t io) {
  Row row{};
  ccoll::Allreduce<CudaVirtualRanks, Algo> ar(config);
  auto& ex = ar.executor();
  const auto one_call = [&] {
    fill(b, count, io);
    ex.template run_all<float, ccoll::ReduceOp::sum>(b.sends, b.recvs, count, stream);
    ex.synchronize(stream);
    row.wrong += count_wrong(b, count, io);
  };
  // Warm-up: module load, plan upload.
  for (int i = 0; i < 20; ++i)
    ex.template run_all<float, ccoll::ReduceOp::sum>(b.sends, b.recvs, count, stream);
  ex.synchronize(stream);

  struct Events {  // destroyed on every path: a failing row leaves none behind
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start != nullptr) cudaEventDestroy(start);
      if (stop != nullptr) cudaEventDestroy(stop);
    }
  } events;
  cudaEvent_t& start = events.start;
  cudaEvent_t& stop = events.stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < calls; ++i)
    ex.template run_all<float, ccoll::ReduceOp::sum>(b.sends, b.recvs, count, stream);
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  ex.synchronize(stream);
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  row.launch_us = 1e3 * ms / calls;
  one_call();

  std::vector<double> each;
  for (int i = 0; i < calls; ++i) {
    const auto t0 = Clock::now();
    ex.template run_all<float, ccoll::ReduceOp::sum>(b.sends, b.recvs, count, stream);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    each.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  ex.synchronize(stream);
  row.launch_sync_us = median(each);
  one_call();

  {
    ccoll::transport::cuda::Session<float, ccoll::ReduceOp::sum> session(ex, stream);
    std::uint64_t ticket = 0;
    for (int i = 0; i < 20; ++i) ticket = session.enqueue(b.sends, b.recvs, count);
    session.wait(ticket);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) ticket = session.enqueue(b.sends, b.recvs, count);
    session.wait(ticket);
    row.session_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls;
    each.clear();
    for (int i = 0; i < calls; ++i) {
      const auto t1 = Clock::now();
      session.wait(session.enqueue(b.sends, b.recvs, count));
      each.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t1).count());
    }
    row.session_rt_us = median(each);
    // The session's own result: reset, one call, check.
    fill(b, count, io);
    session.wait(session.enqueue(b.sends, b.recvs, count));
    row.wrong += count_wrong(b, count, io);
    session.close();
  }
  {
    namespace cuda = ccoll::transport::cuda;
    cuda::Session<float, ccoll::ReduceOp::sum> session(ex, stream, cuda::kMaxSessionDepth);
    std::uint64_t ticket = 0;
    const auto t0 = Clock::now();
    for (std::uint32_t i = 0; i < cuda::kMaxSessionDepth; ++i)
      ticket = session.enqueue(b.sends, b.recvs, count);
    row.enqueue_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
                     cuda::kMaxSessionDepth;
    session.wait(ticket);
    session.close();
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run stopped by a time limit keeps its rows
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 8;
  const int channels = argc > 2 ? std::atoi(argv[2]) : 1;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 200;
  const std::size_t max_bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 65536;
  const std::string protocols = argc > 5 ? argv[5] : "simple,ll";
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("ccoll_gpu_latency: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# %s: %d virtual ranks, %d channel(s), float sum in place, %d calls per figure\n",
              prop.name, ranks, channels, calls);
  std::printf("%-12s %10s %12s %14s %12s %14s %10s %7s\n", "algo", "bytes", "launch_us",
              "launch+sync_us", "session_us", "session_rt_us", "enqueue_us", "#wrong");

  cudaStream_t stream = nullptr, io = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&io, cudaStreamNonBlocking), "cudaStreamCreate");
  Buffers b;
  for (int r = 0; r < ranks; ++r) {
    float* p = nullptr;
    check(cudaMalloc(&p, max_bytes), "cudaMalloc");
    b.device.push_back(p);
    b.sends.push_back(p);
    b.recvs.push_back(p);
  }
  ccoll::Config config;
  config.nranks = ranks;
  config.nchannels = channels;

  using Measure = std::function<Row(std::size_t)>;
  const std::vector<std::pair<std::string, Measure>> algos = {
      {"oneshot",
       [&](std::size_t n) {
         return measure<ccoll::algo::OneShot>(config, b, n, calls, stream, io);
       }},
      {"recdoubling",
       [&](std::size_t n) {
         return measure<ccoll::algo::RecursiveDoubling>(config, b, n, calls, stream, io);
       }},
      {"dbtree",
       [&](std::size_t n) {
         return measure<ccoll::algo::DoubleBinaryTree>(config, b, n, calls, stream, io);
       }},
      {"ring",
       [&](std::size_t n) { return measure<ccoll::algo::Ring>(config, b, n, calls, stream, io); }},
  };
  int status = 0;
  for (const auto& [name, run] : algos) {
    for (const char* protocol : {"simple", "ll"}) {
      if (protocols.find(protocol) == std::string::npos) continue;
      config.protocol = protocol;
      const std::string row_name = name + (config.protocol == "ll" ? "+ll" : "");
      for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
        // A row that fails is reported and the next one runs (each row builds its executor).
        try {
          const Row r = run(bytes / sizeof(float));
          std::printf("%-12s %10zu %12.2f %14.2f %12.2f %14.2f %10.2f %7ld\n", row_name.c_str(),
                      bytes, r.launch_us, r.launch_sync_us, r.session_us, r.session_rt_us,
                      r.enqueue_us, r.wrong);
          if (r.wrong != 0) status = 1;
        } catch (const std::exception& e) {
          std::printf("%-12s %10zu failed: %s\n", row_name.c_str(), bytes, e.what());
          std::fprintf(stderr, "ccoll_gpu_latency: %s, %zu bytes: %s\n", row_name.c_str(), bytes,
                       e.what());
          status = 1;
        }
        std::fflush(stdout);
      }
    }
  }
  // Every executor, and with it every session, is gone: nothing waits for this thread.
  for (float* p : b.device) cudaFree(p);
  cudaStreamDestroy(io);
  cudaStreamDestroy(stream);
  return status;
}
