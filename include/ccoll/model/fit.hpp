// ccoll/model/fit.hpp: alpha-beta(-gamma) parameters fitted to measured (size, time) samples.
//
// [ASC-WFBP] (Sec. VI-B) and [MG-WFBP] (Sec. 6.2) fit t = a + b m to nccl-tests runs over a range
// of sizes and gamma to runs with two allreduces at once; we do the same by ordinary least squares.
// Samples come from nccl-tests' text output (parse_nccl_tests, here) or from our own ccoll_perf
// JSON (model/fit_json.hpp, which needs nlohmann-json).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/model/alpha_beta.hpp"

namespace ccoll::model {

struct Sample {
  double bytes = 0;
  double time_s = 0;
  int concurrent = 1;  // allreduces running at the same time when this was measured
};

struct LinearFit {
  AlphaBeta line;  // a (s) and b (s per byte)
  double r2 = 0;   // coefficient of determination
  double max_rel_error = 0;
};

// Ordinary least squares t = a + b m over the samples (their `concurrent` is ignored).
inline LinearFit fit_alpha_beta(const std::vector<Sample>& samples) {
  const double n = static_cast<double>(samples.size());
  double sx = 0, sy = 0;
  for (const auto& s : samples) {
    sx += s.bytes;
    sy += s.time_s;
  }
  if (samples.size() < 2) throw std::invalid_argument("fit_alpha_beta: need at least 2 samples");
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& s : samples) {
    sxx += (s.bytes - mx) * (s.bytes - mx);
    sxy += (s.bytes - mx) * (s.time_s - my);
    syy += (s.time_s - my) * (s.time_s - my);
  }
  if (!(sxx > 0)) throw std::invalid_argument("fit_alpha_beta: need at least 2 distinct sizes");
  LinearFit fit;
  fit.line.beta_s_per_byte = sxy / sxx;
  fit.line.alpha_s = my - fit.line.beta_s_per_byte * mx;
  double sse = 0;
  for (const auto& s : samples) {
    const double r = s.time_s - fit.line.time(s.bytes);
    sse += r * r;
    if (s.time_s > 0) fit.max_rel_error = std::max(fit.max_rel_error, std::abs(r) / s.time_s);
  }
  fit.r2 = syy > 0 ? 1.0 - sse / syy : 1.0;
  return fit;
}

// Least-squares gamma of [ASC-WFBP] Eq. 9 given the single-allreduce line: each sample with k > 1
// concurrent allreduces contributes t - a - b m = (gamma - 1)(k - 1) b m (model/contention.hpp).
inline double fit_gamma(const AlphaBeta& line, const std::vector<Sample>& samples) {
  double num = 0, den = 0;
  for (const auto& s : samples) {
    if (s.concurrent <= 1) continue;
    const double x = (s.concurrent - 1) * line.beta_s_per_byte * s.bytes;
    num += x * (s.time_s - line.time(s.bytes));
    den += x * x;
  }
  if (!(den > 0)) throw std::invalid_argument("fit_gamma: need samples with concurrent > 1");
  return 1.0 + num / den;
}

// Rows of nccl-tests' all_reduce_perf output (size, count, type, redop, root, then out-of-place
// time/algbw/busbw/#wrong and in-place time/algbw/busbw/#wrong; times in microseconds). Comment
// lines (#) and anything that does not parse are skipped. Older versions without the root column
// are recognised by their column count.
inline std::vector<Sample> parse_nccl_tests(const std::string& text, bool in_place = false) {
  std::vector<Sample> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream cols(line);
    std::vector<std::string> c;
    for (std::string w; cols >> w;) c.push_back(w);
    // 13 columns with root, 12 without.
    std::size_t time_col;
    if (c.size() >= 13) {
      time_col = in_place ? 9 : 5;
    } else if (c.size() == 12) {
      time_col = in_place ? 8 : 4;
    } else {
      continue;
    }
    try {
      std::size_t used = 0;
      const double bytes = std::stod(c[0], &used);
      if (used != c[0].size()) continue;
      const double us = std::stod(c[time_col], &used);
      if (used != c[time_col].size()) continue;
      rows.push_back(Sample{bytes, us * 1e-6, 1});
    } catch (const std::exception&) {
      continue;
    }
  }
  return rows;
}

}  // namespace ccoll::model
