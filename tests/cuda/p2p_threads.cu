// gpu_p2p_threads: transport::CudaP2P with its ranks as threads of one process (label gpu; exit
// 77, "skipped", without a CUDA device).
//
// Rank r runs on device r % (devices) when every pair of devices has peer access, else every rank
// runs on device 0: several ranks then share one GPU, their kernels on separate streams, which the
// executor's residency check admits. Every result is compared bit for bit with host threads
// running the same plan (the same reduction order). Then the failure paths: a rank that never
// calls (a timeout naming it), abort() from the host, the residency refusal and the legacy
// default stream on a shared device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/transport/cuda/p2p.cuh"
#include "host_side.hpp"
#include "p2p_common.hpp"

using namespace ccoll;
using transport::CudaP2P;
using transport::cuda::P2POptions;

namespace {

#define REQUIRE_CUDA(call) REQUIRE((call) == cudaSuccess)

// One device per rank where every pair of devices can reach each other, else all on device 0.
std::vector<int> devices_for(int p) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) return std::vector<int>(p, 0);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      int can = 1;
      if (a != b && (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || can == 0))
        return std::vector<int>(p, 0);
    }
  std::vector<int> d;
  for (int r = 0; r < p; ++r) d.push_back(r % n);
  return d;
}

P2POptions threads_on(std::vector<int> devices) {
  P2POptions o;
  o.mode = P2POptions::Mode::threads;
  o.devices = std::move(devices);
  return o;
}

struct Streams {
  std::vector<cudaStream_t> s;
  Streams(const std::vector<int>& devices) {
    for (int d : devices) {
      cudaSetDevice(d);
      cudaStream_t x = nullptr;
      cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
      s.push_back(x);
    }
  }
  ~Streams() {
    for (auto x : s) cudaStreamDestroy(x);
  }
};

