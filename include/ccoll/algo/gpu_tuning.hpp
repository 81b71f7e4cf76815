// ccoll/algo/gpu_tuning.hpp: the tuning table of "auto" (algo/by_size.hpp) for ranks on GPUs,
// measured on an H200.
//
// The default table (by_size.hpp) was measured on host cores, where a one-hop LowLatency plan
// costs a few hundred nanoseconds a hop and a staged direct plan wins middle sizes. On a GPU a
// call pays a kernel launch, a hop costs about a microsecond (one FIFO hop on one GPU: 0.6-0.8
// us), and a middle-size allreduce is bound by HBM, so other plans win: the double binary tree in
// LowLatency up to 128 KiB, recursive doubling to the megabytes, the ring beyond. Its allreduce
// rules at P = 2, 3, 4, 8 and 16 are what `ccoll_perf --transport cuda-virtual -t P --tune FILE`
// wrote on one H200 (every candidate in both protocols, 8 B - 64 MiB, factor 4;
// docs/results/gpu-2026-11-30-h200.md); other rank counts take the shape of those rules. The
// other collectives keep the default table's rules: they have not been tuned on a GPU.
//   ccoll::Allreduce<ccoll::transport::CudaVirtualRanks, ccoll::algo::BySize> ar(
//       config, ccoll::algo::BySize(ccoll::algo::gpu_tuning_table()));
// `ccoll_perf -a auto` on a GPU transport uses it unless --tuning names another.
#pragma once

#include <cstdint>
#include <limits>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/protocol/protocol.hpp"

namespace ccoll::algo {

inline TuningTable gpu_tuning_table() {
  using C = plan::Collective;
  constexpr protocol::Id kSimple = protocol::Id::simple, kLL = protocol::Id::low_latency;
  constexpr std::uint64_t kKiB = 1024, kMiB = 1024 * 1024;
  constexpr std::uint64_t kAny = std::numeric_limits<std::uint64_t>::max();
  struct Measured {
    int nranks;
    const char* algorithm;
    protocol::Id protocol;
    std::uint64_t max_bytes;
  };
  // A LowLatency rule that reaches large sizes (ring+ll) runs as Simple wherever a message's lines
  // would exceed the GPU's LL slot (kMaxLowLatencySlotBytes, transport/cuda/block_tables.hpp):
  // there its times were the ring's, within the tuning's 5%.
  static constexpr Measured kMeasured[] = {
      {2, "dbtree", kLL, 128 * kKiB},
      {2, "recdoubling", kSimple, 8 * kMiB},
      {2, "ring", kSimple, kAny},
      {3, "dbtree", kLL, 128 * kKiB},
      {3, "oneshot", kSimple, 2 * kMiB},
      {3, "ring", kLL, kAny},
      {4, "dbtree", kLL, 128 * kKiB},
      {4, "recdoubling", kSimple, 2 * kMiB},
      {4, "ring", kLL, kAny},
      {8, "dbtree", kLL, 128 * kKiB},
      {8, "recdoubling", kSimple, 512 * kKiB},
      {8, "ring", kSimple, kAny},
      {16, "dbtree", kLL, 32 * kKiB},
      {16, "recdoubling", kSimple, 512 * kKiB},
      {16, "dbtree", kSimple, 2 * kMiB},
      {16, "ring", kLL, kAny},
  };
  TuningTable t;
  for (const Measured& m : kMeasured)
    t.rules.push_back(
        SizeRule{m.algorithm, m.max_bytes, m.nranks, m.nranks, m.protocol, C::allreduce});
  // Every other rank count: the measured rules' shape.
  t.rules.push_back(
      SizeRule{"dbtree", 64 * kKiB, 1, std::numeric_limits<int>::max(), kLL, C::allreduce});
  t.rules.push_back(SizeRule{"recdoubling", 512 * kKiB, 1, std::numeric_limits<int>::max(), kSimple,
                             C::allreduce});
  t.rules.push_back(
      SizeRule{"ring", kAny, 1, std::numeric_limits<int>::max(), kSimple, C::allreduce});
  // The other collectives: the default table's rules.
  for (const SizeRule& r : default_tuning_table().rules)
    if (r.collective != C::allreduce) t.rules.push_back(r);
  return t;
}

}  // namespace ccoll::algo
