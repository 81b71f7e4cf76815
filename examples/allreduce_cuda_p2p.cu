// Example: one GPU per rank (transport::CudaP2P), the ranks as threads of this process, each
// enqueueing its own stream-ordered call. With fewer GPUs than ranks, ranks share a device (rank r
// runs on device r % devices). Without a CUDA device it prints a message and exits 0.
//
//   build/examples/example_allreduce_cuda_p2p [nranks=4] [count=1048576]
//
// The same transport runs ranks as processes (one per GPU, memory shared through CUDA IPC): set
// P2POptions::mode = processes, and Config::rank / nranks (or CCOLL_RANK / CCOLL_SIZE).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/transport/cuda/p2p.cuh"

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::size_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (1u << 20);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to run\n");
    return 0;
  }
  try {
    ccoll::Config config;
    config.nranks = nranks;
    config.nchannels = 2;
    ccoll::transport::cuda::P2POptions options;  // threads; rank r on device r % devices
    ccoll::Allreduce<ccoll::transport::CudaP2P, ccoll::algo::Ring> ar(config, ccoll::algo::Ring{},
                                                                      options);
    auto& ex = ar.executor();

    // Every rank's buffer on its device holds rank + 1, allocated and filled before any rank
    // calls: once one rank's kernel runs it waits for the others' calls, and cudaMalloc, cudaFree
    // or a synchronous cudaMemcpy in another rank's thread may wait for that kernel to end.
    std::vector<float*> buf(static_cast<std::size_t>(nranks), nullptr);
    for (int r = 0; r < nranks; ++r) {
      const auto i = static_cast<std::size_t>(r);
      cudaSetDevice(ex.device(r));
      cudaMalloc(&buf[i], count * sizeof(float));
      const std::vector<float> v(count, static_cast<float>(r + 1));
      cudaMemcpyAsync(buf[i], v.data(), count * sizeof(float), cudaMemcpyHostToDevice,
                      ex.stream(r));
      cudaStreamSynchronize(ex.stream(r));
    }
    // One thread per rank: a call, waited for, and its first element read on the rank's stream.
    std::vector<float> first(static_cast<std::size_t>(nranks), 0.0f);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; ++r)
      threads.emplace_back([&, r] {
        const auto i = static_cast<std::size_t>(r);
        try {
          cudaSetDevice(ex.device(r));
          ex.run<float, ccoll::ReduceOp::avg>(r, buf[i], buf[i], count, ex.stream(r));
          ex.synchronize(r, ex.stream(r));
          cudaMemcpyAsync(&first[i], buf[i], sizeof(float), cudaMemcpyDeviceToHost, ex.stream(r));
          cudaStreamSynchronize(ex.stream(r));
        } catch (const ccoll::Error& e) {
          std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        }
      });
    for (auto& t : threads) t.join();
    // Every rank's kernels have completed: nothing waits for this thread any more.
    for (int r = 0; r < nranks; ++r) {
      cudaSetDevice(ex.device(r));
      cudaFree(buf[static_cast<std::size_t>(r)]);
    }
    for (int r = 0; r < nranks; ++r)
      std::printf("%s rank %d (device %d): element 0 = %g (expected %g)\n", ar.name().c_str(), r,
                  ex.device(r), first[static_cast<std::size_t>(r)], (nranks + 1) / 2.0);
  } catch (const ccoll::Error& e) {
    std::fprintf(stderr, "ccoll error: %s\n", e.what());
    return 1;
  }
  return 0;
}
