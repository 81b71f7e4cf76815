// ccoll/topology/lp.hpp: a small dense simplex for packing LPs, max c.x s.t. A x <= b, x >= 0.
//
// The packed-forest solver re-solves its restricted master LP (tree weights under link
// capacities, seed 001 problem (4)) after every round of column generation and prices new trees
// with the LP's dual link prices. Packing LPs have b >= 0, so the all-slack basis is feasible and
// no phase 1 is needed. The tableau is dense but the row updates skip zero entries of the pivot
// column and row, which keeps tree-packing LPs (sparse columns) fast. Dantzig's rule, switching to
// Bland's rule after a run of degenerate pivots, guarantees termination.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

namespace ccoll::topology {

struct LpResult {
  double objective = 0;
  std::vector<double> x;     // primal, per column
  std::vector<double> dual;  // per row, >= 0: the price of one unit of that row's capacity
  std::size_t pivots = 0;
};

// Columns are given sparse: cols[j] = list of (row, coefficient >= 0).
struct LpColumn {
  double objective = 0;
  std::vector<std::pair<int, double>> entries;
};

// Incremental form for column generation: columns can be added after a solve and the next
// solve continues from the previous optimal basis (the new columns' tableau entries are B^-1 a,
// read off the slack columns), so a round of pricing costs a few pivots, not a fresh solve.
class PackingLp {
 public:
  explicit PackingLp(std::vector<double> capacities) : m_(capacities.size()) {
    for (double v : capacities)
      if (!(v >= 0)) throw std::invalid_argument("PackingLp: capacities must be >= 0");
    rows_.assign(m_, std::vector<double>(m_ + 1, 0.0));
    for (std::size_t i = 0; i < m_; ++i) rows_[i][i] = 1.0, rows_[i][m_] = capacities[i];
    z_.assign(m_ + 1, 0.0);
    basis_.resize(m_);
    for (std::size_t i = 0; i < m_; ++i) basis_[i] = i;
  }

  std::size_t rows() const { return m_; }
  std::size_t columns() const { return objective_.size(); }

  void add_column(const LpColumn& c) {
    // Tableau column B^-1 a: combination of the slack columns (which hold B^-1).
    for (std::size_t i = 0; i < m_; ++i) {
      double v = 0;
      for (const auto& [r, a] : c.entries) v += rows_[i][static_cast<std::size_t>(r)] * a;
      rows_[i].push_back(v);
    }
    double zj = -c.objective;
    for (const auto& [r, a] : c.entries) zj += z_[static_cast<std::size_t>(r)] * a;
    z_.push_back(zj);
    objective_.push_back(c.objective);
  }

  LpResult solve(std::size_t max_pivots = 200000) {
    constexpr double eps = 1e-11;
    const std::size_t w = z_.size(), rhs = m_;
    LpResult res;
    std::size_t degenerate = 0;
    std::vector<std::size_t> nz;
    for (; res.pivots < max_pivots; ++res.pivots) {
      const bool bland = degenerate > 50;
      std::size_t q = w;
      double best = -eps;
      for (std::size_t j = 0; j < w; ++j) {
        if (j == rhs) continue;
        if (z_[j] < best) {
          q = j;
          if (bland) break;
          best = z_[j];
        }
      }
      if (q == w) break;
      std::size_t p = m_;
      double ratio = std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < m_; ++i) {
        const double a = rows_[i][q];
        if (a > eps) {
          const double r = rows_[i][rhs] / a;
          if (r < ratio - 1e-13 || (r <= ratio + 1e-13 && p < m_ && basis_[i] < basis_[p]))
            ratio = r, p = i;
        }
      }
      if (p == m_) throw std::runtime_error("PackingLp: unbounded (a column with no capacity row)");
      degenerate = ratio < 1e-13 ? degenerate + 1 : 0;
      auto& prow = rows_[p];
      const double inv = 1.0 / prow[q];
      nz.clear();
      for (std::size_t j = 0; j < w; ++j)
        if (prow[j] != 0.0) {
          prow[j] *= inv;
          nz.push_back(j);
        }
      prow[q] = 1.0;
      for (std::size_t i = 0; i < m_; ++i) {
        if (i == p) continue;
        auto& row = rows_[i];
        const double f = row[q];
        if (f == 0.0) continue;
        for (std::size_t j : nz) row[j] -= f * prow[j];
        row[q] = 0.0;
      }
      const double f = z_[q];
      for (std::size_t j : nz) z_[j] -= f * prow[j];
      z_[q] = 0.0;
      basis_[p] = q;
    }
    const std::size_t n = objective_.size();
    res.x.assign(n, 0.0);
    for (std::size_t i = 0; i < m_; ++i)
      if (basis_[i] > rhs) res.x[basis_[i] - rhs - 1] = rows_[i][rhs];
    res.dual.assign(m_, 0.0);
    for (std::size_t i = 0; i < m_; ++i) res.dual[i] = std::max(0.0, z_[i]);
    for (std::size_t j = 0; j < n; ++j) res.objective += objective_[j] * res.x[j];
    return res;
  }

 private:
  std::size_t m_;
  // Row i: [slack columns 0..m-1 | rhs at m | structural columns m+1 ...].
  std::vector<std::vector<double>> rows_;
  std::vector<double> z_;  // reduced costs, same layout (z_[m] unused)
  std::vector<std::size_t> basis_;
  std::vector<double> objective_;
};

inline LpResult solve_packing_lp(const std::vector<double>& b, const std::vector<LpColumn>& cols,
                                 std::size_t max_pivots = 200000) {
  PackingLp lp(b);
  for (const auto& c : cols) lp.add_column(c);
  return lp.solve(max_pivots);
}

}  // namespace ccoll::topology
