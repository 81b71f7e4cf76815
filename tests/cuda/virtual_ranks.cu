// gpu_virtual_ranks: transport::CudaVirtualRanks on one GPU (label gpu; exit 77, "skipped", without
// a CUDA device).
//
// Every plan is run on the GPU and on host threads with the same inputs, and the outputs must be
// identical bit for bit: both run the same interpreter over the same plan, so the reduction order
// of every element is the same (random floats, so rounding would show any difference). Then the
// failure paths: a plan too large to be resident, a peer that never comes (a timeout naming rank,
// channel and step), abort() from the host, and the blocking rank(r).run() convention. The other
// collectives run on device copies of the collectives' reference buffers (host_side.hpp), which
// check every element, the guards around the buffers and the inputs left unchanged.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../random_calls.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/collective.hpp"
#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/cuda/session.cuh"
#include "ccoll/transport/cuda/virtual_ranks.cuh"
#include "device_copies.hpp"
#include "gpu_main.hpp"
#include "host_side.hpp"

using namespace ccoll;
using transport::CudaVirtualRanks;

namespace {

using gpu_test::low_latency_below;
using gpu_test::registered;
using gpu_test::Source;

#define REQUIRE_CUDA(call) REQUIRE((call) == cudaSuccess)

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>)
      x = static_cast<T>(std::uniform_real_distribution<double>(-1.0, 1.0)(gen));
    else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      x = T(std::uniform_real_distribution<float>(-1.0f, 1.0f)(gen));
    else
      x = static_cast<T>(gen() % 7 + 1);  // integer products stay small enough not to overflow
  }
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

Config make_config(int nranks, std::uint32_t nchannels, const char* protocol = "") {
  Config c;
  c.protocol = protocol;
  c.nranks = nranks;
  c.nchannels = nchannels;
  c.slot_bytes = 64 << 10;
  c.nslots = 4;
  c.timeout = std::chrono::milliseconds(20000);
  return c;
}

// Host threads, one per rank: the reference.
template <class T>
std::vector<std::vector<T>> run_on_host(const Source& source, const Config& c,
                                        const std::vector<std::vector<T>>& in, DataType d,
                                        ReduceOp op) {
  const std::size_t n = in[0].size();
  std::vector<std::vector<std::byte>> bytes(in.size(), std::vector<std::byte>(n * sizeof(T)));
  for (std::size_t r = 0; r < in.size(); ++r)
    std::memcpy(bytes[r].data(), in[r].data(), n * sizeof(T));
  const auto out_bytes = gpu_test::run_on_host(source, c, bytes, n, d, op);
  std::vector<std::vector<T>> out(in.size(), std::vector<T>(n));
  for (std::size_t r = 0; r < in.size(); ++r)
    std::memcpy(out[r].data(), out_bytes[r].data(), n * sizeof(T));
  return out;
}

// The GPU: buffers offset by `offset` elements from their allocation, in or out of place.
template <class T>
std::vector<std::vector<T>> run_on_gpu(CudaVirtualRanks::Executor& ex,
                                       const std::vector<std::vector<T>>& in, DataType d,
                                       ReduceOp op, bool in_place, std::size_t offset,
                                       cudaStream_t stream) {
  const std::size_t n = in[0].size(), p = in.size();
  std::vector<T*> sends(p), recvs(p);
  for (std::size_t r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaMalloc(&sends[r], (n + offset) * sizeof(T)));
    sends[r] += offset;
    REQUIRE_CUDA(cudaMemcpy(sends[r], in[r].data(), n * sizeof(T), cudaMemcpyHostToDevice));
    if (in_place) {
      recvs[r] = sends[r];
    } else {
      REQUIRE_CUDA(cudaMalloc(&recvs[r], (n + offset) * sizeof(T)));
      recvs[r] += offset;
      REQUIRE_CUDA(cudaMemset(recvs[r], 0xff, n * sizeof(T)));  // poison: every element is written
    }
  }
  // A pageable cudaMemcpy may return before its data lands; kernels on other streams must see it.
  REQUIRE_CUDA(cudaDeviceSynchronize());
  std::vector<const void*> s(sends.begin(), sends.end());
  std::vector<void*> rv(recvs.begin(), recvs.end());
  ex.run_all(s, rv, n, d, op, stream);
  ex.synchronize(stream);
  std::vector<std::vector<T>> out(p, std::vector<T>(n));
  for (std::size_t r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaMemcpy(out[r].data(), recvs[r], n * sizeof(T), cudaMemcpyDeviceToHost));
    REQUIRE_CUDA(cudaFree(sends[r] - offset));
    if (!in_place) REQUIRE_CUDA(cudaFree(recvs[r] - offset));
  }
  return out;
}

template <class T>
void compare_with_host(const Source& source, int nranks, std::uint32_t nchannels, std::size_t count,
                       ReduceOp op, unsigned threads, const char* protocol = "") {
  const DataType d = data_type_of<T>();
  CAPTURE(nranks);
  CAPTURE(nchannels);
  CAPTURE(count);
  CAPTURE(to_string(d));
  CAPTURE(to_string(op));
  CAPTURE(threads);
  CAPTURE(protocol);
  const Config c = make_config(nranks, nchannels, protocol);
  std::vector<std::vector<T>> in;
  for (int r = 0; r < nranks; ++r)
    in.push_back(random_values<T>(count, static_cast<unsigned>(r * 7919 + count)));
  const auto expect = run_on_host(source, c, in, d, op);
  CudaVirtualRanks::Executor ex(c, source, "gpu-test", transport::cuda::LaunchOptions{-1, threads});
  for (bool in_place : {false, true})
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      CAPTURE(in_place);
      CAPTURE(offset);
      const auto got = run_on_gpu(ex, in, d, op, in_place, offset, nullptr);
      for (int r = 0; r < nranks; ++r) {
        CAPTURE(r);
        CHECK(same_bits(got[static_cast<std::size_t>(r)], expect[static_cast<std::size_t>(r)]));
      }
    }
}

}  // namespace

