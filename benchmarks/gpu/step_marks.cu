// ccoll_gpu_step_marks: where a small allreduce's time goes on one GPU, block by block and step
// phase by step phase (runtime/step_marks.hpp), with every rank a block group of one kernel
// (transport::CudaVirtualRanks): calls launched one at a time, then the same calls enqueued one
// at a time into a persistent session (transport::cuda::Session).
//
// Each call is waited for alone; the kernel's blocks stamp their SM's clock at every phase of
// every step, and this program reads the stamps after the call (on a stream of its own, with
// copies: the session's kernel stays resident). A session's item runs the same blocks' code as a
// launch, so its kernel span against the host's time per call is the queue's share. Per
// algorithm, protocol, size and way of calling it prints the medians over the calls of:
//   - the call on the host (launch to the end of cudaStreamSynchronize), the kernel's span on the
//     GPU's clock (the first block's entry to the last block's exit) and how far apart the blocks
//     entered: what the launch costs beside the kernel's own work;
//   - per block: its setup (tables into shared memory, the context), then summed over its steps
//     the time in each phase: gap (from the previous step's posts to this step), wait (the
//     leader's waits for messages and free slots), start (operands and the barrier), compute (the
//     element pass; for LowLatency steps the lines' arrival too), fence and post, and the time
//     after its last step;
//   - per step, the same phases for the block that ends last (the one the call waits for).
// The marks cost a register read and a store each; the calls here are not the figures of
// ccoll_gpu_latency (no back-to-back launches), only their split.
//
//   build/benchmarks/ccoll_gpu_step_marks [ranks=8] [calls=50] [bytes=8,4096]
//                                         [algorithms=oneshot,recdoubling,dbtree,ring]
//                                         [protocols=ll,simple]
#define CCOLL_STEP_MARKS 1  // before any ccoll header: the kernels stamp their phases

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/one_shot.hpp"
#include "ccoll/algo/recursive_doubling.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/runtime/step_marks.hpp"
#include "ccoll/transport/cuda/session.cuh"
#include "ccoll/transport/cuda/virtual_ranks.cuh"

