// ccoll/algo/by_size.hpp: "auto": the algorithm chosen per collective, message size and rank
// count from a tuning table.
//
// No single plan is best at every size: a one-hop plan (oneshot) wins where a call costs its
// handoffs, recursive doubling where log2 P hops of the whole buffer are still cheap, and the
// bandwidth plans (direct, ring) once the bytes dominate. BySize is a logical topology whose
// build() looks up the first rule of its table that matches the request's collective, rank count
// and message bytes (the plan's whole index space: count x element size, which is reduce-scatter's
// input and all-gather's output, as nccl-tests count them) and builds that algorithm's plan, so
// one Allreduce (or ReduceScatter, AllGather, Broadcast, Reduce) serves every size with the right
// plan (each cached per count, as always).
//
// Every rank computes the choice from the same inputs, so ranks agree without a message, provided
// they hold the same table: the table's digest is part of the policy's name, hence of the
// communicator's fingerprint, and ranks with different tables refuse to run together
// (Mismatch). The table's rules name registered algorithms that plan on abstract ranks, without
// a schedule suffix (the Allreduce's schedule decides), and may name the protocol of their plans
// (protocol/protocol.hpp: "simple" by default, or "ll").
//
// The table decides the plans of staged calls. A call whose buffers lie in a registered window at
// the same offsets on every rank reads its peers' buffers in place above the in-band agreement
// size, whatever the plan (runtime/communicator.hpp), so the buffer's placement is chosen there,
// not here. The default table comes from measurements with ccoll_perf on shared memory with
// staged buffers (docs/results/auto-tuning.md has the figures and the commands); a table measured
// on the target machine tunes it: `ccoll_perf --tune FILE` measures and writes one
// (algo/tuning.hpp derives it), `Allreduce<T, algo::BySize, S> ar(config, algo::BySize(table))` or
// `ccoll_perf -a auto --tuning FILE` use it (format: algo/tuning_table_json.hpp).
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
#include "ccoll/plan/collective.hpp"
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
  plan::Collective collective = plan::Collective::allreduce;  // the collective the rule plans
  bool matches(plan::Collective c, int nranks, std::uint64_t bytes) const {
    return c == collective && nranks >= min_ranks && nranks <= max_ranks && bytes <= max_bytes;
  }
};

struct TuningTable {
  std::vector<SizeRule> rules;  // the first matching rule wins
};

