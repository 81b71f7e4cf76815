// ccoll/runtime/symmetric_allreduce.hpp: the allreduce of ranks that read each other's buffers
// directly (registered windows, transport/shared_window.hpp): no byte is staged through a slot.
//
// Rank r owns share r of the elements (P contiguous shares, 64-byte aligned where the count
// allows). Two phases, each closed by a barrier:
//   1. reduce-scatter: r folds share r of every rank's input, in rank order, into share r of its
//      own output (each element is finalised once, by its owner, so every rank later holds the
//      same bits);
//   2. allgather: r copies share q of rank q's output into its own output, for every q != r.
// The second barrier keeps every rank from returning, and changing its buffers, while a peer still
// reads them. In place is safe: rank q reads only share q of rank r's buffer in phase 1, and r
// overwrites only share r of it.
//
// Memory traffic per rank, for N bytes: phase 1 reads N and writes N/P, phase 2 reads and writes
// N(P-1)/P, so (3P-1)N/P in all, against the (3P-2)N/P + staging of a plan whose every message
// passes through a slot (docs/protocols.md, "Registered windows"). Non-temporal stores skip the
// read-for-ownership of the destination: the copies of step 2 use them from
// Config::stream_output_bytes up; the share of step 1, which the peers read next, as rank 0's
// slot-store tuner decides for the call's size (runtime/slot_store_tuner.hpp: whether lines pass
// faster through the caches or through memory depends on where the cores sit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ccoll/core/op.hpp"
#include "ccoll/runtime/interpreter.hpp"

namespace ccoll::runtime {

// Share q of `count` elements of `elem_size` bytes among `nranks`: [begin, end).
struct Share {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

inline Share symmetric_share(std::uint64_t count, std::size_t elem_size, int nranks, int q) {
  const auto p = static_cast<std::uint64_t>(nranks);
  const std::uint64_t align = elem_size >= 64 ? 1 : 64 / elem_size;
  std::uint64_t per = (count + p - 1) / p;
  per = (per + align - 1) / align * align;
  const auto uq = static_cast<std::uint64_t>(q);
  const std::uint64_t begin = uq * per < count ? uq * per : count;
  const std::uint64_t end = begin + per < count ? begin + per : count;
  return {begin, end};
}

// The most ranks a symmetric call folds (its operand pointers live on the stack); more ranks stage.
inline constexpr int kMaxSymmetricRanks = 256;

// One rank's view of a symmetric call: every rank's window, mapped in this process, and where the
// input and output lie in it (the same offsets on every rank).
template <class T>
struct SymmetricCall {
  std::byte* const* windows = nullptr;  // windows[q]: rank q's window
  std::uint64_t send_offset = 0;
  std::uint64_t recv_offset = 0;
  int rank = 0;
  int nranks = 1;
  int root = 0;  // broadcast and reduce (runtime/symmetric_rooted.hpp)
  std::uint64_t count = 0;
  // Reduce-scatter and all-gather in place (WindowPlacement::in_place): rank q's output is block
  // q of its input, or its input block q of its output (runtime/symmetric_shards.hpp).
  bool in_place = false;
  bool stream_share = false;  // non-temporal stores for this rank's share (its peers read it)
  bool stream = false;        // non-temporal stores for the rest of the output

