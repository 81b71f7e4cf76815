// Example: every rank of an allreduce on one GPU (transport::CudaVirtualRanks), first as
// stream-ordered calls, then as a persistent session that runs a sequence of calls on one
// resident kernel. Without a CUDA device it prints a message and exits 0.
//
//   build/examples/example_allreduce_cuda_virtual [nranks=4] [count=1048576]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/transport/cuda/session.cuh"
#include "ccoll/transport/cuda/virtual_ranks.cuh"

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
    config.nchannels = 4;
    ccoll::Allreduce<ccoll::transport::CudaVirtualRanks, ccoll::algo::Ring> ar(config);
    auto& ex = ar.executor();

    // One device buffer per rank, each holding rank + 1.
    std::vector<float*> buf(static_cast<std::size_t>(nranks));
    for (int r = 0; r < nranks; ++r) {
      cudaMalloc(&buf[static_cast<std::size_t>(r)], count * sizeof(float));
      const std::vector<float> v(count, static_cast<float>(r + 1));
      cudaMemcpy(buf[static_cast<std::size_t>(r)], v.data(), count * sizeof(float),
                 cudaMemcpyHostToDevice);
    }
    std::vector<const void*> sends(buf.begin(), buf.end());
    std::vector<void*> recvs(buf.begin(), buf.end());
    // Non-blocking: a session's kernel (below) runs until it closes, and on a blocking stream the
    // legacy stream's cudaMemcpy would wait for it.
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

    // The inputs' copies (cudaMemcpy from pageable memory may return before the device has
    // them) must land before a kernel on a non-blocking stream reads them.
    cudaDeviceSynchronize();

    // Stream-ordered: one kernel launch per call, nothing on the host between steps.
    ex.run_all<float, ccoll::ReduceOp::sum>(sends, recvs, count, stream);
    ex.synchronize(stream);
    float first = 0;
    cudaMemcpy(&first, buf[0], sizeof(float), cudaMemcpyDeviceToHost);
    std::printf("%s, %d ranks, %d blocks: element 0 = %g (expected %d)\n", ar.name().c_str(),
                nranks, static_cast<int>(ex.blocks(count, sizeof(float))), first,
                nranks * (nranks + 1) / 2);

    // A session: ten calls on one resident kernel, each a quarter of the buffer.
    {
      ccoll::transport::cuda::Session<float, ccoll::ReduceOp::avg> session(ex, stream);
      std::uint64_t last = 0;
      for (int call = 0; call < 10; ++call) {
        const std::size_t part = count / 4, at = (call % 4) * part;
        std::vector<const void*> s(sends.size());
        std::vector<void*> d(recvs.size());
        for (std::size_t r = 0; r < s.size(); ++r) {
          s[r] = buf[r] + at;
          d[r] = buf[r] + at;
        }
        last = session.enqueue(s, d, part);
      }
      session.wait(last);
      std::printf("session: %llu calls completed\n", static_cast<unsigned long long>(last));
    }
    for (float* p : buf) cudaFree(p);
    cudaStreamDestroy(stream);
  } catch (const ccoll::Error& e) {
    std::fprintf(stderr, "ccoll error: %s\n", e.what());
    return 1;
  }
  return 0;
}