// Runs `k` on the executor: one host thread per rank when `threaded`, else one thread enqueueing
// every rank's call (calls are asynchronous) and then waiting for each.
template <class T, ReduceOp Op>
void run_and_compare(CudaP2P::Executor& ex, const std::vector<int>& devices,
                     const p2p_test::Case<T>& k, bool in_place, std::size_t offset, bool threaded) {
  const int p = static_cast<int>(devices.size());
  CAPTURE(in_place);
  CAPTURE(offset);
  CAPTURE(threaded);
  std::vector<p2p_test::RankBuffers<T>> bufs(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(r)]));
    REQUIRE_CUDA(bufs[static_cast<std::size_t>(r)].init(k.in[static_cast<std::size_t>(r)], in_place,
                                                        offset));
    // A pageable cudaMemcpy may return before its data lands; kernels on other streams read it.
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  Streams streams(devices);
  const std::size_t count = k.in[0].size();
  std::vector<std::string> errors(static_cast<std::size_t>(p));
  auto call = [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    try {
      ex.run<T, Op>(r, bufs[i].send, bufs[i].recv, count, streams.s[i]);
      if (threaded) ex.synchronize(r, streams.s[i]);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  };
  if (threaded) {
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r) threads.emplace_back(call, r);
    for (auto& t : threads) t.join();
  } else {
    for (int r = 0; r < p; ++r) call(r);
    for (int r = 0; r < p; ++r) {
      try {
        ex.synchronize(r, streams.s[static_cast<std::size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    }
  }
  for (int r = 0; r < p; ++r) {
    CAPTURE(r);
    const auto i = static_cast<std::size_t>(r);
    CHECK(errors[i] == "");
    REQUIRE_CUDA(cudaSetDevice(devices[i]));
    CHECK(p2p_test::same_bits(bufs[i].result(), k.expected[i]));
  }
}

template <class T, ReduceOp Op>
void compare_with_host(const char* algorithm, int p, std::uint32_t nchannels, std::size_t count) {
  CAPTURE(algorithm);
  CAPTURE(p);
  CAPTURE(nchannels);
  CAPTURE(count);
  CAPTURE(to_string(data_type_of<T>()));
  CAPTURE(to_string(Op));
  const auto source = gpu_test::registered(algorithm, p);
  const Config c = p2p_test::make_config(p, nchannels);
  const auto devices = devices_for(p);
  CudaP2P::Executor ex(c, source, "gpu-test", threads_on(devices));
  const auto k = p2p_test::make_case<T>(source, c, count, Op, 17u * static_cast<unsigned>(count));
  run_and_compare<T, Op>(ex, devices, k, false, 0, false);
  run_and_compare<T, Op>(ex, devices, k, true, 1, true);  // in place, not 16-byte aligned
}

}  // namespace

TEST_CASE("cuda-p2p threads: every result equals host threads bit for bit") {
  for (int p : {2, 3, 4})
    for (const char* algorithm : {"ring", "dbtree"})
      for (std::size_t count : {std::size_t{1}, std::size_t{33}, std::size_t{65537}}) {
        compare_with_host<float, ReduceOp::sum>(algorithm, p, 2, count);
        compare_with_host<BFloat16, ReduceOp::avg>(algorithm, p, 1, count);
        compare_with_host<std::int32_t, ReduceOp::max>(algorithm, p, 2, count);
      }
  // Many messages per connection (slot_bytes is 64 KiB): the FIFOs wrap many times.
  compare_with_host<float, ReduceOp::sum>("ring", 4, 2, (std::size_t{3} << 20) + 5);
}

TEST_CASE("cuda-p2p threads: calls of different counts follow each other on the same counters") {
  const int p = 3;
  const auto source = gpu_test::registered("ring", p);
  const Config c = p2p_test::make_config(p, 2);
  const auto devices = devices_for(p);
  CudaP2P::Executor ex(c, source, "gpu-test", threads_on(devices));
  for (std::size_t count :
       {std::size_t{100003}, std::size_t{7}, std::size_t{100003}, std::size_t{4099}}) {
    CAPTURE(count);
    const auto k = p2p_test::make_case<float>(source, c, count, ReduceOp::sum, 5);
    run_and_compare<float, ReduceOp::sum>(ex, devices, k, false, 0, true);
  }
}

TEST_CASE("cuda-p2p threads: the Allreduce composition, one host thread per rank") {
  const int p = 2;
  const std::size_t n = 100000;
  const auto devices = devices_for(p);
  Allreduce<CudaP2P, algo::Ring> ar(p2p_test::make_config(p, 1), algo::Ring{}, threads_on(devices));
  CHECK(ar.local_ranks().size() == static_cast<std::size_t>(p));
  CHECK(ar.name().rfind("cuda-p2p/ring/", 0) == 0);
  // Small integers in float: every reduction order gives the same exact sums.
  std::vector<p2p_test::RankBuffers<float>> bufs(p);
  for (int r = 0; r < p; ++r) {
    std::vector<float> in(n);
    for (std::size_t i = 0; i < n; ++i)
      in[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7));
    REQUIRE_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(r)]));
    REQUIRE_CUDA(bufs[static_cast<std::size_t>(r)].init(in, false, 0));
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  std::vector<std::string> errors(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      try {
        auto& ex = ar.executor();
        for (int call = 0; call < 3; ++call) {
          ex.run<float, ReduceOp::sum>(r, bufs[i].send, bufs[i].recv, n, ex.stream(r));
          ex.synchronize(r, ex.stream(r));
        }
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < p; ++r) {
    CAPTURE(r);
    CHECK(errors[static_cast<std::size_t>(r)] == "");
    REQUIRE_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(r)]));
    const auto out = bufs[static_cast<std::size_t>(r)].result();
    REQUIRE(out.size() == n);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (out[i] != static_cast<float>(3 * static_cast<int>(i % 7))) ++wrong;
    CHECK(wrong == 0);
  }
}

