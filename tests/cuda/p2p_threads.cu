// gpu_p2p_threads: transport::CudaP2P with its ranks as threads of one process (label gpu; exit
// 77, "skipped", without a CUDA device).
//
// Rank r runs on device r % (devices) when every pair of devices has peer access, else every rank
// runs on device 0: several ranks then share one GPU, their kernels on separate streams, which the
// executor's residency check admits. Every result is compared bit for bit with host threads
// running the same plan (the same reduction order). Then the failure paths: a rank that never
// calls (a timeout naming it), abort() from the host, the residency refusal and the legacy
// default stream on a shared device. Then what every rank's calls must agree on (a mismatch of
// counts fails every rank with Mismatch), a persistent session per rank between launched calls,
// and gradient queuing (a consumer kernel copying each layer once it is ready). The other
// collectives run on device copies of the collectives' reference buffers (host_side.hpp).
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
#include "ccoll/collective.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/transport/cuda/p2p.cuh"
#include "ccoll/transport/cuda/p2p_session.cuh"
#include "device_copies.hpp"
#include "gpu_main.hpp"
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

TEST_CASE("cuda-p2p threads: Config::slot_bytes = 0 takes the transport's slots") {
  Config c;
  c.nranks = 2;
  c.nchannels = 1;
  CHECK(CudaP2P::resolve(c).slot_bytes == transport::cuda::kP2PSlotBytes);
  c.slot_bytes = 4096;
  CHECK(CudaP2P::resolve(c).slot_bytes == 4096);
}

TEST_CASE("cuda-p2p threads: reduce-scatter, all-gather, broadcast and reduce") {
  using C = plan::Collective;
  struct Kind {
    C collective;
    std::vector<const char*> algorithms;
  };
  const Kind kinds[] = {{C::reduce_scatter, {"ring", "direct"}},
                        {C::all_gather, {"ring", "direct"}},
                        {C::broadcast, {"ring", "dbtree"}},
                        {C::reduce, {"ring", "tree"}}};
  for (const Kind& k : kinds)
    for (const char* name : k.algorithms)
      for (const int p : {2, 3, 4}) {
        CAPTURE(plan::collective_name(k.collective));
        CAPTURE(name);
        CAPTURE(p);
        const auto devices = devices_for(p);
        CudaP2P::Executor ex(p2p_test::make_config(p, 2),
                             gpu_test::for_collective(gpu_test::registered(name, p), k.collective),
                             "gpu-test-collective", threads_on(devices));
        Streams streams(devices);
        const bool rooted = plan::has_root(k.collective);
        for (const std::size_t count : {std::size_t{1}, std::size_t{100003}})
          for (const bool in_place : {false, true})
            for (const int root : rooted ? std::vector<int>{0, p - 1} : std::vector<int>{0}) {
              CAPTURE(count);
              CAPTURE(in_place);
              CAPTURE(root);
              const std::string wrong = gpu_test::check_collective(
                  k.collective, p, count, DataType::f32, ReduceOp::sum, in_place, root,
                  [&](const std::vector<gpu_test::RankBuffers>& host) {
                    gpu_test::on_device_copies(
                        host, devices,
                        [&](const std::vector<const void*>& sends,
                            const std::vector<void*>& recvs) {
                          // One thread enqueues every rank's call, then waits for each.
                          for (int r = 0; r < p; ++r) {
                            const auto i = static_cast<std::size_t>(r);
                            ex.run(r, sends[i], recvs[i], count, DataType::f32, ReduceOp::sum,
                                   streams.s[i], runtime::CallShape{k.collective, root});
                          }
                          for (int r = 0; r < p; ++r)
                            ex.synchronize(r, streams.s[static_cast<std::size_t>(r)]);
                        });
                  });
              CHECK_MESSAGE(wrong.empty(), wrong);
            }
      }
}