// The default table, measured with `ccoll_perf --transport shm -t P --tune` at P = 2, 3 and 4 on
// a 2-core host with staged buffers, every candidate of every collective in both protocols,
// interleaved, 8 B to 64 MiB (docs/results/auto-tuning.md: the commands and every time). These are
// the rules it wrote (algo/tuning.hpp: the fewest within 5% of the fastest at every size); the
// rules of reduce-scatter, all-gather, broadcast and reduce up to 64 KiB, which agree in band,
// come from the median of three such runs per candidate, preferring one-hop plans among those
// within 5% at P >= 3 (docs/results/collectives-2026-11-30.md), then re-derived from those and
// three runs on the VM's other (Intel) host, each candidate scored by its worse ratio to the
// fastest over the two hosts (docs/results/auto-small-2026-12-01b.md; allreduce's one-shot plan at
// P = 4 to 2 KiB is a choice by hand on the same page), and every collective's rules above 64 KiB
// from the median of three runs per candidate from 128 KiB to 64 MiB
// (docs/results/auto-tuning-2026-11-30.md): on this host one run's times swap plans that differ
// by more than 10%. Beyond 64 MiB, where nothing was measured, a plan chosen in
// LowLatency at 64 MiB runs as Simple, the protocol meant for bandwidth. Where several plans tie
// within the host's noise (one-hop plans at P = 2, whose shapes coincide) the choice between them
// is arbitrary. The rules of the other rank counts (P = 1, and P >= 5, which this host did not
// measure) follow the shape of those: one-hop and LowLatency plans for small messages, direct plans
// (each rank reduces or sends its share in one hop) for middle sizes, rings and trees for large
// ones. oneshot and direct take at most 16 ranks (plan/one_shot.hpp).
inline TuningTable default_tuning_table() {
  using C = plan::Collective;
  constexpr C A = C::allreduce, RS = C::reduce_scatter, AG = C::all_gather, BC = C::broadcast,
              RD = C::reduce;
  constexpr protocol::Id kSimple = protocol::Id::simple, kLL = protocol::Id::low_latency;
  constexpr std::uint64_t kKiB = 1024, kMiB = 1024 * 1024;
  constexpr std::uint64_t kAny = std::numeric_limits<std::uint64_t>::max();
  struct Measured {
    C collective;
    int nranks;
    const char* algorithm;
    protocol::Id protocol;
    std::uint64_t max_bytes;
  };
  static constexpr Measured kMeasured[] = {
      // allreduce
      {A, 2, "oneshot", kLL, 64 * kKiB},
      {A, 2, "recdoubling", kLL, 2 * kMiB},
      {A, 2, "ring", kSimple, 8 * kMiB},
      {A, 2, "direct", kSimple, kAny},
      {A, 3, "oneshot", kLL, 2 * kKiB},
      {A, 3, "oneshot", kSimple, 8 * kKiB},
      {A, 3, "direct", kLL, 64 * kKiB},
      {A, 3, "ring", kLL, 256 * kKiB},
      {A, 3, "dbtree", kLL, 64 * kMiB},
      {A, 3, "dbtree", kSimple, kAny},
      {A, 4, "oneshot", kLL, 2 * kKiB},
      {A, 4, "direct", kLL, 16 * kKiB},
      {A, 4, "direct", kSimple, 64 * kKiB},
      {A, 4, "direct", kLL, 128 * kKiB},
      {A, 4, "ring", kSimple, 2 * kMiB},
      {A, 4, "ring", kLL, 4 * kMiB},
      {A, 4, "ring", kSimple, kAny},
      // reduce-scatter
      {RS, 2, "ring", kLL, 16 * kKiB},
      {RS, 2, "direct", kSimple, 64 * kKiB},
      {RS, 2, "direct", kLL, 4 * kMiB},
      {RS, 2, "direct", kSimple, kAny},
      {RS, 3, "direct", kLL, 65532},
      {RS, 3, "ring", kSimple, 33554424},
      {RS, 3, "ring", kLL, 67108860},
      {RS, 3, "ring", kSimple, kAny},
      {RS, 4, "direct", kLL, 64 * kKiB},
      {RS, 4, "direct", kSimple, 128 * kKiB},
      {RS, 4, "ring", kSimple, 1 * kMiB},
      {RS, 4, "ring", kLL, 4 * kMiB},
      {RS, 4, "ring", kSimple, kAny},
      // all-gather
      {AG, 2, "ring", kLL, 8 * kKiB},
      {AG, 2, "direct", kSimple, 64 * kKiB},
      {AG, 2, "ring", kLL, 4 * kMiB},
      {AG, 2, "ring", kSimple, kAny},
      {AG, 3, "direct", kLL, 32760},
      {AG, 3, "ring", kLL, 65532},
      {AG, 3, "direct", kLL, 131064},
      {AG, 3, "ring", kSimple, 1048572},
      {AG, 3, "ring", kLL, 67108860},
      {AG, 3, "ring", kSimple, kAny},
      {AG, 4, "direct", kLL, 64 * kKiB},
      {AG, 4, "ring", kLL, 4 * kMiB},
      {AG, 4, "ring", kSimple, kAny},
      // broadcast
      {BC, 2, "tree", kSimple, 64 * kKiB},
      {BC, 2, "dbtree", kLL, 4 * kMiB},
      {BC, 2, "tree", kSimple, kAny},
      {BC, 3, "direct", kSimple, 16 * kKiB},
      {BC, 3, "ring", kSimple, 32 * kKiB},
      {BC, 3, "dbtree", kLL, 64 * kKiB},
      {BC, 3, "dbtree", kSimple, 4 * kMiB},
      {BC, 3, "tree", kLL, 8 * kMiB},
      {BC, 3, "tree", kSimple, kAny},
      {BC, 4, "direct", kLL, 8 * kKiB},
      {BC, 4, "tree", kLL, 16 * kKiB},
      {BC, 4, "direct", kSimple, 32 * kKiB},
      {BC, 4, "ring", kLL, 64 * kKiB},
      {BC, 4, "dbtree", kSimple, 2 * kMiB},
      {BC, 4, "ring", kLL, 16 * kMiB},
      {BC, 4, "dbtree", kSimple, kAny},
      // reduce
      {RD, 2, "direct", kLL, 64},
      {RD, 2, "direct", kSimple, 64 * kKiB},
      {RD, 2, "dbtree", kLL, 4 * kMiB},
      {RD, 2, "dbtree", kSimple, 32 * kMiB},
      {RD, 2, "direct", kSimple, kAny},
      {RD, 3, "direct", kSimple, 8 * kKiB},
      {RD, 3, "ring", kSimple, 32 * kKiB},
      {RD, 3, "direct", kSimple, 64 * kKiB},
      {RD, 3, "ring", kSimple, 128 * kKiB},
      {RD, 3, "dbtree", kLL, 512 * kKiB},
      {RD, 3, "ring", kLL, 8 * kMiB},
      {RD, 3, "tree", kSimple, kAny},
      {RD, 4, "tree", kLL, 8},
      {RD, 4, "direct", kSimple, 64 * kKiB},
      {RD, 4, "dbtree", kLL, 2 * kMiB},
      {RD, 4, "ring", kSimple, 32 * kMiB},
      {RD, 4, "ring", kLL, 64 * kMiB},
      {RD, 4, "ring", kSimple, kAny},
  };
  TuningTable t;
  for (const Measured& m : kMeasured)
    t.rules.push_back(
        SizeRule{m.algorithm, m.max_bytes, m.nranks, m.nranks, m.protocol, m.collective});
  // Every other rank count.
  auto add = [&](C c, const char* algorithm, protocol::Id p, std::uint64_t max_bytes,
                 int max_ranks = std::numeric_limits<int>::max()) {
    t.rules.push_back(SizeRule{algorithm, max_bytes, 1, max_ranks, p, c});
  };
  // One-hop plans (oneshot, direct) take or send P - 1 messages in one step, and a step has at
  // most 15 (runtime/step_operands.hpp): the runtime refuses them above 16 ranks.
  constexpr int kOneHop = plan::kOneShotMaxRanks;
  add(A, "oneshot", kLL, 2 * kKiB, kOneHop);
  add(A, "recdoubling", kLL, 32 * kKiB);
  add(A, "direct", kSimple, 128 * kKiB, kOneHop);
  add(A, "ring", kSimple, kAny);
  add(RS, "direct", kSimple, 16 * kKiB, kOneHop);
  add(RS, "ring", kSimple, kAny);
  add(AG, "direct", kSimple, 64 * kKiB, kOneHop);
  add(AG, "ring", kSimple, kAny);
  add(BC, "direct", kSimple, 64 * kKiB, kOneHop);
  add(BC, "dbtree", kSimple, kAny);
  add(RD, "direct", kSimple, 64 * kKiB, kOneHop);
  add(RD, "dbtree", kSimple, kAny);
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
      if (r.collective != plan::Collective::allreduce) {
        // A rule must name an algorithm that plans its collective: found now, not on the call.
        // Whether an algorithm plans a collective does not depend on the rank count, and a plan
        // for a rule's min_ranks costs up to P^2 steps: a table with rules for thousands of ranks
        // took minutes (or bad_alloc) to construct on any rank count.
        plan::PlanRequest probe;
        probe.nranks = std::clamp(r.min_ranks, 2, kProbeRanks);
        probe.count = static_cast<std::uint64_t>(probe.nranks) * 4;
        probe.collective = r.collective;
        bool planned = false;
        try {
          planned = builders_.back().build(probe).collective == r.collective;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::Unsupported) throw;
        }
        if (!planned)
          fail("rule algorithm '" + r.algorithm + "' plans no " +
               std::string(plan::collective_name(r.collective)));
      }
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

  // A count of each rule that plans req's collective on req.nranks ranks (Registered::
  // size_classes): of the counts the rule gets (after the rules before it; multiples of the ranks
  // for a collective cut into blocks), the one nearest the reference count (ranks x channels x
  // 4096, where every piece is non-empty). A rule shadowed by those before it, or one whose
  // counts all lie beyond 2^36 elements, has none.
  std::vector<std::uint64_t> size_class_counts(const plan::PlanRequest& req) const {
    constexpr std::uint64_t kFarthest = std::uint64_t{1} << 36;
    std::vector<std::uint64_t> counts;
    const std::uint64_t elem = std::max<std::uint64_t>(1, req.elem_size);
    const std::uint64_t step =
        plan::has_blocks(req.collective) ? static_cast<std::uint64_t>(std::max(1, req.nranks)) : 1;
    const std::uint64_t reference = static_cast<std::uint64_t>(std::max(1, req.nranks)) *
                                    std::max<std::uint32_t>(1, req.nchannels) * 4096;
    std::uint64_t below = 0;  // the rules before take the sizes up to this many bytes
    for (const SizeRule& r : table_.rules) {
      if (r.collective != req.collective || req.nranks < r.min_ranks || req.nranks > r.max_ranks)
        continue;
      // The rule's counts: multiples of `step` in [first, last], bytes in (below, max_bytes]
      // (kFarthest keeps both from overflowing).
      const std::uint64_t after = std::min(below / elem, kFarthest);
      const std::uint64_t first = (after / step + 1) * step;
      const std::uint64_t last = std::min(r.max_bytes / elem, kFarthest) / step * step;
      below = std::max(below, r.max_bytes);
      if (first <= last) counts.push_back(std::clamp(reference, first, last));
      if (r.max_bytes == std::numeric_limits<std::uint64_t>::max()) break;
    }
    return counts;
  }

  // The rule for P ranks and a message of `bytes` of `collective`; throws Unsupported when none
  // matches.
  const SizeRule& choose(int nranks, std::uint64_t bytes,
                         plan::Collective collective = plan::Collective::allreduce) const {
    return table_.rules[index(collective, nranks, bytes)];
  }

  // The chosen algorithm's plan, declaring every connection that any rule's plan for these ranks
  // and channels uses, and with as many channels as the most any of them has: a communicator's
  // connection set and its channels (a GPU block each) are fixed when it is created, from
  // reference plans of one size (runtime/plan_cache.hpp), and every size must find its plan's
  // connections and channels there. The extra connections carry no message, the extra channels
  // no program.
  plan::Plan build(const plan::PlanRequest& req) const {
    const std::uint64_t bytes = req.count * req.elem_size;
    const std::size_t rule = index(req.collective, req.nranks, bytes);
    plan::Plan chosen =
        protocol::build_for(table_.rules[rule].protocol, req,
                            [&](const plan::PlanRequest& r) { return builders_[rule].build(r); });
    plan::PlanRequest reference = req;
    reference.count =
        static_cast<std::uint64_t>(req.nranks) * std::max<std::uint32_t>(1, req.nchannels) * 4096;
    for (std::size_t i = 0; i < table_.rules.size(); ++i) {
      const SizeRule& r = table_.rules[i];
      if (r.collective != req.collective || req.nranks < r.min_ranks || req.nranks > r.max_ranks)
        continue;
      if (r.algorithm == "oneshot" && req.nranks > plan::kOneShotMaxRanks) continue;
      const plan::Plan other = builders_[i].build(reference);
      if (other.channels.size() > chosen.channels.size())
        chosen.channels.resize(
            other.channels.size(),
            plan::Channel{std::vector<plan::Program>(static_cast<std::size_t>(chosen.nranks))});
      for (const plan::Connection& c : other.connections) {
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
           (r.collective == plan::Collective::allreduce
                ? ""
                : "/" + std::string(plan::collective_name(r.collective))) +
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
  std::size_t index(plan::Collective collective, int nranks, std::uint64_t bytes) const {
    for (std::size_t i = 0; i < table_.rules.size(); ++i)
      if (table_.rules[i].matches(collective, nranks, bytes)) return i;
    throw Error(ErrorCode::Unsupported, -1,
                "tuning table: no rule for " + std::string(plan::collective_name(collective)) +
                    " on " + std::to_string(nranks) + " ranks and " + std::to_string(bytes) +
                    " bytes (end the table with a rule for every size)");
  }

  static constexpr int kProbeRanks = 8;

  TuningTable table_;
  std::vector<Registered> builders_;  // one per rule
};

static_assert(LogicalTopology<BySize>);

// As a registered algorithm: `table`, on abstract ranks or a topology's active nodes (no relays:
// make_algorithm and on_graph add them), its size classes named (Registered::size_classes).
inline Registered registered_by_size(const AlgorithmRequest& req, TuningTable table) {
  std::vector<int> nodes = active_rank_nodes(req);
  const int n = req.topology == nullptr ? req.nranks : static_cast<int>(nodes.size());
  const BySize policy(std::move(table));
  Registered out(
      policy.name, [policy](const plan::PlanRequest& r) { return policy.build(r); },
      req.topology == nullptr ? 0 : n, std::move(nodes), policy);
  out.size_classes = [policy](const plan::PlanRequest& r) { return policy.size_class_counts(r); };
  return out;
}

// The default table.
inline Registered registered_by_size(const AlgorithmRequest& req) {
  return registered_by_size(req, default_tuning_table());
}

// Its entry in the algorithm table (algo/registry.hpp).
inline Algorithm by_size_algorithm() {
  return Algorithm{.name = "auto",
                   .description =
                       "per message size: oneshot, recdoubling or direct from a tuning table "
                       "(algo/by_size.hpp)",
                   .make = [](const AlgorithmRequest& r) { return registered_by_size(r); }};
}

}  // namespace ccoll::algo

// The definition of find_algorithm, with the table.
#include "ccoll/algo/registry.hpp"
