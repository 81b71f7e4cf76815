// ccoll/solve/lp.hpp: a revised simplex for small packing LPs, max c.x s.t. A x <= b, x >= 0,
// that keeps its basis when columns or rows are added, with a certificate check.
//
// The packed-forest solvers fit tree weights with it: the multiplicative-weights solver re-fits
// the weights of the trees it found and prices the duals for more (packed_forest.hpp), the exact
// reference solves its restricted master LP every round of column generation (forest/exact.hpp).
// Both add columns between solves, and their LPs have far more columns (trees) than rows (links),
// so this is the revised simplex: an explicit dense inverse of the basis (rows x rows), sparse
// columns, partial Dantzig pricing (a block of columns at a time), the ratio test on B^-1 a_q,
// rank-one updates of B^-1, of the basic solution and of the duals (y' = y + d_q * row p of the new
// B^-1). Packing LPs have b >= 0, so the all-slack basis is feasible and no phase 1 is needed;
// after adding columns the old basis stays feasible and optimal for the old columns, so a round of
// column generation costs a few pivots. A new row is a new slack in the basis (the old columns do
// not touch it).
//
// Numerics. Pivots use a tolerance relative to the entering column; among rows tied in the ratio
// test the largest pivot wins; the pivots run on capacities perturbed by parts per billion
// (add_row), which breaks the exact ties of symmetric machines, while the reported solution uses
// the true ones; Dantzig's rule switches to Bland's after a run of degenerate pivots, which
// guarantees termination. The duals are recomputed from B^-1 every 64 pivots. After every
// solve the result is checked against the LP: primal feasibility, dual feasibility and equal
// objectives. On failure the solve restarts once from the all-slack basis; a second failure leaves
// status numerical_error (check_optimal() throws on it). An incremental tableau without these
// checks once let the planner report 69718 GB/s on a graph whose optimum is 14.3.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ccoll::solve {

enum class LpStatus : std::uint8_t { optimal, pivot_limit, numerical_error };

struct LpResult {
  LpStatus status = LpStatus::optimal;
  double objective = 0;
  std::vector<double> x;        // primal, per column, >= 0
  std::vector<double> dual;     // per row, >= 0: the price of one unit of that row's capacity
  double dual_objective = 0;    // b.dual
  double primal_violation = 0;  // max over rows of (A x - b)_+ / max(1, b)
  double dual_violation = 0;    // max over columns of (c - A^T dual)_+ / max(1, c)
  std::size_t pivots = 0;
};

// Columns are given sparse: entries = list of (row, coefficient >= 0).
struct LpColumn {
  double objective = 0;
  std::vector<std::pair<int, double>> entries;
};

struct LpOptions {
  std::size_t max_pivots = 200000;
  // Wall-clock budget; past it the solve stops with status pivot_limit and the current basic
  // solution, which is feasible (primal simplex) but maybe not optimal.
  double max_seconds = std::numeric_limits<double>::infinity();
  double tolerance = 1e-7;  // relative, for the certificate check
};

// Checks r.x and r.dual against the LP and fills the objective, violation fields and status.
inline void certify_packing_lp(const std::vector<double>& b, const std::vector<LpColumn>& cols,
                               LpResult& r, double tolerance = 1e-7) {
  std::vector<double> use(b.size(), 0.0);
  r.objective = 0;
  r.dual_violation = 0;
  for (std::size_t j = 0; j < cols.size(); ++j) {
    double lhs = 0;
    for (const auto& [row, a] : cols[j].entries) {
      use[static_cast<std::size_t>(row)] += a * r.x[j];
      lhs += a * r.dual[static_cast<std::size_t>(row)];
    }
    r.objective += cols[j].objective * r.x[j];
    r.dual_violation = std::max(
        r.dual_violation, (cols[j].objective - lhs) / std::max(1.0, std::abs(cols[j].objective)));
  }
  r.primal_violation = 0;
  r.dual_objective = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    r.primal_violation = std::max(r.primal_violation, (use[i] - b[i]) / std::max(1.0, b[i]));
    r.dual_objective += b[i] * r.dual[i];
  }
  const double scale = std::max(1.0, std::abs(r.objective));
  const bool ok = r.primal_violation <= tolerance && r.dual_violation <= tolerance &&
                  std::abs(r.objective - r.dual_objective) <= tolerance * scale;
  if (!ok && r.status == LpStatus::optimal) r.status = LpStatus::numerical_error;
}