TEST_CASE("virtual ranks: every algorithm equals its host-threads run bit for bit") {
  for (const char* name : {"ring", "dbtree", "tree", "oneshot", "recdoubling", "direct"})
    for (int p : {2, 3, 4, 8})
      for (std::uint32_t nch : {1u, 2u}) {
        CAPTURE(name);
        const Source s = registered(name, p);
        compare_with_host<float>(s, p, nch, 1000003, ReduceOp::sum, 256);
        compare_with_host<float>(s, p, nch, 7, ReduceOp::avg, 256);
        compare_with_host<Half>(s, p, nch, 100001, ReduceOp::sum, 512);
      }
}

TEST_CASE(
    "virtual ranks: LowLatency plans run on their own kernel, bit for bit as on host threads") {
  // Config::protocol "ll": every plan is a LowLatency plan, which the executor runs on its
  // LowLatency kernel (flagged lines in the plan's own LL slots); host threads run the same plan as
  // packed LowLatency messages. Four calls per executor (in place or not, offset or not) reuse
  // the plan's LL slots with later flags.
  for (const char* name : {"ring", "dbtree", "tree", "oneshot", "recdoubling", "direct"})
    for (int p : {2, 3, 8}) {
      CAPTURE(name);
      const Source s = registered(name, p);
      for (std::size_t count : {std::size_t{1}, std::size_t{4099}})
        compare_with_host<float>(s, p, 1, count, ReduceOp::sum, 256, "ll");
      compare_with_host<Half>(s, p, 1, 333, ReduceOp::avg, 512, "ll");
    }
  // Two channels, and 8-byte elements (two lines a unit).
  for (const char* name : {"ring", "dbtree"}) {
    CAPTURE(name);
    compare_with_host<float>(registered(name, 4), 4, 2, 4099, ReduceOp::sum, 128, "ll");
    compare_with_host<double>(registered(name, 4), 4, 2, 65, ReduceOp::max, 128, "ll");
  }
  // Plans of several counts alternate on one executor: each has its own LL slots and message
  // numbers. The plans are LowLatency ones.
  const Source ring = registered("ring", 4);
  const Config c = make_config(4, 2, "ll");
  CudaVirtualRanks::Executor ex(c, ring, "gpu-test");
  CHECK(ex.plan(1000, sizeof(float)).algorithm == "ring+ll");
  for (int round = 0; round < 3; ++round)
    for (std::size_t count : {std::size_t{5}, std::size_t{1000}, std::size_t{20000}}) {
      CAPTURE(round);
      CAPTURE(count);
      std::vector<std::vector<float>> in;
      for (int r = 0; r < 4; ++r)
        in.push_back(random_values<float>(count, static_cast<unsigned>(r * 31 + count + round)));
      const auto expect = run_on_host(ring, c, in, DataType::f32, ReduceOp::sum);
      const auto got = run_on_gpu(ex, in, DataType::f32, ReduceOp::sum, false, 0, nullptr);
      for (int r = 0; r < 4; ++r)
        CHECK(same_bits(got[static_cast<std::size_t>(r)], expect[static_cast<std::size_t>(r)]));
    }
  // With 256 KiB slots, a LowLatency plan of a large count has messages beyond the 64 KiB of lines
  // a GPU runs as LowLatency (kMaxLowLatencySlotBytes): it runs as Simple, on the other kernel.
  {
    Config big = make_config(4, 2, "ll");
    big.slot_bytes = 256 << 10;
    std::vector<std::vector<float>> in;
    const std::size_t count = (std::size_t{1} << 20) + 3;
    for (int r = 0; r < 4; ++r)
      in.push_back(random_values<float>(count, static_cast<unsigned>(77 + r)));
    CudaVirtualRanks::Executor large(big, ring, "gpu-test");
    CHECK(large.plan(count, sizeof(float)).algorithm == "ring+ll");
    const auto expect = run_on_host(ring, big, in, DataType::f32, ReduceOp::sum);
    const auto got = run_on_gpu(large, in, DataType::f32, ReduceOp::sum, false, 0, nullptr);
    for (int r = 0; r < 4; ++r)
      CHECK(same_bits(got[static_cast<std::size_t>(r)], expect[static_cast<std::size_t>(r)]));
  }
  // A source that builds LowLatency plans below 10000 elements and Simple ones above: the two
  // kernels alternate on the executor's slot pool.
  const Source mixed = low_latency_below(ring, 10000);
  const Config plain = make_config(4, 2);
  CudaVirtualRanks::Executor both(plain, mixed, "gpu-test-mixed");
  for (std::size_t count : {std::size_t{5}, std::size_t{100003}, std::size_t{5}, std::size_t{9999},
                            std::size_t{100003}}) {
    CAPTURE(count);
    std::vector<std::vector<float>> in;
    for (int r = 0; r < 4; ++r)
      in.push_back(random_values<float>(count, static_cast<unsigned>(r * 17 + count)));
    const auto expect = run_on_host(mixed, plain, in, DataType::f32, ReduceOp::sum);
    const auto got = run_on_gpu(both, in, DataType::f32, ReduceOp::sum, true, 0, nullptr);
    for (int r = 0; r < 4; ++r)
      CHECK(same_bits(got[static_cast<std::size_t>(r)], expect[static_cast<std::size_t>(r)]));
  }
}

