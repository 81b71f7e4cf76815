// ccoll_gpu_session_floor: the floors under a call: what a launch costs with nothing in its
// kernel, and what a persistent session's work queue costs with no collective in its items, so
// that a call's time (ccoll_gpu_latency, launched and in a session) splits into those parts and
// the call's own.
//
// Four measurements:
//   launch   empty kernels launched back to back, plain and cooperative (as CudaVirtualRanks
//            launches every call), 16 blocks and 2 per SM: the floor under a launched call;
//   pcie     the floor under any host-fed kernel: the host stores a number into host-mapped memory,
//            one device thread polls it and stores it back into another host-mapped word, the
//            host polls that: one round trip, host clock, median and 90th percentile;
//   echo     the session queue itself (session_queue.cuh, session_protocol.hpp, as cuda::Session
//            runs it): a kernel of B blocks whose leaders wait for each item's record
//            (session_wait_record) and arrive at once (session_item_done), without running
//            anything, for several grid sizes B (the session kernel of 8 ranks has 8 blocks per
//            channel; 2 per SM is the largest grid). Per item:
//              back_to_back   items posted as fast as the queue takes them (depth 16), host clock
//                             from the first post to the last completion, per item;
//              round_trip     post, then wait for the completion, median;
//              take_to_arrive block 0's leader, %globaltimer: from reading its record whole
//                             (after the acquire fence) to its arrival returning, median;
//              idle           block 0's leader, round trips only: from its arrival at item j to
//                             its record of item j + 1, median: the host noticing the completion,
//                             posting, and the poll that takes the post.
//            Each grid twice: `direct`, every block's leader polling its record in host memory (as
//            the session kernels do), and `relayed`, one more block whose threads copy the
//            records into device memory (session_relay_record), the blocks polling that copy, so
//            that host memory sees one reader per record whatever the grid. The host's waits
//            read the completion word alone, never asking the driver;
//   query    a driver query of the session's stream (cudaStreamQuery) while the echo kernel is
//            resident, as a session's host waits ask it (session_queue.cuh): 500 per run, the
//            range of the runs' medians.
// Where echo's round trip is near ccoll_gpu_latency's session_rt, the queue sets a session's
// pace; where it is small, the calls inside the session do. Where `direct` grows with the grid
// and `relayed` does not, the blocks' reads of host memory queue, and a relay is the remedy.
// Where a query costs about what a session's call does beyond the echo's, the host's queries set
// the pace (a session's waits now ask seldom: SessionDriverPace).
//
//   build/benchmarks/ccoll_gpu_session_floor [items=2000] [records=8]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/poll.hpp"
#include "ccoll/transport/cuda/device_memory.cuh"
#include "ccoll/transport/cuda/session_protocol.hpp"
#include "ccoll/transport/cuda/session_queue.cuh"

