// ccoll/model/fit_json.hpp: (size, time) samples from ccoll_perf's JSON report, for model/fit.hpp.
//
// Kept apart from fit.hpp because it needs nlohmann-json. ccoll_perf writes
// {"results": [{"transport", "algo", "nranks", "size" (bytes), "time_us", ...}, ...]}
// (benchmarks/ccoll_perf/perf_report.hpp); rows can be filtered by algorithm and rank count. The
// model is an allreduce's: rows of the other collectives (their "collective") are left out.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/model/fit.hpp"

namespace ccoll::model {

inline std::vector<Sample> parse_ccoll_perf_json(const std::string& text,
                                                 const std::string& algo = "", int nranks = 0) {
  const auto doc = nlohmann::json::parse(text);
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    throw std::invalid_argument("ccoll_perf JSON: expected an object with a \"results\" array");
  std::vector<Sample> rows;
  std::string other;  // a collective other than allreduce that rows time
  bool any_allreduce = false;
  for (const auto& r : doc["results"]) {
    if (!r.contains("size") || !r.contains("time_us"))
      throw std::invalid_argument("ccoll_perf JSON: a result lacks \"size\" or \"time_us\"");
    // The model is an allreduce's (a report without the field predates the other collectives).
    if (const std::string c = r.value("collective", std::string("allreduce")); c != "allreduce") {
      other = c;
      continue;
    }
    any_allreduce = true;
    if (!algo.empty() && r.value("algo", std::string{}) != algo) continue;
    if (nranks > 0 && r.value("nranks", 0) != nranks) continue;
    rows.push_back(Sample{r["size"].get<double>(), r["time_us"].get<double>() * 1e-6,
                          r.value("concurrent", 1)});
  }
  if (!any_allreduce && !other.empty())
    throw std::invalid_argument("ccoll_perf JSON: its rows time " + other +
                                "; the fit models allreduce (ccoll_perf -C allreduce)");
  return rows;
}

}  // namespace ccoll::model