TEST_CASE("cuda-p2p threads: relays inside ranks, every collective, counts and roots in turn") {
  // GPU-only graphs, where relays run inside the ranks on their GPUs (plan/placement.hpp): a
  // communicator's plans for other counts and roots must keep each connection in its blocks.
  using C = plan::Collective;
  for (const char* preset : {"ring:4", "ring:5"})
    for (const char* name : {"dbtree", "direct", "ring"})
      for (const C collective :
           {C::allreduce, C::reduce_scatter, C::all_gather, C::broadcast, C::reduce}) {
        CAPTURE(preset);
        CAPTURE(name);
        CAPTURE(plan::collective_name(collective));
        int p = 0;
        const gpu_test::Source base = gpu_test::registered_on(name, preset, &p);
        ccoll::plan::PlanRequest probe;
        probe.nranks = p;
        probe.count = static_cast<std::uint64_t>(p) * 64;
        probe.collective = collective;
        try {
          if (base(probe).collective != collective) continue;
        } catch (const Error&) {
          continue;  // no plan of this collective
        }
        const auto devices = devices_for(p);
        CudaP2P::Executor ex(p2p_test::make_config(p, 2),
                             gpu_test::for_collective(base, collective), "gpu-test-placed",
                             threads_on(devices));
        Streams streams(devices);
        const bool rooted = plan::has_root(collective);
        int call = 0;
        for (const std::size_t per_rank : {std::size_t{8192}, std::size_t{1}, std::size_t{37}})
          for (int root = 0; root < (rooted ? p : 1); ++root) {
            const std::size_t count = per_rank * static_cast<std::size_t>(p);
            const int r0 = (root + call++) % (rooted ? p : 1);  // roots in changing order
            CAPTURE(count);
            CAPTURE(r0);
            const std::string wrong = gpu_test::check_collective(
                collective, p, count, DataType::f32, ReduceOp::sum, false, r0,
                [&](const std::vector<gpu_test::RankBuffers>& host) {
                  gpu_test::on_device_copies(
                      host, devices,
                      [&](const std::vector<const void*>& sends, const std::vector<void*>& recvs) {
                        for (int r = 0; r < p; ++r) {
                          const auto i = static_cast<std::size_t>(r);
                          ex.run(r, sends[i], recvs[i], count, DataType::f32, ReduceOp::sum,
                                 streams.s[i], runtime::CallShape{collective, r0});
                        }
                        for (int r = 0; r < p; ++r)
                          ex.synchronize(r, streams.s[static_cast<std::size_t>(r)]);
                      });
                });
            CHECK_MESSAGE(wrong.empty(), wrong);
          }
      }
}

TEST_CASE("cuda-p2p threads: ranks whose broadcast roots differ all fail with Mismatch") {
  const int p = 2;
  const std::size_t n = 1000;
  const auto devices = devices_for(p);
  Broadcast<CudaP2P, algo::Ring> bc(p2p_test::make_config(p, 1), algo::Ring{}, threads_on(devices));
  Streams streams(devices);
  std::vector<float*> buf(p);
  for (int r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(r)]));
    REQUIRE_CUDA(cudaMalloc(&buf[static_cast<std::size_t>(r)], n * sizeof(float)));
  }
  std::vector<std::string> errors(p);
  for (int r = 0; r < p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    bc.executor().run(r, buf[i], buf[i], n, DataType::f32, ReduceOp::sum, streams.s[i],
                      runtime::CallShape{plan::Collective::broadcast, r});
  }
  for (int r = 0; r < p; ++r) {
    try {
      bc.executor().synchronize(r, streams.s[static_cast<std::size_t>(r)]);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Mismatch);
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  }
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e.find("root 0") != std::string::npos);
    CHECK(e.find("root 1") != std::string::npos);
  }
  for (int r = 0; r < p; ++r) {
    cudaSetDevice(devices[static_cast<std::size_t>(r)]);
    cudaFree(buf[static_cast<std::size_t>(r)]);
  }
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