namespace {

namespace cuda = ccoll::transport::cuda;
namespace sync = ccoll::sync;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kDeviceTimeoutNs = 5'000'000'000ull;
constexpr auto kHostTimeout = std::chrono::seconds(5);

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "ccoll_gpu_session_floor: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

[[noreturn]] void fail(const char* what, std::uint32_t* abort_host) {
  // The kernel's waits watch this word: it ends before the process does.
  sync::AtomicWord<std::uint32_t>(abort_host).store_release(1);
  std::fprintf(stderr, "ccoll_gpu_session_floor: %s\n", what);
  std::exit(1);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

// One device thread answers each number the host stores with the same number.
__global__ void pcie_echo_kernel(std::uint64_t* ping, std::uint64_t* pong, std::uint64_t n,
                                 const std::uint32_t* abort) {
  const sync::AtomicWord<std::uint64_t> in(ping);
  const sync::AtomicWord<std::uint64_t> out(pong);
  for (std::uint64_t i = 1; i <= n; ++i) {
    if (sync::poll_until([&] { return in.load_relaxed() >= i; }, abort,
                         sync::now_ns() + kDeviceTimeoutNs) != sync::WaitResult::Ok)
      return;
    out.store_relaxed(i);
  }
}

// The queue's depth in every measurement: the items in flight back to back.
constexpr std::uint32_t kDepth = 16;

struct EchoArgs {
  cuda::SessionQueueView queue;  // the host's records (host-mapped)
  // Relayed: the last block copies the records here (device memory, the host's layout) and the
  // others poll this copy, watching `relay_abort` (device memory, raised by the relay when the
  // host's word is) instead of the host's word. nullptr: every block polls the host's records.
  cuda::SessionRecord* mirror = nullptr;
  std::uint32_t* relay_abort = nullptr;
  std::uint32_t* abort = nullptr;   // host-mapped
  std::uint64_t* stamps = nullptr;  // device memory: block 0's (record read, arrival) per item
  std::uint64_t max_items = 0;
};

// The relay block: its thread k copies records k, k + 32, ... of every item, up to the stop item;
// only the records some block reads (block b reads record b % stride): a copy that no block reads
// holds no item back, so the host could overwrite its record before the relay took it.
__device__ void relay_records(const EchoArgs& args) {
  const std::uint32_t lanes = 32;
  const std::uint32_t read = min(args.queue.stride, gridDim.x - 1);
  if (threadIdx.x >= lanes || threadIdx.x >= read) return;
  for (std::uint64_t j = 0;; ++j) {
    bool stop = false;
    for (std::uint32_t i = threadIdx.x; i < read; i += lanes) {
      bool stop_record = false;
      if (cuda::session_relay_record(args.queue, args.mirror, j, i, args.abort, stop_record) !=
          sync::WaitResult::Ok) {
        sync::AtomicWord<std::uint32_t, sync::Scope::device>(args.relay_abort).store_release(1);
        return;
      }
      stop = stop || stop_record;
    }
    if (stop) return;
  }
}

// The session kernel's queue protocol, and nothing between an item's record and its arrival.
__global__ void echo_kernel(const EchoArgs args) {
  const bool relayed = args.mirror != nullptr;
  if (relayed && blockIdx.x == gridDim.x - 1) {
    relay_records(args);
    return;
  }
  cuda::SessionQueueView queue = args.queue;
  std::uint32_t* abort = args.abort;
  unsigned nblocks = gridDim.x;
  if (relayed) {
    queue.records = args.mirror;
    abort = args.relay_abort;
    nblocks -= 1;
  }
  __shared__ bool stop;
  const bool leader = threadIdx.x == 0;
  for (std::uint64_t j = 0;; ++j) {
    if (leader) {
      cuda::SessionWork w;
      stop = cuda::session_wait_record(queue, j, blockIdx.x % queue.stride, abort, w) !=
                 sync::WaitResult::Ok ||
             w.plan == nullptr;
      if (blockIdx.x == 0 && j < args.max_items) args.stamps[2 * j] = sync::now_ns();
    }
    __syncthreads();
    if (stop) return;
    bool cut = false;
    if (leader) {
      cut = !cuda::session_item_done<sync::Scope::device>(queue, j, nblocks, abort);
      if (blockIdx.x == 0 && j < args.max_items) args.stamps[2 * j + 1] = sync::now_ns();
    }
    if (__syncthreads_or(cut ? 1 : 0) != 0) return;
  }
}

// Nothing: what a launch costs by itself.
__global__ void empty_kernel(int) {}

// Per launch of an empty kernel of `nblocks` blocks, back to back (host clock, `n` launches and
// one synchronisation), us: a plain launch, a cooperative one (as CudaVirtualRanks launches every
// call: virtual_ranks.cuh), and a cooperative one with the executor's cudaSetDevice before it and
// cudaEventRecord after it.
struct LaunchResult {
  double plain_us, cooperative_us, executor_us;
};

LaunchResult measure_launch(unsigned nblocks, int n, cudaStream_t stream) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  int arg = 0;
  void* params[] = {&arg};
  const void* key = reinterpret_cast<const void*>(&empty_kernel);
  const auto per_launch = [&](int mode) {
    const auto launch = [&] {
      if (mode == 2) check(cudaSetDevice(device), "cudaSetDevice");
      if (mode == 0)
        empty_kernel<<<nblocks, 32, 0, stream>>>(0);
      else
        check(cudaLaunchCooperativeKernel(key, dim3(nblocks), dim3(32), params, 0, stream),
              "cudaLaunchCooperativeKernel(empty)");
      if (mode == 2) check(cudaEventRecord(event, stream), "cudaEventRecord");
    };
    for (int i = 0; i < 100; ++i) launch();  // warm-up
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(launch)");
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) launch();
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(launch)");
    check(cudaGetLastError(), "launch empty_kernel");
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
  };
  LaunchResult r{};
  r.plain_us = per_launch(0);
  r.cooperative_us = per_launch(1);
  r.executor_us = per_launch(2);
  check(cudaEventDestroy(event), "cudaEventDestroy");
  return r;
}

struct PcieResult {
  double median_us, p90_us;
};

