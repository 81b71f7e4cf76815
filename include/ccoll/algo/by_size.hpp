// ccoll/algo/by_size.hpp: "auto": the algorithm chosen per message size and rank count from a
// tuning table.
//
// No single plan is best at every size: a one-hop plan (oneshot) wins where a call costs its
// handoffs, recursive doubling where log2 P hops of the whole buffer are still cheap, and the
// bandwidth plans (direct, ring) once the bytes dominate. BySize is a logical topology whose
// build() looks up the first rule of its table that matches the request's rank count and message
// bytes (count x element size) and builds that algorithm's plan, so one Allreduce serves every
// size with the right plan (each cached per count, as always).
//
// Every rank computes the choice from the same inputs, so ranks agree without a message, provided
// they hold the same table: the table's digest is part of the policy's name, hence of the
// communicator's fingerprint, and ranks with different tables refuse to run together
// (Mismatch). The table's rules name registered algorithms that plan on abstract ranks, without
// a schedule suffix (the Allreduce's schedule decides), and may name the protocol of their plans
// (protocol/protocol.hpp: "simple" by default, or "ll").
//
// The default table comes from measurements with ccoll_perf on shared memory (docs/protocols.md
// has the figures and the commands); pass a table measured on the target machine to tune it:
// `Allreduce<T, algo::BySize, S> ar(config, algo::BySize(table))`, or `ccoll_perf -a auto
// --tuning FILE` (format: algo/tuning_table_json.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/one_shot.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/protocol.hpp"

namespace ccoll::algo {

struct SizeRule {
  std::string algorithm;  // a registered abstract-rank algorithm
  std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max();  // count x element size
  int min_ranks = 1;
  int max_ranks = std::numeric_limits<int>::max();
  // How the plan's messages signal arrival (protocol/protocol.hpp); a LowLatency plan is chunked
  // for half slots.
  protocol::Id protocol = protocol::Id::simple;
  bool matches(int nranks, std::uint64_t bytes) const {
    return nranks >= min_ranks && nranks <= max_ranks && bytes <= max_bytes;
  }
};

struct TuningTable {
  std::vector<SizeRule> rules;  // the first matching rule wins
};

// Measured on a 2-core host with shared memory (docs/protocols.md,
// docs/results/small-messages-2026-11-28.md): at P = 2 the one-hop plan is fastest up to 64 KiB,
// in LowLatency up to 4 KiB (a packed LL message of up to 48 bytes is one cache line with its
// trailer, and an in-band LL call needs no comparison of the arguments after its steps) and in
// Simple above, where the two tie and Simple's whole slots start to tell. Above two ranks, the
// one-hop plan up to 2 KiB and recursive doubling up to 32 KiB, both in LowLatency, then the direct
// plan. oneshot takes at most 16 ranks (plan/one_shot.hpp).
inline TuningTable default_tuning_table() {
  TuningTable t;
  t.rules.push_back(SizeRule{"oneshot", 4 * 1024, 1, 2, protocol::Id::low_latency});
  t.rules.push_back(SizeRule{"oneshot", 64 * 1024, 1, 2});
  t.rules.push_back(SizeRule{"oneshot", 2 * 1024, 3, 16, protocol::Id::low_latency});
  t.rules.push_back(SizeRule{"recdoubling", 32 * 1024, 3, std::numeric_limits<int>::max(),
                             protocol::Id::low_latency});
  t.rules.push_back(SizeRule{"direct"});
  return t;
}

// The rules' algorithms come from the complete table (algo/registry.hpp, included at the end of
// this header: the table lists "auto" itself, so it includes this header first).
inline AlgorithmSpec find_algorithm(std::string_view spec);

class BySize {
 public:
  std::string name;  // "auto", or "auto:<digest>" for a table other than the default

  BySize() : BySize(default_tuning_table()) {}
  explicit BySize(TuningTable table) : table_(std::move(table)) {
    if (table_.rules.empty()) fail("a tuning table needs at least one rule");
    std::string text;
    for (const SizeRule& r : table_.rules) {
      const AlgorithmSpec spec = find_algorithm(r.algorithm);
      if (spec.algorithm.name != r.algorithm)
        fail("rule algorithm '" + r.algorithm +
             "': name a registered algorithm without -overlap/-phased (the schedule decides)");
      if (spec.algorithm.needs_topology || r.algorithm == "auto")
        fail("rule algorithm '" + r.algorithm +
             "': only algorithms that plan on abstract ranks can be chosen by size");
      if (r.min_ranks < 1 || r.max_ranks < r.min_ranks)
        fail("rule for '" + r.algorithm + "': need 1 <= min_ranks <= max_ranks");
      AlgorithmRequest req;
      req.nranks = r.min_ranks;
      builders_.push_back(make_algorithm(spec.algorithm, req));
      text += rule_text(r);
    }
    name = "auto";
    if (text != default_text()) {
      std::uint64_t h = 1469598103934665603ull;  // FNV-1a: a digest, not a security measure
      for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
      static constexpr char kHex[] = "0123456789abcdef";
      name += ':';
      for (int shift = 60; shift >= 0; shift -= 4) name += kHex[(h >> shift) & 15u];
    }
  }

