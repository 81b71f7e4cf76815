// ccoll_perf/machine.cpp: machine description and the STREAM-like bandwidth measurement.
#include "machine.hpp"

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define CCOLL_PERF_HAVE_SSE2 1
#else
#define CCOLL_PERF_HAVE_SSE2 0
#endif

namespace ccoll_perf {

std::string read_load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

MachineInfo read_machine_info() {
  MachineInfo m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos)
        m.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  m.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm);
  m.date_utc = date;
  m.load_average = read_load_average();
  return m;
}

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// The kernels are volatile-free loops over doubles; scale and triad cannot be turned into memcpy,
// so they keep ordinary (read-for-ownership) stores, like an allreduce's output writes.
void scale_kernel(double* a, const double* b, std::size_t n, double s) {
  for (std::size_t i = 0; i < n; ++i) a[i] = s * b[i];
}
void triad_kernel(double* a, const double* b, const double* c, std::size_t n, double s) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
// A copy whose stores bypass the caches: the destination's lines are not read first, so the
// memory sees exactly one read and one write per element, as an allreduce that streams its output
// does. (glibc's memcpy switches to such stores only above a size threshold that depends on the
// CPU, and `copy` has shown both behaviours across machines.) a and b are 64-byte aligned.
void copy_nt_kernel(double* a, const double* b, std::size_t n) {
#if CCOLL_PERF_HAVE_SSE2
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128d x0 = _mm_load_pd(b + i), x1 = _mm_load_pd(b + i + 2);
    const __m128d x2 = _mm_load_pd(b + i + 4), x3 = _mm_load_pd(b + i + 6);
    _mm_stream_pd(a + i, x0);
    _mm_stream_pd(a + i + 2, x1);
    _mm_stream_pd(a + i + 4, x2);
    _mm_stream_pd(a + i + 6, x3);
  }
  for (; i < n; ++i) a[i] = b[i];
  _mm_sfence();
#else
  std::memcpy(a, b, n * sizeof(double));
#endif
}

}  // namespace

MemoryBandwidth measure_memory_bandwidth(int threads, std::size_t array_bytes, int reps) {
  MemoryBandwidth result;
  result.threads = threads;
  const std::size_t n = array_bytes / sizeof(double);
  const std::size_t per = n / static_cast<std::size_t>(threads) / 8 * 8;  // 64-byte aligned parts
  std::unique_ptr<double, FreeDeleter> a(static_cast<double*>(std::aligned_alloc(64, n * 8 + 64)));
  std::unique_ptr<double, FreeDeleter> b(static_cast<double*>(std::aligned_alloc(64, n * 8 + 64)));
  std::unique_ptr<double, FreeDeleter> c(static_cast<double*>(std::aligned_alloc(64, n * 8 + 64)));
  if (!a || !b || !c) return result;

  constexpr int kKernels = 4;
  // seconds[kernel][rep][thread], indexed in size_t so no int product can overflow.
  const auto at = [reps, threads](int k, int rep, int t) {
    return (static_cast<std::size_t>(k) * static_cast<std::size_t>(reps) +
            static_cast<std::size_t>(rep)) *
               static_cast<std::size_t>(threads) +
           static_cast<std::size_t>(t);
  };
  std::vector<double> seconds(at(kKernels, 0, 0), 0.0);
  std::barrier sync(threads);
  auto worker = [&](int t) {
    double* pa = a.get() + per * static_cast<std::size_t>(t);
    double* pb = b.get() + per * static_cast<std::size_t>(t);
    double* pc = c.get() + per * static_cast<std::size_t>(t);
    for (std::size_t i = 0; i < per; ++i) {  // first touch: pages land near this thread
      pa[i] = 0.0;
      pb[i] = 1.0;
      pc[i] = 2.0;
    }
    for (int rep = 0; rep < reps; ++rep) {
      for (int k = 0; k < kKernels; ++k) {
        sync.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        if (k == 0) std::memcpy(pa, pb, per * sizeof(double));
        if (k == 1) scale_kernel(pa, pb, per, 3.0);
        if (k == 2) triad_kernel(pa, pb, pc, per, 3.0);
        if (k == 3) copy_nt_kernel(pa, pb, per);
        const auto t1 = std::chrono::steady_clock::now();
        seconds[at(k, rep, t)] = std::chrono::duration<double>(t1 - t0).count();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();

  const double bytes_moved = static_cast<double>(per) * static_cast<double>(threads) * 8.0;
  double gbps[kKernels] = {0, 0, 0, 0};
  // Arrays touched per element (STREAM counting: a read-for-ownership is not counted).
  const double streams[kKernels] = {2.0, 2.0, 3.0, 2.0};
  for (int k = 0; k < kKernels; ++k) {
    for (int rep = 0; rep < reps; ++rep) {
      double slowest = 0;
      for (int t = 0; t < threads; ++t) {
        slowest = std::max(slowest, seconds[at(k, rep, t)]);
      }
      if (slowest > 0) gbps[k] = std::max(gbps[k], streams[k] * bytes_moved / slowest / 1e9);
    }
  }
  // Keep the results observable so the loops are not optimised away.
  volatile double sink = a.get()[n / 2];
  (void)sink;
  result.copy_GBps = gbps[0];
  result.scale_GBps = gbps[1];
  result.triad_GBps = gbps[2];
  result.copy_nt_GBps = gbps[3];
  return result;
}

}  // namespace ccoll_perf
