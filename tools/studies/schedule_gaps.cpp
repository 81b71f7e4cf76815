// ccoll_schedule_gaps: how far the published planners fall from the optimum.
//
// Draws random profiles small enough for the exact search to finish with a proof (L = 3..12),
// in three regimes set by the ratio of communication to backward time, solves each exactly with
// at most two allreduces in flight (ASC-WFBP's two-way simultaneity), and prints one CSV row per
// instance: the exact optimum, ASC-WFBP ([ASC-WFBP] Alg. 1), MG-WFBP exact and [MG-WFBP]'s rule,
// WFBP and single-layer. scripts/repro_schedules.py summarises the rows (docs/schedules.md).
//
//   ccoll_schedule_gaps [--trials N] [--seed S] [--max-layers L] [--concurrency K]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "ccoll/gradient/asc_wfbp.hpp"
#include "ccoll/gradient/mg_wfbp.hpp"
#include "ccoll/gradient/optimal.hpp"
#include "ccoll/gradient/single_layer.hpp"
#include "ccoll/gradient/wfbp.hpp"

using namespace ccoll::gradient;

int main(int argc, char** argv) {
  int trials = 1000, max_layers = 12, K = 2;
  unsigned long long seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--trials")
      trials = std::atoi(argv[i + 1]);
    else if (f == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (f == "--max-layers")
      max_layers = std::atoi(argv[i + 1]);
    else if (f == "--concurrency")
      K = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--trials N] [--seed S] [--max-layers L] [--concurrency K]\n",
                   argv[0]);
      return 2;
    }
  }
  if (trials < 1 || max_layers < 3 || K < 2) {
    std::fprintf(stderr, "need --trials >= 1, --max-layers >= 3, --concurrency >= 2\n");
    return 2;
  }
  std::mt19937_64 rng(seed);
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto logu = [&](double lo, double hi) { return std::exp(uni(std::log(lo), std::log(hi))); };
  const char* regimes[] = {"compute", "balanced", "comm"};
  std::printf(
      "trial,regime,layers,a_s,b_s_per_B,gamma,optimal_s,proven,asc_s,mg_s,mg_paper_s,"
      "wfbp_s,single_s,backward_end_s\n");
  OptimalOptions opt;
  opt.max_concurrent = K;
  opt.time_limit_s = 60;
  for (int t = 0; t < trials; ++t) {
    const int regime = t % 3;
    const int L = 3 + static_cast<int>(rng() % static_cast<unsigned>(max_layers - 2));
    ModelProfile p;
    p.name = "random";
    p.forward_s = uni(0, 0.02);
    double backward = 0, bytes = 0;
    for (int i = 0; i < L; ++i) {
      LayerProfile l;
      l.name = detail::cat({"l", std::to_string(i + 1)});
      l.bytes = static_cast<std::uint64_t>(logu(1e3, 3e7)) / 4 * 4;
      l.backward_s = logu(1e-5, 5e-3);
      backward += l.backward_s;
      bytes += static_cast<double>(l.bytes);
      p.layers.push_back(l);
    }
    // Communication of the whole model over backward time: ~0.2 (compute-bound), ~1, ~5.
    const double ratio = regime == 0 ? logu(0.05, 0.5) : regime == 1 ? logu(0.5, 2) : logu(2, 10);
    const double startup_share = uni(0.05, 0.8);  // of the communication time, spent in startups
    const double comm = ratio * backward;
    const double a = comm * startup_share / L;
    const double b = comm * (1 - startup_share) / bytes;
    const CommModel c = CommModel::from_line(a, b, uni(1.0, 2.0));
    const OptimalResult r = solve_optimal(p, c, opt);
    std::printf("%d,%s,%d,%.9g,%.9g,%.6f,%.12g,%d,%.12g,%.12g,%.12g,%.12g,%.12g,%.12g\n", t,
                regimes[regime], L, a, b, c.gamma, r.iteration_s, r.proven_optimal ? 1 : 0,
                iteration_time(p, plan_asc_wfbp(p, c, K), c),
                iteration_time(p, plan_mg_wfbp(p, c), c),
                iteration_time(p, plan_mg_wfbp_paper(p, c), c), iteration_time(p, plan_wfbp(p), c),
                iteration_time(p, plan_single_layer(p), c), p.ready_times()[0]);
  }
  return 0;
}