TEST_CASE("cuda-p2p threads: LowLatency plans, and both protocols on the same connections") {
  // Below 10000 elements the source builds LowLatency plans, above it Simple ones: calls of both
  // protocols follow each other on the same connections, counters and message numbers, the
  // LowLatency ones as flagged lines in the connections' LL slots. With 256 KiB slots a LowLatency
  // plan of a large count has messages beyond the LL slots (64 KiB of lines): it runs as Simple.
  const int p = 3;
  const auto ring = gpu_test::registered("ring", p);
  const gpu_test::Source mixed = gpu_test::low_latency_below(ring, 10000);
  Config c = p2p_test::make_config(p, 2);
  c.slot_bytes = 256 << 10;
  const auto devices = devices_for(p);
  {
    CudaP2P::Executor ex(c, mixed, "gpu-test-mixed", threads_on(devices));
    CHECK(protocol::is_low_latency(ex.plan(4099, sizeof(float))));
    for (std::size_t count : {std::size_t{7}, std::size_t{100003}, std::size_t{4099},
                              std::size_t{7}, std::size_t{9999}, std::size_t{100003}}) {
      CAPTURE(count);
      const auto k = p2p_test::make_case<float>(mixed, c, count, ReduceOp::sum, 9);
      run_and_compare<float, ReduceOp::sum>(ex, devices, k, false, 0, true);
    }
  }
  // Every plan LowLatency (Config::protocol "ll"), a dbtree too, and one too large for the LL
  // slots.
  c.protocol = "ll";
  for (const char* algorithm : {"ring", "dbtree"}) {
    CAPTURE(algorithm);
    const auto source = gpu_test::registered(algorithm, p);
    CudaP2P::Executor ex(c, source, "gpu-test-ll", threads_on(devices));
    for (std::size_t count : {std::size_t{1}, std::size_t{33}, std::size_t{5000},
                              std::size_t{300007}, std::size_t{33}}) {
      CAPTURE(count);
      const auto k = p2p_test::make_case<float>(source, c, count, ReduceOp::sum, 3);
      run_and_compare<float, ReduceOp::sum>(ex, devices, k, false, 0, true);
      const auto kb = p2p_test::make_case<BFloat16>(source, c, count, ReduceOp::avg, 4);
      run_and_compare<BFloat16, ReduceOp::avg>(ex, devices, kb, true, 1, false);
    }
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

TEST_CASE("cuda-p2p threads: ranks whose calls differ all fail with Mismatch naming both") {
  const int p = 3;
  const auto devices = devices_for(p);
  const auto source = gpu_test::registered("ring", p);
  const Config c = p2p_test::make_config(p, 2);
  CudaP2P::Executor ex(c, source, "gpu-test", threads_on(devices));
  std::vector<p2p_test::RankBuffers<float>> bufs(p);
  for (int r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaSetDevice(devices[static_cast<std::size_t>(r)]));
    REQUIRE_CUDA(bufs[static_cast<std::size_t>(r)].init(std::vector<float>(4096, 1.0f), false, 0));
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  Streams streams(devices);
  // A first call that agrees, then one where rank 1 has another count.
  for (std::size_t call = 0; call < 2; ++call)
    for (int r = 0; r < p; ++r) {
      const auto i = static_cast<std::size_t>(r);
      const std::size_t count = call == 1 && r == 1 ? 4000 : 4096;
      ex.run<float, ReduceOp::sum>(r, bufs[i].send, bufs[i].recv, count, streams.s[i]);
    }
  std::vector<std::string> what(p);
  for (int r = 0; r < p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    try {
      ex.synchronize(r, streams.s[i]);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Mismatch);
      what[i] = e.what();
    }
  }
  MESSAGE(what[0]);
  CHECK(what[0].find("call 1 of rank ") != std::string::npos);
  CHECK(what[0].find("count 4000") != std::string::npos);
  CHECK(what[0].find("count 4096") != std::string::npos);
  CHECK(what[1] == what[0]);
  CHECK(what[2] == what[0]);
}

namespace {

void sessions_between_launches(const gpu_test::Source& source) {
  const int p = 3;
  const auto devices = devices_for(p);
  const Config c = p2p_test::make_config(p, 2);
  CudaP2P::Executor ex(c, source, "gpu-test", threads_on(devices));
  const std::vector<std::size_t> counts = {65537, 1,     4099, 65537, 33, 100003,
                                           7,     65537, 4099, 1,     33, 100003};
  // Call 0 launched, calls 1..12 in each rank's session, call 13 launched again.
  std::vector<p2p_test::Case<float>> cases;
  cases.push_back(p2p_test::make_case<float>(source, c, 4099, ReduceOp::sum, 100));
  for (std::size_t j = 0; j < counts.size(); ++j)
    cases.push_back(p2p_test::make_case<float>(source, c, counts[j], ReduceOp::sum,
                                               200 + 10 * static_cast<unsigned>(j)));
  cases.push_back(p2p_test::make_case<float>(source, c, 33, ReduceOp::sum, 999));
  // bufs[call][rank]
  std::vector<std::vector<p2p_test::RankBuffers<float>>> bufs(cases.size());
  for (std::size_t j = 0; j < cases.size(); ++j) {
    bufs[j] = std::vector<p2p_test::RankBuffers<float>>(p);
    for (int r = 0; r < p; ++r) {
      const auto i = static_cast<std::size_t>(r);
      REQUIRE_CUDA(cudaSetDevice(devices[i]));
      REQUIRE_CUDA(bufs[j][i].init(cases[j].in[i], j % 2 == 0, 0));
      REQUIRE_CUDA(cudaDeviceSynchronize());
    }
  }
  Streams streams(devices);
  std::vector<std::string> errors(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      try {
        auto launched = [&](std::size_t j) {
          ex.run<float, ReduceOp::sum>(r, bufs[j][i].send, bufs[j][i].recv, cases[j].in[i].size(),
                                       streams.s[i]);
          ex.synchronize(r, streams.s[i]);
        };
        launched(0);
        {
          transport::cuda::P2PSession<float, ReduceOp::sum> session(ex, r, streams.s[i], 4);
          // While it is open, the rank's launched calls are refused.
          bool refused = false;
          try {
            ex.run<float, ReduceOp::sum>(r, bufs[0][i].send, bufs[0][i].recv, 1, streams.s[i]);
          } catch (const Error& e) {
            refused = e.code() == ErrorCode::InvalidArgument;
          }
          if (!refused) errors[i] += "run() was accepted while a session was open; ";
          refused = false;
          try {
            transport::cuda::P2PSession<float, ReduceOp::sum> second(ex, r, streams.s[i]);
          } catch (const Error& e) {
            refused = e.code() == ErrorCode::InvalidArgument;
          }
          if (!refused) errors[i] += "a second session of the rank was accepted; ";
          std::uint64_t ticket = 0;
          for (std::size_t j = 1; j <= counts.size(); ++j)
            ticket = session.enqueue(bufs[j][i].send, bufs[j][i].recv, cases[j].in[i].size());
          session.wait(ticket);
          session.close();
        }
        launched(cases.size() - 1);
      } catch (const std::exception& e) {
        errors[i] += e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < p; ++r) {
    CAPTURE(r);
    const auto i = static_cast<std::size_t>(r);
    CHECK(errors[i] == "");
    REQUIRE_CUDA(cudaSetDevice(devices[i]));
    for (std::size_t j = 0; j < cases.size(); ++j) {
      CAPTURE(j);
      CHECK(p2p_test::same_bits(bufs[j][i].result(), cases[j].expected[i]));
    }
  }
}

}  // namespace

TEST_CASE("cuda-p2p threads: a session per rank runs a queue of calls between launched calls") {
  sessions_between_launches(gpu_test::registered("ring", 3));
  // Calls below 10000 elements on LowLatency plans: each call in its plan's protocol.
  sessions_between_launches(gpu_test::low_latency_below(gpu_test::registered("ring", 3), 10000));
}

namespace {
// The next forward pass of [C-Cube] Sec. III-D: one block that waits for each layer of a rank's
// output and copies it the moment it is ready. A wrong table would copy partial sums.
__global__ void consume_layers(runtime::LayerTableView table, const std::uint64_t* progress,
                               std::uint64_t call_base, const std::uint64_t* layer_end,
                               const float* output, float* copy, std::uint32_t* failed) {
  __shared__ bool ok;
  for (std::uint32_t l = 0; l < table.nlayers; ++l) {
    if (threadIdx.x == 0)
      ok = runtime::wait_layer_ready(table, progress, call_base, l, nullptr,
                                     sync::now_ns() + 20'000'000'000ull) == sync::WaitResult::Ok;
    __syncthreads();
    if (!ok) {
      if (threadIdx.x == 0) *failed = l + 1;
      return;
    }
    const std::uint64_t begin = l == 0 ? 0 : layer_end[l - 1];
    for (std::uint64_t i = begin + threadIdx.x; i < layer_end[l]; i += blockDim.x)
      copy[i] = static_cast<const volatile float*>(output)[i];
    __syncthreads();
  }
}
}  // namespace

TEST_CASE("cuda-p2p threads: a consumer kernel reads each layer of a rank once it is ready") {
  const int p = 3;
  const auto devices = devices_for(p);
  const auto source = gpu_test::registered("ring", p);
  const Config c = p2p_test::make_config(p, 2);
  CudaP2P::Executor ex(c, source, "gpu-test", threads_on(devices));
  const std::vector<std::uint64_t> layer_end = {100, 70000, 70001, 300000, 1000003};
  const std::size_t n = layer_end.back();
  const auto k = p2p_test::make_case<float>(source, c, n, ReduceOp::sum, 41);
  std::vector<p2p_test::RankBuffers<float>> bufs(p);
  for (int r = 0; r < p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    REQUIRE_CUDA(cudaSetDevice(devices[i]));
    REQUIRE_CUDA(bufs[i].init(k.in[i], false, 0));
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  Streams streams(devices);
  const int rank = 1;
  const auto dev = devices[rank];
  REQUIRE_CUDA(cudaSetDevice(dev));
  std::uint64_t* d_end = nullptr;
  float* d_copy = nullptr;
  std::uint32_t* d_failed = nullptr;
  REQUIRE_CUDA(cudaMalloc(&d_end, layer_end.size() * 8));
  REQUIRE_CUDA(cudaMemcpy(d_end, layer_end.data(), layer_end.size() * 8, cudaMemcpyHostToDevice));
  REQUIRE_CUDA(cudaMalloc(&d_copy, n * 4));
  REQUIRE_CUDA(cudaMalloc(&d_failed, 4));
  cudaStream_t compute = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  auto ready = ex.layer_readiness(rank, n, sizeof(float), layer_end);
  for (int call = 0; call < 3; ++call) {
    CAPTURE(call);
    REQUIRE_CUDA(cudaSetDevice(dev));
    REQUIRE_CUDA(cudaMemset(bufs[rank].recv, 0xff, n * 4));
    REQUIRE_CUDA(cudaMemset(d_copy, 0, n * 4));
    REQUIRE_CUDA(cudaMemset(d_failed, 0, 4));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    // The consumer starts first and waits on the device; every rank's call follows.
    const std::uint64_t base = ex.next_call_base(rank, n, sizeof(float));
    REQUIRE_CUDA(cudaSetDevice(dev));
    consume_layers<<<1, 256, 0, compute>>>(ready.table, ready.progress, base, d_end,
                                           bufs[rank].recv, d_copy, d_failed);
    REQUIRE_CUDA(cudaGetLastError());
    for (int r = 0; r < p; ++r) {
      const auto i = static_cast<std::size_t>(r);
      ex.run<float, ReduceOp::sum>(r, bufs[i].send, bufs[i].recv, n, streams.s[i]);
    }
    for (int r = 0; r < p; ++r) ex.synchronize(r, streams.s[static_cast<std::size_t>(r)]);
    REQUIRE_CUDA(cudaSetDevice(dev));
    REQUIRE_CUDA(cudaStreamSynchronize(compute));
    std::uint32_t failed = 0;
    REQUIRE_CUDA(cudaMemcpy(&failed, d_failed, 4, cudaMemcpyDeviceToHost));
    CHECK(failed == 0);
    std::vector<float> copied(n);
    REQUIRE_CUDA(cudaMemcpy(copied.data(), d_copy, n * 4, cudaMemcpyDeviceToHost));
    CHECK(p2p_test::same_bits(bufs[rank].result(), k.expected[rank]));
    CHECK(p2p_test::same_bits(copied, k.expected[rank]));
  }
  REQUIRE_CUDA(cudaFree(d_end));
  REQUIRE_CUDA(cudaFree(d_copy));
  REQUIRE_CUDA(cudaFree(d_failed));
  REQUIRE_CUDA(cudaStreamDestroy(compute));
}

int main(int argc, char** argv) {
  return gpu_test::run_tests(argc, argv, [] {
    int devices = 0;
    return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  });
}
