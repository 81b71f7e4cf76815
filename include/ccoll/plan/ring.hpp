// ccoll/plan/ring.hpp: the pipelined ring allreduce (reduce-scatter, then all-gather), as in NCCL.
//
// The buffer is cut into one contiguous part per channel; channel c's part is cut into K chunks
// and every chunk into P pieces. For a chunk, the rank at ring position i runs 2P - 1 steps; at
// step s it handles piece (i - 1 - s) mod P:
//
//     s = 0            send             src Input                      -> next
//     s = 1 .. P-2     recv-reduce-send src Input  (+) prev            -> next
//     s = P-1          recv-reduce-copy-send, final, write output      -> next   (piece i complete)
//     s = P .. 2P-3    recv-copy-send,  write output                   -> next
//     s = 2P-2         recv,            write output
//
// so piece j is reduced along the ring ending at position j and then travels once more around it.
// Every rank is busy in every lock-step round, so chunks add only latency (see chunking.hpp): the
// default K is the fewest chunks whose pieces fit a slot. Channels use the ring forwards (even c)
// or backwards (odd c), so two channels drive both directions of every link. Pieces that are empty
// (count < P K) are skipped on every rank, which keeps the sends and receives paired.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

namespace detail {

inline void check_ring(const std::vector<Rank>& ring, Rank nranks, std::size_t channel) {
  std::vector<bool> seen(static_cast<std::size_t>(nranks), false);
  bool ok = ring.size() == static_cast<std::size_t>(nranks);
  for (Rank r : ring) {
    if (r < 0 || r >= nranks || seen[static_cast<std::size_t>(r)]) {
      ok = false;
      break;
    }
    seen[static_cast<std::size_t>(r)] = true;
  }
  if (!ok)
    throw_invalid_argument(-1, "rings[" + std::to_string(channel) + "]",
                           "a permutation of ranks 0.." + std::to_string(nranks - 1),
                           std::to_string(ring.size()) + " entries, not a permutation");
}

}  // namespace detail

// One ring order per channel (for rings embedded in a physical graph). Channel c reduces the c-th
// contiguous part of the buffer along rings[c].
inline Plan build_ring(const PlanRequest& req, const std::vector<std::vector<Rank>>& rings) {
  check_request(req);
  if (rings.empty()) throw_invalid_argument(-1, "rings", "at least one ring", "none");
  for (std::size_t c = 0; c < rings.size(); ++c) detail::check_ring(rings[c], req.nranks, c);
  if (req.nranks > 1 && req.nslots < 2)
    throw_invalid_argument(-1, "nslots",
                           ">= 2 for a ring (every step receives and sends at the same time)",
                           std::to_string(req.nslots));
  Plan plan;
  const auto nchannels = static_cast<std::uint32_t>(rings.size());
  PlanBuilder b(plan, "ring", req, nchannels);
  const Rank p = req.nranks;
  const auto up = static_cast<std::uint64_t>(p);
  for (std::uint32_t c = 0; c < nchannels; ++c) {
    const std::uint64_t lo = even_split_begin(req.count, nchannels, c);
    const std::uint64_t n = even_split_begin(req.count, nchannels, c + 1) - lo;
    if (n == 0) continue;
    if (p == 1) {  // a local copy: nothing to exchange
      b.add(c, 0, lo, n, Source::Input, {}, {}, true, true);
      continue;
    }
    const std::uint64_t k = resolve_chunks(req, n, up, 0.0, 2.0 * static_cast<double>(p - 1));
    const std::vector<Rank>& ring = rings[c];
    std::vector<std::uint32_t> to_next(up), from_prev(up);
    for (std::uint64_t i = 0; i < up; ++i) {
      const Rank me = ring[i], next = ring[(i + 1) % up];
      to_next[i] = b.connection(me, next, c);
      from_prev[(i + 1) % up] = to_next[i];
    }
    for (std::uint64_t chunk = 0; chunk < k; ++chunk) {
      const std::uint64_t chunk_lo = lo + even_split_begin(n, k, chunk);
      const std::uint64_t chunk_n =
          even_split_begin(n, k, chunk + 1) - even_split_begin(n, k, chunk);
      for (std::uint64_t i = 0; i < up; ++i) {
        const Rank me = ring[i];
        for (std::uint64_t s = 0; s + 1 < 2 * up; ++s) {
          const std::uint64_t piece = (i + 2 * up - 1 - s) % up;
          const std::uint64_t off = chunk_lo + even_split_begin(chunk_n, up, piece);
          const std::uint64_t cnt = chunk_lo + even_split_begin(chunk_n, up, piece + 1) - off;
          if (cnt == 0) continue;
          const bool recv = s > 0, send = s + 2 < 2 * up;
          const bool reduce = s < up;  // reduce-scatter half (including the completing step)
          const bool completes = s + 1 == up;
          std::vector<std::uint32_t> rv, sv;
          if (recv) rv.push_back(from_prev[i]);
          if (send) sv.push_back(to_next[i]);
          b.add(c, me, off, cnt, reduce ? Source::Input : Source::None, rv, sv,
                !reduce || completes, completes);
        }
      }
    }
  }
  return b.finish();
}

// req.nchannels rings over ranks 0..P-1: even channels forwards, odd channels backwards.
inline Plan build_ring(const PlanRequest& req) {
  check_request(req);
  std::vector<std::vector<Rank>> rings(std::max<std::uint32_t>(1, req.nchannels));
  for (std::size_t c = 0; c < rings.size(); ++c) {
    rings[c].resize(static_cast<std::size_t>(req.nranks));
    std::iota(rings[c].begin(), rings[c].end(), 0);
    if (c % 2 == 1) std::reverse(rings[c].begin(), rings[c].end());
  }
  return build_ring(req, rings);
}

}  // namespace ccoll::plan