namespace {

using Clock = std::chrono::steady_clock;
using ccoll::runtime::kStepPhases;
using ccoll::runtime::StepMarkTable;
using ccoll::transport::CudaVirtualRanks;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "ccoll_gpu_step_marks: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool listed(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Every call's tables, and the host's time per call.
struct Samples {
  std::vector<ccoll::runtime::CallTimes> calls;
  std::vector<std::unique_ptr<StepMarkTable>> tables;
  std::vector<double> host_us;
};

// The calls launched one at a time, then the same calls through a session one at a time.
struct Row {
  Samples launched, session;
  long wrong = 0;
};

// Zeroes the device table with a copy on `io` (not a memset, which is a kernel: the session's
// kernel is resident meanwhile), and waits for it.
void zero_table(void* table, const StepMarkTable& zeros, cudaStream_t io) {
  check(cudaMemcpyAsync(table, &zeros, sizeof(StepMarkTable), cudaMemcpyHostToDevice, io),
        "cudaMemcpyAsync(zero marks)");
  check(cudaStreamSynchronize(io), "cudaStreamSynchronize(io)");
}

// Reads the device table after a call on `io` and adds it to `s`.
void take_table(void* table, Samples& s, cudaStream_t io) {
  auto host = std::make_unique<StepMarkTable>();
  check(cudaMemcpyAsync(host.get(), table, sizeof(StepMarkTable), cudaMemcpyDeviceToHost, io),
        "cudaMemcpyAsync(marks)");
  check(cudaStreamSynchronize(io), "cudaStreamSynchronize(io)");
  s.calls.push_back(ccoll::runtime::call_times(*host));
  s.tables.push_back(std::move(host));
}

template <class Algo>
Row measure(const ccoll::Config& config, const std::vector<float*>& device, std::size_t count,
            int calls, cudaStream_t stream, cudaStream_t io) {
  Row out;
  const auto p = static_cast<float>(device.size());
  std::vector<const void*> sends(device.begin(), device.end());
  std::vector<void*> recvs(device.begin(), device.end());
  ccoll::Allreduce<CudaVirtualRanks, Algo> ar(config);
  auto& ex = ar.executor();
  for (int i = 0; i < 20; ++i)  // module load, plan upload
    ex.template run_all<float, ccoll::ReduceOp::sum>(sends, recvs, count, stream);
  ex.synchronize(stream);
  void* table = nullptr;
  check(cudaGetSymbolAddress(&table, ccoll::runtime::step_mark_table), "cudaGetSymbolAddress");
  const auto zeros = std::make_unique<StepMarkTable>();
  for (int i = 0; i < calls; ++i) {
    zero_table(table, *zeros, io);
    const auto t0 = Clock::now();
    ex.template run_all<float, ccoll::ReduceOp::sum>(sends, recvs, count, stream);
    ex.synchronize(stream);
    out.launched.host_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    take_table(table, out.launched, io);
  }
  {
    // The session's kernel runs each item's plan through the same run_block: its marks are the
    // item's, and the host's time around them is the queue's.
    ccoll::transport::cuda::Session<float, ccoll::ReduceOp::sum> session(ex, stream);
    for (int i = 0; i < 20; ++i) session.wait(session.enqueue(sends, recvs, count));
    for (int i = 0; i < calls; ++i) {
      zero_table(table, *zeros, io);
      const auto t0 = Clock::now();
      session.wait(session.enqueue(sends, recvs, count));
      out.session.host_us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      take_table(table, out.session, io);
    }
    session.close();
  }
  // The result of one call on fresh inputs (rank r holds r + 1): every element P(P+1)/2.
  std::vector<float> v(count);
  for (std::size_t r = 0; r < device.size(); ++r) {
    std::fill(v.begin(), v.end(), static_cast<float>(r + 1));
    check(cudaMemcpy(device[r], v.data(), count * sizeof(float), cudaMemcpyHostToDevice),
          "cudaMemcpy");
  }
  ex.template run_all<float, ccoll::ReduceOp::sum>(sends, recvs, count, stream);
  ex.synchronize(stream);
  for (float* d : device) {
    check(cudaMemcpy(v.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (const float x : v) out.wrong += x != p * (p + 1) / 2 ? 1 : 0;
  }
  return out;
}

void report(const std::string& name, std::size_t bytes, const char* how, const Samples& s,
            long wrong) {
  std::vector<double> span, spread;
  std::size_t nblocks = 0;
  for (const auto& c : s.calls) {
    span.push_back(c.span_ns / 1e3);
    double latest = 0;
    for (const auto& b : c.blocks) latest = std::max(latest, b.entry_ns);
    spread.push_back(latest / 1e3);
    nblocks = std::max(nblocks, c.blocks.size());
  }
  std::printf(
      "\n## %s, %zu bytes, %s: call on the host %.2f us, kernel span %.2f us, blocks entered "
      "within %.2f us, %zu blocks, #wrong %ld\n",
      name.c_str(), bytes, how, median(s.host_us), median(span), median(spread), nblocks, wrong);
  std::printf("%6s %6s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "block", "steps", "entry_us",
              "setup", "gap", "wait", "start", "compute", "fence", "post", "after", "total");
  std::size_t last_block = 0;
  double last_exit = -1;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::vector<double> col[12];
    for (const auto& c : s.calls) {
      if (b >= c.blocks.size()) continue;
      const auto& t = c.blocks[b];
      col[0].push_back(t.entry_ns / 1e3);
      col[1].push_back(t.setup / 1e3);
      for (std::uint32_t p = 0; p < kStepPhases; ++p) col[2 + p].push_back(t.phase[p] / 1e3);
      col[8].push_back(t.after / 1e3);
      col[9].push_back(t.total / 1e3);
      col[10].push_back((t.entry_ns + t.total) / 1e3);
    }
    const unsigned steps = s.tables.empty() ? 0 : s.tables.back()->nsteps[b];
    std::printf("%6zu %6u %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", b, steps,
                median(col[0]), median(col[1]), median(col[2]), median(col[3]), median(col[4]),
                median(col[5]), median(col[6]), median(col[7]), median(col[8]), median(col[9]));
    if (median(col[10]) > last_exit) {
      last_exit = median(col[10]);
      last_block = b;
    }
  }
  if (s.tables.empty()) return;
  const std::uint32_t nsteps =
      s.tables.back()->marked_steps(static_cast<std::uint32_t>(last_block));
  std::printf("  block %zu (ends last), per step, us:\n", last_block);
  std::printf("  %6s %8s %8s %8s %8s %8s %8s\n", "step", "gap", "wait", "start", "compute", "fence",
              "post");
  for (std::uint32_t st = 0; st < nsteps; ++st) {
    std::vector<double> col[kStepPhases];
    for (const auto& t : s.tables) {
      const auto times = ccoll::runtime::step_times(*t, static_cast<std::uint32_t>(last_block), st);
      for (std::uint32_t p = 0; p < kStepPhases; ++p) col[p].push_back(times.phase[p] / 1e3);
    }
    std::printf("  %6u %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", st, median(col[0]), median(col[1]),
                median(col[2]), median(col[3]), median(col[4]), median(col[5]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run stopped by a time limit keeps its rows
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 8;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 50;
  const std::vector<std::string> sizes = split(argc > 3 ? argv[3] : "8,4096");
  const std::vector<std::string> algorithms =
      split(argc > 4 ? argv[4] : "oneshot,recdoubling,dbtree,ring");
  const std::vector<std::string> protocols = split(argc > 5 ? argv[5] : "ll,simple");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("ccoll_gpu_step_marks: no CUDA device\n");
    return 77;
  }
  if (ranks < 1 || calls < 1) {
    std::fprintf(stderr, "ccoll_gpu_step_marks: ranks and calls must be at least 1\n");
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf(
      "# %s: %d virtual ranks, 1 channel, float sum in place, %d calls per row, each "
      "launched alone and waited for; medians over the calls\n",
      prop.name, ranks, calls);
  std::size_t max_bytes = 0;
  for (const auto& s : sizes) max_bytes = std::max<std::size_t>(max_bytes, std::stoull(s));
  cudaStream_t stream = nullptr, io = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&io, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<float*> device;
  for (int r = 0; r < ranks; ++r) {
    float* p = nullptr;
    check(cudaMalloc(&p, std::max<std::size_t>(max_bytes, sizeof(float))), "cudaMalloc");
    device.push_back(p);
  }
  ccoll::Config config;
  config.nranks = ranks;
  config.nchannels = 1;
  using Measure = std::function<Row(std::size_t)>;
  const std::vector<std::pair<std::string, Measure>> all = {
      {"oneshot",
       [&](std::size_t n) {
         return measure<ccoll::algo::OneShot>(config, device, n, calls, stream, io);
       }},
      {"recdoubling",
       [&](std::size_t n) {
         return measure<ccoll::algo::RecursiveDoubling>(config, device, n, calls, stream, io);
       }},
      {"dbtree",
       [&](std::size_t n) {
         return measure<ccoll::algo::DoubleBinaryTree>(config, device, n, calls, stream, io);
       }},
      {"ring",
       [&](std::size_t n) {
         return measure<ccoll::algo::Ring>(config, device, n, calls, stream, io);
       }},
  };
  int status = 0;
  for (const auto& [name, run] : all) {
    if (!listed(algorithms, name)) continue;
    for (const std::string& protocol : protocols) {
      config.protocol = protocol;
      const std::string row = name + (protocol == "ll" ? "+ll" : "");
      for (const std::string& size : sizes) {
        const std::size_t bytes = std::stoull(size);
        try {  // a row that fails is reported and the next one runs
          const Row r = run(std::max<std::size_t>(1, bytes / sizeof(float)));
          report(row, bytes, "launched", r.launched, r.wrong);
          report(row, bytes, "session", r.session, r.wrong);
          if (r.wrong != 0) status = 1;
        } catch (const std::exception& e) {
          std::printf("\n## %s, %zu bytes: failed: %s\n", row.c_str(), bytes, e.what());
          status = 1;
        }
      }
    }
  }
  for (float* p : device) cudaFree(p);  // every executor is gone: no kernel waits for the host
  cudaStreamDestroy(io);
  cudaStreamDestroy(stream);
  return status;
}