class PackingSimplex {
 public:
  PackingSimplex() = default;
  explicit PackingSimplex(const std::vector<double>& capacities) {
    for (double v : capacities) add_row(v);
  }

  std::size_t rows() const { return b_.size(); }
  std::size_t columns() const { return cols_.size(); }
  const std::vector<LpColumn>& column_list() const { return cols_; }

  // A new row (capacity >= 0) enters with its slack basic; existing columns do not touch it.
  int add_row(double capacity) {
    if (!(capacity >= 0) || !std::isfinite(capacity))
      throw std::invalid_argument("PackingSimplex: capacities must be finite and >= 0");
    const std::size_t m = b_.size();
    if (m == ld_) {  // grow the storage of B^-1 geometrically
      const std::size_t ld = std::max<std::size_t>(16, 2 * ld_);
      std::vector<double> next(ld * ld, 0.0);
      for (std::size_t c = 0; c < m; ++c)
        std::copy(binv_.begin() + static_cast<std::ptrdiff_t>(c * ld_),
                  binv_.begin() + static_cast<std::ptrdiff_t>(c * ld_ + m),
                  next.begin() + static_cast<std::ptrdiff_t>(c * ld));
      binv_.swap(next);
      ld_ = ld;
    }
    // B^-1 gains a unit row and column (storage beyond m is kept zero).
    binv_[m * ld_ + m] = 1.0;
    b_.push_back(capacity);
    // The pivots run on capacities perturbed by a few parts per billion (deterministically):
    // symmetric machines have many equal links, and the exact ties make long runs of degenerate
    // pivots. The reported solution is B^-1 b with the true capacities.
    const double jitter = 1.0 + 1e-9 * static_cast<double>(1 + (m * 2654435761u) % 997) / 997.0;
    bp_.push_back(capacity * jitter);
    xb_.push_back(bp_.back());
    basis_.push_back(slack(m));
    y_.push_back(0.0);
    return static_cast<int>(m);
  }

  // A new column starts non-basic (weight 0); rows must exist.
  void add_column(LpColumn c) {
    for (const auto& [row, a] : c.entries)
      if (row < 0 || static_cast<std::size_t>(row) >= b_.size() || !(a >= 0) || !std::isfinite(a))
        throw std::invalid_argument("PackingSimplex: column " + std::to_string(cols_.size()) +
                                    " has a bad entry");
    cols_.push_back(std::move(c));
  }

  // Changes a column's objective; the basis stays feasible, the next solve re-optimises. A
  // negative objective drives a column out of the solution (how pruning removes pairs).
  void set_objective(std::size_t j, double c) { cols_.at(j).objective = c; }

  // Optimises from the current basis; the result is checked (see the header comment).
  LpResult solve(const LpOptions& opt = {}) {
    LpResult r = iterate(opt);
    if (r.status == LpStatus::numerical_error && !std::isfinite(opt.max_seconds) &&
        r.pivots < opt.max_pivots) {
      reset();
      const std::size_t before = r.pivots;
      LpOptions rest = opt;
      rest.max_pivots -= before;
      r = iterate(rest);
      r.pivots += before;
    }
    return r;
  }

 private:
  static constexpr std::int64_t slack(std::size_t row) {
    return -static_cast<std::int64_t>(row) - 1;
  }
  static bool is_slack(std::int64_t v) { return v < 0; }

  void reset() {
    const std::size_t m = b_.size();
    std::fill(binv_.begin(), binv_.end(), 0.0);
    for (std::size_t i = 0; i < m; ++i) binv_[i * ld_ + i] = 1.0, basis_[i] = slack(i);
    xb_ = bp_;
    std::fill(y_.begin(), y_.end(), 0.0);
  }
  double binv(std::size_t i, std::size_t c) const { return binv_[c * ld_ + i]; }
  double& binv(std::size_t i, std::size_t c) { return binv_[c * ld_ + i]; }

