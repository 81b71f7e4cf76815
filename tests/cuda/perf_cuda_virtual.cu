// gpu_perf_cuda_virtual: ccoll_perf's GPU backend (benchmarks/ccoll_perf/cuda_*.cu) as
// `ccoll_perf --transport cuda-virtual [--peer nccl]` runs it (label gpu; exit 77, "skipped",
// without a CUDA device).
//
// Through the registry the benchmark uses, a few algorithms run at small sizes on every rank's
// device buffers, each output is checked against perf_data.hpp's reference, and there must be no
// wrong element; likewise the NCCL peer where it is built. The calibration must give positive,
// finite figures.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "device_backend.hpp"
#include "gpu_main.hpp"
#include "host_side.hpp"

using namespace ccoll_perf;

namespace {

ccoll::Config make_config(int nranks) {
  ccoll::Config c;
  c.nranks = nranks;
  c.nchannels = 2;
  c.slot_bytes = 64 << 10;
  c.nslots = 4;
  c.timeout = std::chrono::milliseconds(20000);
  return c;
}

std::unique_ptr<DeviceTransport> make_transport(int nranks, std::uint64_t max_count,
                                                ccoll::DataType dtype, ccoll::ReduceOp op) {
  const DeviceTransportEntry* entry = find_device_transport("cuda-virtual");
  REQUIRE(entry != nullptr);
  DeviceRunSpec spec;
  spec.nranks = nranks;
  spec.max_count = max_count;
  spec.dtype = dtype;
  spec.op = op;
  spec.check = true;
  return entry->make(spec);
}

constexpr std::uint64_t kCounts[] = {1, 33, 4096, 65537};

}  // namespace

TEST_CASE("cuda-virtual: ring, dbtree and tree on 2 and 4 ranks, every output right") {
  for (const auto dtype : {ccoll::DataType::f32, ccoll::DataType::bf16}) {
    for (const int p : {2, 4}) {
      auto transport = make_transport(p, 65537, dtype, ccoll::ReduceOp::sum);
      for (const char* name : {"ring", "dbtree", "tree"}) {
        CAPTURE(std::string(ccoll::to_string(dtype)));
        CAPTURE(p);
        CAPTURE(std::string(name));
        auto coll = transport->ccoll(make_config(p), gpu_test::registered(name, p),
                                     std::string("perf-test/") + name, {});
        CHECK(coll->nranks() == p);
        for (const std::uint64_t count : kCounts) {
          CAPTURE(count);
          const DeviceTimed t = coll->time_block(count, 1, 2, true);
          CHECK(t.wrong == 0);
          CHECK(t.time_s > 0);
          CHECK(std::isfinite(t.time_s));
          const auto plan = coll->plan(count);
          REQUIRE(plan.has_value());
          CHECK(plan->nranks == p);
          CHECK(plan->count == count);
        }
        // Unchecked blocks say so rather than report zero wrong elements.
        CHECK(coll->time_block(33, 0, 1, false).wrong == -1);
      }
    }
  }
}

TEST_CASE("cuda-virtual: avg, and a plan with relays (dbtree on ring:4) checks active ranks only") {
  auto transport = make_transport(4, 4096, ccoll::DataType::f32, ccoll::ReduceOp::avg);
  auto coll =
      transport->ccoll(make_config(4), gpu_test::registered("ring", 4), "perf-test/avg", {});
  CHECK(coll->time_block(4096, 1, 2, true).wrong == 0);

  int nranks = 0;
  const gpu_test::Source source = gpu_test::registered_on("dbtree", "ring:4", &nranks);
  ccoll::plan::PlanRequest probe;
  probe.nranks = nranks;
  probe.count = 4096;
  const std::vector<bool> active = source(probe).active;
  auto relayed = make_transport(nranks, 4096, ccoll::DataType::f32, ccoll::ReduceOp::sum);
  auto dbtree = relayed->ccoll(make_config(nranks), source, "perf-test/relays", active);
  int nactive = 0;
  for (const bool a : active) nactive += a ? 1 : 0;
  CHECK(dbtree->nranks() == nactive);
  CHECK(dbtree->time_block(4096, 1, 2, true).wrong == 0);
}

TEST_CASE("the GPU calibration gives positive, finite figures") {
  auto transport = make_transport(2, 1024, ccoll::DataType::f32, ccoll::ReduceOp::sum);
  const GpuCalibration c = transport->calibrate();
  CHECK_FALSE(c.device.empty());
  CHECK(c.array_bytes > 0);
  for (const double v : {c.memcpy_GBps, c.copy_kernel_GBps, c.add_kernel_GBps, c.launch_us,
                         c.cooperative_launch_us}) {
    CHECK(v > 0);
    CHECK(std::isfinite(v));
  }
}

TEST_CASE("--peer nccl on the same buffers, where built with NCCL") {
  auto transport = make_transport(4, 65537, ccoll::DataType::f32, ccoll::ReduceOp::sum);
  CHECK_THROWS_AS(transport->peer("no-such-peer"), std::invalid_argument);
#if CCOLL_HAVE_NCCL
  auto peer = transport->peer("nccl");
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  CHECK(peer->nranks() == devices);
  CHECK(peer->description().find("NCCL") != std::string::npos);
  for (const std::uint64_t count : kCounts) {
    CAPTURE(count);
    const DeviceTimed t = peer->time_block(count, 1, 2, true);
    CHECK(t.wrong == 0);
    CHECK(t.time_s > 0);
  }
#endif
}

int main(int argc, char** argv) {
  return gpu_test::run_tests(argc, argv, [] {
    int devices = 0;
    return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  });
}