  const TuningTable& table() const { return table_; }

  // The rule for P ranks and a message of `bytes`; throws Unsupported when none matches.
  const SizeRule& choose(int nranks, std::uint64_t bytes) const {
    return table_.rules[index(nranks, bytes)];
  }

  // The chosen algorithm's plan, declaring every connection that any rule's plan for these ranks
  // and channels uses: a communicator's connection set is fixed when it is created, from
  // reference plans of one size (runtime/plan_cache.hpp), and every size must find its plan's
  // connections there. The extra connections carry no message.
  plan::Plan build(const plan::PlanRequest& req) const {
    const std::uint64_t bytes = req.count * req.elem_size;
    const std::size_t rule = index(req.nranks, bytes);
    plan::Plan chosen =
        protocol::build_for(table_.rules[rule].protocol, req,
                            [&](const plan::PlanRequest& r) { return builders_[rule].build(r); });
    plan::PlanRequest reference = req;
    reference.count =
        static_cast<std::uint64_t>(req.nranks) * std::max<std::uint32_t>(1, req.nchannels) * 4096;
    for (std::size_t i = 0; i < table_.rules.size(); ++i) {
      const SizeRule& r = table_.rules[i];
      if (req.nranks < r.min_ranks || req.nranks > r.max_ranks) continue;
      if (r.algorithm == "oneshot" && req.nranks > plan::kOneShotMaxRanks) continue;
      for (const plan::Connection& c : builders_[i].build(reference).connections) {
        const bool known = std::any_of(
            chosen.connections.begin(), chosen.connections.end(), [&](const plan::Connection& k) {
              return k.from == c.from && k.to == c.to && k.channel == c.channel;
            });
        if (!known) chosen.connections.push_back(plan::Connection{c.from, c.to, c.channel, 0});
      }
    }
    return chosen;
  }

 private:
  // A rule as it enters the table's digest (the protocol only when it is not the default).
  static std::string rule_text(const SizeRule& r) {
    return r.algorithm + "/" + std::to_string(r.max_bytes) + "/" + std::to_string(r.min_ranks) +
           "/" + std::to_string(r.max_ranks) +
           (r.protocol == protocol::Id::simple ? ""
                                               : "/" + std::string(protocol::name(r.protocol))) +
           ";";
  }
  [[noreturn]] static void fail(const std::string& what) {
    throw Error(ErrorCode::InvalidArgument, -1, "tuning table: " + what);
  }
  static const std::string& default_text() {
    static const std::string text = [] {
      std::string s;
      for (const SizeRule& r : default_tuning_table().rules) s += rule_text(r);
      return s;
    }();
    return text;
  }
  std::size_t index(int nranks, std::uint64_t bytes) const {
    for (std::size_t i = 0; i < table_.rules.size(); ++i)
      if (table_.rules[i].matches(nranks, bytes)) return i;
    throw Error(ErrorCode::Unsupported, -1,
                "tuning table: no rule for " + std::to_string(nranks) + " ranks and " +
                    std::to_string(bytes) + " bytes (end the table with a rule for every size)");
  }

  TuningTable table_;
  std::vector<Registered> builders_;  // one per rule
};

static_assert(LogicalTopology<BySize>);

// As a registered algorithm: the default table, on abstract ranks or a topology's active nodes.
inline Registered registered_by_size(const AlgorithmRequest& req) {
  std::vector<int> nodes = active_rank_nodes(req);
  const int n = req.topology == nullptr ? req.nranks : static_cast<int>(nodes.size());
  const BySize policy;
  return Registered(
      policy.name, [policy](const plan::PlanRequest& r) { return policy.build(r); },
      req.topology == nullptr ? 0 : n, std::move(nodes), policy);
}

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm by_size_algorithm() {
  return Algorithm{.name = "auto",
                   .description =
                       "per message size: oneshot, recdoubling or direct from a tuning table "
                       "(algo/by_size.hpp)",
                   .make = &registered_by_size};
}

}  // namespace ccoll::algo

// The definition of find_algorithm, with the table.
#include "ccoll/algo/registry.hpp"