PcieResult measure_pcie(std::uint64_t n, cudaStream_t stream, std::uint32_t* abort_host,
                        const std::uint32_t* abort_device) {
  cuda::MappedHostMemory words(256);
  auto* ping_host = reinterpret_cast<std::uint64_t*>(words.host());
  auto* pong_host = reinterpret_cast<std::uint64_t*>(words.host() + 128);  // another line
  pcie_echo_kernel<<<1, 32, 0, stream>>>(reinterpret_cast<std::uint64_t*>(words.device()),
                                         reinterpret_cast<std::uint64_t*>(words.device() + 128), n,
                                         abort_device);
  check(cudaGetLastError(), "launch pcie_echo_kernel");
  const sync::AtomicWord<std::uint64_t> ping(ping_host);
  const sync::AtomicWord<std::uint64_t> pong(pong_host);
  std::vector<double> each;
  each.reserve(n);
  for (std::uint64_t i = 1; i <= n; ++i) {
    const auto t0 = Clock::now();
    ping.store_release(i);
    for (std::uint32_t polls = 0; pong.load_acquire() < i; ++polls)
      if ((polls & 4095u) == 4095u && Clock::now() - t0 > kHostTimeout)
        fail("pcie: the device did not answer within 5 s", abort_host);
    each.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(pcie)");
  // The first answers include the kernel's start.
  each.erase(each.begin(),
             each.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(n / 10, 100)));
  return {percentile(each, 0.5), percentile(each, 0.9)};
}

struct EchoResult {
  double back_to_back_us, round_trip_us, take_to_arrive_us, idle_us;
  double query_median_us = 0;  // cudaStreamQuery with the kernel resident
};

// Waits, bounded, until `ticket` completed.
void wait_ticket(const cuda::SessionQueue& q, std::uint64_t ticket, std::uint32_t* abort_host) {
  const auto t0 = Clock::now();
  for (std::uint32_t polls = 0; q.completed() < ticket; ++polls)
    if ((polls & 4095u) == 4095u && Clock::now() - t0 > kHostTimeout)
      fail("echo: an item did not complete within 5 s", abort_host);
}

// The relayed queue's device memory: the records' copy and the relay's abort word.
struct RelayMemory {
  cuda::DeviceMemory mirror;
  cuda::DeviceMemory abort;
};

// `relay`: nullptr for the direct queue.
EchoResult measure_echo(unsigned nblocks, std::uint32_t records, std::uint64_t items,
                        const cuda::SessionQueueMemory& memory, const RelayMemory* relay,
                        std::uint64_t* stamps_device, cudaStream_t stream,
                        std::uint32_t* abort_host, std::uint32_t* abort_device) {
  constexpr std::uint32_t depth = kDepth;
  cuda::SessionQueue queue(memory, depth, records, stream);
  EchoArgs args;
  args.queue = queue.view();
  args.abort = abort_device;
  args.stamps = stamps_device;
  args.max_items = 3 * items;
  if (relay != nullptr) {
    // A previous session's copies could pass for this one's records: zeroed first, in stream
    // order, as the queue's own device words.
    args.mirror = reinterpret_cast<cuda::SessionRecord*>(relay->mirror.get());
    args.relay_abort = reinterpret_cast<std::uint32_t*>(relay->abort.get());
    check(cudaMemsetAsync(relay->mirror.get(), 0, relay->mirror.size(), stream),
          "cudaMemsetAsync(mirror)");
    check(cudaMemsetAsync(relay->abort.get(), 0, sizeof(std::uint32_t), stream),
          "cudaMemsetAsync(relay abort)");
  }
  echo_kernel<<<nblocks + (relay != nullptr ? 1 : 0), 64, 0, stream>>>(args);
  check(cudaGetLastError(), "launch echo_kernel");

  // Any address below 2^48 that is not null: the echo never reads it.
  cuda::SessionWork work;
  work.plan = reinterpret_cast<const void*>(std::uintptr_t{0x1000});
  const std::vector<cuda::SessionWork> item(records, work);
  const auto post = [&] {
    const std::uint64_t posted = queue.posted();
    if (posted >= depth) wait_ticket(queue, posted - depth + 1, abort_host);
    return queue.post(item);
  };

  EchoResult r{};
  // Warm-up, then back to back, then one at a time.
  std::uint64_t ticket = 0;
  for (std::uint64_t i = 0; i < items; ++i) ticket = post();
  wait_ticket(queue, ticket, abort_host);
  const auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < items; ++i) ticket = post();
  wait_ticket(queue, ticket, abort_host);
  r.back_to_back_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
                      static_cast<double>(items);
  std::vector<double> each;
  each.reserve(items);
  const std::uint64_t first_round_trip = queue.posted();
  for (std::uint64_t i = 0; i < items; ++i) {
    const auto t1 = Clock::now();
    ticket = post();
    wait_ticket(queue, ticket, abort_host);
    each.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t1).count());
  }
  r.round_trip_us = percentile(each, 0.5);
  // What a driver query of the session's stream costs while its kernel is resident (as a
  // session's waits ask it: session_queue.cuh): the kernel waits for its next item meanwhile.
  std::vector<double> queries;
  for (int i = 0; i < 500; ++i) {
    const auto t1 = Clock::now();
    const cudaError_t e = cudaStreamQuery(stream);
    queries.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t1).count());
    if (e != cudaErrorNotReady) {
      check(e, "cudaStreamQuery(echo)");
      fail("echo: the kernel ended before its stop item", abort_host);
    }
  }
  r.query_median_us = percentile(queries, 0.5);
  // The stop item, then the kernel's end: no device-wide call while it runs.
  if (queue.posted() >= depth) wait_ticket(queue, queue.posted() - depth + 1, abort_host);
  queue.close([] {});

  std::vector<std::uint64_t> stamps(2 * 3 * items);
  check(cudaMemcpy(stamps.data(), stamps_device, stamps.size() * sizeof(std::uint64_t),
                   cudaMemcpyDeviceToHost),
        "cudaMemcpy(stamps)");
  std::vector<double> take_to_arrive, idle;
  for (std::uint64_t j = items; j < 3 * items; ++j)
    take_to_arrive.push_back(static_cast<double>(stamps[2 * j + 1] - stamps[2 * j]) / 1e3);
  for (std::uint64_t j = first_round_trip; j + 1 < 3 * items; ++j)
    idle.push_back(static_cast<double>(stamps[2 * (j + 1)] - stamps[2 * j + 1]) / 1e3);
  r.take_to_arrive_us = percentile(take_to_arrive, 0.5);
  r.idle_us = percentile(idle, 0.5);
  return r;
}

