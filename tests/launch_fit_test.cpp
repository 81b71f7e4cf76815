// The choice of channels and threads per block that makes a plan's blocks co-resident on a GPU
// (transport/cuda/launch_fit.hpp), on the figures of real devices, without a GPU.
#include "ccoll/transport/cuda/launch_fit.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/core/config.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/transport/cuda/block_tables.hpp"

namespace launch_fit_test {
using namespace ccoll::transport::cuda;

namespace {

// Occupancy of a kernel that holds `at512` blocks of 512 threads per SM and scales with fewer
// threads as registers allow (2048 threads and 32 blocks per SM at most: sm_80 / sm_90).
std::vector<Occupancy> occupancy(int at512) {
  std::vector<Occupancy> v;
  for (unsigned t : kThreadChoices)
    v.push_back({t, std::min({at512 * 512 / static_cast<int>(t), 2048 / static_cast<int>(t), 32})});
  return v;
}

}  // namespace

TEST_CASE("the dgx1v forest (248 blocks) fits an H200 by taking fewer threads, or 2 per SM") {
  // 31 trees x 8 ranks, one block per (rank, tree): the plan fixes its channels.
  const auto one = occupancy(1);  // 72 registers: one 512-thread block per SM
  FitRequest r;
  r.blocks_per_channel = 8;
  r.channels = 31;
  r.sms = 132;
  r.occupancy = one;
  LaunchFit f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.threads == 256);
  CHECK(f.blocks == 248);
  CHECK(f.capacity() == 132u * 2);
  CHECK(f.blocks <= f.capacity());
  // Kernels within their launch bounds hold two 512-thread blocks: the default threads stay.
  const auto two = occupancy(2);
  r.occupancy = two;
  f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.threads == 512);
  CHECK(f.capacity() == 264);
  // Asked for 512 threads on the one-block kernel: refused, naming what was needed and held.
  r.occupancy = one;
  r.threads = 512;
  f = fit_launch(r);
  CHECK_FALSE(f.ok);
  CHECK(f.blocks == 248);
  CHECK(f.capacity() == 132);
  CHECK(f.threads == 512);
}

TEST_CASE("default channels fill the SMs with as many blocks as they hold, capped") {
  const auto two = occupancy(2);
  FitRequest r;
  r.sms = 132;
  r.occupancy = two;
  r.blocks_per_channel = 8;  // P = 8 ring on an H200: 33 channels, two blocks on every SM
  LaunchFit f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.channels == 33);
  CHECK(f.blocks == 264);
  CHECK(f.threads == 512);
  CHECK(f.blocks == f.capacity());
  CHECK(f.describe() ==
        "33 channels x 8 blocks = 264 blocks of 512 threads (132 SMs x 2 resident)");
  // More channels than a fixed default of 2 wherever the GPU has the SMs for them, and every SM
  // busy: one more channel would not fit (or the cap holds).
  for (std::uint32_t p : {2u, 3u, 4u, 5u, 7u, 8u, 16u}) {
    r.blocks_per_channel = p;
    f = fit_launch(r);
    CAPTURE(p);
    CHECK(f.ok);
    CHECK(f.channels >= 16);
    CHECK(f.blocks <= f.capacity());
    CHECK(f.blocks >= 128);  // at least one block per SM bar a few
    CHECK((f.blocks + p > f.capacity() || f.channels == kMaxDefaultChannels));
  }
  r.blocks_per_channel = 2;  // 132 channels would fit; the cap is 64
  CHECK(fit_launch(r).channels == kMaxDefaultChannels);
  r.max_channels = 8;  // a cap from the FIFO memory
  CHECK(fit_launch(r).channels == 8);
  r.max_channels = kMaxDefaultChannels;
  // P = 16 on an H100 SXM or H200 (132 SMs) and an H100 PCIe (114 SMs).
  r.blocks_per_channel = 16;
  CHECK(fit_launch(r).channels == 16);
  r.sms = 114;
  CHECK(fit_launch(r).channels == 14);
  // A kernel of 72 registers holds one 512-thread block per SM: half the channels.
  const auto one = occupancy(1);
  r.occupancy = one;
  r.sms = 132;
  r.blocks_per_channel = 8;
  f = fit_launch(r);
  CHECK(f.channels == 16);
  CHECK(f.threads == 512);
}

