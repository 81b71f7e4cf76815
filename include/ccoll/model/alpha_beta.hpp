// ccoll/model/alpha_beta.hpp: the alpha-beta cost of one message and of whole allreduces.
//
// One message of m bytes over one link costs alpha + beta m (Hockney). An allreduce over P workers
// is then, for each algorithm, again a line a + b m whose coefficients [MG-WFBP] (Sec. 2.5,
// Table II) tabulates after Thakur et al. Our copy of [MG-WFBP] lost the table's formulas, so the
// coefficients below are derived here, step by step, in the classic model: full-duplex links, one
// link per peer pair, `reduce_s_per_byte` (Thakur's gamma; 0 = free arithmetic) per reduced byte.
//
//   binary tree (reduce up, then broadcast down, whole message per step, both children received
//   one after the other as in Thakur):
//       a = 2 log P alpha,    b = (2 beta + gamma) log P
//   recursive doubling:
//       a = log P alpha,      b = (beta + gamma) log P
//   recursive halving/doubling (Rabenseifner):
//       a = 2 log P alpha,    b = 2 (P-1)/P beta + (P-1)/P gamma
//   ring:
//       a = 2 (P-1) alpha,    b = 2 (P-1)/P beta + (P-1)/P gamma
//   double binary tree (two pipelined trees, each with half the data, K chunks per tree):
//       T(K) = 2 (log P + K) (alpha + beta m / (2K)),
//       smallest at K* = sqrt(log P beta m / (2 alpha)):
//       T* = 2 log P alpha + beta m + 2 sqrt(2 alpha beta m log P)
//   which is not a line in m; the a/b split of Table II holds only for a fixed K.
//
// [C-Cube] (Sec. II-C and III-C) gives the pipelined single tree with K chunks:
//   Eq. 3: T_reduce = T_broadcast = (log P + K)(alpha + beta N / K)
//   Eq. 4: K_opt = sqrt(log P beta N / alpha)
//   Eq. 6: T_tree = 2 log P alpha + 2 beta N + 4 sqrt(alpha beta N log P)
//   Eq. 7: overlapped tree (C1), 2 log P + K steps: T = 2 log P alpha + beta N + 3 sqrt(...)
// Eq. 7's 3 sqrt(...) is (2 log P + K)(alpha + beta N / K) evaluated at Eq. 4's K, which is the
// phased optimum; the overlapped pipeline's own optimum is K = sqrt(2 log P beta N / alpha) with
// 2 sqrt(2) sqrt(...) ~ 2.83 sqrt(...). Both are provided; plan/chunking.hpp uses the latter.
// "log P" is log2 P in the papers; callers with an actual tree pass its depth instead.
#pragma once

#include <algorithm>
#include <cmath>

namespace ccoll::model {

// Cost of one message over one link (or, for collectives, the line a + b m of Table II).
struct AlphaBeta {
  double alpha_s = 0;          // latency per message, seconds
  double beta_s_per_byte = 0;  // inverse bandwidth, seconds per byte

  double time(double bytes) const { return alpha_s + beta_s_per_byte * bytes; }

