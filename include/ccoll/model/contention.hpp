// ccoll/model/contention.hpp: the cost of running several allreduces at the same time.
//
// [ASC-WFBP] (Sec. III) models one allreduce of m bytes as a + b m (Eq. 3) and two
// simultaneous ones as each taking a + gamma b m with 1 < gamma <= 2 (Eq. 9): the startup a is paid
// once in parallel, and the shared bandwidth stretches the transfer part. We generalise to k
// simultaneous allreduces with gamma_k = 1 + (gamma - 1)(k - 1), which is gamma_2 = gamma for k =
// 2, gamma_1 = 1, and stays <= k (never worse than sharing a perfectly used link k ways) when gamma
// <= 2. Fitting gamma_k directly per k (model/fit.hpp) is preferable where samples exist.
//
// The penalty of a partial overlap (Eq. 12-13): if task 2 starts `delay` after task 1 (started at
// tau_1, alone it would take a + b m_1), only the part of task 1 not yet sent by then is slowed.
#pragma once

#include <algorithm>

#include "ccoll/model/alpha_beta.hpp"

namespace ccoll::model {

struct Contention {
  AlphaBeta line;    // a + b m of one allreduce alone ([ASC-WFBP] Eq. 3)
  double gamma = 1;  // transfer-time stretch with two at once ([ASC-WFBP] Eq. 9)

  // Stretch with k allreduces at once (our generalisation; gamma_2 = gamma).
  double gamma_k(int k) const { return k <= 1 ? 1.0 : 1.0 + (gamma - 1.0) * (k - 1); }

  // Time of each of k simultaneous allreduces of m bytes: a + gamma_k b m.
  double simultaneous_time(int k, double bytes) const {
    return line.alpha_s + gamma_k(k) * line.beta_s_per_byte * bytes;
  }

  // [ASC-WFBP] Eq. 7 (k = 1) and Eq. 9 (k = 2), generalised: aggregate throughput k m / (a +
  // gamma_k b m).
  double throughput(int k, double bytes) const {
    const double t = simultaneous_time(k, bytes);
    return t > 0 ? k * bytes / t : 0.0;
  }

  // [ASC-WFBP] Eq. 8 generalised: k allreduces one after the other.
  double sequential_time(int k, double bytes) const { return k * line.time(bytes); }

  // [ASC-WFBP] Eq. 11: extra time each of two fully overlapped allreduces pays, (gamma - 1) b m.
  double full_overlap_penalty(double bytes) const {
    return (gamma - 1.0) * line.beta_s_per_byte * bytes;
  }

  // [ASC-WFBP] Eq. 12: bytes of task 1 (m1 bytes, alone a + b m1 long) still in flight when task 2
  // starts `delay` seconds after it; 0 when task 1 is done by then.
  double overlapped_bytes(double bytes1, double delay) const {
    const double t1 = line.time(bytes1);
    if (!(t1 > 0)) return 0.0;
    return std::clamp(bytes1 - delay * bytes1 / t1, 0.0, bytes1);
  }

  // [ASC-WFBP] Eq. 13: the penalty of that partial overlap, (gamma - 1) b m.
  double partial_overlap_penalty(double bytes1, double delay) const {
    return (gamma - 1.0) * line.beta_s_per_byte * overlapped_bytes(bytes1, delay);
  }
};

}  // namespace ccoll::model