void run(std::uint64_t items, std::uint32_t records, const cudaDeviceProp& prop) {
  // Everything allocated before the first kernel: no allocation waits for a resident one.
  cuda::MappedHostMemory abort_word(sizeof(std::uint32_t));
  auto* abort_host = reinterpret_cast<std::uint32_t*>(abort_word.host());
  auto* abort_device = reinterpret_cast<std::uint32_t*>(abort_word.device());
  const cuda::SessionQueueMemory memory(0, records);
  cuda::DeviceMemory stamps(2 * 3 * items * sizeof(std::uint64_t));
  const RelayMemory relay{cuda::DeviceMemory(sizeof(cuda::SessionRecord) * kDepth * records),
                          cuda::DeviceMemory(sizeof(std::uint32_t))};
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  std::printf("empty launches back to back, per launch (us): %7s %8s %12s %21s\n", "blocks",
              "plain", "cooperative", "cooperative+set+event");
  for (const unsigned nblocks : {16u, 2 * static_cast<unsigned>(prop.multiProcessorCount)}) {
    const LaunchResult l = measure_launch(nblocks, 2000, stream);
    std::printf("%47s %7u %8.2f %12.2f %21.2f\n", "", nblocks, l.plain_us, l.cooperative_us,
                l.executor_us);
  }

  const PcieResult pcie = measure_pcie(items, stream, abort_host, abort_device);
  std::printf(
      "pcie round trip (host store, device poll and store, host poll): median %.2f us, "
      "p90 %.2f us\n",
      pcie.median_us, pcie.p90_us);

  std::printf("%8s %7s %16s %14s %18s %9s\n", "queue", "blocks", "back_to_back_us", "round_trip_us",
              "take_to_arrive_us", "idle_us");
  std::vector<unsigned> grids{1, records, 4 * records, 64,
                              2 * static_cast<unsigned>(prop.multiProcessorCount)};
  std::sort(grids.begin(), grids.end());
  grids.erase(std::unique(grids.begin(), grids.end()), grids.end());
  // Direct and relayed alternate grid by grid, so that a drift of the machine shows in both.
  std::vector<double> query_medians;
  for (const unsigned nblocks : grids)
    for (const RelayMemory* mode : {static_cast<const RelayMemory*>(nullptr), &relay}) {
      const EchoResult r = measure_echo(nblocks, records, items, memory, mode,
                                        reinterpret_cast<std::uint64_t*>(stamps.get()), stream,
                                        abort_host, abort_device);
      std::printf("%8s %7u %16.2f %14.2f %18.2f %9.2f\n", mode == nullptr ? "direct" : "relayed",
                  nblocks, r.back_to_back_us, r.round_trip_us, r.take_to_arrive_us, r.idle_us);
      query_medians.push_back(r.query_median_us);
    }
  std::printf(
      "cudaStreamQuery with a session kernel resident: medians %.2f-%.2f us over the runs above\n",
      *std::min_element(query_medians.begin(), query_medians.end()),
      *std::max_element(query_medians.begin(), query_medians.end()));
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run stopped by a time limit keeps its rows
  const std::uint64_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2000;
  const auto records = static_cast<std::uint32_t>(argc > 2 ? std::atoi(argv[2]) : 8);
  if (items < 10 || records == 0) {
    std::fprintf(stderr, "usage: ccoll_gpu_session_floor [items>=10] [records>=1]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("ccoll_gpu_session_floor: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf(
      "# %s: session queue without calls, %u records per item, depth %u, %llu items per "
      "figure\n",
      prop.name, records, kDepth, static_cast<unsigned long long>(items));

  run(items, records, prop);
  return 0;
}