TEST_CASE("virtual ranks: every dtype and op, odd counts, block sizes") {
  const Source ring = registered("ring", 4);
  const Source dbt = registered("dbtree", 5);
  for (std::size_t count : {std::size_t{1}, std::size_t{33}, std::size_t{65537}})
    for (ReduceOp op : kAllReduceOps) {
      compare_with_host<float>(ring, 4, 2, count, op, 128);
      compare_with_host<double>(ring, 4, 2, count, op, 256);
      compare_with_host<Half>(dbt, 5, 2, count, op, 1024);
      compare_with_host<BFloat16>(ring, 4, 2, count, op, 256);
      compare_with_host<std::int32_t>(dbt, 5, 1, count, op, 64);
      compare_with_host<std::int64_t>(ring, 4, 1, count, op, 256);
      compare_with_host<std::uint8_t>(ring, 4, 1, count, op, 32);
    }
}

TEST_CASE("virtual ranks: relays of a GPU-only ring run like any rank") {
  for (const char* name : {"ring", "dbtree", "oneshot"}) {
    CAPTURE(name);
    int p = 0;
    const Source s = gpu_test::registered_on(name, "ring:4", &p);
    compare_with_host<float>(s, p, 1, 300007, ReduceOp::sum, 256);
  }
}

TEST_CASE("virtual ranks: stream-ordered calls, several counts, two streams") {
  const int p = 4;
  const Config c = make_config(p, 2);
  const Source s = registered("ring", p);
  CudaVirtualRanks::Executor ex(c, s, "gpu-test");
  cudaStream_t a = nullptr, b = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  const std::size_t big = 1 << 20;
  std::vector<float*> buf(p);
  for (int r = 0; r < p; ++r) REQUIRE_CUDA(cudaMalloc(&buf[static_cast<std::size_t>(r)], big * 4));
  std::vector<const void*> sends(buf.begin(), buf.end());
  std::vector<void*> recvs(buf.begin(), buf.end());
  // 12 in-place sums of ones, no host synchronisation in between: after k calls every element
  // is p^k. Counts alternate, so the plans (and their counters) alternate too.
  for (int r = 0; r < p; ++r) {
    const std::vector<float> ones(big, 1.0f);
    REQUIRE_CUDA(
        cudaMemcpy(buf[static_cast<std::size_t>(r)], ones.data(), big * 4, cudaMemcpyHostToDevice));
  }
  REQUIRE_CUDA(cudaDeviceSynchronize());
  const int calls = 12;  // 4^12 = 2^24: exact in float
  for (int k = 0; k < calls; ++k) {
    const std::size_t n = k % 3 == 0 ? big : k % 3 == 1 ? 4099 : 1;
    ex.run_all(sends, recvs, n, DataType::f32, ReduceOp::sum, k % 2 == 0 ? a : b);
  }
  ex.synchronize(a);
  ex.synchronize(b);
  std::vector<float> out(big);
  REQUIRE_CUDA(cudaMemcpy(out.data(), buf[2], big * 4, cudaMemcpyDeviceToHost));
  // Element 0 took part in all 12 calls, element 4098 in 8, the rest in 4.
  CHECK(out[0] == 16777216.0f);
  CHECK(out[1] == 65536.0f);
  CHECK(out[4098] == 65536.0f);
  CHECK(out[4099] == 256.0f);
  CHECK(out[big - 1] == 256.0f);
  for (auto* ptr : buf) REQUIRE_CUDA(cudaFree(ptr));
  REQUIRE_CUDA(cudaStreamDestroy(a));
  REQUIRE_CUDA(cudaStreamDestroy(b));
}

TEST_CASE("virtual ranks: blocking rank(r).run convention through ccoll::Allreduce") {
  Config c = make_config(3, 2);
  Allreduce<CudaVirtualRanks, algo::Ring> ar(c);
  const std::size_t n = 1001;
  std::vector<float*> buf(3);
  for (int r = 0; r < 3; ++r) {
    REQUIRE_CUDA(cudaMalloc(&buf[static_cast<std::size_t>(r)], n * 4));
    const std::vector<float> v(n, static_cast<float>(r + 1));
    REQUIRE_CUDA(
        cudaMemcpy(buf[static_cast<std::size_t>(r)], v.data(), n * 4, cudaMemcpyHostToDevice));
  }
  for (int r = 0; r < 3; ++r)
    ar.rank(r).run(buf[static_cast<std::size_t>(r)], buf[static_cast<std::size_t>(r)], n,
                   DataType::f32, ReduceOp::sum);
  std::vector<float> out(n);
  REQUIRE_CUDA(cudaMemcpy(out.data(), buf[1], n * 4, cudaMemcpyDeviceToHost));
  CHECK(out == std::vector<float>(n, 6.0f));
  // A rank that disagrees is refused, and so is a rank calling twice.
  ar.rank(0).run(buf[0], buf[0], n, DataType::f32, ReduceOp::sum);
  CHECK_THROWS_AS(ar.rank(1).run(buf[1], buf[1], n + 1, DataType::f32, ReduceOp::sum), Error);
  ar.rank(0).run(buf[0], buf[0], n, DataType::f32, ReduceOp::sum);
  CHECK_THROWS_AS(ar.rank(0).run(buf[0], buf[0], n, DataType::f32, ReduceOp::sum), Error);
  for (auto* ptr : buf) REQUIRE_CUDA(cudaFree(ptr));
}

