// ccoll/gradient/fusion_buffer.hpp: the tensor-fusion baselines users know.
//
// Horovod: a background loop wakes every cycle time (HOROVOD_CYCLE_TIME, 5 ms by default in the
// Horovod of the [ASC-WFBP] Sec. VI-A testbed, 1 ms in later releases) and fuses every gradient
// that became ready since the last tick into buffers of at most the fusion threshold
// (HOROVOD_FUSION_THRESHOLD, 64 MiB), larger tensors going alone; the fused allreduces run one
// after the other. We put the first tick one cycle after the backward pass starts.
//
// PyTorch DDP: gradients are assigned to buckets in reverse parameter order (layer L first); a
// bucket closes once it holds at least its cap (25 MiB; the first bucket 1 MiB,
// dist._DEFAULT_FIRST_BUCKET_BYTES); a bucket's allreduce is launched when all its gradients are
// ready, and buckets are all-reduced in order on one stream.
#pragma once

#include <cstdint>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

struct HorovodFusion {
  std::uint64_t threshold_bytes = 64ull << 20;
  double cycle_time_s = 5e-3;
};

inline Schedule plan_horovod_fusion(const ModelProfile& p, const HorovodFusion& opt = {}) {
  if (!(opt.cycle_time_s > 0))
    throw_invalid_argument(-1, "cycle_time_s", "> 0", std::to_string(opt.cycle_time_s));
  const std::vector<double> ready = p.ready_times();
  const double t0 = p.forward_s;
  Schedule s;
  s.policy = "horovod";
  s.max_concurrent = 1;
  int i = p.num_layers() - 1;
  double tick = t0 + opt.cycle_time_s;
  while (i >= 0) {
    const double r = ready[static_cast<std::size_t>(i)];
    if (r > tick) {  // sleep until the first tick at or after r
      const double k = std::ceil((r - t0) / opt.cycle_time_s - 1e-12);
      const double next = std::max(tick + opt.cycle_time_s, t0 + k * opt.cycle_time_s);
      // A cycle below the clock's resolution at this time leaves both forms where they were:
      // the ticks are then as fine as the clock, and the first one at or after r is r.
      tick = next > tick ? next : r;
      continue;
    }
    Message m;
    m.hi = i;
    m.not_before_s = tick;
    std::uint64_t fill = 0;
    while (i >= 0 && ready[static_cast<std::size_t>(i)] <= tick) {
      const std::uint64_t b = p.layers[static_cast<std::size_t>(i)].bytes;
      if (fill > 0 && fill + b > opt.threshold_bytes) break;
      fill += b;
      --i;
    }
    m.lo = i + 1;
    s.messages.push_back(m);
    if (i >= 0 && ready[static_cast<std::size_t>(i)] > tick) tick += opt.cycle_time_s;
  }
  return s;
}

struct DdpBuckets {
  std::uint64_t bucket_cap_bytes = 25ull << 20;
  std::uint64_t first_bucket_cap_bytes = 1ull << 20;
};

inline Schedule plan_ddp_buckets(const ModelProfile& p, const DdpBuckets& opt = {}) {
  Schedule s;
  s.policy = "bucket";
  s.max_concurrent = 1;
  std::uint64_t fill = 0;
  Message m;
  m.hi = p.num_layers() - 1;
  for (int i = p.num_layers() - 1; i >= 0; --i) {
    fill += p.layers[static_cast<std::size_t>(i)].bytes;
    const std::uint64_t cap =
        s.messages.empty() ? opt.first_bucket_cap_bytes : opt.bucket_cap_bytes;
    if (fill >= cap || i == 0) {
      m.lo = i;
      s.messages.push_back(m);
      m.hi = i - 1;
      fill = 0;
    }
  }
  return s;
}

}  // namespace ccoll::gradient
