// tools/ccoll/fit_args.hpp: `ccoll fit`, the alpha-beta(-gamma) fit of model/fit.hpp from measured
// runs: nccl-tests' all_reduce_perf output or ccoll_perf's JSON report. Header-only so that
// tests/cli_test.cpp runs the same code.
#pragma once

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/model/fit.hpp"
#include "ccoll/model/fit_json.hpp"
#include "cli_common.hpp"

namespace ccoll::cli {

inline const char* kFitHelp =
    "usage: ccoll fit (--nccl-tests FILE [--in-place] | --ccoll-perf FILE [--algo A] [--nranks "
    "P])\n"
    "                 [--with K FILE] [--min-bytes N] [--max-bytes N] [--json]\n"
    "Least-squares fit of t = a + b m ([ASC-WFBP] Eq. 3, [MG-WFBP] Eq. 10) over the rows of an\n"
    "nccl-tests all_reduce_perf output (out-of-place times, or in-place with --in-place) or of a\n"
    "ccoll_perf --json report (filtered by algorithm and rank count). --with K FILE adds a run\n"
    "of the same kind measured with K allreduces at once and fits [ASC-WFBP]'s gamma (Eq. 9) from\n"
    "it. Prints a (us), b (s/byte), 1/b (GB/s), r^2, the largest relative error and gamma.\n"
    "See docs/models.md.\n";

inline int run_fit(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (wants_help(args)) {
    out << kFitHelp;
    return 0;
  }
  return run_reporting("fit", err, [&] {
    std::string nccl, perf, algo, with_file;
    bool in_place = false, json = false;
    int nranks = 0, with_k = 0;
    double min_bytes = 0, max_bytes = INFINITY;
    const auto value = [&](std::size_t& i) -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(args[i] + ": missing value");
      return args[++i];
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--nccl-tests") {
        nccl = value(i);
      } else if (a == "--ccoll-perf") {
        perf = value(i);
      } else if (a == "--in-place") {
        in_place = true;
      } else if (a == "--algo") {
        algo = value(i);
      } else if (a == "--nranks") {
        nranks = static_cast<int>(parse_integer(a, value(i), 1, 1 << 24));
      } else if (a == "--with") {
        with_k = static_cast<int>(parse_integer(a + " K", value(i), 2, 1 << 20));
        with_file = value(i);
      } else if (a == "--min-bytes") {
        min_bytes = parse_number(a, value(i));
      } else if (a == "--max-bytes") {
        max_bytes = parse_number(a, value(i));
      } else if (a == "--json") {
        json = true;
      } else {
        throw UsageError("unknown option \"" + a + "\" (see --help)");
      }
    }
    if (nccl.empty() == perf.empty())
      throw UsageError("give exactly one of --nccl-tests FILE and --ccoll-perf FILE");
    const auto load = [&](const std::string& path, int concurrent) {
      auto rows = !nccl.empty() ? model::parse_nccl_tests(read_text_file(path), in_place)
                                : model::parse_ccoll_perf_json(read_text_file(path), algo, nranks);
      std::vector<model::Sample> kept;
      for (auto s : rows)
        if (s.bytes >= min_bytes && s.bytes <= max_bytes && s.time_s > 0) {
          if (concurrent > 1) s.concurrent = concurrent;
          kept.push_back(s);
        }
      return kept;
    };
    const auto samples = load(!nccl.empty() ? nccl : perf, 1);
    std::vector<model::Sample> single;
    for (const auto& s : samples)
      if (s.concurrent <= 1) single.push_back(s);
    if (single.size() < 2)
      throw std::runtime_error("fewer than 2 samples of one allreduce at a time in the size range");
    const auto fit = model::fit_alpha_beta(single);
    auto contended = samples;
    if (with_k > 0) {
      const auto more = load(with_file, with_k);
      contended.insert(contended.end(), more.begin(), more.end());
    }
    double gamma = NAN;
    for (const auto& s : contended)
      if (s.concurrent > 1) {
        gamma = model::fit_gamma(fit.line, contended);
        break;
      }
    const double bw = fit.line.beta_s_per_byte > 0 ? 1e-9 / fit.line.beta_s_per_byte : INFINITY;
    if (json) {
      nlohmann::json j{{"samples", single.size()},
                       {"a_s", fit.line.alpha_s},
                       {"b_s_per_byte", fit.line.beta_s_per_byte},
                       {"bandwidth_GBps", bw},
                       {"r2", fit.r2},
                       {"max_rel_error", fit.max_rel_error}};
      if (!std::isnan(gamma)) j["gamma"] = gamma;
      out << j.dump(2) << "\n";
    } else {
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "samples %zu\na %.6g us\nb %.6g s/byte (1/b = %.6g GB/s)\nr2 %.6f\n"
                    "max relative error %.3g %%\n",
                    single.size(), fit.line.alpha_s * 1e6, fit.line.beta_s_per_byte, bw, fit.r2,
                    100 * fit.max_rel_error);
      out << buf;
      if (!std::isnan(gamma)) {
        std::snprintf(buf, sizeof buf, "gamma %.6g\n", gamma);
        out << buf;
      }
    }
    return 0;
  });
}

}  // namespace ccoll::cli
