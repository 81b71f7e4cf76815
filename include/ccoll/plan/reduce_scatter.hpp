// ccoll/plan/reduce_scatter.hpp: reduce-scatter plans (plan/collective.hpp: rank k ends with
// block k of the sum of every rank's input), ring and direct.
//
// Ring (NCCL's ring reduce-scatter, the first half of plan/ring.hpp's allreduce): each block is
// cut into one part per channel and each part into K chunks. For chunk k of channel c, the rank at
// ring position i runs P steps; at step s it handles the chunk of the block owned by the rank at
// position (i - 1 - s) mod P:
//
//     s = 0            send             src Input                      -> next
//     s = 1 .. P-2     recv-reduce-send src Input  (+) prev            -> next
//     s = P-1          recv-reduce, final, write output                 (its own block complete)
//
// Each block travels P - 1 hops and is finished by its owner. Channels run the ring forwards
// (even c) or backwards (odd c), so two channels drive both directions of every link.
//
// Direct (one hop, for ranks that reach each other at the same cost): rank q sends chunk k of
// every other block j to j, `lookahead` chunks ahead, and reduces chunk k of its own block from
// every peer's message and its input: plan/direct.hpp's reduce-scatter channel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/ring.hpp"

namespace ccoll::plan {

namespace detail {

// Checks a blocked request (reduce-scatter, all-gather: req.count = P blocks) and returns b.
inline std::uint64_t checked_block(const PlanRequest& req, const char* collective) {
  check_request(req);
  const auto up = static_cast<std::uint64_t>(req.nranks);
  if (req.count % up != 0)
    throw_invalid_argument(-1, "count",
                           std::string("a multiple of the ") + std::to_string(up) + " ranks (the " +
                               collective + "'s index space holds one block per rank)",
                           std::to_string(req.count));
  return req.count / up;
}

// A ring step receives and sends at once: with one slot per FIFO every rank would wait for its
// successor to empty the slot it is about to fill.
inline void check_ring_slots(const PlanRequest& req) {
  if (req.nranks > 1 && req.nslots < 2)
    throw_invalid_argument(-1, "nslots",
                           ">= 2 for a ring (every step receives and sends at the same time)",
                           std::to_string(req.nslots));
}

// Ring orders per channel: even channels 0..P-1, odd channels reversed.
inline std::vector<std::vector<Rank>> default_rings(Rank nranks, std::uint32_t nchannels) {
  std::vector<std::vector<Rank>> rings(std::max<std::uint32_t>(1, nchannels));
  for (std::size_t c = 0; c < rings.size(); ++c) {
    rings[c].resize(static_cast<std::size_t>(nranks));
    std::iota(rings[c].begin(), rings[c].end(), 0);
    if (c % 2 == 1) std::reverse(rings[c].begin(), rings[c].end());
  }
  return rings;
}

// Elements of channel c's part of a block of b.
inline std::uint64_t part_elems(std::uint64_t b, std::uint32_t nchannels, std::uint32_t c) {
  return even_split_begin(b, nchannels, c + 1) - even_split_begin(b, nchannels, c);
}

// Chunks of a one-hop plan's part of n elements: req.nchunks if set (never empty chunks), at
// least enough that a chunk fits a slot.
inline std::uint64_t one_hop_chunks(const PlanRequest& req, std::uint64_t n) {
  return std::max(std::min<std::uint64_t>(std::max<std::uint32_t>(1, req.nchunks), n),
                  min_chunks_for_slots(n, 1, req.slot_bytes / req.elem_size));
}

// Chunk k of K of channel c's part of block j: [offset, offset + count).
struct BlockChunk {
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
};
inline BlockChunk block_chunk(std::uint64_t b, std::uint64_t j, std::uint32_t nchannels,
                              std::uint32_t c, std::uint64_t k, std::uint64_t chunk) {
  const std::uint64_t part_lo = even_split_begin(b, nchannels, c);
  const std::uint64_t part_n = even_split_begin(b, nchannels, c + 1) - part_lo;
  const std::uint64_t lo = even_split_begin(part_n, k, chunk);
  return {j * b + part_lo + lo, even_split_begin(part_n, k, chunk + 1) - lo};
}

}  // namespace detail

namespace detail {

// One step of a blocked ring: the ring position whose block it handles and what it does.
struct RingStep {
  std::uint64_t owner_position = 0;
  Source src = Source::None;
  bool write_output = false;
  bool final = false;
  bool sends = false;
};

// The ring shared by reduce-scatter and all-gather over `orders` (one ring per channel; empty:
// req.nchannels rings, even forwards, odd backwards): each block is cut into one part per channel
// and each part into K chunks; for chunk k of channel c the rank at ring position i runs P steps,
// step s being step_at(i, s) (s > 0 receives from the previous position). Block j is rank j's
// whatever the order.
template <class StepAt>
Plan build_blocked_ring(const PlanRequest& req, Collective coll, const char* what, StepAt&& step_at,
                        const std::vector<std::vector<Rank>>& orders = {}) {
  const std::uint64_t b = checked_block(req, what);
  check_ring_slots(req);
  const auto rings = orders.empty() ? default_rings(req.nranks, req.nchannels) : orders;
  for (std::size_t c = 0; c < rings.size(); ++c) check_ring(rings[c], req.nranks, c);
  const auto nchannels = static_cast<std::uint32_t>(rings.size());
  Plan plan;
  PlanBuilder builder(plan, "ring", req, nchannels);
  plan.collective = coll;
  const auto up = static_cast<std::uint64_t>(req.nranks);
  for (std::uint32_t c = 0; c < nchannels; ++c) {
    const std::uint64_t part_n = part_elems(b, nchannels, c);
    if (part_n == 0) continue;
    // Every rank is busy in every round (as in the allreduce ring): the fewest chunks whose
    // messages fit a slot, unless req.nchunks asks for more.
    const std::uint64_t k =
        up == 1 ? 1 : resolve_chunks(req, part_n, 1, 0.0, static_cast<double>(up - 1));
    const std::vector<Rank>& ring = rings[c];
    std::vector<std::uint32_t> to_next(up), from_prev(up);
    if (up > 1)
      for (std::uint64_t i = 0; i < up; ++i) {
        to_next[i] = builder.connection(ring[i], ring[(i + 1) % up], c);
        from_prev[(i + 1) % up] = to_next[i];
      }
    for (std::uint64_t chunk = 0; chunk < k; ++chunk)
      for (std::uint64_t i = 0; i < up; ++i)
        for (std::uint64_t s = 0; s < up; ++s) {
          const RingStep st = step_at(i, s, up);
          const auto owner = static_cast<std::uint64_t>(ring[st.owner_position % up]);
          const auto bc = block_chunk(b, owner, nchannels, c, k, chunk);
          if (bc.count == 0) continue;
          std::vector<std::uint32_t> rv, sv;
          if (s > 0) rv.push_back(from_prev[i]);
          if (st.sends) sv.push_back(to_next[i]);
          builder.add(c, ring[i], bc.offset, bc.count, st.src, rv, sv, st.write_output, st.final);
        }
  }
  return builder.finish();
}

}  // namespace detail

// Ring reduce-scatter: step s of position i reduces the block of position i - 1 - s into what it
// received and passes it on; the owner completes it at s = P - 1. `rings`: one ring order per
// channel (a ring embedded in a physical graph: algo/embedding.hpp); empty: req.nchannels rings
// in rank order, odd ones reversed.
inline Plan build_ring_reduce_scatter_on(const PlanRequest& req,
                                         const std::vector<std::vector<Rank>>& rings) {
  return detail::build_blocked_ring(
      req, Collective::reduce_scatter, "reduce-scatter",
      [](std::uint64_t i, std::uint64_t s, std::uint64_t up) {
        const bool completes = s + 1 == up;
        return detail::RingStep{i + 2 * up - 1 - s, Source::Input, completes, completes,
                                !completes};
      },
      rings);
}
inline Plan build_ring_reduce_scatter(const PlanRequest& req) {
  return build_ring_reduce_scatter_on(req, {});
}

// Direct reduce-scatter: every rank sends its peers their blocks and reduces its own.
inline Plan build_direct_reduce_scatter(const PlanRequest& req) {
  const std::uint64_t b = detail::checked_block(req, "reduce-scatter");
  const std::uint32_t nchannels = std::max<std::uint32_t>(1, req.nchannels);
  Plan plan;
  PlanBuilder builder(plan, "direct", req, nchannels);
  plan.collective = Collective::reduce_scatter;
  const Rank p = req.nranks;
  const auto up = static_cast<std::uint64_t>(p);
  const std::uint64_t lookahead =
      std::max<std::uint32_t>(1, std::min<std::uint32_t>(req.nslots, 2));
  for (std::uint32_t c = 0; c < nchannels; ++c) {
    const std::uint64_t part_n = detail::part_elems(b, nchannels, c);
    if (part_n == 0) continue;
    if (p == 1) {
      const auto bc = detail::block_chunk(b, 0, nchannels, c, 1, 0);
      builder.add(c, 0, bc.offset, bc.count, Source::Input, {}, {}, true, true);
      continue;
    }
    const std::uint64_t k = detail::one_hop_chunks(req, part_n);
    for (Rank q = 0; q < p; ++q) {
      const auto uq = static_cast<std::uint64_t>(q);
      auto stage = [&](std::uint64_t chunk) {
        for (std::uint64_t d = 1; d < up; ++d) {  // q+1, q+2, ...: spreads the readers' load
          const std::uint64_t j = (uq + d) % up;
          const auto bc = detail::block_chunk(b, j, nchannels, c, k, chunk);
          if (bc.count == 0) continue;
          builder.add(c, q, bc.offset, bc.count, Source::Input, {},
                      {builder.connection(q, static_cast<Rank>(j), c)}, false, false);
        }
      };
      for (std::uint64_t chunk = 0; chunk < std::min(lookahead, k); ++chunk) stage(chunk);
      for (std::uint64_t chunk = 0; chunk < k; ++chunk) {
        const auto bc = detail::block_chunk(b, uq, nchannels, c, k, chunk);
        if (bc.count > 0) {
          std::vector<std::uint32_t> rv;
          for (std::uint64_t d = 1; d < up; ++d)
            rv.push_back(builder.connection(static_cast<Rank>((uq + up - d) % up), q, c));
          builder.add(c, q, bc.offset, bc.count, Source::Input, rv, {}, true, true);
        }
        if (chunk + lookahead < k) stage(chunk + lookahead);
      }
    }
  }
  return builder.finish();
}

}  // namespace ccoll::plan