TEST_CASE("cuda-p2p threads: a rank that never calls is named at the timeout; abort() stops") {
  const int p = 3;
  Config c = p2p_test::make_config(p, 1);
  c.timeout = std::chrono::milliseconds(300);
  const auto devices = devices_for(p);
  const auto source = gpu_test::registered("ring", p);
  const auto k = p2p_test::make_case<float>(source, c, 65536, ReduceOp::sum, 3);
  std::vector<p2p_test::RankBuffers<float>> bufs(p);
  for (int r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(r)]));
    REQUIRE_CUDA(
        bufs[static_cast<std::size_t>(r)].init(k.in[static_cast<std::size_t>(r)], false, 0));
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  Streams streams(devices);
  {
    CudaP2P::Executor ex(c, source, "gpu-test", threads_on(devices));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> what(p);
    for (int r : {0, 2})  // rank 1 never calls
      ex.run<float, ReduceOp::sum>(r, bufs[static_cast<std::size_t>(r)].send,
                                   bufs[static_cast<std::size_t>(r)].recv, 65536,
                                   streams.s[static_cast<std::size_t>(r)]);
    for (int r : {0, 2}) {
      const auto i = static_cast<std::size_t>(r);
      try {
        ex.synchronize(r, streams.s[i]);
      } catch (const Error& e) {
        what[i] = e.what();
        CHECK(e.code() == ErrorCode::Timeout);
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(what[0]);
    CHECK(what[0].find("rank 1 did not call") != std::string::npos);
    CHECK(what[0] == what[2]);  // every rank reports the same root cause
    CHECK(seconds < 10.0);
    // Sticky: the FIFOs are in an unknown state.
    auto again = [&] {
      ex.run<float, ReduceOp::sum>(0, bufs[0].send, bufs[0].recv, 65536, streams.s[0]);
    };
    CHECK_THROWS_AS(again(), Error);
  }
  {
    c.timeout = std::chrono::milliseconds(60000);
    CudaP2P::Executor ex(c, source, "gpu-test", threads_on(devices));
    const auto t0 = std::chrono::steady_clock::now();
    ex.run<float, ReduceOp::sum>(0, bufs[0].send, bufs[0].recv, 65536, streams.s[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ex.abort();
    ErrorCode code = ErrorCode::System;
    try {
      ex.synchronize(0, streams.s[0]);
    } catch (const Error& e) {
      code = e.code();
      MESSAGE(e.what());
    }
    CHECK(code == ErrorCode::Aborted);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
  }
}

TEST_CASE("cuda-p2p threads: ranks sharing a device must fit it at once, on streams of their own") {
  const int p = 4;
  const std::vector<int> all_on_0(p, 0);
  const auto source = gpu_test::registered("ring", p);
  int sms = 0;
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // More channels than the SMs can hold at 1024 threads per block, for four ranks.
  Config c = p2p_test::make_config(p, static_cast<std::uint32_t>(sms));
  P2POptions o = threads_on(all_on_0);
  o.threads = 1024;
  CudaP2P::Executor ex(c, source, "gpu-test", o);
  REQUIRE_CUDA(cudaSetDevice(0));
  p2p_test::RankBuffers<float> b;
  REQUIRE_CUDA(b.init(std::vector<float>(1 << 20, 1.0f), true, 0));
  try {
    ex.run<float, ReduceOp::sum>(0, b.send, b.recv, 1 << 20, ex.stream(0));
    FAIL("a launch that cannot be resident was accepted");
  } catch (const Error& e) {
    MESSAGE(e.what());
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK(std::string(e.what()).find("resident at once") != std::string::npos);
  }
  Config small = p2p_test::make_config(p, 1);
  CudaP2P::Executor ex2(small, source, "gpu-test", threads_on(all_on_0));
  // Four ranks on device 0: the legacy default stream would serialise them.
  auto on_default_stream = [&] {
    ex2.run<float, ReduceOp::sum>(0, b.send, b.recv, 1 << 20, nullptr);
  };
  CHECK_THROWS_AS(on_default_stream(), Error);
}

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
