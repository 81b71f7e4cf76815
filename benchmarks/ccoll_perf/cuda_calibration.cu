// ccoll_perf/cuda_calibration.cu: what the GPU itself draws, measured in the run that times the
// allreduces, so that every plan's time can be set against its HBM bound (docs/benchmark.md).
//
// Four figures, each the median of `reps` CUDA-event timings after warm-up: a device-to-device
// cudaMemcpyAsync; a copy kernel moving 16-byte vectors (the width of the interpreter's packs, so
// the bound's denominator is what a kernel of ccoll's shape can draw); an add kernel reading two
// arrays and writing a third (a reduction step's mix); and an empty kernel's launch, plain and
// cooperative (ccoll's launch), back to back on one stream. Bandwidths count bytes read plus bytes
// written, as STREAM and memory_traffic() do.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "cuda_workspace.cuh"

namespace ccoll_perf::cuda {

namespace {

constexpr int kWarmup = 3;
constexpr int kLaunchesPerTiming = 100;
constexpr unsigned kThreads = 512;

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dst[i] = src[i];
}

__global__ void add_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                           float4* __restrict__ c, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float4 x = a[i];
    const float4 y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void empty_kernel() {}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of `enqueue` (which enqueues the work on `stream`), after kWarmup untimed runs.
template <class F>
double median_time(cudaStream_t stream, int reps, F&& enqueue) {
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> times;
  try {
    for (int i = 0; i < kWarmup; ++i) enqueue();
    for (int i = 0; i < reps; ++i) {
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      enqueue();
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      times.push_back(elapsed_s(start, stop));
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(std::move(times));
}

// Device memory freed at scope exit.
struct Array {
  void* p = nullptr;
  explicit Array(std::size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc(calibration)"); }
  ~Array() { cudaFree(p); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
};

}  // namespace

GpuCalibration calibrate(int device, std::uint64_t array_bytes, int reps) {
  check(cudaSetDevice(device), "cudaSetDevice");
  // Three arrays must fit beside what the run already holds: shrink rather than fail.
  std::size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  std::uint64_t bytes = std::min<std::uint64_t>(array_bytes, free_bytes / 4);
  bytes = bytes / (16u * kThreads) * (16u * kThreads);
  if (bytes == 0) throw std::runtime_error("GPU calibration: no device memory left");
  GpuCalibration c;
  c.device = describe_device(device);
  c.array_bytes = bytes;
  c.reps = reps;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    Array a(bytes), b(bytes), d(bytes);
    check(cudaMemsetAsync(a.p, 1, bytes, stream), "cudaMemsetAsync");
    check(cudaMemsetAsync(b.p, 2, bytes, stream), "cudaMemsetAsync");
    const auto n = static_cast<double>(bytes);
    c.memcpy_GBps = 2 * n / 1e9 / median_time(stream, reps, [&] {
                      check(cudaMemcpyAsync(d.p, a.p, bytes, cudaMemcpyDeviceToDevice, stream),
                            "cudaMemcpyAsync(D2D)");
                    });
    // Enough resident blocks to cover every SM, as ccoll's kernels do.
    int sms = 0, per_sm = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_kernel, kThreads, 0),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    const unsigned grid = static_cast<unsigned>(std::max(1, sms * std::max(1, per_sm)));
    const std::size_t vectors = bytes / 16;
    c.copy_kernel_GBps = 2 * n / 1e9 / median_time(stream, reps, [&] {
                           copy_kernel<<<grid, kThreads, 0, stream>>>(
                               static_cast<const uint4*>(a.p), static_cast<uint4*>(d.p), vectors);
                           check(cudaGetLastError(), "copy kernel");
                         });
    c.add_kernel_GBps = 3 * n / 1e9 / median_time(stream, reps, [&] {
                          add_kernel<<<grid, kThreads, 0, stream>>>(
                              static_cast<const float4*>(a.p), static_cast<const float4*>(b.p),
                              static_cast<float4*>(d.p), vectors);
                          check(cudaGetLastError(), "add kernel");
                        });
    c.launch_us = 1e6 / kLaunchesPerTiming * median_time(stream, reps, [&] {
                    for (int i = 0; i < kLaunchesPerTiming; ++i)
                      empty_kernel<<<1, 32, 0, stream>>>();
                    check(cudaGetLastError(), "empty kernel");
                  });
    c.cooperative_launch_us =
        1e6 / kLaunchesPerTiming * median_time(stream, reps, [&] {
          for (int i = 0; i < kLaunchesPerTiming; ++i)
            check(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(empty_kernel), dim3(1),
                                              dim3(32), nullptr, 0, stream),
                  "cudaLaunchCooperativeKernel(empty)");
        });
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
  cudaStreamDestroy(stream);
  return c;
}

}  // namespace ccoll_perf::cuda
