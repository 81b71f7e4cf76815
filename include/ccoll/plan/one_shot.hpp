// ccoll/plan/one_shot.hpp: the one-shot allreduce, for small messages: every rank sends its whole
// input to every other rank and reduces all P inputs itself.
//
// A call is one hop deep: no rank waits for a value another rank computed, only for its peers'
// inputs, so its latency is one message handoff where the ring pays 2(P-1) in sequence and the
// direct plan two. The price is bandwidth: each rank sends (P-1) N and reduces P N elements,
// against about 2N for a ring, so it pays only below a few KiB (docs/plans.md has the crossover;
// ccoll_perf measures it). This is the shape intra-node small-message allreduces take when every
// rank can read every peer's memory ([NCCL-LL], vLLM's and MSCCL++'s one-shot kernels).
//
// For chunk k of channel part c, rank q runs
//
//     send    1 step    src Input, chunk k             -> every j != q
//     reduce  1 step    recv chunk k from every j != q, reduce with its own input, final, write
//                       output; the operands are folded in rank order 0, 1, ..., P-1 (the own
//                       input at position q: Step::src_position), so every rank computes the same
//                       bits for floating-point data too
//
// with the sends of `lookahead` chunks issued ahead of the reduce that consumes them. Deadlock
// freedom for every nslots >= 1: a send of chunk k waits only for its receivers to have consumed
// chunk k - nslots, and a reduce only for sends of the same chunk, which no reduce blocks.
//
// A step holds at most 15 ports (runtime::kMaxStepPorts), so the plan takes P <= 16; larger
// groups are refused (use direct or ring: at that scale one hop is not the cost that matters).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

inline constexpr Rank kOneShotMaxRanks = 16;

inline Plan build_one_shot(const PlanRequest& req) {
  check_request(req);
  if (req.nranks > kOneShotMaxRanks)
    throw Error(ErrorCode::Unsupported, -1,
                "the one-shot plan takes at most " + std::to_string(kOneShotMaxRanks) +
                    " ranks (a step reduces at most 15 received messages); got " +
                    std::to_string(req.nranks) + ": use direct or ring");
  const std::uint32_t parts = std::max<std::uint32_t>(1, req.nchannels);
  const Rank p = req.nranks;
  Plan plan;
  PlanBuilder b(plan, "oneshot", req, parts);
  const std::uint64_t lookahead =
      std::max<std::uint32_t>(1, std::min<std::uint32_t>(req.nslots, 2));
  for (std::uint32_t c = 0; c < parts; ++c) {
    const std::uint64_t lo = even_split_begin(req.count, parts, c);
    const std::uint64_t n = even_split_begin(req.count, parts, c + 1) - lo;
    if (n == 0) continue;
    if (p == 1) {
      b.add(c, 0, lo, n, Source::Input, {}, {}, true, true);
      continue;
    }
    // Whole chunks are messages: one hop has no pipeline to fill, so more chunks than the slots
    // need only add handshakes.
    const std::uint64_t slot_elems = req.slot_bytes / req.elem_size;
    const std::uint64_t k =
        std::min(n, std::max<std::uint64_t>(req.nchunks, min_chunks_for_slots(n, 1, slot_elems)));
    auto chunk = [&](std::uint64_t i, std::uint64_t& off) {
      off = lo + even_split_begin(n, k, i);
      return lo + even_split_begin(n, k, i + 1) - off;
    };
    for (Rank q = 0; q < p; ++q) {
      std::vector<std::uint32_t> to, from;
      for (Rank j = 0; j < p; ++j) {
        if (j == q) continue;
        to.push_back(b.connection(q, j, c));
        from.push_back(b.connection(j, q, c));  // rank order: the fold order of the reduce
      }
      auto send = [&](std::uint64_t i) {
        std::uint64_t off = 0;
        const std::uint64_t cnt = chunk(i, off);
        b.add(c, q, off, cnt, Source::Input, {}, to, false, false);
      };
      for (std::uint64_t i = 0; i < std::min(lookahead, k); ++i) send(i);
      for (std::uint64_t i = 0; i < k; ++i) {
        std::uint64_t off = 0;
        const std::uint64_t cnt = chunk(i, off);
        b.add(c, q, off, cnt, Source::Input, from, {}, true, true).src_position =
            static_cast<std::uint8_t>(q);
        if (i + lookahead < k) send(i + lookahead);
      }
    }
  }
  return b.finish();
}

}  // namespace ccoll::plan
