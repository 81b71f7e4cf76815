// ccoll/runtime/element_loop.hpp: a step's element loop on any Group: the host loops
// (host_loops.hpp) for one thread, the block path (block_loops.hpp) for several, and the host's
// non-temporal stores for outputs and slots that should bypass the caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ccoll/core/op.hpp"
#include "ccoll/core/platform.hpp"
#include "ccoll/runtime/block_loops.hpp"
#include "ccoll/runtime/host_loops.hpp"
#include "ccoll/runtime/program_context.hpp"

#if !CCOLL_DEVICE_PASS && (defined(__x86_64__) || defined(__i386__))
#include <emmintrin.h>
#define CCOLL_HAVE_STREAMING_STORES 1
#else
#define CCOLL_HAVE_STREAMING_STORES 0
#endif

namespace ccoll::runtime::detail {

template <class T, ReduceOp Op, bool Fin, class Group>
CCOLL_HD void element_loop(const Group& g, T* const* dsts, std::uint32_t ndst, const T* const* srcs,
                           std::uint32_t nsrc, std::uint64_t n, int nactive) {
  if constexpr (!Group::kSingleThread) {
    block_element_loop<T, Op, Fin>(g, dsts, ndst, srcs, nsrc, n, nactive);
  } else if (nsrc == 1 && ndst == 1) {
    copy_pass<T, Op, Fin>(g, dsts[0], srcs[0], n, nactive);
  } else if (nsrc == 1 && ndst == 2) {
    copy2_pass<T, Op, Fin>(g, dsts[0], dsts[1], srcs[0], n, nactive);
  } else if (nsrc == 2 && ndst == 1) {
    reduce_pass<T, Op, Fin>(g, dsts[0], srcs[0], srcs[1], n, nactive);
  } else if (nsrc == 2 && ndst == 2) {
    reduce2_pass<T, Op, Fin>(g, dsts[0], dsts[1], srcs[0], srcs[1], n, nactive);
  } else {
    general_pass<T, Op, Fin>(g, dsts, ndst, srcs, nsrc, n, nactive);
  }
}

// Host only: copies `bytes` to dst with non-temporal stores where dst is 16-byte aligned (the
// caller issues the store fence before publishing anything).
inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
#if CCOLL_HAVE_STREAMING_STORES
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
  if (head >= bytes) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

inline void stream_fence() {
#if CCOLL_HAVE_STREAMING_STORES
  _mm_sfence();
#endif
}

// Host only: like element_loop, but the destinations flagged in `streamed` (bit k: dsts[k]) are
// written with non-temporal stores. Tiles of kTileBytes are computed into the first destination
// that is not streamed (it stays cached for its reader) or into a stack buffer, then streamed to
// the others; a plain copy streams straight from its source.
template <class T, ReduceOp Op, bool Fin>
void element_loop_streaming(T* const* dsts, std::uint32_t ndst, std::uint32_t streamed,
                            const T* const* srcs, std::uint32_t nsrc, std::uint64_t n,
                            int nactive) {
  constexpr std::size_t kTileBytes = 8192;
  constexpr std::uint64_t kTile = kTileBytes / sizeof(T);
  alignas(64) unsigned char stage_buffer[kTileBytes];
  const HostGroup g;
  if (nsrc == 1 && !Fin) {  // a copy: no need to stage
    for (std::uint32_t k = 0; k < ndst; ++k) {
      if (dsts[k] == srcs[0]) continue;
      if ((streamed >> k) & 1u)
        stream_copy(dsts[k], srcs[0], n * sizeof(T));
      else
        std::memcpy(dsts[k], srcs[0], n * sizeof(T));
    }
    return;
  }
  const T* tile_srcs[kMaxStepPorts + 1];
  T* tile_dsts[kMaxStepPorts + 1];
  for (std::uint64_t lo = 0; lo < n; lo += kTile) {
    const std::uint64_t m = n - lo < kTile ? n - lo : kTile;
    for (std::uint32_t k = 0; k < nsrc; ++k) tile_srcs[k] = srcs[k] + lo;
    std::uint32_t nd = 0;
    for (std::uint32_t k = 0; k < ndst; ++k)
      if (((streamed >> k) & 1u) == 0) tile_dsts[nd++] = dsts[k] + lo;
    T* stage = nd > 0 ? tile_dsts[0] : reinterpret_cast<T*>(stage_buffer);
    if (nd == 0) tile_dsts[nd++] = stage;
    element_loop<T, Op, Fin>(g, tile_dsts, nd, tile_srcs, nsrc, m, nactive);
    for (std::uint32_t k = 0; k < ndst; ++k)
      if ((streamed >> k) & 1u) stream_copy(dsts[k] + lo, stage, m * sizeof(T));
  }
}

}  // namespace ccoll::runtime::detail