TEST_CASE("virtual ranks: reduce-scatter, all-gather, broadcast and reduce on every plan kind") {
  using C = plan::Collective;
  struct Kind {
    C collective;
    std::vector<const char*> algorithms;
  };
  const Kind kinds[] = {{C::reduce_scatter, {"ring", "direct"}},
                        {C::all_gather, {"ring", "direct"}},
                        {C::broadcast, {"ring", "direct", "tree", "dbtree"}},
                        {C::reduce, {"ring", "direct", "tree", "dbtree"}}};
  for (const Kind& k : kinds)
    for (const char* name : k.algorithms)
      for (const int p : {1, 3, 8}) {
        CAPTURE(plan::collective_name(k.collective));
        CAPTURE(name);
        CAPTURE(p);
        const Config c = make_config(p, 2);
        CudaVirtualRanks::Executor ex(CudaVirtualRanks::resolve(c),
                                      gpu_test::for_collective(registered(name, p), k.collective),
                                      "gpu-test-collective");
        REQUIRE(ex.collective() == k.collective);
        const bool rooted = plan::has_root(k.collective);
        // Reductions in f32 sum and bf16 avg, gathers in i32 and bf16: a few hundred calls in all,
        // each with its buffers copied in and out.
        const std::vector<std::pair<DataType, ReduceOp>> types =
            plan::reduces(k.collective)
                ? std::vector<std::pair<DataType, ReduceOp>>{{DataType::f32, ReduceOp::sum},
                                                             {DataType::bf16, ReduceOp::avg}}
                : std::vector<std::pair<DataType, ReduceOp>>{{DataType::i32, ReduceOp::sum},
                                                             {DataType::bf16, ReduceOp::sum}};
        for (const std::size_t count : {std::size_t{7}, std::size_t{100003}})
          for (const bool in_place : {false, true})
            for (const int root : rooted&& p > 1 ? std::vector<int>{0, p - 1} : std::vector<int>{0})
              for (const auto& [dtype, op] : types) {
                CAPTURE(count);
                CAPTURE(in_place);
                CAPTURE(root);
                CAPTURE(to_string(dtype));
                const std::string wrong = gpu_test::check_collective(
                    k.collective, p, count, dtype, op, in_place, root,
                    [&](const std::vector<gpu_test::RankBuffers>& host) {
                      gpu_test::on_device_copies(host, std::vector<int>(host.size(), ex.device()),
                                                 [&](const std::vector<const void*>& sends,
                                                     const std::vector<void*>& recvs) {
                                                   ex.run_all(
                                                       sends, recvs, count, dtype, op, nullptr,
                                                       runtime::CallShape{k.collective, root});
                                                   ex.synchronize(nullptr);
                                                 });
                    });
                CHECK_MESSAGE(wrong.empty(), wrong);
              }
      }
}

TEST_CASE("virtual ranks: a random sequence of every collective through auto, one executor each") {
  // tests/random_calls.hpp's sequence (the host transports run it too): each executor's plans
  // change with the count from call to call (protocols and plan kinds by size), between calls of
  // the other collectives; random roots, dtypes, ops and in place.
  using C = plan::Collective;
  const int p = 4;
  const C kinds[] = {C::allreduce, C::reduce_scatter, C::all_gather, C::broadcast, C::reduce};
  std::vector<std::unique_ptr<CudaVirtualRanks::Executor>> executors;
  const Config c = make_config(p, 2);
  for (const C kind : kinds)
    executors.push_back(std::make_unique<CudaVirtualRanks::Executor>(
        CudaVirtualRanks::resolve(c), gpu_test::for_collective(registered("auto", p), kind),
        "gpu-test-random"));
  const auto calls = ccoll::testing::random_calls(11, p, 40, false);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const ccoll::testing::RandomCall& call = calls[i];
    const auto [dtype, op] = ccoll::testing::random_call_type(call);
    const auto which = static_cast<std::size_t>(
        std::find(std::begin(kinds), std::end(kinds), call.collective) - std::begin(kinds));
    CudaVirtualRanks::Executor& ex = *executors[which];
    const std::string wrong = gpu_test::check_collective(
        call.collective, p, call.count, dtype, op, call.in_place, call.root,
        [&](const std::vector<gpu_test::RankBuffers>& host) {
          gpu_test::on_device_copies(
              host, std::vector<int>(host.size(), ex.device()),
              [&](const std::vector<const void*>& sends, const std::vector<void*>& recvs) {
                ex.run_all(sends, recvs, call.count, dtype, op, nullptr,
                           runtime::CallShape{call.collective,
                                              plan::has_root(call.collective) ? call.root : 0});
                ex.synchronize(nullptr);
              });
        });
    CHECK_MESSAGE(wrong.empty(), "call " << i << ": " << wrong);
  }
}

