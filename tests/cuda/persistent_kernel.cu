// gpu_persistent_kernel: runs ccoll plans on one GPU with virtual ranks, through the same step
// interpreter the host executors use (runtime/interpreter.hpp) instantiated with a CUDA block
// Group, and checks the results against a host reference. One block per (rank, channel); buffers,
// FIFO slots and counters in device memory; counters through cuda::atomic_ref ([C-Cube]'s
// device-side post / wait without host intervention).
//
// Usage: gpu_persistent_kernel [nranks=4] [count=1000003] [nchannels=2] [calls=3]
// Exit status: 0 all checks passed (or no CUDA device: prints "SKIP"), 1 a check failed.
// Compiled for sm_80 and sm_90 by the CUDA build; never run in CI (no GPU there).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/cuda/persistent_kernel.cuh"

namespace {

using ccoll::DataType;
using ccoll::ReduceOp;
namespace plan = ccoll::plan;
namespace transport = ccoll::transport;
namespace runtime = ccoll::runtime;

#define CHECK_CUDA(call)                                                 \
  do {                                                                   \
    const cudaError_t err_ = (call);                                     \
    if (err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(err_));                            \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

template <class T>
T make_value(int rank, std::uint64_t i) {
  const int v = static_cast<int>((static_cast<std::uint64_t>(rank) * 7 + i * 3) % 11) + 1;
  if constexpr (std::is_same_v<T, ccoll::Half> || std::is_same_v<T, ccoll::BFloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Runs `calls` allreduces of plan p on the GPU; returns the number of wrong elements.
template <class T, ReduceOp Op>
long run_plan(const plan::Plan& p, int calls, unsigned threads) {
  const int nranks = p.nranks;
  const std::uint64_t count = p.count;
  const auto nch = static_cast<std::uint32_t>(p.channels.size());
  const std::size_t nconn = p.connections.size();
  const std::uint64_t slot_bytes = (p.slot_elems * sizeof(T) + 127) / 128 * 128;

  // Device memory: inputs, outputs, slots, counters, the plan's steps and ports.
  T *d_in = nullptr, *d_out = nullptr;
  std::byte* d_slots = nullptr;
  ccoll::sync::ConnectionCounters* d_counters = nullptr;
  CHECK_CUDA(cudaMalloc(&d_in, sizeof(T) * count * nranks));
  CHECK_CUDA(cudaMalloc(&d_out, sizeof(T) * count * nranks));
  CHECK_CUDA(cudaMalloc(&d_slots, slot_bytes * p.nslots * nconn + 128));
  CHECK_CUDA(cudaMalloc(&d_counters, sizeof(ccoll::sync::ConnectionCounters) * nconn + 1));
  CHECK_CUDA(cudaMemset(d_counters, 0, sizeof(ccoll::sync::ConnectionCounters) * nconn + 1));
  std::vector<plan::Step> steps;
  std::vector<std::size_t> first_step;  // per (channel, rank)
  for (std::uint32_t c = 0; c < nch; ++c)
    for (int r = 0; r < nranks; ++r) {
      first_step.push_back(steps.size());
      const auto& s = p.channels[c].programs[static_cast<std::size_t>(r)].steps;
      steps.insert(steps.end(), s.begin(), s.end());
    }
  plan::Step* d_steps = nullptr;
  plan::Port* d_ports = nullptr;
  CHECK_CUDA(cudaMalloc(&d_steps, sizeof(plan::Step) * (steps.size() + 1)));
  CHECK_CUDA(cudaMalloc(&d_ports, sizeof(plan::Port) * (p.ports.size() + 1)));
  CHECK_CUDA(
      cudaMemcpy(d_steps, steps.data(), sizeof(plan::Step) * steps.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_ports, p.ports.data(), sizeof(plan::Port) * p.ports.size(),
                        cudaMemcpyHostToDevice));
  std::vector<ccoll::sync::ConnectionRef> refs(nconn);
  for (std::size_t i = 0; i < nconn; ++i) {
    refs[i].slots = d_slots + i * p.nslots * slot_bytes;
    refs[i].tail = &d_counters[i].tail;
    refs[i].head = &d_counters[i].head;
    refs[i].slot_bytes = slot_bytes;
    refs[i].nslots = p.nslots;
    refs[i].from = p.connections[i].from;
    refs[i].to = p.connections[i].to;
  }
  ccoll::sync::ConnectionRef* d_refs = nullptr;
  std::uint64_t* d_base = nullptr;
  std::uint32_t* d_abort = nullptr;
  runtime::StepFailure* d_failures = nullptr;
  runtime::ProgramContext<T>* d_ctx = nullptr;
  const unsigned nblocks = nch * static_cast<unsigned>(nranks);
  CHECK_CUDA(cudaMalloc(&d_refs, sizeof(ccoll::sync::ConnectionRef) * nconn));
  CHECK_CUDA(cudaMemcpy(d_refs, refs.data(), sizeof(ccoll::sync::ConnectionRef) * nconn,
                        cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMalloc(&d_base, sizeof(std::uint64_t) * (nconn + 1)));
  CHECK_CUDA(cudaMalloc(&d_abort, sizeof(std::uint32_t)));
  CHECK_CUDA(cudaMemset(d_abort, 0, sizeof(std::uint32_t)));
  CHECK_CUDA(cudaMalloc(&d_failures, sizeof(runtime::StepFailure) * nblocks));
  CHECK_CUDA(cudaMalloc(&d_ctx, sizeof(runtime::ProgramContext<T>) * nblocks));

  std::vector<runtime::ProgramContext<T>> ctx(nblocks);
  for (std::uint32_t c = 0; c < nch; ++c)
    for (int r = 0; r < nranks; ++r) {
      const std::size_t b = c * static_cast<std::size_t>(nranks) + static_cast<std::size_t>(r);
      auto& x = ctx[b];
      x.steps = d_steps + first_step[b];
      x.nsteps = static_cast<std::uint32_t>(
          p.channels[c].programs[static_cast<std::size_t>(r)].steps.size());
      x.ports = d_ports;
      x.connections = d_refs;
      x.base = d_base;
      x.input = d_in + count * static_cast<std::uint64_t>(r);
      x.output = d_out + count * static_cast<std::uint64_t>(r);
      x.nactive = p.nactive();
      x.rank = r;
      x.channel = c;
      x.abort = d_abort;
    }
  CHECK_CUDA(cudaMemcpy(d_ctx, ctx.data(), sizeof(runtime::ProgramContext<T>) * nblocks,
                        cudaMemcpyHostToDevice));

  std::vector<T> in(count * static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    for (std::uint64_t i = 0; i < count; ++i)
      in[count * static_cast<std::uint64_t>(r) + i] = make_value<T>(r, i);
  CHECK_CUDA(cudaMemcpy(d_in, in.data(), sizeof(T) * in.size(), cudaMemcpyHostToDevice));
  std::vector<T> ref(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    T acc = make_value<T>(0, i);
    for (int r = 1; r < nranks; ++r) acc = ccoll::combine<Op>(acc, make_value<T>(r, i));
    ref[i] = ccoll::finalize<Op>(acc, p.nactive());
  }

  long wrong = 0;
  std::vector<std::uint64_t> base(nconn, 0);
  std::vector<T> out(count * static_cast<std::size_t>(nranks));
  for (int call = 0; call < calls; ++call) {
    // Counters never reset: this call's messages follow the previous calls'.
    CHECK_CUDA(
        cudaMemcpy(d_base, base.data(), sizeof(std::uint64_t) * nconn, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(d_out, 0, sizeof(T) * count * nranks));
    const cudaError_t launched = transport::cuda::launch_persistent_plan<T, Op>(
        d_ctx, nblocks, threads, 10'000'000'000ull, d_failures, d_abort);
    if (launched == cudaErrorCooperativeLaunchTooLarge) {
      std::printf("SKIP: %u blocks cannot be resident at once on this GPU\n", nblocks);
      return 0;
    }
    CHECK_CUDA(launched);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<runtime::StepFailure> failures(nblocks);
    CHECK_CUDA(cudaMemcpy(failures.data(), d_failures, sizeof(runtime::StepFailure) * nblocks,
                          cudaMemcpyDeviceToHost));
    for (unsigned b = 0; b < nblocks; ++b)
      if (failures[b].result != ccoll::sync::WaitResult::Ok) {
        std::printf("block %u (rank %u, channel %u) stopped at step %u waiting for %s rank %d\n", b,
                    b % nranks, b / nranks, failures[b].step,
                    failures[b].waiting_for_slot ? "a free slot at" : "a message from",
                    failures[b].peer);
        ++wrong;
      }
    CHECK_CUDA(cudaMemcpy(out.data(), d_out, sizeof(T) * out.size(), cudaMemcpyDeviceToHost));
    for (int r = 0; r < nranks; ++r)
      for (std::uint64_t i = 0; i < count; ++i)
        if (std::memcmp(&out[count * static_cast<std::uint64_t>(r) + i], &ref[i], sizeof(T)) != 0)
          ++wrong;
    for (std::size_t i = 0; i < nconn; ++i) base[i] += p.connections[i].messages_per_call;
  }
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_slots);
  cudaFree(d_counters);
  cudaFree(d_steps);
  cudaFree(d_ports);
  cudaFree(d_refs);
  cudaFree(d_base);
  cudaFree(d_abort);
  cudaFree(d_failures);
  cudaFree(d_ctx);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::uint64_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000003;
  const auto nchannels = static_cast<std::uint32_t>(argc > 3 ? std::atoi(argv[3]) : 2);
  const int calls = argc > 4 ? std::atoi(argv[4]) : 3;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 0;
  }
  long failures = 0;
  auto report = [&](const char* what, long wrong) {
    std::printf("%-40s %s (%ld wrong)\n", what, wrong == 0 ? "PASS" : "FAIL", wrong);
    failures += wrong != 0;
  };
  plan::PlanRequest req;
  req.nranks = nranks;
  req.count = count;
  req.nchannels = nchannels;
  req.slot_bytes = 256 << 10;
  req.nslots = 4;
  {
    req.elem_size = sizeof(float);
    const plan::Plan ring = plan::build_ring(req);
    plan::verify_or_throw(ring);
    report("ring f32 sum", run_plan<float, ReduceOp::sum>(ring, calls, 256));
    report("ring f32 avg", run_plan<float, ReduceOp::avg>(ring, calls, 512));
    const plan::Plan dbt = plan::build_double_binary_tree(req);
    plan::verify_or_throw(dbt);
    report("double binary tree f32 sum", run_plan<float, ReduceOp::sum>(dbt, calls, 256));
  }
  {
    req.elem_size = sizeof(std::int32_t);
    const plan::Plan ring = plan::build_ring(req);
    report("ring i32 max", run_plan<std::int32_t, ReduceOp::max>(ring, calls, 256));
  }
  {
    req.elem_size = sizeof(ccoll::Half);
    const plan::Plan ring = plan::build_ring(req);
    report("ring f16 sum", run_plan<ccoll::Half, ReduceOp::sum>(ring, calls, 256));
  }
  return failures == 0 ? 0 : 1;
}