  void recompute_duals() {
    const std::size_t m = b_.size();
    std::fill(y_.begin(), y_.end(), 0.0);
    for (std::size_t i = 0; i < m; ++i) {
      if (is_slack(basis_[i])) continue;
      const double c = cols_[static_cast<std::size_t>(basis_[i])].objective;
      if (c == 0.0) continue;
      for (std::size_t k = 0; k < m; ++k) y_[k] += c * binv(i, k);
    }
  }

  LpResult iterate(const LpOptions& opt) {
    const std::size_t m = b_.size(), n = cols_.size();
    LpResult res;
    const auto t0 = std::chrono::steady_clock::now();
    recompute_duals();
    std::vector<double> w(m);
    std::vector<std::size_t> wnz, pnz;
    std::size_t degenerate = 0;
    for (;; ++res.pivots) {
      if (res.pivots >= opt.max_pivots) {
        res.status = LpStatus::pivot_limit;
        break;
      }
      if (res.pivots % 64 == 63) {
        recompute_duals();
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
            opt.max_seconds) {
          res.status = LpStatus::pivot_limit;
          break;
        }
      }
      const bool bland = degenerate > 50;
      // Entering variable: partial pricing. Columns are scanned in blocks from a rotating cursor;
      // the largest reduced cost d = c - y.a of the first block holding a positive one enters
      // (Bland: the first positive in index order). Slacks are scanned with every block.
      std::int64_t q = 0;
      bool found = false;
      double best = 1e-11;
      if (bland) {
        for (std::size_t j = 0; j < n && !found; ++j) {
          const double d = reduced_cost(j);
          if (d > best) best = d, q = static_cast<std::int64_t>(j), found = true;
        }
        for (std::size_t k = 0; k < m && !found; ++k)
          if (-y_[k] > best) best = -y_[k], q = slack(k), found = true;
      } else {
        for (std::size_t k = 0; k < m; ++k)
          if (-y_[k] > best) best = -y_[k], q = slack(k), found = true;
        const std::size_t block = std::max<std::size_t>(64, n / 8);
        for (std::size_t scanned = 0; scanned < n && !found;) {
          const std::size_t len = std::min(block, n - scanned);
          for (std::size_t k = 0; k < len; ++k) {
            const std::size_t j = (cursor_ + k) % n;
            const double d = reduced_cost(j);
            if (d > best) best = d, q = static_cast<std::int64_t>(j), found = true;
          }
          cursor_ = (cursor_ + len) % n;
          scanned += len;
        }
      }
      if (!found) break;  // optimal
      // w = B^-1 a_q.
      std::fill(w.begin(), w.end(), 0.0);
      if (is_slack(q)) {
        const auto k = static_cast<std::size_t>(-q - 1);
        for (std::size_t i = 0; i < m; ++i) w[i] = binv(i, k);
      } else {
        for (const auto& [row, a] : cols_[static_cast<std::size_t>(q)].entries) {
          const double* col = binv_.data() + static_cast<std::size_t>(row) * ld_;
          for (std::size_t i = 0; i < m; ++i) w[i] += a * col[i];
        }
      }
      double wmax = 0;
      for (double v : w) wmax = std::max(wmax, std::abs(v));
      const double tol = 1e-9 * std::max(1.0, wmax);
      std::size_t p = m;
      double ratio = std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < m; ++i) {
        if (w[i] <= tol) continue;
        const double t = std::max(0.0, xb_[i]) / w[i];
        if (p == m || t < ratio * (1 - 1e-12) - 1e-15) {
          ratio = t, p = i;
        } else if (t <= ratio * (1 + 1e-12) + 1e-15) {
          const bool take = bland ? order(basis_[i]) < order(basis_[p]) : w[i] > w[p];
          if (take) ratio = std::min(ratio, t), p = i;
        }
      }
      if (p == m) throw std::runtime_error("PackingSimplex: unbounded (a column with no row)");
      degenerate = ratio <= 1e-13 ? degenerate + 1 : 0;
      // Pivot: row p of B^-1 divided by w_p, subtracted from the others.
      const double wp = w[p];
      pnz.clear();
      for (std::size_t c = 0; c < m; ++c) {
        double& v = binv(p, c);
        if (v != 0.0) v /= wp, pnz.push_back(c);
      }
      wnz.clear();
      for (std::size_t i = 0; i < m; ++i)
        if (i != p && w[i] != 0.0) wnz.push_back(i);
      if (wnz.size() * 4 > m) {  // dense enough: a plain (vectorised) loop over the column
        w[p] = 0.0;
        const double* __restrict wv = w.data();
        for (std::size_t c : pnz) {
          double* __restrict col = binv_.data() + c * ld_;
          const double pv = col[p];
          for (std::size_t i = 0; i < m; ++i) col[i] -= wv[i] * pv;
          col[p] = pv;
        }
        w[p] = wp;
      } else {
        for (std::size_t c : pnz) {
          double* col = binv_.data() + c * ld_;
          const double pv = col[p];
          for (std::size_t i : wnz) col[i] -= w[i] * pv;
        }
      }
      const double theta = ratio;
      for (std::size_t i : wnz) {
        xb_[i] -= w[i] * theta;
        if (xb_[i] < 0 && xb_[i] > -1e-12 * std::max(1.0, b_[i])) xb_[i] = 0;
      }
      xb_[p] = theta;
      for (std::size_t c : pnz) y_[c] += best * binv(p, c);
      basis_[p] = q;
    }
    recompute_duals();
    // Basic solution from B^-1 b with the true capacities (and xb_ afresh from the perturbed).
    res.x.assign(n, 0.0);
    for (std::size_t i = 0; i < m; ++i) {
      double v = 0, vp = 0;
      for (std::size_t c = 0; c < m; ++c) v += binv(i, c) * b_[c], vp += binv(i, c) * bp_[c];
      xb_[i] = vp;
      if (!is_slack(basis_[i])) res.x[static_cast<std::size_t>(basis_[i])] = std::max(0.0, v);
    }
    res.dual.assign(m, 0.0);
    for (std::size_t k = 0; k < m; ++k) res.dual[k] = std::max(0.0, y_[k]);
    certify_packing_lp(b_, cols_, res, opt.tolerance);
    return res;
  }

  double reduced_cost(std::size_t j) const {
    double d = cols_[j].objective;
    for (const auto& [row, a] : cols_[j].entries) d -= a * y_[static_cast<std::size_t>(row)];
    return d;
  }

  // A total order on variables for Bland's rule: structural columns, then slacks.
  std::int64_t order(std::int64_t v) const {
    return is_slack(v) ? static_cast<std::int64_t>(cols_.size()) + (-v - 1) : v;
  }

  std::vector<double> b_, bp_, xb_, y_;  // capacities, perturbed ones, basic values, duals
  std::vector<double> binv_;  // column-major: binv_[c * ld_ + i] = (B^-1)_{i,c}, i, c < m
  std::size_t ld_ = 0;        // storage stride (capacity in rows)
  std::size_t cursor_ = 0;    // partial pricing position
  std::vector<std::int64_t> basis_;
  std::vector<LpColumn> cols_;
};

inline LpResult solve_packing_lp(const std::vector<double>& b, const std::vector<LpColumn>& cols,
                                 const LpOptions& opt = {}) {
  PackingSimplex lp(b);
  for (const auto& c : cols) lp.add_column(c);
  return lp.solve(opt);
}

// Throws std::runtime_error naming `what` unless `r` is a verified optimum.
inline void check_optimal(const LpResult& r, const std::string& what) {
  if (r.status == LpStatus::optimal) return;
  throw std::runtime_error(
      what + ": LP " +
      (r.status == LpStatus::pivot_limit ? "hit its pivot limit" : "failed its optimality check") +
      " (objective " + std::to_string(r.objective) + ", dual " + std::to_string(r.dual_objective) +
      ", primal violation " + std::to_string(r.primal_violation) + ", dual violation " +
      std::to_string(r.dual_violation) + ")");
}

}  // namespace ccoll::solve
