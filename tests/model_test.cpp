// Tests of the alpha-beta(-gamma) cost models and their fitting (include/ccoll/model).
#include <doctest/doctest.h>
#include <cmath>
#include <string>
#include <vector>

#include "ccoll/model/alpha_beta.hpp"
#include "ccoll/model/contention.hpp"
#include "ccoll/model/fit.hpp"
#include "ccoll/model/fit_json.hpp"

namespace model_test {
using namespace ccoll::model;

namespace {
const AlphaBeta kLink{5e-6, 1.0 / 10e9};
}

TEST_CASE("alpha-beta message time and link construction") {
  CHECK(kLink.time(0) == doctest::Approx(5e-6));
  CHECK(kLink.time(1e9) == doctest::Approx(5e-6 + 0.1));
  const AlphaBeta l = AlphaBeta::from_link(25, 2);
  CHECK(l.alpha_s == doctest::Approx(2e-6));
  CHECK(l.beta_s_per_byte == doctest::Approx(1.0 / 25e9));
}

TEST_CASE("Table II collective lines") {
  for (int P : {2, 4, 8, 16, 64, 1024}) {
    const double lg = std::log2(P), f = (P - 1.0) / P;
    for (double m : {0.0, 1e3, 1e6, 1e9}) {
      CHECK(ring_allreduce_time(kLink, P, m) ==
            doctest::Approx(2 * (P - 1) * kLink.alpha_s + 2 * f * kLink.beta_s_per_byte * m));
      CHECK(binary_tree_allreduce_time(kLink, P, m, 1e-11) ==
            doctest::Approx(2 * lg * kLink.alpha_s + (2 * kLink.beta_s_per_byte + 1e-11) * lg * m));
      CHECK(recursive_doubling_allreduce_time(kLink, P, m) == doctest::Approx(lg * kLink.time(m)));
      CHECK(recursive_halving_doubling_allreduce_time(kLink, P, m) ==
            doctest::Approx(2 * lg * kLink.alpha_s + 2 * f * kLink.beta_s_per_byte * m));
      // Bandwidth-optimal algorithms never move fewer bytes per link than 2 (P-1)/P m.
      CHECK(ring_allreduce_time(kLink, P, m) >= 2 * f * kLink.beta_s_per_byte * m);
    }
    // The double binary tree at its optimum beats every fixed K.
    const double m = 64e6;
    const double best = double_binary_tree_allreduce_time(kLink, P, m);
    for (double K : {1.0, 4.0, 16.0, 64.0, 256.0, 4096.0})
      CHECK(best <= double_binary_tree_allreduce_time(kLink, P, m, K) * (1 + 1e-9));
  }
}

TEST_CASE("[C-Cube] Eq. 3-7 and their optima") {
  for (int P : {8, 64, 1024}) {
    const double L = std::log2(P);
    for (double N : {16e3, 1e6, 64e6}) {
      const double k4 = phased_tree_optimal_chunks(kLink, L, N);
      CHECK(k4 == doctest::Approx(std::sqrt(L * kLink.beta_s_per_byte * N / kLink.alpha_s)));
      // Eq. 6 is Eq. 3 + 5 at Eq. 4's K.
      CHECK(phased_tree_optimal_time(kLink, L, N) ==
            doctest::Approx(phased_tree_time(kLink, L, N, k4)));
      // Eq. 7 as printed is the overlapped pipeline at Eq. 4's K ...
      CHECK(overlapped_tree_time_seed004_eq7(kLink, L, N) ==
            doctest::Approx(overlapped_tree_time(kLink, L, N, k4)));
      // ... and the overlapped pipeline's own optimum is at least as good.
      const double ko = overlapped_tree_optimal_chunks(kLink, L, N);
      CHECK(overlapped_tree_optimal_time(kLink, L, N) ==
            doctest::Approx(overlapped_tree_time(kLink, L, N, ko)));
      CHECK(overlapped_tree_optimal_time(kLink, L, N) <=
            overlapped_tree_time_seed004_eq7(kLink, L, N) * (1 + 1e-12));
      for (double K : {1.0, 8.0, 256.0}) {
        CHECK(overlapped_tree_time(kLink, L, N, K) < phased_tree_time(kLink, L, N, K));
        CHECK(overlapped_tree_turnaround(kLink, L, N, K) <= phased_tree_turnaround(kLink, L, N, K));
      }
    }
  }
}

TEST_CASE("contention gamma ([ASC-WFBP] Eq. 7-13)") {
  const Contention c{AlphaBeta{1.4e-3, 1.7e-9}, 1.5};
  CHECK(c.gamma_k(1) == 1.0);
  CHECK(c.gamma_k(2) == 1.5);
  CHECK(c.gamma_k(4) == doctest::Approx(2.5));
  for (double m : {1e3, 1e6, 1e8}) {
    // Eq. 9 vs Eq. 7/8: two at once deliver more than one alone, each one takes longer.
    CHECK(c.throughput(2, m) > c.throughput(1, m));
    CHECK(c.simultaneous_time(2, m) > c.simultaneous_time(1, m));
    CHECK(c.simultaneous_time(2, m) < c.sequential_time(2, m));
    CHECK(c.full_overlap_penalty(m) == doctest::Approx(0.5 * 1.7e-9 * m));
    // Eq. 12-13: no delay = full overlap; delay past the end = none; halfway = half.
    CHECK(c.partial_overlap_penalty(m, 0) == doctest::Approx(c.full_overlap_penalty(m)));
    CHECK(c.partial_overlap_penalty(m, 2 * c.line.time(m)) == 0.0);
    CHECK(c.partial_overlap_penalty(m, c.line.time(m) / 2) ==
          doctest::Approx(c.full_overlap_penalty(m) / 2));
  }
}

TEST_CASE("least-squares fit of a, b and gamma") {
  const double a = 1.4e-3, b = 1.7e-9, gamma = 1.4;
  std::vector<Sample> samples, concurrent;
  for (int i = 0; i < 20; ++i) {
    const double m = 8e3 * std::pow(2.0, i % 10);
    const double noise = 1.0 + ((i * 7919) % 11 - 5) * 1e-4;  // +-0.05 %, deterministic
    samples.push_back(Sample{m, (a + b * m) * noise, 1});
    concurrent.push_back(Sample{m, (a + gamma * b * m) * noise, 2});
  }
  const LinearFit fit = fit_alpha_beta(samples);
  CHECK(fit.line.alpha_s == doctest::Approx(a).epsilon(0.02));
  CHECK(fit.line.beta_s_per_byte == doctest::Approx(b).epsilon(0.01));
  CHECK(fit.r2 > 0.999);
  CHECK(fit_gamma(fit.line, concurrent) == doctest::Approx(gamma).epsilon(0.01));
  CHECK_THROWS(fit_alpha_beta(std::vector<Sample>{Sample{1, 1, 1}}));
}

TEST_CASE("parse nccl-tests output") {
  const std::string text =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5\n"
      "#\n"
      "#                                                              out-of-place                 "
      "      in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
      "(us)  (GB/s)  (GB/s)\n"
      "        8192          2048     float     sum      -1    20.15    0.41    0.71      0    "
      "19.80    0.41    0.72      0\n"
      "     1048576        262144     float     sum      -1    45.10   23.25   40.69      0    "
      "44.90   23.35   40.87      0\n"
      "   134217728      33554432     float     sum      -1   1520.3   88.28  154.50      0   "
      "1515.2   88.58  155.02      0\n"
      "# Out of bounds values : 0 OK\n";
  const auto rows = parse_nccl_tests(text);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].bytes == 8192);
  CHECK(rows[0].time_s == doctest::Approx(20.15e-6));
  CHECK(rows[2].bytes == 134217728);
  CHECK(rows[2].time_s == doctest::Approx(1520.3e-6));
  const auto inplace = parse_nccl_tests(text, /*in_place=*/true);
  CHECK(inplace[1].time_s == doctest::Approx(44.90e-6));
}

