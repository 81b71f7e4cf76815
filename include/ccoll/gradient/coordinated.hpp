// ccoll/gradient/coordinated.hpp: gradient::Coordinated, the policy under which GradientSync
// decides at run time, by agreement between the ranks, which gradients to all-reduce together and
// in which order ([Horovod-cache] Alg. 1-2; coord/coordinator.hpp), instead of following a
// Schedule fixed in advance.
//
// The ranks' engines submit each gradient to a coord::Coordinator as the training loop marks it
// ready; a background cycle agrees on the tensors ready on every rank, fuses them up to the fusion
// threshold (a group never split) and runs the fused allreduces in the agreed order. What it buys
// over a Schedule: a message starts as soon as its tensors are ready everywhere, whatever order
// the ranks produced them in, and the set of tensors all-reduced may change from one iteration to
// the next. What it costs: one control allreduce per cycle (docs/gradients.md, "Coordination").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ccoll::gradient {

struct Coordinated {
  // HOROVOD_FUSION_THRESHOLD: consecutive responses of one dtype share an allreduce up to this.
  std::uint64_t fusion_threshold_bytes = std::uint64_t{64} << 20;
  std::size_t cache_capacity = 1024;  // response cache positions ([Horovod-cache] Sec. 3.1.1)
  bool cache_enabled = true;          // false: every cycle takes the coordinator path
  // Fused allreduces run on this many channels, the i-th of the agreed sequence on channel i mod K:
  // the sequence is the same on every rank, so the assignment needs no further agreement.
  int max_concurrent = 1;
  // After a cycle that decided nothing, the next one waits this long for a local ready() before it
  // starts anyway (HOROVOD_CYCLE_TIME's role): the ranks that are behind catch up meanwhile.
  std::chrono::microseconds cycle_time{1000};
  // Groups of tensors (by name) that are all-reduced together, never split ([Horovod-cache] 3.2).
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
};

}  // namespace ccoll::gradient