TEST_CASE("virtual ranks: the collectives' templates, blocking calls, and what they refuse") {
  const int p = 4;
  const std::size_t n = 4099;
  ReduceScatter<CudaVirtualRanks, algo::Ring> rs(make_config(p, 2));
  CHECK(rs.name().rfind("cuda-virtual/ring/", 0) == 0);
  CHECK(rs.name().find(plan::collective_name(plan::Collective::reduce_scatter)) !=
        std::string::npos);
  const std::string wrong = gpu_test::check_collective(
      plan::Collective::reduce_scatter, p, n, DataType::f32, ReduceOp::sum, false, 0,
      [&](const std::vector<gpu_test::RankBuffers>& host) {
        gpu_test::on_device_copies(
            host, std::vector<int>(host.size(), rs.executor().device()),
            [&](const std::vector<const void*>& sends, const std::vector<void*>& recvs) {
              // rank(r).run: the last rank's call launches and waits.
              for (int r = 0; r < p; ++r)
                rs.rank(r).run(sends[static_cast<std::size_t>(r)],
                               recvs[static_cast<std::size_t>(r)], n, DataType::f32, ReduceOp::sum);
            });
      });
  CHECK_MESSAGE(wrong.empty(), wrong);

  Broadcast<CudaVirtualRanks, algo::DoubleBinaryTree> bc(make_config(p, 2));
  std::vector<float*> buf(p);
  for (auto& b : buf) REQUIRE_CUDA(cudaMalloc(&b, n * sizeof(float)));
  // Roots that differ across ranks: refused with Mismatch before any launch.
  bc.rank(0).run(buf[0], buf[0], n, DataType::f32, 1);
  try {
    bc.rank(1).run(buf[1], buf[1], n, DataType::f32, 2);
    FAIL("a root that differs was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Mismatch);
    CHECK(std::string(e.what()).find("root 2") != std::string::npos);
  }
  // run_all without a root, or with another collective, is refused.
  std::vector<const void*> s(buf.begin(), buf.end());
  std::vector<void*> r(buf.begin(), buf.end());
  CHECK_THROWS_AS(bc.executor().run_all(s, r, n, DataType::f32, ReduceOp::sum, nullptr), Error);
  CHECK_THROWS_AS(bc.executor().run_all(s, r, n, DataType::f32, ReduceOp::sum, nullptr,
                                        runtime::CallShape{plan::Collective::reduce, 0}),
                  Error);
  // A root out of range names the argument on rank 0, the first rank checked.
  try {
    bc.executor().run_all(s, r, n, DataType::f32, ReduceOp::sum, nullptr,
                          runtime::CallShape{plan::Collective::broadcast, p});
    FAIL("root p was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("root") != std::string::npos);
  }
  for (auto* b : buf) REQUIRE_CUDA(cudaFree(b));
}

TEST_CASE("virtual ranks: a plan too large to be resident is refused, not hung") {
  Config c = make_config(128, 64);  // 8192 blocks of 1024 threads: no GPU holds them
  c.slot_bytes = 4096;
  try {
    CudaVirtualRanks::Executor ex(c, registered("ring", 128), "gpu-test",
                                  transport::cuda::LaunchOptions{-1, 1024});
    std::vector<float*> buf(128);
    for (auto& ptr : buf) REQUIRE_CUDA(cudaMalloc(&ptr, 4096 * 4));
    std::vector<const void*> s(buf.begin(), buf.end());
    std::vector<void*> rv(buf.begin(), buf.end());
    bool refused = false;
    try {
      ex.run_all(s, rv, 4096, DataType::f32, ReduceOp::sum, nullptr);
    } catch (const Error& e) {
      refused = e.code() == ErrorCode::Unsupported;
      MESSAGE(e.what());
    }
    CHECK(refused);
    for (auto* ptr : buf) REQUIRE_CUDA(cudaFree(ptr));
  } catch (const Error& e) {
    FAIL(e.what());
  }
}

TEST_CASE(
    "virtual ranks: default channels, threads and slots fill the GPU, and a wide plan still fits") {
  int sms = 0;
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // Default channels: as many as the SMs hold at 512 threads (two blocks per SM within the
  // kernel's launch bounds); then explicit channels beyond one block per SM: 248 blocks on 8
  // ranks, the dgx1v forest's shape, which fits H100s and H200s at 512 threads.
  for (std::uint32_t asked : {0u, 31u}) {
    CAPTURE(asked);
    Config c = make_config(8, asked);
    if (asked == 0) c.slot_bytes = 0;  // every default: the transport's slots too
    c = CudaVirtualRanks::resolve(c);
    if (asked == 0) CHECK(c.slot_bytes == transport::cuda::kVirtualRanksSlotBytes);
    CudaVirtualRanks::Executor ex(c, registered("ring", 8), "gpu-test");
    const std::size_t n = 1 << 16;
    std::vector<float*> buf(8);
    for (auto& ptr : buf) {
      REQUIRE_CUDA(cudaMalloc(&ptr, n * sizeof(float)));
      const std::vector<float> ones(n, 1.0f);
      REQUIRE_CUDA(cudaMemcpy(ptr, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    std::vector<const void*> s(buf.begin(), buf.end());
    std::vector<void*> rv(buf.begin(), buf.end());
    ex.run_all<float, ReduceOp::sum>(s, rv, n, nullptr);
    ex.synchronize(nullptr);
    std::vector<float> out(n);
    REQUIRE_CUDA(cudaMemcpy(out.data(), buf[7], n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(out.front() == 8.0f);
    CHECK(out.back() == 8.0f);
    const auto& fit = ex.launch_fit();
    MESSAGE(fit.describe());
    CHECK(fit.ok);
    CHECK(fit.blocks == 8ull * ex.config().nchannels);
    CHECK(fit.blocks <= fit.capacity());
    CHECK(fit.sms == sms);
    if (asked == 0) {
      CHECK(fit.threads == 512);
      CHECK(fit.blocks_per_sm >= 2);           // the launch bounds: at most 64 registers per thread
      CHECK(fit.blocks + 8 > fit.capacity());  // one more channel would not fit
    }
    for (auto* ptr : buf) REQUIRE_CUDA(cudaFree(ptr));
  }
}

TEST_CASE("virtual ranks: a missing peer times out with rank, channel and step; abort() stops") {
  Config c = make_config(4, 1);
  c.verify_plans = false;
  c.timeout = std::chrono::milliseconds(300);
  std::vector<float*> buf(4);
  for (auto& ptr : buf) REQUIRE_CUDA(cudaMalloc(&ptr, 65536 * 4));
  std::vector<const void*> s(buf.begin(), buf.end());
  std::vector<void*> rv(buf.begin(), buf.end());
  {
    CudaVirtualRanks::Executor ex(c, gpu_test::ring_without_rank1(), "broken");
    const auto t0 = std::chrono::steady_clock::now();
    std::string what;
    ErrorCode code = ErrorCode::System;
    try {
      ex.run_all(s, rv, 65536, DataType::f32, ReduceOp::sum, nullptr);
      ex.synchronize(nullptr);
    } catch (const Error& e) {
      what = e.what();
      code = e.code();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(what);
    CHECK(code == ErrorCode::Timeout);
    CHECK(what.find("channel 0") != std::string::npos);
    CHECK(what.find("rank 1") != std::string::npos);  // the peer it waited for
    CHECK(seconds < 10.0);
    // Sticky: the FIFOs are in an unknown state.
    CHECK_THROWS_AS(ex.run_all(s, rv, 65536, DataType::f32, ReduceOp::sum, nullptr), Error);
  }
  {
    c.timeout = std::chrono::milliseconds(60000);
    CudaVirtualRanks::Executor ex(c, gpu_test::ring_without_rank1(), "broken");
    const auto t0 = std::chrono::steady_clock::now();
    ex.run_all(s, rv, 65536, DataType::f32, ReduceOp::sum, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ex.abort();
    ErrorCode code = ErrorCode::System;
    try {
      ex.synchronize(nullptr);
    } catch (const Error& e) {
      code = e.code();
      MESSAGE(e.what());
    }
    CHECK(code == ErrorCode::Aborted);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
  }
  for (auto* ptr : buf) REQUIRE_CUDA(cudaFree(ptr));
}

namespace {

void session_sequence(const Source& source) {
  const int p = 4;
  const Config c = make_config(p, 2);
  CudaVirtualRanks::Executor ex(c, source, "gpu-test");
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Layers of different sizes in one fused buffer per rank, like a backward pass.
  const std::vector<std::size_t> layer = {1000003, 17, 4096, 1, 65536, 300000};
  std::size_t total = 0;
  for (std::size_t n : layer) total += n;
  std::vector<std::vector<float>> in(p);
  std::vector<float*> buf(p), out(p);
  for (int r = 0; r < p; ++r) {
    auto& v = in[static_cast<std::size_t>(r)];
    v = random_values<float>(total, static_cast<unsigned>(r + 11));
    REQUIRE_CUDA(cudaMalloc(&buf[static_cast<std::size_t>(r)], total * 4));
    REQUIRE_CUDA(cudaMalloc(&out[static_cast<std::size_t>(r)], total * 4));
    REQUIRE_CUDA(
        cudaMemcpy(buf[static_cast<std::size_t>(r)], v.data(), total * 4, cudaMemcpyHostToDevice));
  }
  REQUIRE_CUDA(cudaDeviceSynchronize());
  std::vector<std::uint64_t> tickets;
  {
    transport::cuda::Session<float, ReduceOp::sum> session(ex, stream, 4);
    for (int round = 0; round < 3; ++round) {
      std::size_t at = 0;
      for (std::size_t n : layer) {
        std::vector<const void*> s(p);
        std::vector<void*> rv(p);
        for (int r = 0; r < p; ++r) {
          s[static_cast<std::size_t>(r)] = buf[static_cast<std::size_t>(r)] + at;
          rv[static_cast<std::size_t>(r)] = out[static_cast<std::size_t>(r)] + at;
        }
        tickets.push_back(session.enqueue(s, rv, n));
        at += n;
      }
    }
    // The executor's own calls would share the session's slots.
    std::vector<const void*> s(buf.begin(), buf.end());
    std::vector<void*> rv(out.begin(), out.end());
    CHECK_THROWS_AS(ex.run_all(s, rv, 16, DataType::f32, ReduceOp::sum, stream), Error);
    // A second session would share the slots too; a ticket not yet issued is refused.
    CHECK_THROWS_AS((transport::cuda::Session<float, ReduceOp::sum>(ex, stream)), Error);
    CHECK_THROWS_AS(session.done(tickets.back() + 1), Error);
    session.wait(tickets.back());
    for (std::uint64_t t : tickets) CHECK(session.done(t));
    session.close();
  }
  // Every call is out of place from the same inputs, so each round writes the same results.
  Config one = c;
  std::vector<std::vector<float>> expect(p, std::vector<float>(total));
  std::size_t at = 0;
  for (std::size_t n : layer) {
    std::vector<std::vector<float>> part(p);
    for (int r = 0; r < p; ++r)
      part[static_cast<std::size_t>(r)].assign(in[static_cast<std::size_t>(r)].begin() + at,
                                               in[static_cast<std::size_t>(r)].begin() + at + n);
    const auto got = run_on_host(source, one, part, DataType::f32, ReduceOp::sum);
    for (int r = 0; r < p; ++r)
      std::copy(got[static_cast<std::size_t>(r)].begin(), got[static_cast<std::size_t>(r)].end(),
                expect[static_cast<std::size_t>(r)].begin() + at);
    at += n;
  }
  for (int r = 0; r < p; ++r) {
    std::vector<float> got(total);
    REQUIRE_CUDA(cudaMemcpy(got.data(), out[static_cast<std::size_t>(r)], total * 4,
                            cudaMemcpyDeviceToHost));
    CAPTURE(r);
    CHECK(same_bits(got, expect[static_cast<std::size_t>(r)]));
  }
  // After the session, the executor runs calls again.
  std::vector<const void*> s(buf.begin(), buf.end());
  std::vector<void*> rv(out.begin(), out.end());
  ex.run_all(s, rv, 4096, DataType::f32, ReduceOp::sum, stream);
  ex.synchronize(stream);
  for (int r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaFree(buf[static_cast<std::size_t>(r)]));
    REQUIRE_CUDA(cudaFree(out[static_cast<std::size_t>(r)]));
  }
  REQUIRE_CUDA(cudaStreamDestroy(stream));
}

}  // namespace

TEST_CASE("persistent session: a sequence of calls on one resident kernel") {
  session_sequence(registered("ring", 4));
  // The calls below 10000 elements on LowLatency plans: the session kernel runs each call in its
  // plan's protocol.
  session_sequence(low_latency_below(registered("ring", 4), 10000));
  // Two trees per channel: the session's default grid (session_blocks()) holds their blocks.
  session_sequence(registered("dbtree", 4));
}

TEST_CASE("persistent session: a missing peer ends the kernel with a timeout") {
  Config c = make_config(4, 1);
  c.verify_plans = false;
  c.timeout = std::chrono::milliseconds(300);
  CudaVirtualRanks::Executor ex(c, gpu_test::ring_without_rank1(), "broken");
  std::vector<float*> buf(4);
  for (auto& ptr : buf) REQUIRE_CUDA(cudaMalloc(&ptr, 4096 * 4));
  std::vector<const void*> s(buf.begin(), buf.end());
  std::vector<void*> rv(buf.begin(), buf.end());
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ErrorCode code = ErrorCode::System;
  try {
    transport::cuda::Session<float, ReduceOp::sum> session(ex, stream);
    const std::uint64_t t = session.enqueue(s, rv, 4096);
    session.wait(t);
  } catch (const Error& e) {
    code = e.code();
    MESSAGE(e.what());
  }
  CHECK(code == ErrorCode::Timeout);
  REQUIRE_CUDA(cudaStreamDestroy(stream));
  for (auto* ptr : buf) REQUIRE_CUDA(cudaFree(ptr));
}

TEST_CASE("persistent session: the default and blocking streams are refused") {
  // A session's kernel runs until close(): on such a stream, a later cudaMemcpy would wait for it.
  CudaVirtualRanks::Executor ex(make_config(2, 1), registered("ring", 2), "streams");
  cudaStream_t blocking = nullptr;
  REQUIRE_CUDA(cudaStreamCreate(&blocking));
  for (cudaStream_t s : {cudaStream_t{nullptr}, cudaStreamLegacy, cudaStreamPerThread, blocking}) {
    ErrorCode code = ErrorCode::System;
    try {
      transport::cuda::Session<float, ReduceOp::sum> session(ex, s);
    } catch (const Error& e) {
      code = e.code();
    }
    CHECK(code == ErrorCode::InvalidArgument);
  }
  REQUIRE_CUDA(cudaStreamDestroy(blocking));
}

TEST_CASE("persistent session: abort() ends an idle session and a call stuck on a missing peer") {
  Config c = make_config(4, 1);
  c.verify_plans = false;
  c.timeout = std::chrono::milliseconds(60000);  // only abort() can end either wait in time
  std::vector<float*> buf(4);
  for (auto& ptr : buf) REQUIRE_CUDA(cudaMalloc(&ptr, 4096 * 4));
  std::vector<const void*> s(buf.begin(), buf.end());
  std::vector<void*> rv(buf.begin(), buf.end());
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto aborted_within = [&](bool stuck_call) {
    CudaVirtualRanks::Executor ex(
        c, stuck_call ? gpu_test::ring_without_rank1() : registered("ring", 4), "abort");
    const auto t0 = std::chrono::steady_clock::now();
    ErrorCode code = ErrorCode::System;
    try {
      transport::cuda::Session<float, ReduceOp::sum> session(ex, stream);
      // Idle: the blocks wait for an item (no deadline). Stuck: they wait for rank 1 inside it.
      if (stuck_call) (void)session.enqueue(s, rv, 4096);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ex.abort();
      session.close();
    } catch (const Error& e) {
      code = e.code();
      MESSAGE(e.what());
    }
    CHECK(code == ErrorCode::Aborted);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  CHECK(aborted_within(false) < 10.0);
  CHECK(aborted_within(true) < 10.0);
  REQUIRE_CUDA(cudaStreamDestroy(stream));
  for (auto* ptr : buf) REQUIRE_CUDA(cudaFree(ptr));
}

namespace {
// The next forward pass of [C-Cube] Sec. III-D: one block that waits for each layer of rank r's
// output and copies it the moment it is ready. A wrong table would copy partial sums. ready_ns[l]:
// when layer l was seen ready (%globaltimer).
__global__ void consume_layers(runtime::LayerTableView table, const std::uint64_t* progress,
                               std::uint64_t call_base, const std::uint64_t* layer_end,
                               const float* output, float* copy, std::uint32_t* failed,
                               std::uint64_t* ready_ns) {
  __shared__ bool ok;
  for (std::uint32_t l = 0; l < table.nlayers; ++l) {
    if (threadIdx.x == 0) {
      ok = runtime::wait_layer_ready(table, progress, call_base, l, nullptr,
                                     sync::now_ns() + 20'000'000'000ull) == sync::WaitResult::Ok;
      ready_ns[l] = sync::now_ns();
    }
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
// %globaltimer when the stream reaches it: the start and the end of what runs between two stamps.
__global__ void stamp_time(std::uint64_t* at) {
  *at = sync::now_ns();
}
}  // namespace

TEST_CASE("gradient queuing on the GPU: a consumer kernel reads each layer once it is ready") {
  const int p = 4;
  const Config c = make_config(p, 2);
  CudaVirtualRanks::Executor ex(c, registered("ring", p), "gpu-test");
  const std::vector<std::uint64_t> layer_end = {100, 70000, 70001, 300000, 1000003};
  const std::size_t n = layer_end.back();
  std::vector<float*> in(p), out(p);
  for (int r = 0; r < p; ++r) {
    const auto v = random_values<float>(n, static_cast<unsigned>(r + 3));
    REQUIRE_CUDA(cudaMalloc(&in[static_cast<std::size_t>(r)], n * 4));
    REQUIRE_CUDA(cudaMalloc(&out[static_cast<std::size_t>(r)], n * 4));
    REQUIRE_CUDA(
        cudaMemcpy(in[static_cast<std::size_t>(r)], v.data(), n * 4, cudaMemcpyHostToDevice));
  }
  std::uint64_t* d_end = nullptr;
  float* d_copy = nullptr;
  std::uint32_t* d_failed = nullptr;
  std::uint64_t* d_ready = nullptr;
  std::uint64_t* d_call = nullptr;  // the allreduce's start and end on its stream
  REQUIRE_CUDA(cudaMalloc(&d_ready, layer_end.size() * 8));
  REQUIRE_CUDA(cudaMalloc(&d_call, 2 * 8));
  REQUIRE_CUDA(cudaMalloc(&d_end, layer_end.size() * 8));
  REQUIRE_CUDA(cudaMemcpy(d_end, layer_end.data(), layer_end.size() * 8, cudaMemcpyHostToDevice));
  REQUIRE_CUDA(cudaMalloc(&d_copy, n * 4));
  REQUIRE_CUDA(cudaMalloc(&d_failed, 4));
  cudaStream_t comm = nullptr, compute = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  const int rank = 2;
  auto ready = ex.layer_readiness(rank, n, sizeof(float), layer_end);
  std::vector<const void*> s(in.begin(), in.end());
  std::vector<void*> rv(out.begin(), out.end());
  for (int call = 0; call < 3; ++call) {
    CAPTURE(call);
    REQUIRE_CUDA(cudaMemset(out[rank], 0xff, n * 4));
    REQUIRE_CUDA(cudaMemset(d_copy, 0, n * 4));
    REQUIRE_CUDA(cudaMemset(d_failed, 0, 4));
    REQUIRE_CUDA(cudaMemset(d_ready, 0, layer_end.size() * 8));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    // The consumer starts first and waits on the device; the allreduce follows on its stream.
    const std::uint64_t base = ex.next_call_base(n, sizeof(float));
    consume_layers<<<1, 256, 0, compute>>>(ready.table, ready.progress, base, d_end, out[rank],
                                           d_copy, d_failed, d_ready);
    REQUIRE_CUDA(cudaGetLastError());
    stamp_time<<<1, 1, 0, comm>>>(d_call);
    ex.run_all<float, ReduceOp::sum>(s, rv, n, comm);
    stamp_time<<<1, 1, 0, comm>>>(d_call + 1);
    ex.synchronize(comm);
    REQUIRE_CUDA(cudaStreamSynchronize(compute));
    std::uint32_t failed = 0;
    REQUIRE_CUDA(cudaMemcpy(&failed, d_failed, 4, cudaMemcpyDeviceToHost));
    CHECK(failed == 0);
    std::vector<float> final_out(n), copied(n);
    REQUIRE_CUDA(cudaMemcpy(final_out.data(), out[rank], n * 4, cudaMemcpyDeviceToHost));
    REQUIRE_CUDA(cudaMemcpy(copied.data(), d_copy, n * 4, cudaMemcpyDeviceToHost));
    CHECK(same_bits(copied, final_out));
    // The consumer's head start: when layer 0 was ready, against the allreduce's start and end
    // on its stream (a figure for the results page; the times depend on the GPU).
    std::vector<std::uint64_t> ready_ns(layer_end.size());
    std::uint64_t call_ns[2] = {0, 0};
    REQUIRE_CUDA(cudaMemcpy(ready_ns.data(), d_ready, ready_ns.size() * 8, cudaMemcpyDeviceToHost));
    REQUIRE_CUDA(cudaMemcpy(call_ns, d_call, sizeof(call_ns), cudaMemcpyDeviceToHost));
    if (failed == 0) {
      CHECK(std::is_sorted(ready_ns.begin(), ready_ns.end()));
      CHECK(ready_ns.front() <= call_ns[1]);
      const double after_start_us =
          (static_cast<double>(ready_ns.front()) - static_cast<double>(call_ns[0])) / 1000.0;
      const double before_end_us =
          (static_cast<double>(call_ns[1]) - static_cast<double>(ready_ns.front())) / 1000.0;
      MESSAGE("call " << call << ": layer 0 (" << layer_end[0] << " of " << n << " elements) ready "
                      << after_start_us << " us after the allreduce started and " << before_end_us
                      << " us before it ended");
    }
  }
  for (int r = 0; r < p; ++r) {
    REQUIRE_CUDA(cudaFree(in[static_cast<std::size_t>(r)]));
    REQUIRE_CUDA(cudaFree(out[static_cast<std::size_t>(r)]));
  }
  REQUIRE_CUDA(cudaFree(d_ready));
  REQUIRE_CUDA(cudaFree(d_call));
  REQUIRE_CUDA(cudaFree(d_end));
  REQUIRE_CUDA(cudaFree(d_copy));
  REQUIRE_CUDA(cudaFree(d_failed));
  REQUIRE_CUDA(cudaStreamDestroy(comm));
  REQUIRE_CUDA(cudaStreamDestroy(compute));
}

int main(int argc, char** argv) {
  return gpu_test::run_tests(argc, argv, [] {
    int devices = 0;
    return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  });
}