  const T* send(int q) const { return reinterpret_cast<const T*>(windows[q] + send_offset); }
  T* recv(int q) const { return reinterpret_cast<T*>(windows[q] + recv_offset); }
};

namespace detail {

// dst[i] = the fold of srcs[k][i], with non-temporal stores, in 64-byte blocks whose operands are
// all read before the block is written (so dst may be one of the sources). One pass: folding into
// a cached tile and streaming it out afterwards reads and writes in turns and was 1.4x slower on
// the host measured.
template <class T, ReduceOp Op, class Acc>
void fold_streaming(T* dst, const T* const* srcs, std::uint32_t nsrc, std::uint64_t n,
                    int nactive) {
  const auto mis = reinterpret_cast<std::uintptr_t>(dst) & 15;
  std::uint64_t head = mis % sizeof(T) != 0 ? n : ((16 - mis) & 15) / sizeof(T);
  if (head > n) head = n;
  for (std::uint64_t i = 0; i < head; ++i)
    dst[i] = fold_element<T, Op, true, Acc>(srcs, nsrc, i, nactive);
  std::uint64_t i = head;
#if CCOLL_HAVE_STREAMING_STORES
  constexpr std::uint64_t kBlock = 64 / sizeof(T);
  for (; i + kBlock <= n; i += kBlock) {
    Acc v[kBlock];
    for (std::uint64_t e = 0; e < kBlock; ++e) v[e] = static_cast<Acc>(srcs[0][i + e]);
    for (std::uint32_t k = 1; k < nsrc; ++k)
      for (std::uint64_t e = 0; e < kBlock; ++e)
        v[e] = combine<Op>(v[e], static_cast<Acc>(srcs[k][i + e]));
    alignas(16) T out[kBlock];
    for (std::uint64_t e = 0; e < kBlock; ++e) out[e] = static_cast<T>(finalize<Op>(v[e], nactive));
    for (int q = 0; q < 4; ++q)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i) + q,
                       _mm_load_si128(reinterpret_cast<const __m128i*>(out) + q));
  }
#endif
  for (; i < n; ++i) dst[i] = fold_element<T, Op, true, Acc>(srcs, nsrc, i, nactive);
}

// out[i] = the fold of srcs[k][i] over the nsrc operands, for n elements: non-temporal stores
// when `stream` (16-bit floats fold three or more operands in float, as the interpreter does),
// cached stores through the interpreter's element loop otherwise. out may be one of the sources.
template <class T, ReduceOp Op>
void fold_operands(T* out, const T* const* srcs, std::uint32_t nsrc, std::uint64_t n, int nactive,
                   bool stream) {
  if (!stream) {
    element_loop<T, Op, true>(HostGroup{}, &out, 1, srcs, nsrc, n, nactive);
    return;
  }
  bool widened = false;
  if constexpr (kWidensToFloat<T>) {
    widened = nsrc >= 3;
    if (widened) fold_streaming<T, Op, float>(out, srcs, nsrc, n, nactive);
  }
  if (!widened) fold_streaming<T, Op, T>(out, srcs, nsrc, n, nactive);
  stream_fence();
}

// Rank c.rank folds its share of every rank's input, in rank order, into the same share of
// `out` (an output of the call's window: its own, or the root's).
template <class T, ReduceOp Op>
void fold_share(const SymmetricCall<T>& c, T* out, bool stream) {
  const Share mine = symmetric_share(c.count, sizeof(T), c.nranks, c.rank);
  const std::uint64_t n = mine.end - mine.begin;
  if (n == 0) return;
  const T* srcs[kMaxSymmetricRanks];
  for (int q = 0; q < c.nranks; ++q) srcs[q] = c.send(q) + mine.begin;
  fold_operands<T, Op>(out + mine.begin, srcs, static_cast<std::uint32_t>(c.nranks), n, c.nranks,
                       stream);
}

}  // namespace detail

// Runs the call on rank c.rank; barrier() returns once every rank has called it as often.
template <class T, ReduceOp Op, class Barrier>
void symmetric_allreduce(const SymmetricCall<T>& c, Barrier&& barrier) {
  detail::fold_share<T, Op>(c, c.recv(c.rank), c.stream_share);
  barrier();
  T* const own = c.recv(c.rank);
  for (int k = 1; k < c.nranks; ++k) {
    const int q = (c.rank + k) % c.nranks;  // ranks start on different peers
    const Share s = symmetric_share(c.count, sizeof(T), c.nranks, q);
    if (s.end <= s.begin) continue;
    const std::size_t bytes = (s.end - s.begin) * sizeof(T);
    if (c.stream)
      detail::stream_copy(own + s.begin, c.recv(q) + s.begin, bytes);
    else
      std::memcpy(own + s.begin, c.recv(q) + s.begin, bytes);
  }
  if (c.stream) detail::stream_fence();
  barrier();
}

}  // namespace ccoll::runtime
