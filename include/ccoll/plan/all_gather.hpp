// ccoll/plan/all_gather.hpp: all-gather plans (plan/collective.hpp: every rank ends with every
// rank's block, rank k's input at block k), ring and direct.
//
// Ring (NCCL's ring all-gather, the second half of plan/ring.hpp's allreduce): for chunk k of
// channel c, the rank at ring position i runs P steps; at step s it handles the chunk of the block
// owned by the rank at position (i - s) mod P:
//
//     s = 0            copy-send        src Input (its own block), write output -> next
//     s = 1 .. P-2     recv-copy-send,  write output                            -> next
//     s = P-1          recv,            write output
//
// Direct: every rank sends each chunk of its block to all peers in one step, then receives the
// peers' chunks: one hop, P - 1 messages in and out per chunk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/reduce_scatter.hpp"

namespace ccoll::plan {

// Ring all-gather: step s of position i writes the block of position i - s (its own at s = 0)
// and passes it on, P - 1 hops in all. `rings`: as build_ring_reduce_scatter's.
inline Plan build_ring_all_gather_on(const PlanRequest& req,
                                     const std::vector<std::vector<Rank>>& rings) {
  return detail::build_blocked_ring(
      req, Collective::all_gather, "all-gather",
      [](std::uint64_t i, std::uint64_t s, std::uint64_t up) {
        return detail::RingStep{i + up - s, s == 0 ? Source::Input : Source::None, true, false,
                                s + 1 < up};
      },
      rings);
}
inline Plan build_ring_all_gather(const PlanRequest& req) {
  return build_ring_all_gather_on(req, {});
}

inline Plan build_direct_all_gather(const PlanRequest& req) {
  const std::uint64_t b = detail::checked_block(req, "all-gather");
  const std::uint32_t nchannels = std::max<std::uint32_t>(1, req.nchannels);
  Plan plan;
  PlanBuilder builder(plan, "direct", req, nchannels);
  plan.collective = Collective::all_gather;
  const Rank p = req.nranks;
  const auto up = static_cast<std::uint64_t>(p);
  for (std::uint32_t c = 0; c < nchannels; ++c) {
    const std::uint64_t part_n = detail::part_elems(b, nchannels, c);
    if (part_n == 0) continue;
    const std::uint64_t k = p == 1 ? 1 : detail::one_hop_chunks(req, part_n);
    for (Rank q = 0; q < p; ++q) {
      const auto uq = static_cast<std::uint64_t>(q);
      for (std::uint64_t chunk = 0; chunk < k; ++chunk) {
        const auto mine = detail::block_chunk(b, uq, nchannels, c, k, chunk);
        std::vector<std::uint32_t> sv;
        for (std::uint64_t d = 1; d < up; ++d)
          sv.push_back(builder.connection(q, static_cast<Rank>((uq + d) % up), c));
        if (mine.count > 0)
          builder.add(c, q, mine.offset, mine.count, Source::Input, {}, sv, true, false);
        for (std::uint64_t d = 1; d < up; ++d) {
          const std::uint64_t j = (uq + up - d) % up;
          const auto theirs = detail::block_chunk(b, j, nchannels, c, k, chunk);
          if (theirs.count == 0) continue;
          builder.add(c, q, theirs.offset, theirs.count, Source::None,
                      {builder.connection(static_cast<Rank>(j), q, c)}, {}, true, false);
        }
      }
    }
  }
  return builder.finish();
}

}  // namespace ccoll::plan
