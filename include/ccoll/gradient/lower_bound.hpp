// ccoll/gradient/lower_bound.hpp: provable lower bounds on the iteration time of any schedule.
//
// The exact planner (optimal.hpp) prunes and certifies with these bounds, so they must hold for
// every layer typing under timeline.hpp's evaluator: messages pay a startup (no transfer) and then
// transfer their solo work w = transfer_s(bytes); with k messages transferring at once each
// progresses at 1 / gamma_k, so the aggregate rate is R_k = k / gamma_k; at most K messages are
// in flight.
//
// Capacity bound. Over an interval in which messages must do W seconds of solo transfer work and
// S seconds of startup, the interval lasts at least D(W, S), the value of the linear program
//   minimise sum_s x_s  over states s = (j startups, k transfers), j + k <= K,
//   subject to sum_s x_s R_k >= W  and  sum_s x_s j >= S,
// because a startup holds a slot without transferring. With K = 2 and gamma = 1.5 each startup
// costs at least a (1 - 1 / R_2) = a / 4 of channel time even when hidden behind a transfer: this
// is what makes the bound see that splitting a gradient into more messages is not free. D is
// evaluated through the vertices of the dual polygon (max over u W + v S).
//
// Relaxed schedule bound. Consider any schedule, and the message i (in issue order) whose lowest
// layer is lo_i. Messages i..n (those holding layers <= hi_i) cannot start before ready(lo_i), so
//   iteration >= ready(lo_i) + D(T(0..hi_i), (n - i + 1) a),
// with T(0..h) = transfer_s(bytes of layers 0..h), the solo transfer of those layers as one
// message: a lower bound on the total solo transfer of any split of them into messages, since
// transfer_s is subadditive (linear for the line and the ring, concave for the double binary tree).
// Minimising the largest of these terms over all partitions of layers 0..h into messages is a
// dynamic programme over (messages, top layer), exact for this relaxation and O(n_max h^2); n_max
// is where more messages provably cannot beat the upper bound. H(b) is that bound for layers 0..b-1
// alone, the part of a planner's state that does not depend on its past.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/profile.hpp"

namespace ccoll::gradient {

// D(W, S) for a communication channel with at most `max_concurrent` messages in flight.
class CapacityBound {
 public:
  CapacityBound(const CommModel& c, int max_concurrent) {
    // Primal state types (j startups, k transferring); dual constraints u R_k + v j <= 1.
    struct Row {
      double r, j;
    };
    std::vector<Row> rows;
    for (int k = 0; k <= max_concurrent; ++k)
      for (int j = 0; j + k <= max_concurrent; ++j)
        if (k > 0 || j > 0)
          rows.push_back({k > 0 ? k / c.gamma_k(k) : 0.0, static_cast<double>(j)});
    // Vertices of {u, v >= 0, u r + v j <= 1}: pairwise intersections of the constraint lines and
    // the axes; keep the feasible ones.
    auto feasible = [&](double u, double v) {
      if (u < -1e-12 || v < -1e-12) return false;
      for (const Row& q : rows)
        if (u * q.r + v * q.j > 1 + 1e-12) return false;
      return true;
    };
    auto add = [&](double u, double v) {
      if (feasible(u, v)) vertices_.push_back({std::max(u, 0.0), std::max(v, 0.0)});
    };
    for (const Row& q : rows) {
      if (q.r > 0) add(1.0 / q.r, 0.0);  // v = 0 axis
      if (q.j > 0) add(0.0, 1.0 / q.j);  // u = 0 axis
    }
    for (std::size_t x = 0; x < rows.size(); ++x)
      for (std::size_t y = x + 1; y < rows.size(); ++y) {
        const double det = rows[x].r * rows[y].j - rows[y].r * rows[x].j;
        if (det == 0) continue;
        add((rows[y].j - rows[x].j) / det, (rows[x].r - rows[y].r) / det);
      }
  }

  double operator()(double work_s, double startup_s) const {
    double d = 0;
    for (const auto& v : vertices_) d = std::max(d, v.u * work_s + v.v * startup_s);
    return d;
  }

 private:
  struct Vertex {
    double u, v;
  };
  std::vector<Vertex> vertices_;
};

// H(b) for b = 0..L: a lower bound on the time at which layers 0..b-1 can all be all-reduced,
// counted from time 0, whatever happened before (their readiness alone); values at or above
// `cap` are reported as `cap` (only comparisons with an upper bound `cap` are meaningful then).
inline std::vector<double> relaxed_suffix_bounds(const ModelProfile& p, const CommModel& c,
                                                 int max_concurrent, double cap) {
  const int L = p.num_layers();
  const std::vector<double> ready = p.ready_times();
  const CapacityBound D(c, max_concurrent);
  const double a = c.startup_s();
  // T[h + 1] = T(0..h), layers 0..h as one message: for a concave cost (the double binary tree),
  // the sum of their transfers alone would exceed what a split into a few messages costs.
  std::vector<double> T(static_cast<std::size_t>(L) + 1, 0.0);
  double bytes = 0;
  for (int i = 0; i < L; ++i) {
    bytes += static_cast<double>(p.layers[static_cast<std::size_t>(i)].bytes);
    T[static_cast<std::size_t>(i) + 1] = c.transfer_s(bytes);
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(static_cast<std::size_t>(L), inf);  // over message counts so far
  std::vector<double> row(static_cast<std::size_t>(L)), next(static_cast<std::size_t>(L));
  for (int h = 0; h < L; ++h) {  // one message for layers 0..h
    row[static_cast<std::size_t>(h)] = ready[0] + D(T[static_cast<std::size_t>(h) + 1], a);
    best[static_cast<std::size_t>(h)] = row[static_cast<std::size_t>(h)];
  }
  for (int n = 2; n <= L; ++n) {
    // A partition of 0..h into n messages has a top term >= ready(h) + D(T(0..h), n a); once that
    // reaches min(best so far, cap) for every h, more messages cannot lower any bound below cap.
    bool useful = false;
    for (int h = n - 1; h < L && !useful; ++h)
      useful = ready[static_cast<std::size_t>(h)] + D(T[static_cast<std::size_t>(h) + 1], n * a) <
               std::min(best[static_cast<std::size_t>(h)], cap);
    if (!useful) break;
    std::fill(next.begin(), next.end(), inf);
    for (int h = n - 1; h < L; ++h) {
      const double top_work = T[static_cast<std::size_t>(h) + 1];
      const double top_floor = D(top_work, n * a);
      double v = inf;
      // The top message holds layers lo..h; below it, n - 1 messages hold 0..lo-1.
      for (int lo = h; lo >= n - 1; --lo) {
        const double top = ready[static_cast<std::size_t>(lo)] + top_floor;
        if (top >= v) break;  // ready grows as lo falls: later lo only worse
        v = std::min(v, std::max(top, row[static_cast<std::size_t>(lo) - 1]));
      }
      next[static_cast<std::size_t>(h)] = v;
      best[static_cast<std::size_t>(h)] = std::min(best[static_cast<std::size_t>(h)], v);
    }
    std::swap(row, next);
  }
  std::vector<double> H(static_cast<std::size_t>(L) + 1, 0.0);
  for (int b = 1; b <= L; ++b) {
    const double last = ready[0] + a + c.transfer_s(static_cast<double>(p.layers[0].bytes));
    H[static_cast<std::size_t>(b)] =
        std::min(cap, std::max(best[static_cast<std::size_t>(b) - 1], last));
  }
  return H;
}

}  // namespace ccoll::gradient