  // From a bandwidth in GB/s (1e9 bytes per second) and a latency in microseconds.
  static AlphaBeta from_link(double bandwidth_GBps, double latency_us) {
    return AlphaBeta{latency_us * 1e-6, bandwidth_GBps > 0 ? 1.0 / (bandwidth_GBps * 1e9) : 0.0};
  }
};

inline double log2_workers(int nworkers) {
  return nworkers > 1 ? std::log2(static_cast<double>(nworkers)) : 0.0;
}

// Table II as lines a + b m ----------------------------------------------------------------------

inline AlphaBeta ring_allreduce_line(const AlphaBeta& link, int P, double reduce_s_per_byte = 0) {
  if (P <= 1) return AlphaBeta{0, 0};
  const double f = static_cast<double>(P - 1) / P;
  return AlphaBeta{2.0 * (P - 1) * link.alpha_s,
                   2.0 * f * link.beta_s_per_byte + f * reduce_s_per_byte};
}

inline AlphaBeta binary_tree_allreduce_line(const AlphaBeta& link, int P,
                                            double reduce_s_per_byte = 0) {
  const double lg = log2_workers(P);
  return AlphaBeta{2.0 * lg * link.alpha_s, (2.0 * link.beta_s_per_byte + reduce_s_per_byte) * lg};
}

inline AlphaBeta recursive_doubling_allreduce_line(const AlphaBeta& link, int P,
                                                   double reduce_s_per_byte = 0) {
  const double lg = log2_workers(P);
  return AlphaBeta{lg * link.alpha_s, (link.beta_s_per_byte + reduce_s_per_byte) * lg};
}

inline AlphaBeta recursive_halving_doubling_allreduce_line(const AlphaBeta& link, int P,
                                                           double reduce_s_per_byte = 0) {
  if (P <= 1) return AlphaBeta{0, 0};
  const double f = static_cast<double>(P - 1) / P;
  return AlphaBeta{2.0 * log2_workers(P) * link.alpha_s,
                   2.0 * f * link.beta_s_per_byte + f * reduce_s_per_byte};
}

// Collective times for P workers and m bytes ---------------------------------------------------

inline double ring_allreduce_time(const AlphaBeta& link, int P, double bytes,
                                  double reduce_s_per_byte = 0) {
  return ring_allreduce_line(link, P, reduce_s_per_byte).time(bytes);
}

inline double binary_tree_allreduce_time(const AlphaBeta& link, int P, double bytes,
                                         double reduce_s_per_byte = 0) {
  return binary_tree_allreduce_line(link, P, reduce_s_per_byte).time(bytes);
}

inline double recursive_doubling_allreduce_time(const AlphaBeta& link, int P, double bytes,
                                                double reduce_s_per_byte = 0) {
  return recursive_doubling_allreduce_line(link, P, reduce_s_per_byte).time(bytes);
}

inline double recursive_halving_doubling_allreduce_time(const AlphaBeta& link, int P, double bytes,
                                                        double reduce_s_per_byte = 0) {
  return recursive_halving_doubling_allreduce_line(link, P, reduce_s_per_byte).time(bytes);
}

// Pipelined trees ([C-Cube] Sec. II-C, III-C) -----------------------------------------------------

// [C-Cube] Eq. 3: one phase (reduce or broadcast) of a pipelined tree of depth `depth` with K
// chunks.
inline double tree_phase_time(const AlphaBeta& link, double depth, double bytes, double chunks) {
  chunks = std::max(1.0, chunks);
  return (depth + chunks) * link.time(bytes / chunks);
}

// [C-Cube] Eq. 3 + 5: phased tree (baseline B), reduce then broadcast.
inline double phased_tree_time(const AlphaBeta& link, double depth, double bytes, double chunks) {
  return 2.0 * tree_phase_time(link, depth, bytes, chunks);
}

// [C-Cube] Sec. III-C: overlapped tree (C1), 2 depth + K steps of one chunk each.
inline double overlapped_tree_time(const AlphaBeta& link, double depth, double bytes,
                                   double chunks) {
  chunks = std::max(1.0, chunks);
  return (2.0 * depth + chunks) * link.time(bytes / chunks);
}

// [C-Cube] Eq. 4 (real-valued): the phased tree's optimal chunk count.
inline double phased_tree_optimal_chunks(const AlphaBeta& link, double depth, double bytes) {
  if (!(link.alpha_s > 0)) return bytes > 0 ? bytes : 1.0;
  return std::sqrt(depth * link.beta_s_per_byte * bytes / link.alpha_s);
}

// The overlapped tree's own optimum (not in [C-Cube]): K = sqrt(2 depth beta N / alpha).
inline double overlapped_tree_optimal_chunks(const AlphaBeta& link, double depth, double bytes) {
  if (!(link.alpha_s > 0)) return bytes > 0 ? bytes : 1.0;
  return std::sqrt(2.0 * depth * link.beta_s_per_byte * bytes / link.alpha_s);
}

// [C-Cube] Eq. 6: the phased tree at K_opt.
inline double phased_tree_optimal_time(const AlphaBeta& link, double depth, double bytes) {
  return 2.0 * depth * link.alpha_s + 2.0 * link.beta_s_per_byte * bytes +
         4.0 * std::sqrt(link.alpha_s * link.beta_s_per_byte * bytes * depth);
}

// [C-Cube] Eq. 7 as printed (overlapped tree at the phased K_opt of Eq. 4).
inline double overlapped_tree_time_seed004_eq7(const AlphaBeta& link, double depth, double bytes) {
  return 2.0 * depth * link.alpha_s + link.beta_s_per_byte * bytes +
         3.0 * std::sqrt(link.alpha_s * link.beta_s_per_byte * bytes * depth);
}

// The overlapped tree at its own optimum: 2 depth alpha + beta N + 2 sqrt(2 alpha beta N depth).
inline double overlapped_tree_optimal_time(const AlphaBeta& link, double depth, double bytes) {
  return 2.0 * depth * link.alpha_s + link.beta_s_per_byte * bytes +
         2.0 * std::sqrt(2.0 * link.alpha_s * link.beta_s_per_byte * bytes * depth);
}

// Gradient turnaround ([C-Cube] Sec. III-C): when the first chunk is reduced and back at every
// worker. Overlapped: 2 depth steps. Phased: the whole reduce (depth + K steps) then depth more.
inline double overlapped_tree_turnaround(const AlphaBeta& link, double depth, double bytes,
                                         double chunks) {
  chunks = std::max(1.0, chunks);
  return 2.0 * depth * link.time(bytes / chunks);
}
inline double phased_tree_turnaround(const AlphaBeta& link, double depth, double bytes,
                                     double chunks) {
  chunks = std::max(1.0, chunks);
  return (2.0 * depth + chunks) * link.time(bytes / chunks);
}

// Double binary tree: two phased trees at once, each with half the bytes and K chunks.
inline double double_binary_tree_allreduce_time(const AlphaBeta& link, int P, double bytes,
                                                double chunks) {
  return phased_tree_time(link, log2_workers(P), bytes / 2.0, chunks);
}

// ... at its optimal K (the Table II row, our derivation): 2 log P alpha + beta m + 2 sqrt(2 alpha
// beta m log P).
inline double double_binary_tree_allreduce_time(const AlphaBeta& link, int P, double bytes) {
  const double lg = log2_workers(P);
  return 2.0 * lg * link.alpha_s + link.beta_s_per_byte * bytes +
         2.0 * std::sqrt(2.0 * link.alpha_s * link.beta_s_per_byte * bytes * lg);
}

// Parameter server with one server per shard (or all shards on one link of the same speed): every
// worker pushes m and pulls m through its own link, the servers' links carry P m in total. With
// S servers sharing the load evenly and links as fast as the workers': 2 alpha + 2 beta m max(1,
// P / S) (push and pull each bottlenecked by the busier side).
inline double parameter_server_allreduce_time(const AlphaBeta& link, int P, double bytes,
                                              int servers = 1) {
  const double load = std::max(1.0, static_cast<double>(P) / std::max(1, servers));
  return 2.0 * link.alpha_s + 2.0 * link.beta_s_per_byte * bytes * load;
}

// nccl-tests' bus bandwidth factor for allreduce: busbw = algbw * 2 (P - 1) / P.
inline double allreduce_bus_factor(int P) {
  return P > 1 ? 2.0 * (P - 1) / static_cast<double>(P) : 0.0;
}

}  // namespace ccoll::model