TEST_CASE("more ranks than SMs: one channel at fewer threads, or refused") {
  const auto one = occupancy(1);
  FitRequest r;
  r.sms = 20;
  r.occupancy = one;
  r.blocks_per_channel = 64;  // 20 x 1 at 512, 40 at 256, 80 at 128
  LaunchFit f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.channels == 1);
  CHECK(f.threads == 128);
  CHECK(f.blocks == 64);
  r.blocks_per_channel = 128;  // 20 x 8 at 64 threads = 160 >= 128
  f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.threads == 64);
  r.sms = 4;  // 4 x 8 at 64 threads = 32 < 128: nothing fits
  f = fit_launch(r);
  CHECK_FALSE(f.ok);
  CHECK(f.threads == 64);
  CHECK(f.channels == 1);
  CHECK(f.blocks == 128);
  CHECK(f.capacity() == 32);
  // What both executors say when they refuse it.
  CHECK(f.refusal("the plan needs", "plan ranks x channels", 1, "lower Config::nchannels") ==
        "the plan needs 128 thread blocks of 64 threads resident at once (plan ranks x "
        "channels); device 1 holds 32 (4 SMs x 8): lower Config::nchannels");
}

TEST_CASE("requests are kept when they fit and refused when they do not") {
  const auto two = occupancy(2);
  FitRequest r;
  r.sms = 132;
  r.occupancy = two;
  r.blocks_per_channel = 8;
  r.channels = 33;  // 264 blocks: exactly two per SM at 512 threads
  LaunchFit f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.channels == 33);
  CHECK(f.threads == 512);
  r.channels = 34;  // 272 > 264 at 512: the default threads drop to 256 (4 per SM)
  f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.threads == 256);
  r.threads = 512;  // but asked for 512: refused
  CHECK_FALSE(fit_launch(r).ok);
  r.channels = 0;  // threads asked for, channels default
  r.threads = 1024;
  const std::vector<Occupancy> at1024{{1024, 1}};
  r.occupancy = at1024;
  f = fit_launch(r);
  CHECK(f.ok);
  CHECK(f.threads == 1024);
  CHECK(f.channels == 16);
  r.threads = 96;  // a thread count missing from the table holds nothing: refused
  CHECK_FALSE(fit_launch(r).ok);
}

TEST_CASE("launch bounds give the occupancy the defaults are chosen against") {
  CHECK(bounded_blocks_per_sm(512, 2048, 32) == 2);
  CHECK(bounded_blocks_per_sm(1024, 2048, 32) == 1);
  CHECK(bounded_blocks_per_sm(256, 2048, 32) == 4);
  CHECK(bounded_blocks_per_sm(64, 2048, 32) == 16);
  CHECK(bounded_blocks_per_sm(32, 2048, 32) == 32);
  CHECK(bounded_blocks_per_sm(32, 2048, 16) == 16);  // a GPU with 16 blocks per SM
  CHECK(bounded_blocks_per_sm(512, 1536, 16) == 2);  // sm_86: 1536 threads per SM
  CHECK(bounded_blocks_per_sm(1024, 1536, 16) == 1);
  CHECK(bounded_blocks_per_sm(2048, 2048, 32) == 0);  // past the bound
  // Shared memory: the kernels' table cache bounds small blocks (H100: 228 KiB per SM, A100: 164).
  CHECK(bounded_blocks_per_sm(64, 2048, 32, 228 * 1024) == 14);
  CHECK(bounded_blocks_per_sm(64, 2048, 32, 164 * 1024) == 10);
  CHECK(bounded_blocks_per_sm(512, 2048, 32, 164 * 1024) == 2);
  CHECK(bounded_blocks_per_sm(64, 2048, 32, 0) == 16);  // not known: not bounded
  CHECK(bounded_occupancy(64, 2048, 32, 164 * 1024).at(0).blocks_per_sm == 10);
  const auto v = bounded_occupancy(0, 2048, 32);
  REQUIRE(v.size() == std::size(kThreadChoices));
  CHECK(v[0].threads == 512);
  CHECK(v[0].blocks_per_sm == 2);
  const auto one = bounded_occupancy(384, 2048, 32);
  REQUIRE(one.size() == 1);
  CHECK(one[0].blocks_per_sm == 2);
  // Every P up to 16 (and a relay-heavy 128) fits an H100 or H200 by default.
  for (int sms : {108, 114, 132})
    for (std::uint32_t p = 1; p <= 128; ++p) {
      FitRequest r;
      r.sms = sms;
      r.blocks_per_channel = p;
      const auto occ = bounded_occupancy(0, 2048, 32);
      r.occupancy = occ;
      const LaunchFit f = fit_launch(r);
      CAPTURE(sms);
      CAPTURE(p);
      CHECK(f.ok);
      CHECK(f.blocks <= f.capacity());
      CHECK(f.channels >= 1);
      if (p <= 16) CHECK(f.threads == 512);
    }
}

