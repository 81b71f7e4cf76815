// ccoll/algo/tuning.hpp: a tuning table (algo/by_size.hpp) derived from measurements, and merged
// into a table that already serves other rank counts and collectives.
//
// `ccoll_perf --tune FILE` times every candidate plan of a collective at every size on the ranks
// it runs on and hands the times here; anyone with times of their own (another benchmark, another
// transport) can do the same. At every size the candidate chosen is within `tolerance` of the
// fastest, and among such choices the table takes the one with the fewest rules (then the least
// total time): on a shared or small machine the times of close candidates swap from run to run,
// and a table that followed every swap would cut the sizes into many small rules that no rerun
// reproduces. Sizes between two measured ones go to the larger one's choice (a rule's max_bytes
// is its last measured size).
//
// The rules derived hold for exactly the rank count measured; merged into a table they come first
// (the first matching rule wins) and replace that table's rules for the same collective and rank
// count, so one table grows by running `--tune` once per rank count and collective, and every
// other rank count keeps the rules it had.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/protocol/protocol.hpp"

namespace ccoll::algo {

// One candidate's time for one size.
struct TunedTime {
  std::string algorithm;  // a registered abstract-rank algorithm
  protocol::Id protocol = protocol::Id::simple;
  std::uint64_t bytes = 0;  // the whole buffer, as the table counts it
  double time_us = 0;       // per call; <= 0: not measured (the candidate cannot run it)
};

// A candidate's name as ccoll_perf --tune prints it: "oneshot", or "oneshot+ll" for the
// LowLatency protocol.
inline std::string candidate_name(std::string_view algorithm, protocol::Id p) {
  return std::string(algorithm) + (p == protocol::Id::low_latency ? "+ll" : "");
}

// The rules for `collective` on exactly `nranks` ranks from the times of every candidate at
// every size (the sizes as measured, in any order). Throws InvalidArgument without any time.
inline std::vector<SizeRule> derive_rules(plan::Collective collective, int nranks,
                                          const std::vector<TunedTime>& times,
                                          double tolerance = 0.05) {
  if (nranks < 1) throw_invalid_argument(-1, "nranks", ">= 1", std::to_string(nranks));
  // size -> (candidate -> time)
  std::map<std::uint64_t, std::map<std::string, const TunedTime*>> by_size;
  for (const TunedTime& t : times)
    if (t.time_us > 0) by_size[t.bytes][candidate_name(t.algorithm, t.protocol)] = &t;
  if (by_size.empty())
    throw_invalid_argument(-1, "tuning times", "at least one measured time", "none");
  // Per size, the candidates within the tolerance of the fastest; over the sizes, the choice with
  // the fewest changes of candidate, and among those the least total time (dynamic programming:
  // for each admissible candidate at a size, the best choice of the sizes up to it ending there).
  struct Path {
    int changes = 0;
    double total_us = 0;
    std::vector<const TunedTime*> chosen;
  };
  std::map<std::string, Path> paths;
  for (const auto& [bytes, candidates] : by_size) {
    double fastest = std::numeric_limits<double>::infinity();
    for (const auto& [name, t] : candidates) fastest = std::min(fastest, t->time_us);
    std::map<std::string, Path> next;
    for (const auto& [name, t] : candidates) {
      if (t->time_us > fastest * (1 + tolerance)) continue;
      const Path* from = nullptr;
      int changes = 0;
      for (const auto& [prev, path] : paths) {
        const int c = path.changes + (prev == name ? 0 : 1);
        if (from == nullptr || c < changes || (c == changes && path.total_us < from->total_us)) {
          from = &path;
          changes = c;
        }
      }
      Path p = from == nullptr ? Path{} : *from;
      p.changes = changes;
      p.total_us += t->time_us;
      p.chosen.push_back(t);
      next[name] = std::move(p);
    }
    paths = std::move(next);
  }
  const Path* best = nullptr;
  for (const auto& [name, path] : paths)
    if (best == nullptr || path.changes < best->changes ||
        (path.changes == best->changes && path.total_us < best->total_us))
      best = &path;
  std::vector<SizeRule> rules;
  std::string previous;
  for (const TunedTime* t : best->chosen) {
    const std::string name = candidate_name(t->algorithm, t->protocol);
    if (name == previous) {
      rules.back().max_bytes = t->bytes;
      continue;
    }
    SizeRule r;
    r.algorithm = t->algorithm;
    r.protocol = t->protocol;
    r.max_bytes = t->bytes;
    r.min_ranks = nranks;
    r.max_ranks = nranks;
    r.collective = collective;
    rules.push_back(r);
    previous = name;
  }
  rules.back().max_bytes = std::numeric_limits<std::uint64_t>::max();  // and every larger size
  return rules;
}

// `table` with `rules` (all for one collective and one rank count, as derive_rules gives them)
// in front, and the table's own rules for exactly that collective and rank count removed.
inline TuningTable merge_rules(const TuningTable& table, const std::vector<SizeRule>& rules) {
  TuningTable merged;
  merged.rules = rules;
  for (const SizeRule& r : table.rules) {
    const bool replaced = std::any_of(rules.begin(), rules.end(), [&](const SizeRule& n) {
      return n.collective == r.collective && n.min_ranks == r.min_ranks &&
             n.max_ranks == r.max_ranks && r.min_ranks == r.max_ranks;
    });
    if (!replaced) merged.rules.push_back(r);
  }
  return merged;
}

}  // namespace ccoll::algo
