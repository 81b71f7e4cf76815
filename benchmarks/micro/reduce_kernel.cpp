// bench_reduce_kernel: the host element loops of the step interpreter (runtime/host_loops.hpp),
// the inner loop of every host allreduce: copy (recv -> out), reduce (in (+) recv -> out) and
// reduce into two destinations (in (+) recv -> out and the next slot), per element type.
//
// bytes_per_second counts every byte read and written, as STREAM does, so an in-cache size shows
// the kernel's compute rate (is half/bfloat16 conversion the limit?) and an out-of-cache size can
// be compared with ccoll_perf's memory-bandwidth line.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"

#if __has_include(<ccoll/runtime/interpreter.hpp>)
#include "ccoll/runtime/interpreter.hpp"
#define CCOLL_MICRO_HAVE_INTERPRETER 1
#else
#define CCOLL_MICRO_HAVE_INTERPRETER 0
#endif

namespace {

template <class T>
std::vector<T> filled(std::size_t n, int seed) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = static_cast<int>((i * 7 + static_cast<std::size_t>(seed) * 13) % 11) - 5;
    if constexpr (std::is_same_v<T, ccoll::Half> || std::is_same_v<T, ccoll::BFloat16>) {
      v[i] = T(static_cast<float>(x));
    } else {
      v[i] = static_cast<T>(x);
    }
  }
  return v;
}

// nsrc sources reduced (sum) into ndst destinations, through the interpreter's dispatcher.
template <class T, int NSrc, int NDst>
void BM_ElementLoop(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t n = bytes / sizeof(T);
  std::vector<std::vector<T>> src, dst;
  for (int k = 0; k < NSrc; ++k) src.push_back(filled<T>(n, k));
  for (int k = 0; k < NDst; ++k) dst.push_back(filled<T>(n, 10 + k));
  const T* srcs[NSrc];
  T* dsts[NDst];
  for (int k = 0; k < NSrc; ++k) srcs[k] = src[static_cast<std::size_t>(k)].data();
  for (int k = 0; k < NDst; ++k) dsts[k] = dst[static_cast<std::size_t>(k)].data();
  for (auto _ : state) {
#if CCOLL_MICRO_HAVE_INTERPRETER
    ccoll::runtime::detail::element_loop<T, ccoll::ReduceOp::sum, false>(
        ccoll::runtime::HostGroup{}, dsts, NDst, srcs, NSrc, n, 1);
#else
    // Same shape, plain loop (the interpreter is not in this checkout).
    for (std::size_t i = 0; i < n; ++i) {
      T v = srcs[0][i];
      for (int k = 1; k < NSrc; ++k) v = ccoll::combine<ccoll::ReduceOp::sum>(v, srcs[k][i]);
      for (int k = 0; k < NDst; ++k) dsts[k][i] = v;
    }
#endif
    benchmark::DoNotOptimize(dsts[0]);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n * sizeof(T) * (NSrc + NDst)));
}

// 32 KiB per buffer stays in L1/L2; 16 MiB per buffer goes to memory on a 36 MiB L3 when three or
// four buffers are live.
#define CCOLL_ELEMENT_LOOP_SIZES ->Arg(32 << 10)->Arg(16 << 20)

BENCHMARK(BM_ElementLoop<float, 1, 1>) CCOLL_ELEMENT_LOOP_SIZES;
BENCHMARK(BM_ElementLoop<float, 2, 1>) CCOLL_ELEMENT_LOOP_SIZES;
BENCHMARK(BM_ElementLoop<float, 2, 2>) CCOLL_ELEMENT_LOOP_SIZES;
BENCHMARK(BM_ElementLoop<float, 3, 1>) CCOLL_ELEMENT_LOOP_SIZES;
BENCHMARK(BM_ElementLoop<double, 2, 1>) CCOLL_ELEMENT_LOOP_SIZES;
BENCHMARK(BM_ElementLoop<ccoll::Half, 2, 1>) CCOLL_ELEMENT_LOOP_SIZES;
BENCHMARK(BM_ElementLoop<ccoll::BFloat16, 2, 1>) CCOLL_ELEMENT_LOOP_SIZES;
BENCHMARK(BM_ElementLoop<std::int32_t, 2, 1>) CCOLL_ELEMENT_LOOP_SIZES;

}  // namespace

BENCHMARK_MAIN();
