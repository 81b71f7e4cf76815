// ccoll_mpi/algorithm_choice.hpp: CCOLL_MPI_ALGO=auto, the algorithm for a call of a given size.
//
// Below kDefaultAutoMinBytes a call goes to MPI: there a call's time is latency, and Open MPI's
// recursive doubling needs log2 P message rounds where a ccoll call adds its argument agreement to
// the plan's 2(P-1) steps. From there on the ring, whose per-rank traffic 2N(P-1)/P is the minimum
// for any allreduce [Patarasuk]; for two ranks the double binary tree, which then is one exchange
// of halves. docs/results/mpi-dropin.md has the measurements behind both numbers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <ccoll/algo/by_size.hpp>
#include <ccoll/algo/registry.hpp>
#include <ccoll/protocol/protocol.hpp>

namespace ccoll_mpi {

inline constexpr std::uint64_t kDefaultAutoMinBytes = 64u << 10;

// The algorithm auto picks for nranks ranks and `bytes` bytes per rank; empty: MPI's own.
inline std::string_view choose_auto(int nranks, std::uint64_t bytes, std::uint64_t min_bytes) {
  if (bytes < min_bytes) return {};
  return nranks == 2 ? "dbtree" : "ring";
}

// The algorithm auto picks for the other collectives: below min_bytes (the whole buffer) MPI's own,
// whose small broadcasts and reduces return without waiting for the other ranks where every ccoll
// call synchronises them (docs/results/collectives.md); from there on rings and chains, at or
// above Open MPI's bandwidth for every collective there.
inline std::string_view choose_auto_collective(std::uint64_t bytes, std::uint64_t min_bytes) {
  if (bytes < min_bytes) return {};
  return "ring";
}

// The suffix of a tuned choice in the LowLatency protocol ("direct+ll"), as ccoll_perf -a names it.
inline constexpr std::string_view kLowLatencySuffix = "+ll";

// The algorithm a tuning table (CCOLL_MPI_TUNING) picks for a call of collective c on nranks
// ranks and `bytes` bytes (the whole buffer): its first matching rule's, with kLowLatencySuffix
// when the rule asks for the LowLatency protocol; empty when no rule matches.
inline std::string choose_tuned(const ccoll::algo::TuningTable& table, ccoll::plan::Collective c,
                                int nranks, std::uint64_t bytes) {
  for (const ccoll::algo::SizeRule& r : table.rules)
    if (r.matches(c, nranks, bytes))
      return r.algorithm +
             (r.protocol == ccoll::protocol::Id::low_latency ? std::string(kLowLatencySuffix) : "");
  return {};
}

// The registered algorithms that plan on abstract ranks: those an MPI communicator can run.
inline std::string abstract_algorithm_names() {
  std::string s;
  for (const auto& a : ccoll::algo::algorithms())
    if (!a.needs_topology) s += (s.empty() ? "" : ", ") + a.name;
  return s;
}

}  // namespace ccoll_mpi
