// ccoll_perf/perf_tune.hpp: --tune FILE: the rows of a run become the rules of a tuning table
// (ccoll/algo/tuning.hpp) for the run's collective and rank count, merged into FILE's table.
//
// FILE is read before the run (a file that is not a table is a usage error, not a lost run) and
// written after it; a FILE that does not exist starts from the library's default table, so the
// result always has a rule for every rank count and collective. Rows with wrong results never
// win.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/algo/gpu_tuning.hpp"
#include "ccoll/algo/tuning.hpp"
#include "ccoll/algo/tuning_table_json.hpp"
#include "perf_options.hpp"
#include "perf_report.hpp"

namespace ccoll_perf {

// FILE's table, or where FILE does not exist the table `-a auto` uses on this transport (the GPU
// table on a GPU transport, algo/gpu_tuning.hpp; the default elsewhere); a usage error naming
// --tune for a file that cannot be read or is not a table.
inline ccoll::algo::TuningTable read_tune_base(const std::string& path, bool device) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return device ? ccoll::algo::gpu_tuning_table() : ccoll::algo::default_tuning_table();
  std::ifstream in(path);
  if (!in) throw UsageError("--tune: cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  try {
    ccoll::algo::TuningTable t = ccoll::algo::tuning_table_from_json(text.str());
    (void)ccoll::algo::BySize(t);  // its rules name algorithms that can be chosen
    return t;
  } catch (const std::exception& e) {
    throw UsageError("--tune: '" + path + "' is not a tuning table: " + e.what());
  }
}

// The measured times of the run's candidates (the rows of the collective under test, checked or
// unchecked, none wrong).
inline std::vector<ccoll::algo::TunedTime> tuned_times(const std::vector<Row>& rows) {
  std::vector<ccoll::algo::TunedTime> times;
  for (const Row& r : rows) {
    if (r.wrong > 0 || !r.paired_with.empty() || r.time_us <= 0) continue;
    ccoll::algo::TunedTime t;
    t.algorithm = r.algo;
    if (r.algo.ends_with(ll_suffix())) {
      t.algorithm.resize(r.algo.size() - ll_suffix().size());
      t.protocol = ccoll::protocol::Id::low_latency;
    }
    t.bytes = r.bytes;
    t.time_us = r.time_us;
    times.push_back(t);
  }
  return times;
}

// Writes the tuned table to o.tune_path and returns the lines that report the new rules.
inline std::string write_tuning(const Options& o, int nranks, const std::vector<Row>& rows) {
  const ccoll::algo::TuningTable base = read_tune_base(o.tune_path, is_device(o.transport));
  const auto rules = ccoll::algo::derive_rules(o.collective, nranks, tuned_times(rows));
  const ccoll::algo::TuningTable table = ccoll::algo::merge_rules(base, rules);
  (void)ccoll::algo::BySize(table);  // a table every rank can build
  std::ofstream f(o.tune_path);
  f << ccoll::algo::tuning_table_to_json(table);
  if (!f) throw std::runtime_error("--tune: cannot write '" + o.tune_path + "'");
  std::string report = "# tuned: " + std::string(ccoll::plan::collective_name(o.collective)) +
                       " on " + std::to_string(nranks) + " ranks, " + std::to_string(rules.size()) +
                       " rule" + (rules.size() == 1 ? "" : "s") + " written to " + o.tune_path +
                       " (" + std::to_string(table.rules.size()) + " in the table):\n";
  std::uint64_t from = 0;
  for (const auto& r : rules) {
    const bool last = &r == &rules.back();
    report += "#   " + format_size(from) + (last ? " and up" : " .. " + format_size(r.max_bytes)) +
              ": " + ccoll::algo::candidate_name(r.algorithm, r.protocol) + "\n";
    from = r.max_bytes + 1;
  }
  return report;
}

}  // namespace ccoll_perf