TEST_CASE("parse ccoll_perf JSON") {
  const std::string json = R"({"results": [
      {"transport": "threads", "algo": "ring", "nranks": 4, "size": 1024, "time_us": 10.5},
      {"transport": "threads", "algo": "tree", "nranks": 4, "size": 1024, "time_us": 12.0},
      {"transport": "threads", "algo": "ring", "nranks": 4, "size": 4096, "time_us": 20.0}]})";
  const auto all = parse_ccoll_perf_json(json);
  CHECK(all.size() == 3);
  const auto ring = parse_ccoll_perf_json(json, "ring");
  REQUIRE(ring.size() == 2);
  CHECK(ring[1].bytes == 4096);
  CHECK(ring[1].time_s == doctest::Approx(20e-6));
  CHECK_THROWS(parse_ccoll_perf_json("{\"nothing\": 1}"));
  // The model is an allreduce's: other collectives' rows are left out, and a report of only
  // those is refused, naming its collective.
  const std::string mixed = R"({"results": [
      {"algo": "ring", "nranks": 4, "size": 1024, "time_us": 10.5, "collective": "allreduce"},
      {"algo": "ring", "nranks": 4, "size": 1024, "time_us": 3.0, "collective": "broadcast"}]})";
  CHECK(parse_ccoll_perf_json(mixed).size() == 1);
  const std::string bcast = R"({"results": [
      {"algo": "ring", "nranks": 4, "size": 1024, "time_us": 3.0, "collective": "broadcast"}]})";
  CHECK_THROWS_WITH(parse_ccoll_perf_json(bcast), doctest::Contains("time broadcast"));
}
}  // namespace model_test
