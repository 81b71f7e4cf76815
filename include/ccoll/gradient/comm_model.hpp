// ccoll/gradient/comm_model.hpp: the cost of one gradient allreduce, alone or with others at once.
//
// The schedules of this directory only need, per message of m bytes, a startup time (paid once,
// not slowed by other messages) and a transfer time (stretched when messages run at once):
//   alone:            startup + transfer(m)            -- a + b m ([ASC-WFBP] Eq. 3, [MG-WFBP] Eq.
//   10) k messages at once: each transfer progresses at 1 / gamma_k of its solo speed, gamma_k from
//                     model/contention.hpp (gamma_2 = gamma, [ASC-WFBP] Eq. 9; our k > 2
//                     extension).
// The per-P forms use model/alpha_beta.hpp: ring is the line of [MG-WFBP] Table II; the double
// binary tree at its optimal chunk count is 2 log P alpha + beta m + 2 sqrt(2 alpha beta m log P),
// whose startup is the 2 log P alpha term and whose transfer is the rest (not linear in m).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/model/alpha_beta.hpp"
#include "ccoll/model/contention.hpp"

namespace ccoll::gradient {

enum class Collective { line, ring, double_binary_tree };

inline Collective parse_collective(std::string_view s) {
  if (s == "line") return Collective::line;
  if (s == "ring") return Collective::ring;
  if (s == "dbtree" || s == "double_binary_tree") return Collective::double_binary_tree;
  throw_invalid_argument(-1, "collective", "line, ring or dbtree", s);
}

struct CommModel {
  Collective kind = Collective::line;
  model::AlphaBeta line{1.4e-3, 1.7e-9};  // line: a, b of the allreduce ([ASC-WFBP] Sec. VI-B)
  model::AlphaBeta link{0, 0};            // ring / dbtree: per-link alpha, beta
  int workers = 1;                        // ring / dbtree: P
  double gamma = 1;                       // [ASC-WFBP] Eq. 9

  // a + b m with a given (a, b), e.g. fitted with nccl-tests ([ASC-WFBP] Fig. 4).
  static CommModel from_line(double a, double b, double gamma = 1) {
    CommModel c;
    c.kind = Collective::line;
    c.line = {a, b};
    c.gamma = gamma;
    return c;
  }

  // P workers over links of the given alpha, beta ([MG-WFBP] Sec. 6.4's scaling simulation).
  static CommModel collective(Collective kind, int workers, model::AlphaBeta link,
                              double gamma = 1) {
    if (workers < 1) throw_invalid_argument(-1, "workers", ">= 1", std::to_string(workers));
    CommModel c;
    c.kind = kind;
    c.link = link;
    c.workers = workers;
    c.gamma = gamma;
    if (kind == Collective::ring) c.line = model::ring_allreduce_line(link, workers);
    if (kind == Collective::line) c.line = link;
    return c;
  }

  double startup_s() const {
    if (kind == Collective::double_binary_tree)
      return 2.0 * model::log2_workers(workers) * link.alpha_s;
    return line.alpha_s;
  }

  // Solo transfer time of m bytes (everything after the startup).
  double transfer_s(double bytes) const {
    if (bytes <= 0) return 0;
    if (kind == Collective::double_binary_tree)
      return model::double_binary_tree_allreduce_time(link, workers, bytes) - startup_s();
    return line.beta_s_per_byte * bytes;
  }

  // One allreduce alone.
  double time(double bytes) const { return startup_s() + transfer_s(bytes); }

  // Transfer stretch with k messages transferring at once.
  double gamma_k(int k) const { return model::Contention{line, gamma}.gamma_k(k); }

  std::string describe() const {
    char buf[160];
    if (kind == Collective::line)
      std::snprintf(buf, sizeof buf, "line a=%g s b=%g s/B gamma=%g", line.alpha_s,
                    line.beta_s_per_byte, gamma);
    else
      std::snprintf(buf, sizeof buf, "%s P=%d alpha=%g s beta=%g s/B gamma=%g",
                    kind == Collective::ring ? "ring" : "dbtree", workers, link.alpha_s,
                    link.beta_s_per_byte, gamma);
    return buf;
  }
};

}  // namespace ccoll::gradient
