// ccoll/plan/direct.hpp: the direct allreduce (one-hop reduce-scatter, then one-hop all-gather),
// the shape intra-node shared-memory collectives use when every rank can reach every other rank's
// memory at the same cost.
//
// The buffer is cut into one contiguous part per requested channel, each part into K chunks and
// every chunk into P pieces; rank j owns piece j of every chunk. For chunk k, rank q runs
//
//     stage   P-1 steps   send            src Input, piece j            -> j      (every j != q)
//     reduce  1 step      recv-reduce-copy-send, final, write output:
//                         src Input, piece q (+) piece q staged by every j != q
//                                                                        -> every j != q
//     gather  P-1 steps   recv            reduced piece j from j, write output (every j != q)
//
// Each input element is read once by its owner's process and crosses one FIFO slot to the rank
// that reduces it, and each reduced element crosses one slot to each other rank: a byte makes one
// hop in each phase, where a ring makes P-1 (each a full step of P-1 ranks in a chain) and a tree
// log P. The reduce step reads P-1 peers' slots directly, so for a shared-memory host the slots
// are the staging buffers of the textbook "copy in, reduce your slice from everyone's copy, copy
// out" algorithm, pipelined chunk by chunk so that the staging traffic stays in the caches and only
// the user buffers go to DRAM (docs/benchmark.md counts that traffic).
//
// Every rank pair uses two connections: one in the reduce-scatter channel (staged pieces) and one
// in the all-gather channel (reduced pieces), so the two kinds of message never queue behind each
// other. A rank's reduce-scatter program stages `lookahead` chunks ahead of the chunk it reduces
// (stage 0..d-1, then reduce k and stage k+d), which keeps its peers supplied while it waits; its
// all-gather program receives the reduced pieces in chunk order. The reduce step sends into the
// all-gather channel's connections (Connection::channel is the receiver's program, as in the
// overlapped tree). Deadlock-freedom for every nslots >= 1: a stage step waits only for its peer's
// reduce of an earlier chunk, a reduce step only for its peers' stage steps of the same chunk and
// free all-gather slots, which the peers' all-gather programs free in chunk order without waiting
// on anything but reduce steps; the tests confirm it through the verifier.
//
// Chunk count: req.nchunks if set (but never pieces larger than a slot or empty chunks); otherwise
// the fewest chunks whose pieces fit a slot. Like the ring, every rank is busy in every round, so
// more chunks only add handshakes; the slot size (Config::slot_bytes) sets the granularity.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

// Chunks per channel part of `elems` elements for the direct plan (see above).
inline std::uint64_t direct_chunks(const PlanRequest& req, std::uint64_t elems) {
  if (elems == 0) return 1;
  const auto up = static_cast<std::uint64_t>(req.nranks);
  const std::uint64_t slot_elems = req.slot_bytes / req.elem_size;
  const std::uint64_t most = std::max<std::uint64_t>(1, (elems + up - 1) / up);
  const std::uint64_t k = std::min<std::uint64_t>(std::max<std::uint32_t>(1, req.nchunks), most);
  return std::max(k, min_chunks_for_slots(elems, up, slot_elems));
}

inline Plan build_direct(const PlanRequest& req) {
  check_request(req);
  const std::uint32_t parts = std::max<std::uint32_t>(1, req.nchannels);
  const Rank p = req.nranks;
  const auto up = static_cast<std::uint64_t>(p);
  Plan plan;
  // Channels 2c (reduce-scatter) and 2c + 1 (all-gather) serve part c.
  PlanBuilder b(plan, "direct", req, 2 * parts);
  const std::uint64_t lookahead =
      std::max<std::uint32_t>(1, std::min<std::uint32_t>(req.nslots, 2));
  for (std::uint32_t c = 0; c < parts; ++c) {
    const std::uint64_t lo = even_split_begin(req.count, parts, c);
    const std::uint64_t n = even_split_begin(req.count, parts, c + 1) - lo;
    if (n == 0) continue;
    const std::uint32_t rs = 2 * c, ag = 2 * c + 1;
    if (p == 1) {  // a local copy: nothing to exchange
      b.add(rs, 0, lo, n, Source::Input, {}, {}, true, true);
      continue;
    }
    const std::uint64_t k = direct_chunks(req, n);
    auto piece = [&](std::uint64_t chunk, std::uint64_t j, std::uint64_t& off) {
      const std::uint64_t chunk_lo = lo + even_split_begin(n, k, chunk);
      const std::uint64_t chunk_n =
          even_split_begin(n, k, chunk + 1) - even_split_begin(n, k, chunk);
      off = chunk_lo + even_split_begin(chunk_n, up, j);
      return chunk_lo + even_split_begin(chunk_n, up, j + 1) - off;
    };
    for (Rank q = 0; q < p; ++q) {
      const auto uq = static_cast<std::uint64_t>(q);
      auto stage = [&](std::uint64_t chunk) {
        for (std::uint64_t d = 1; d < up; ++d) {  // q+1, q+2, ...: spreads the readers' load
          const std::uint64_t j = (uq + d) % up;
          std::uint64_t off = 0;
          const std::uint64_t cnt = piece(chunk, j, off);
          if (cnt == 0) continue;
          b.add(rs, q, off, cnt, Source::Input, {}, {b.connection(q, static_cast<Rank>(j), rs)},
                false, false);
        }
      };
      for (std::uint64_t chunk = 0; chunk < std::min(lookahead, k); ++chunk) stage(chunk);
      for (std::uint64_t chunk = 0; chunk < k; ++chunk) {
        std::uint64_t off = 0;
        const std::uint64_t cnt = piece(chunk, uq, off);
        if (cnt > 0) {
          std::vector<std::uint32_t> rv, sv;
          for (std::uint64_t d = 1; d < up; ++d) {
            const auto j = static_cast<Rank>((uq + up - d) % up);  // the order they staged it in
            rv.push_back(b.connection(j, q, rs));
            sv.push_back(b.connection(q, static_cast<Rank>((uq + d) % up), ag));
          }
          b.add(rs, q, off, cnt, Source::Input, rv, sv, true, true);
        }
        if (chunk + lookahead < k) stage(chunk + lookahead);
        for (std::uint64_t d = 1; d < up; ++d) {
          const std::uint64_t j = (uq + up - d) % up;
          std::uint64_t goff = 0;
          const std::uint64_t gcnt = piece(chunk, j, goff);
          if (gcnt == 0) continue;
          b.add(ag, q, goff, gcnt, Source::None, {b.connection(static_cast<Rank>(j), q, ag)}, {},
                true, false);
        }
      }
    }
  }
  return b.finish();
}

}  // namespace ccoll::plan
