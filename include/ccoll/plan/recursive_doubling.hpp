// ccoll/plan/recursive_doubling.hpp: the recursive-doubling allreduce (Thakur, Rabenseifner and
// Gropp 2005, Sec. 4.1 [MPICH-coll]), for small messages on any rank count.
//
// With m the largest power of two <= P, ranks 0..m-1 exchange their whole buffer with the rank
// whose number differs in bit r, for r = 0..log2(m)-1, reducing each time: log2(m) hops, each
// rank sending and reducing N elements per hop. The P - m ranks above m first hand their input to
// rank q - m and get the result back at the end (two more hops), as in MPICH. Against the
// one-shot plan it reduces only two operands per step and sends N per hop instead of (P-1) N, at
// the cost of log2(m) hops in sequence.
//
// Each exchange is a step that receives the partner's value, reduces it with the rank's own
// (input in the first round, output afterwards), writes the output and sends the result on to
// the next round's partner. The lower-numbered rank's operand always comes first
// (Step::src_position), so both partners compute the same bits; by induction every rank ends with
// bit-identical results for floating-point data too.
//
// Messages larger than a slot are cut into chunks that run the whole exchange one after the
// other; the plan is meant for messages that fit a slot.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

inline Plan build_recursive_doubling(const PlanRequest& req) {
  check_request(req);
  const std::uint32_t parts = std::max<std::uint32_t>(1, req.nchannels);
  const Rank p = req.nranks;
  Rank m = 1;
  while (m * 2 <= p) m *= 2;
  const Rank extra = p - m;  // ranks m..p-1 fold into ranks 0..extra-1
  int rounds = 0;
  while ((Rank{1} << rounds) < m) ++rounds;
  Plan plan;
  PlanBuilder b(plan, "recdoubling", req, parts);
  for (std::uint32_t c = 0; c < parts; ++c) {
    const std::uint64_t lo = even_split_begin(req.count, parts, c);
    const std::uint64_t n = even_split_begin(req.count, parts, c + 1) - lo;
    if (n == 0) continue;
    if (p == 1) {
      b.add(c, 0, lo, n, Source::Input, {}, {}, true, true);
      continue;
    }
    const std::uint64_t slot_elems = req.slot_bytes / req.elem_size;
    const std::uint64_t k =
        std::min(n, std::max<std::uint64_t>(req.nchunks, min_chunks_for_slots(n, 1, slot_elems)));
    for (std::uint64_t i = 0; i < k; ++i) {
      const std::uint64_t off = lo + even_split_begin(n, k, i);
      const std::uint64_t cnt = lo + even_split_begin(n, k, i + 1) - off;
      for (Rank q = 0; q < p; ++q) {
        if (q >= m) {  // hand the input to q - m, get the result back
          b.add(c, q, off, cnt, Source::Input, {}, {b.connection(q, q - m, c)}, false, false);
          b.add(c, q, off, cnt, Source::None, {b.connection(q - m, q, c)}, {}, true, false);
          continue;
        }
        auto partner = [&](int r) { return static_cast<Rank>(q ^ (Rank{1} << r)); };
        // Where the own value lives before round 0, and the step that sends it to the first
        // partner (folding in an extra rank's input first).
        Source own = Source::Input;
        if (q < extra) {
          b.add(c, q, off, cnt, Source::Input, {b.connection(q + m, q, c)},
                {b.connection(q, partner(0), c)}, true, false);  // own input first: q < q + m
          own = Source::Output;
        } else {
          b.add(c, q, off, cnt, Source::Input, {}, {b.connection(q, partner(0), c)}, false, false);
        }
        for (int r = 0; r < rounds; ++r) {
          const Rank with = partner(r);
          const bool last = r + 1 == rounds;
          std::vector<std::uint32_t> to;
          if (!last) {
            to.push_back(b.connection(q, partner(r + 1), c));
          } else if (q < extra) {
            to.push_back(b.connection(q, q + m, c));
          }
          b.add(c, q, off, cnt, own, {b.connection(with, q, c)}, to, true, last).src_position =
              q < with ? 0 : 1;
          own = Source::Output;
        }
      }
    }
  }
  return b.finish();
}

}  // namespace ccoll::plan
