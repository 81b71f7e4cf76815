// ccoll_perf/perf_tune.hpp: --tune FILE: the rows of a run become the rules of a tuning table
// (ccoll/algo/tuning.hpp) for the run's collective and rank count, merged into FILE's table.
//
// FILE is read before the run (a file that is not a table is a usage error, not a lost run) and
// written after it; a FILE that does not exist starts from the library's default table, so the
// result always has a rule for every rank count and collective. Rows with wrong results never
// win.
//
// On a shared or small machine one run's times of close candidates swap from run to run, and
// between runs more than within one: where the scheduler puts the ranks and which pages the
// buffers get are fixed for a process's life. So --tune times the candidates in several passes
// (--tune_passes, default 3), each in a fresh process forked before any rank or buffer exists,
// and the table takes each candidate's median per size.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/algo/gpu_tuning.hpp"
#include "ccoll/algo/tuning.hpp"
#include "ccoll/algo/tuning_table_json.hpp"
#include "perf_options.hpp"
#include "perf_report.hpp"

namespace ccoll_perf {

// FILE's table, or where FILE does not exist or is empty the table `-a auto` uses on this
// transport (the GPU table on a GPU transport, algo/gpu_tuning.hpp; the default elsewhere); a
// usage error naming --tune for a file that cannot be read or is not a table.
inline ccoll::algo::TuningTable read_tune_base(const std::string& path, bool device) {
  std::error_code ec;
  std::ifstream in(path);
  if (!in && std::filesystem::exists(path, ec))
    throw UsageError("--tune: cannot read '" + path + "'");
  std::stringstream text;
  if (in) text << in.rdbuf();
  // Under mpirun every rank checks that FILE can be written before the run (check_output_path),
  // which creates a missing FILE empty and removes it: another rank may find it so, or find it
  // gone between looking and opening. Neither is a table that FILE held.
  if (text.str().find_first_not_of(" \t\r\n") == std::string::npos)
    return device ? ccoll::algo::gpu_tuning_table() : ccoll::algo::default_tuning_table();
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

// Each candidate's median over the passes of a --tune run.
struct PassMedians {
  // Per candidate and size, in the order of their first appearance: the row of the pass whose
  // time is the median (for an even count, the slower of the middle two), with the largest
  // #wrong of any pass, so that a result wrong in one pass never wins. A pass that did not
  // measure the candidate (it failed, or was not run) counts as slower than any time: a
  // candidate measured in fewer than half the passes has no median (time 0), and never wins.
  std::vector<Row> rows;
  std::vector<double> spread;  // per row: the slowest measured pass's time over the fastest's
  std::vector<int> measured;   // per row: how many passes measured it
};

inline PassMedians median_rows(const std::vector<std::vector<Row>>& passes) {
  std::map<std::pair<std::string, std::uint64_t>, std::size_t> index;
  std::vector<std::vector<const Row*>> groups;  // per candidate and size: its row in each pass
  for (std::size_t k = 0; k < passes.size(); ++k)
    for (const Row& r : passes[k]) {
      if (!r.paired_with.empty()) continue;  // a peer's row (--tune has no peer)
      const auto [it, added] = index.try_emplace({r.algo, r.bytes}, groups.size());
      if (added) groups.emplace_back(passes.size(), nullptr);
      groups[it->second][k] = &r;
    }
  PassMedians m;
  for (const std::vector<const Row*>& g : groups) {
    std::vector<const Row*> timed;
    const Row* any = nullptr;
    long wrong = -1;
    for (const Row* r : g) {
      if (r == nullptr) continue;
      any = r;
      wrong = std::max(wrong, r->wrong);
      if (r->time_us > 0) timed.push_back(r);
    }
    std::sort(timed.begin(), timed.end(),
              [](const Row* a, const Row* b) { return a->time_us < b->time_us; });
    // The median of all passes, the unmeasured ones last.
    const std::size_t middle = g.size() / 2;
    Row row = *any;
    if (middle < timed.size()) {
      row = *timed[middle];
    } else {
      row.time_us = row.algbw_GBps = row.busbw_GBps = 0;
    }
    row.wrong = wrong;
    m.rows.push_back(row);
    m.spread.push_back(timed.empty() ? 0.0 : timed.back()->time_us / timed.front()->time_us);
    m.measured.push_back(static_cast<int>(timed.size()));
  }
  return m;
}

// The medians as a table: a line per size, a column per candidate (time per call in us), the
// choice of `rules` (derive_rules's, for the run's collective and rank count) marked with *, and
// the spread of the chosen candidate's passes.
inline std::string format_pass_medians(const PassMedians& m, int passes,
                                       const std::vector<ccoll::algo::SizeRule>& rules) {
  std::vector<std::string> names;
  std::map<std::uint64_t, std::map<std::string, std::size_t>> by_size;
  for (std::size_t i = 0; i < m.rows.size(); ++i) {
    const Row& r = m.rows[i];
    if (std::find(names.begin(), names.end(), r.algo) == names.end()) names.push_back(r.algo);
    by_size[r.bytes][r.algo] = i;
  }
  int width = 10;
  for (const std::string& n : names) width = std::max(width, static_cast<int>(n.size()) + 1);
  std::string out = "#\n# --tune: each candidate's median time per call (us) over " +
                    std::to_string(passes) +
                    " passes, each in a fresh process;\n# * the table's choice, ! a wrong "
                    "result, - measured in fewer than half the passes;\n# spread: the "
                    "choice's slowest pass over its fastest\n#       size";
  char cell[96];
  for (const std::string& n : names) {
    std::snprintf(cell, sizeof cell, " %*s", width + 1, n.c_str());
    out += cell;
  }
  out += "   spread\n";
  for (const auto& [bytes, row_of] : by_size) {
    std::string chosen;
    for (const ccoll::algo::SizeRule& r : rules)
      if (bytes <= r.max_bytes) {
        chosen = ccoll::algo::candidate_name(r.algorithm, r.protocol);
        break;
      }
    std::snprintf(cell, sizeof cell, "# %10s", format_size(bytes).c_str());
    out += cell;
    double spread = 0;
    for (const std::string& n : names) {
      const auto it = row_of.find(n);
      if (it == row_of.end() || m.rows[it->second].time_us <= 0) {
        std::snprintf(cell, sizeof cell, " %*s ", width, "-");
        out += cell;
        continue;
      }
      const Row& r = m.rows[it->second];
      const bool mark = n == chosen;
      if (mark) spread = m.spread[it->second];
      std::snprintf(cell, sizeof cell, " %*.1f%s", width, r.time_us,
                    r.wrong > 0 ? "!"
                    : mark      ? "*"
                                : " ");
      out += cell;
    }
    if (spread > 0) {
      std::snprintf(cell, sizeof cell, "   %5.2fx", spread);
      out += cell;
    }
    out += "\n";
  }
  return out;
}

// What the passes of a --tune run gave: each pass's report, and the worst exit status of a pass
// (1: a wrong result or a candidate that failed; its rows still count, and wrong ones never win).
struct TunePasses {
  std::vector<ReportData> reports;
  int status = 0;
};

// Runs `pass(k, json_path)` for k = 0 .. passes-1, one after another, each in a process forked
// for it (so that its ranks, threads and buffers are new), and reads the JSON report it wrote to
// json_path (in a directory of this run's own, removed at the end). A pass that exits with status
// 2 (a usage error) ends the run with that status and no reports; one that dies, or ends without
// a report, throws std::runtime_error.
inline TunePasses run_in_fresh_processes(int passes,
                                         const std::function<int(int, const std::string&)>& pass) {
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "ccoll_perf_tune.XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr)
    throw std::runtime_error("--tune: cannot make a directory for the passes' reports in " +
                             std::filesystem::temp_directory_path().string());
  const std::filesystem::path dir = dir_template;
  struct RemoveDir {
    std::filesystem::path dir;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_dir{dir};
  TunePasses result;
  for (int k = 0; k < passes; ++k) {
    const std::string json = (dir / ("pass-" + std::to_string(k + 1) + ".json")).string();
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error("--tune: fork failed");
    if (child == 0) {
      int rc = 1;
      try {
        rc = pass(k, json);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ccoll_perf: --tune pass %d: %s\n", k + 1, e.what());
      } catch (...) {
        std::fprintf(stderr, "ccoll_perf: --tune pass %d: an unknown exception\n", k + 1);
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(rc);
    }
    int wstatus = 0;
    while (::waitpid(child, &wstatus, 0) < 0)
      if (errno != EINTR) throw std::runtime_error("--tune: waitpid failed");
    if (!WIFEXITED(wstatus))
      throw std::runtime_error("--tune: pass " + std::to_string(k + 1) + " died (signal " +
                               std::to_string(WTERMSIG(wstatus)) + ")");
    const int rc = WEXITSTATUS(wstatus);
    if (rc == 2) return TunePasses{{}, 2};
    std::ifstream in(json);
    if (!in)
      throw std::runtime_error("--tune: pass " + std::to_string(k + 1) + " (exit status " +
                               std::to_string(rc) + ") wrote no results");
    std::stringstream text;
    text << in.rdbuf();
    result.reports.push_back(report_from_json(text.str()));
    result.status = std::max(result.status, rc);
  }
  return result;
}

}  // namespace ccoll_perf
