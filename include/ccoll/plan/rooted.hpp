// ccoll/plan/rooted.hpp: the rooted collectives' plans: broadcast (plan/collective.hpp: every rank
// ends with the root's input) and their mirror image, reduce (the root ends with the sum of every
// rank's input): pipelined chains and one-hop (direct) forms.
//
// Chain (NCCL's ring broadcast and reduce): the ranks in ring order starting at the root (even
// channels) or going backwards from it (odd channels), so two channels use both directions of
// every link. Each channel's part of the buffer is cut into K chunks that follow each other down
// the chain:
//
//     broadcast   root: copy-send src Input, write output -> next;  middle: recv-copy-send, write
//                 output -> next;  last: recv, write output
//     reduce      first: send src Input -> next;  middle: recv-reduce-send src Input -> next;
//                 root (last): recv-reduce src Input, final, write output
//
// A chunk takes P - 1 steps to reach the end and the chain moves one chunk per step, so K follows
// [C-Cube]'s pipeline model (plan/chunking.hpp) with L = P - 2 fill steps and one step per chunk.
//
// Direct: the root sends every chunk to all peers in one step (broadcast), or every peer sends its
// chunk to the root, which folds its own input and then the peers' in the order root + 1, root +
// 2, ... (reduce): one hop, for small messages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/reduce_scatter.hpp"

namespace ccoll::plan {

namespace detail {

inline void check_root(const PlanRequest& req) {
  check_request(req);
  if (req.root < 0 || req.root >= req.nranks)
    throw_invalid_argument(-1, "root", "a rank in [0, " + std::to_string(req.nranks) + ")",
                           std::to_string(req.root));
}

// Chain or direct, broadcast or reduce. A chain follows channel c's ring of `rings` from the root
// (empty: rank order, odd channels backwards).
inline Plan build_rooted(const PlanRequest& req, Collective coll, bool chain,
                         const std::vector<std::vector<Rank>>& rings = {}) {
  check_root(req);
  for (std::size_t c = 0; c < rings.size(); ++c) check_ring(rings[c], req.nranks, c);
  const std::uint32_t nchannels = rings.empty() ? std::max<std::uint32_t>(1, req.nchannels)
                                                : static_cast<std::uint32_t>(rings.size());
  Plan plan;
  PlanBuilder builder(plan, chain ? "chain" : "direct", req, nchannels);
  plan.collective = coll;
  plan.root = req.root;
  const bool bcast = coll == Collective::broadcast;
  const Rank p = req.nranks;
  const auto up = static_cast<std::uint64_t>(p);
  const auto root = static_cast<std::uint64_t>(req.root);
  for (std::uint32_t c = 0; c < nchannels; ++c) {
    const std::uint64_t lo = even_split_begin(req.count, nchannels, c);
    const std::uint64_t n = even_split_begin(req.count, nchannels, c + 1) - lo;
    if (n == 0) continue;
    if (p == 1) {
      builder.add(c, 0, lo, n, Source::Input, {}, {}, true, !bcast);
      continue;
    }
    const std::uint64_t k =
        chain ? resolve_chunks(req, n, 1, static_cast<double>(p - 2), 1.0) : one_hop_chunks(req, n);
    // order[0] .. order[P-1]: the chain in the direction data flows.
    std::vector<Rank> order(up);
    if (rings.empty()) {
      for (std::uint64_t i = 0; i < up; ++i) {
        const std::uint64_t d = c % 2 == 0 ? i : (up - i) % up;  // odd channels go backwards
        order[i] = static_cast<Rank>((root + d) % up);
      }
    } else {
      const auto& ring = rings[c];
      const auto at =
          static_cast<std::uint64_t>(std::find(ring.begin(), ring.end(), req.root) - ring.begin());
      for (std::uint64_t i = 0; i < up; ++i) order[i] = ring[(at + i) % up];
    }
    if (!bcast) std::reverse(order.begin(), order.end());  // reduce: flows into the root
    for (std::uint64_t chunk = 0; chunk < k; ++chunk) {
      const std::uint64_t off = lo + even_split_begin(n, k, chunk);
      const std::uint64_t cnt = even_split_begin(n, k, chunk + 1) - even_split_begin(n, k, chunk);
      if (cnt == 0) continue;
      if (chain) {
        for (std::uint64_t i = 0; i < up; ++i) {
          std::vector<std::uint32_t> rv, sv;
          if (i > 0) rv.push_back(builder.connection(order[i - 1], order[i], c));
          if (i + 1 < up) sv.push_back(builder.connection(order[i], order[i + 1], c));
          const bool last = i + 1 == up;
          if (bcast)
            builder.add(c, order[i], off, cnt, i == 0 ? Source::Input : Source::None, rv, sv, true,
                        false);
          else
            builder.add(c, order[i], off, cnt, Source::Input, rv, sv, last, last);
        }
        continue;
      }
      const auto r = static_cast<Rank>(root);
      std::vector<std::uint32_t> fan;
      for (std::uint64_t d = 1; d < up; ++d) {
        const auto peer = static_cast<Rank>((root + d) % up);
        fan.push_back(bcast ? builder.connection(r, peer, c) : builder.connection(peer, r, c));
      }
      if (bcast) {
        builder.add(c, r, off, cnt, Source::Input, {}, fan, true, false);
        for (std::uint64_t d = 1; d < up; ++d)
          builder.add(c, static_cast<Rank>((root + d) % up), off, cnt, Source::None, {fan[d - 1]},
                      {}, true, false);
      } else {
        for (std::uint64_t d = 1; d < up; ++d)
          builder.add(c, static_cast<Rank>((root + d) % up), off, cnt, Source::Input, {},
                      {fan[d - 1]}, false, false);
        builder.add(c, r, off, cnt, Source::Input, fan, {}, true, true);
      }
    }
  }
  return builder.finish();
}

}  // namespace detail

// `rings`: one ring order per channel, which each channel's chain follows from the root (a ring
// embedded in a physical graph: algo/embedding.hpp); empty: rank order, odd channels backwards.
inline Plan build_chain_broadcast_on(const PlanRequest& req,
                                     const std::vector<std::vector<Rank>>& rings) {
  return detail::build_rooted(req, Collective::broadcast, true, rings);
}
inline Plan build_chain_broadcast(const PlanRequest& req) {
  return build_chain_broadcast_on(req, {});
}
inline Plan build_direct_broadcast(const PlanRequest& req) {
  return detail::build_rooted(req, Collective::broadcast, false);
}
inline Plan build_chain_reduce_on(const PlanRequest& req,
                                  const std::vector<std::vector<Rank>>& rings) {
  return detail::build_rooted(req, Collective::reduce, true, rings);
}
inline Plan build_chain_reduce(const PlanRequest& req) {
  return build_chain_reduce_on(req, {});
}
inline Plan build_direct_reduce(const PlanRequest& req) {
  return detail::build_rooted(req, Collective::reduce, false);
}

}  // namespace ccoll::plan