TEST_CASE("default channels within a sixteenth of the device's memory for their FIFO slots") {
  // P = 8 on an H200 (141 GiB): 56 ordered pairs x 4 slots of slot_stride(1 MiB) = 1048704 bytes
  // take 234909696 bytes a channel, so a sixteenth of the memory holds 40 channels; with the
  // default 256 KiB slots (262272 bytes each) 161, capped at 64.
  const std::uint64_t h200 = 141ull << 30;
  CHECK(virtual_ranks_channel_fifo_bytes(8, 4, 1u << 20) == 234909696u);
  CHECK(channels_within_memory(h200, virtual_ranks_channel_fifo_bytes(8, 4, 1u << 20), 64) == 40);
  CHECK(virtual_ranks_channel_fifo_bytes(8, 4, kVirtualRanksSlotBytes) == 58748928u);
  CHECK(channels_within_memory(h200, virtual_ranks_channel_fifo_bytes(8, 4, kVirtualRanksSlotBytes),
                               64) == 64);
  // One rank has no connections; a cap of 0 and a memory too small still give one channel.
  CHECK(virtual_ranks_channel_fifo_bytes(1, 4, 1u << 20) == 0);
  CHECK(channels_within_memory(h200, 0, 64) == 64);
  CHECK(channels_within_memory(h200, 1, 0) == 1);
  CHECK(channels_within_memory(1u << 20, 1u << 30, 64) == 1);
}

TEST_CASE("every registered algorithm's plan at P <= 16 fits an H200 with the default settings") {
  // cuda-virtual's defaults as CudaVirtualRanks::resolve and the launch choose them, on an H200's
  // figures (132 SMs, 2048 threads, 32 blocks and 228 KiB of shared memory per SM, 141 GB) and
  // the kernels' launch bounds (scripts/kernel_resources holds them to 64 registers): the
  // default channels for P blocks each, the plan built with them (a forest fixes its own), and
  // its blocks fitted at the default threads. Topology algorithms run on every preset of at
  // most 16 GPUs, the others on 2..16 abstract ranks.
  const int sms = 132;
  const std::uint64_t memory = 141ull << 30;
  const std::vector<Occupancy> occupancy = bounded_occupancy(0, 2048, 32, 228u << 10);
  const ccoll::Config defaults;
  const auto check = [&](const ccoll::algo::Registered& reg, int p, const std::string& where) {
    CAPTURE(where);
    const auto up = static_cast<std::uint64_t>(p);
    FitRequest channels_request;
    channels_request.blocks_per_channel = static_cast<std::uint32_t>(p);
    channels_request.sms = sms;
    channels_request.occupancy = occupancy;
    // The functions CudaVirtualRanks::resolve and cuda::default_channels call.
    channels_request.max_channels = channels_within_memory(
        memory, virtual_ranks_channel_fifo_bytes(up, defaults.nslots, kVirtualRanksSlotBytes),
        kMaxDefaultChannels);
    const LaunchFit by_default = fit_launch(channels_request);
    REQUIRE(by_default.ok);
    ccoll::plan::PlanRequest r;
    r.nranks = p;
    r.count = 64u << 20;
    r.nchannels = by_default.channels;
    r.slot_bytes = kVirtualRanksSlotBytes;
    r.nslots = defaults.nslots;
    const ccoll::plan::Plan plan = reg.build(r);
    FitRequest launch;
    launch.blocks_per_channel = static_cast<std::uint32_t>(plan.nranks);
    launch.channels = static_cast<std::uint32_t>(plan.channels.size());
    launch.sms = sms;
    launch.occupancy = occupancy;
    const LaunchFit f = fit_launch(launch);
    CAPTURE(plan.channels.size());
    CAPTURE(plan.nranks);
    CHECK(f.ok);
    CHECK(f.blocks <= f.capacity());
  };
  for (const ccoll::algo::Algorithm& a : ccoll::algo::algorithms()) {
    if (a.needs_topology) {
      for (const std::string& name : ccoll::physical::preset_names()) {
        const ccoll::physical::PhysicalTopology t = ccoll::physical::preset(name);
        ccoll::algo::AlgorithmRequest req;
        req.topology = &t;
        const ccoll::algo::Registered reg = ccoll::algo::make_algorithm(a, req);
        if (reg.nranks() > 16) continue;
        check(reg, reg.nranks(), a.name + " on " + name);
      }
      continue;
    }
    for (int p = 2; p <= 16; ++p) {
      ccoll::algo::AlgorithmRequest req;
      req.nranks = p;
      check(ccoll::algo::make_algorithm(a, req), p, a.name + " P=" + std::to_string(p));
    }
  }
}
}  // namespace launch_fit_test
