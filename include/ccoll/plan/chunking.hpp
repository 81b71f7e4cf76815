// ccoll/plan/chunking.hpp: how many pipeline chunks a plan cuts its buffer into.
//
// [C-Cube] (Sec. II-C) models a pipelined tree with the alpha-beta cost of one message of
// N/K bytes per step. With a pipeline that needs L steps to fill and m steps per chunk,
//
//     T(K) = (L + m K) (alpha + beta N / K) = L alpha + m beta N + m K alpha + L beta N / K,
//
// which is smallest at K* = sqrt(L beta N / (m alpha)). [C-Cube]'s cases:
//   - phased tree (reduce, then broadcast; [C-Cube] Eq. 3): L = 2 log P, m = 2, so
//     K* = sqrt(log(P) beta N / alpha), [C-Cube] Eq. 4, and T = 2 log(P) alpha + 2 beta N
//     + 4 sqrt(alpha beta N log P) (Eq. 6).
//   - overlapped tree (C1; Eq. 7: "the number of steps is 2 log(P) + K"): L = 2 log P, m = 1, so
//     K* = sqrt(2 log(P) beta N / alpha) and T = 2 log(P) alpha + beta N + 2 sqrt(2) sqrt(alpha
//     beta N log P). [C-Cube] Eq. 7 writes 3 sqrt(...) instead of 2 sqrt(2) sqrt(...) = 2.83
//     sqrt(...): it keeps Eq. 4's K, which is optimal for the phased tree but not for the
//     overlapped one. We use the overlapped model's own optimum.
//   - ring (each chunk takes 2(P-1) steps on every rank and ranks are never idle): L = 0, so K* = 0
//     and one chunk is best; more chunks only add latency. The ring uses the fewest chunks whose
//     messages fit a slot.
// In every case the builders use the depth of the tree they built instead of log2 P, then clamp:
// at least the number of chunks whose messages fit a slot, at most one element per chunk.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

// The model's optimum may be enormous for a tiny alpha; a cap keeps plans small. The slot limit
// can still require more chunks than this.
inline constexpr std::uint32_t kMaxModelChunks = 4096;

// Pipeline cost T(K) = (fill_steps + steps_per_chunk K)(alpha + beta bytes / K) from above.
inline double pipeline_time(double alpha_s, double beta_s_per_byte, double fill_steps,
                            double steps_per_chunk, double bytes, double chunks) {
  return (fill_steps + steps_per_chunk * chunks) * (alpha_s + beta_s_per_byte * bytes / chunks);
}

// The integer K >= 1 that minimises pipeline_time (the better of floor/ceil of K*), capped at
// kMaxModelChunks.
inline std::uint32_t pipeline_optimal_chunks(double alpha_s, double beta_s_per_byte,
                                             double fill_steps, double steps_per_chunk,
                                             double bytes) {
  if (!(fill_steps > 0) || !(bytes > 0) || !(beta_s_per_byte > 0) || !(steps_per_chunk > 0))
    return 1;
  if (!(alpha_s > 0)) return kMaxModelChunks;
  const double k = std::sqrt(fill_steps * beta_s_per_byte * bytes / (steps_per_chunk * alpha_s));
  if (!(k < kMaxModelChunks)) return kMaxModelChunks;
  const double lo = std::max(1.0, std::floor(k)), hi = std::max(1.0, std::ceil(k));
  const double t_lo =
      pipeline_time(alpha_s, beta_s_per_byte, fill_steps, steps_per_chunk, bytes, lo);
  const double t_hi =
      pipeline_time(alpha_s, beta_s_per_byte, fill_steps, steps_per_chunk, bytes, hi);
  return static_cast<std::uint32_t>(t_hi < t_lo ? hi : lo);
}

// [C-Cube] Eq. 4 as written: K_opt = sqrt(log2(P) beta N / alpha), N in bytes, rounded to the
// better integer neighbour, at least 1.
inline std::uint32_t optimal_chunks(double alpha_s, double beta_s_per_byte, int nranks,
                                    double bytes) {
  const double log_p = nranks > 1 ? std::log2(static_cast<double>(nranks)) : 0.0;
  return pipeline_optimal_chunks(alpha_s, beta_s_per_byte, 2 * log_p, 2, bytes);
}

// Fewest chunks such that every message fits a slot: a chunk of ceil(elems / K) elements is cut
// into `pieces` messages (P for a ring, 1 for a tree) of at most slot_elems elements each.
inline std::uint64_t min_chunks_for_slots(std::uint64_t elems, std::uint64_t pieces,
                                          std::uint64_t slot_elems) {
  if (elems == 0) return 1;
  const std::uint64_t per_chunk =
      std::max<std::uint64_t>(1, slot_elems) * std::max<std::uint64_t>(1, pieces);
  return std::max<std::uint64_t>(1, (elems + per_chunk - 1) / per_chunk);
}

// The chunk count a builder uses for `elems` elements of one channel: req.nchunks if given,
// otherwise the model optimum for a pipeline of `fill_steps` and `steps_per_chunk`, at most
// req.max_chunks when set; then at least min_chunks_for_slots and at most one chunk per element of
// a piece (no empty chunks).
inline std::uint64_t resolve_chunks(const PlanRequest& req, std::uint64_t elems,
                                    std::uint64_t pieces, double fill_steps,
                                    double steps_per_chunk) {
  if (elems == 0) return 1;
  const std::uint64_t slot_elems = req.elem_size ? req.slot_bytes / req.elem_size : 0;
  std::uint64_t k = req.nchunks != 0
                        ? req.nchunks
                        : pipeline_optimal_chunks(
                              req.alpha_s, req.beta_s_per_byte, fill_steps, steps_per_chunk,
                              static_cast<double>(elems) * static_cast<double>(req.elem_size));
  if (req.nchunks == 0 && req.max_chunks != 0) k = std::min<std::uint64_t>(k, req.max_chunks);
  const std::uint64_t most =
      std::max<std::uint64_t>(1, (elems + pieces - 1) / std::max<std::uint64_t>(1, pieces));
  k = std::min(k, most);
  return std::max(k, min_chunks_for_slots(elems, pieces, slot_elems));
}

}  // namespace ccoll::plan
