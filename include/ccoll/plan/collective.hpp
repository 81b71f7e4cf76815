// ccoll/plan/collective.hpp: what each collective computes, in the plan's one index space.
//
// A plan addresses Plan::count elements; a step reads its input and writes its output at the same
// index (Step::offset). The collectives differ in which indices a rank's input and output hold
// and in what an output element must contain when the plan ends. With A active ranks, the k-th
// active rank in rank order (its "block index") owns block k = [k b, (k + 1) b), b = count / A:
//
//   collective       input of rank r          output of rank r         an output element holds
//   allreduce        [0, count)               [0, count)               every active input, reduced
//   reduce_scatter   [0, count), A blocks     its block                every active input, reduced
//   all_gather       its block                [0, count), A blocks     its block owner's input
//   broadcast        [0, count), root only    [0, count)               the root's input
//   reduce           [0, count)               [0, count), root only    every active input, reduced
//
// These are NCCL's definitions (ncclReduceScatter: recvcount = count / A per rank, rank k's
// output is block k of the sum; ncclAllGather: sendcount = count / A; ncclBroadcast and
// ncclReduce with a root): an executor maps a rank's user buffers onto the index space by its
// block's offset (reduce_scatter output and all_gather input start at k b). NCCL's in-place forms
// then alias exactly: reduce_scatter in place has recvbuff = sendbuff + k b, all_gather in place
// has sendbuff = recvbuff + k b, the same element at the same index.
//
// A reduction (allreduce, reduce_scatter, reduce) finalizes every output element once (avg
// divides there); a gather or broadcast moves single contributions and never combines two values
// or finalizes one. The verifier (plan/verifier.hpp) checks all of this for every plan.
#pragma once

#include <cstdint>
#include <string_view>

#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

inline constexpr std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::allreduce:
      return "allreduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_gather:
      return "all_gather";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
  }
  return "unknown";
}

// Does the collective combine contributions (and finalize them)?
inline constexpr bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

// Is the index space cut into one block per active rank?
inline constexpr bool has_blocks(Collective c) {
  return c == Collective::reduce_scatter || c == Collective::all_gather;
}

// Does the collective have a root?
inline constexpr bool has_root(Collective c) {
  return c == Collective::broadcast || c == Collective::reduce;
}

// nccl-tests' bus bandwidth factor (its PERFORMANCE.md): busbw = algbw x factor, with algbw the
// whole buffer (Plan::count elements) over the time: 2(P-1)/P for allreduce, (P-1)/P for
// reduce-scatter and all-gather, 1 for broadcast and reduce; 0 for one rank.
inline constexpr double bus_factor(Collective c, int nactive) {
  if (nactive <= 1) return 0.0;
  const double p = static_cast<double>(nactive);
  if (c == Collective::allreduce) return 2.0 * (p - 1) / p;
  if (has_blocks(c)) return (p - 1) / p;
  return 1.0;
}

// The block size b of a blocked collective over `nactive` ranks (count must be a multiple).
inline constexpr std::uint64_t block_elems(std::uint64_t count, int nactive) {
  return nactive > 0 ? count / static_cast<std::uint64_t>(nactive) : 0;
}

// Where rank r's user buffers sit in the plan's index space: elements [input_begin, input_end) of
// the space are its input buffer's elements 0, 1, ...; likewise for the output. `block` is the
// rank's block index (its position among the active ranks), `b` the block size.
struct BufferSpan {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool contains(std::uint64_t lo, std::uint64_t hi) const { return lo >= begin && hi <= end; }
};

inline constexpr BufferSpan input_span(Collective c, std::uint64_t count, std::uint64_t block,
                                       std::uint64_t b, bool is_root) {
  if (c == Collective::all_gather) return {block * b, block * b + b};
  if (c == Collective::broadcast && !is_root) return {0, 0};
  return {0, count};
}

inline constexpr BufferSpan output_span(Collective c, std::uint64_t count, std::uint64_t block,
                                        std::uint64_t b, bool is_root) {
  if (c == Collective::reduce_scatter) return {block * b, block * b + b};
  if (c == Collective::reduce && !is_root) return {0, 0};
  return {0, count};
}

}  // namespace ccoll::plan
