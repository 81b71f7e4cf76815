// ccoll/plan/placement.hpp: plan ranks placed on fewer executor ranks, a relay's programs run by
// the rank that hosts it.
//
// A relay (an inactive plan rank that only forwards: algo/relay_routing.hpp, the double binary
// tree's detours) runs on a GPU. When that GPU already runs a compute rank, the relay belongs in
// that rank's process, beside its own programs ([C-Cube] Sec. III-C: a detour is a forwarding
// kernel on the intermediate GPU, launched by the process that owns it), not in a process of its
// own: a user with 16 GPUs starts 16 processes whatever the plan forwards.
//
// place_programs() rewrites a plan for such a placement. Each program of a hosted rank becomes a
// program of its host on a channel of its own, after the host's channels; every executor already
// runs a rank's channels independently (a thread block each on a GPU, interleaved by the
// interpreter's non-blocking steps on a host thread: runtime/run_loop.hpp), so a placed relay
// program never waits behind its host's programs or the other way round. Appending the relay's
// steps to the host's own program instead would order them, and that can deadlock (a relay on
// rank 1 forwarding 0 -> 2 while rank 1 waits for that very message's reduction to come back);
// the placed plan is an ordinary plan, which the verifier (plan/verifier.hpp) checks for deadlock
// like any other, so the executors run only placements proven free of it.
//
// Which of a host's channels a placed program runs on is fixed by a reference shape, the programs
// that plans of every count and root leave non-empty (ProgramShape: algo::host_relays takes the
// union of the reference plans'), not by the plan at hand: a GPU block counts the messages of the
// connections it uses, so a connection must be used from the same channel by every plan of a
// communicator (transport/cuda/p2p_options.hpp, ConnectionBlocks), and a small count or another
// root leaves different relay programs empty. A program the shape leaves out runs after the
// shape's channels.
//
// Connections keep their index, ports and messages; their endpoints become the hosts. A
// connection's channel is part of its identity (from, to, channel), which must stay unique and
// the same in every plan of one algorithm (the communicator's connection set is fixed: a
// connection of a plan for another count must be found in it). A connection into a placed program
// is labelled by that program (its channel and its slot among its host's relays), one out of a
// placed program into a rank's own program by the sender; both labels depend only on the
// placement, never on which programs a plan leaves empty. So labels are not the channels programs
// run on: the executors size their channels from the plans (runtime/plan_cache.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

// Which rank runs each plan rank's programs: host[r] == r keeps r a rank of its own, any other
// value names the rank that hosts it (itself kept, and r inactive). Kept ranks are renumbered in
// their order, so ranks before the first hosted one keep their numbers.
struct Placement {
  std::vector<Rank> host;

  Rank nkept() const {
    Rank n = 0;
    for (std::size_t r = 0; r < host.size(); ++r) n += host[r] == static_cast<Rank>(r) ? 1 : 0;
    return n;
  }
  bool trivial() const { return nkept() == static_cast<Rank>(host.size()); }
  // The executor rank of plan rank r.
  Rank executor_rank(Rank r) const {
    Rank n = 0;
    const Rank h = host.at(static_cast<std::size_t>(r));
    for (Rank q = 0; q < h; ++q) n += host[static_cast<std::size_t>(q)] == q ? 1 : 0;
    return n;
  }
  // Hosted ranks per host, at most.
  std::uint32_t max_hosted() const {
    std::vector<std::uint32_t> n(host.size(), 0);
    std::uint32_t most = 0;
    for (std::size_t r = 0; r < host.size(); ++r)
      if (host[r] != static_cast<Rank>(r))
        most = std::max(most, ++n[static_cast<std::size_t>(host[r])]);
    return most;
  }
};

namespace detail {

// What a plan renumbered onto `nranks` ranks keeps of `p` (its algorithm, collective, count,
// chunking and ports), with rank r's activity and the root moved to number[r] (-1: r runs on no
// rank of its own), and `nchannels` empty channels for its programs.
inline Plan renumbered_frame(const Plan& p, const std::vector<Rank>& number, Rank nranks,
                             std::uint32_t nchannels) {
  Plan out;
  out.algorithm = p.algorithm;
  out.collective = p.collective;
  out.count = p.count;
  out.slot_elems = p.slot_elems;
  out.nslots = p.nslots;
  out.ports = p.ports;
  out.active.assign(static_cast<std::size_t>(nranks), false);
  for (std::size_t r = 0; r < number.size(); ++r)
    if (number[r] >= 0) out.active[static_cast<std::size_t>(number[r])] = p.active[r];
  out.reset(nranks, nchannels);
  out.root = number[static_cast<std::size_t>(p.root)];
  return out;
}

}  // namespace detail

// Which programs of a plan have steps: used[r][c] for rank r on channel c; `channels`, the most
// channels of the plans added.
struct ProgramShape {
  std::vector<std::vector<bool>> used;
  std::uint32_t channels = 0;

  bool has(std::size_t r, std::size_t c) const {
    return r < used.size() && c < used[r].size() && used[r][c];
  }
  // This shape with p's non-empty programs added.
  void add(const Plan& p) {
    channels = std::max(channels, static_cast<std::uint32_t>(p.channels.size()));
    if (used.size() < static_cast<std::size_t>(p.nranks))
      used.resize(static_cast<std::size_t>(p.nranks));
    for (std::size_t c = 0; c < p.channels.size(); ++c)
      for (std::size_t r = 0; r < p.channels[c].programs.size(); ++r) {
        if (p.channels[c].programs[r].steps.empty()) continue;
        if (used[r].size() <= c) used[r].resize(c + 1, false);
        used[r][c] = true;
      }
  }
  static ProgramShape of(const Plan& p) {
    ProgramShape s;
    s.add(p);
    return s;
  }
};

// `p` with every hosted rank's programs run by its host (see above), on channels numbered by
// `reference` (p's own shape when null). Throws InvalidArgument for a placement that hosts an
// active rank, names a host that is not kept, or would join two ends of one connection in one
// rank.
inline Plan place_programs(const Plan& p, const Placement& placement,
                           const ProgramShape* reference = nullptr) {
  const auto P = static_cast<std::size_t>(p.nranks);
  const auto fail = [](const std::string& what) {
    throw Error(ErrorCode::InvalidArgument, -1, "placement: " + what);
  };
  if (placement.host.size() != P)
    fail("names " + std::to_string(placement.host.size()) + " ranks; the plan has " +
         std::to_string(P));
  for (std::size_t r = 0; r < P; ++r) {
    const Rank h = placement.host[r];
    if (h == static_cast<Rank>(r)) continue;
    if (h < 0 || static_cast<std::size_t>(h) >= P ||
        placement.host[static_cast<std::size_t>(h)] != h)
      fail("rank " + std::to_string(r) + " is hosted by " + std::to_string(h) +
           ", which is not a rank of its own");
    if (p.active[r]) fail("rank " + std::to_string(r) + " is active; only relays can be hosted");
  }
  if (placement.trivial()) return p;

  std::vector<Rank> number(P, -1);  // kept ranks' new numbers
  Rank kept = 0;
  for (std::size_t r = 0; r < P; ++r)
    if (placement.host[r] == static_cast<Rank>(r)) number[r] = kept++;
  // slot[r]: 0 for a kept rank, k for the k-th rank its host hosts (in rank order).
  std::vector<std::uint32_t> slot(P, 0), hosted(P, 0);
  for (std::size_t r = 0; r < P; ++r)
    if (placement.host[r] != static_cast<Rank>(r))
      slot[r] = ++hosted[static_cast<std::size_t>(placement.host[r])];
  const std::uint32_t most = placement.max_hosted();
  const auto runs_on = [&](Rank r) {
    return number[static_cast<std::size_t>(placement.host[static_cast<std::size_t>(r)])];
  };

  const auto C = static_cast<std::uint32_t>(p.channels.size());
  const ProgramShape own = reference == nullptr ? ProgramShape::of(p) : ProgramShape{};
  const ProgramShape& shape = reference == nullptr ? own : *reference;
  // Channel of each program: its own for kept ranks; placed ones after the shape's channels (so
  // that a plan with fewer channels numbers them alike), in (slot, channel) order over the shape's
  // programs, then those the shape leaves out.
  std::vector<std::vector<std::uint32_t>> channel_of(P, std::vector<std::uint32_t>(C, 0));
  std::vector<std::uint32_t> next(P, std::max(C, shape.channels));
  std::uint32_t nchannels = C;
  for (const bool in_shape : {true, false})
    for (std::uint32_t s = 1; s <= most; ++s)
      for (std::size_t r = 0; r < P; ++r) {
        if (slot[r] != s) continue;
        const auto h = static_cast<std::size_t>(placement.host[r]);
        // The shape's channels beyond p's keep their places, so that the numbering of the others
        // does not depend on how many channels p has.
        const auto width =
            std::max<std::size_t>(C, r < shape.used.size() ? shape.used[r].size() : 0);
        for (std::uint32_t c = 0; c < width; ++c) {
          const bool listed = shape.has(r, c);
          if (listed != in_shape) continue;
          if (!listed && (c >= C || p.channels[c].programs[r].steps.empty())) continue;
          const std::uint32_t at = next[h]++;
          if (c >= C) continue;
          channel_of[r][c] = at;
          nchannels = std::max(nchannels, next[h]);
        }
      }
  for (std::size_t r = 0; r < P; ++r)
    if (slot[r] == 0)
      for (std::uint32_t c = 0; c < C; ++c) channel_of[r][c] = c;

  Plan out = detail::renumbered_frame(p, number, kept, nchannels);
  for (std::uint32_t c = 0; c < C; ++c)
    for (std::size_t r = 0; r < P; ++r) {
      const auto& steps = p.channels[c].programs[r].steps;
      if (steps.empty()) continue;
      out.channels[channel_of[r][c]]
          .programs[static_cast<std::size_t>(runs_on(static_cast<Rank>(r)))]
          .steps = steps;
    }

  // Labels: c * (1 + 2 * most) + code, code 0 between kept programs, 1 + slot - 1 into a placed
  // program (which identifies it), 1 + most + slot - 1 out of a placed program into a kept one.
  const std::uint32_t stride = 1 + 2 * most;
  std::set<std::tuple<std::uint32_t, Rank, Rank>> keys;
  out.connections.reserve(p.connections.size());
  for (const Connection& k : p.connections) {
    const auto from = static_cast<std::size_t>(k.from), to = static_cast<std::size_t>(k.to);
    std::uint32_t code = 0;
    if (slot[to] > 0)
      code = slot[to];
    else if (slot[from] > 0)
      code = most + slot[from];
    Connection placed{runs_on(k.from), runs_on(k.to), k.channel * stride + code,
                      k.messages_per_call};
    if (placed.from == placed.to)
      fail("connection " + std::to_string(k.from) + "->" + std::to_string(k.to) +
           " would join rank " + std::to_string(placed.from) + " to itself");
    if (!keys.emplace(placed.channel, placed.from, placed.to).second)
      fail("two connections " + std::to_string(placed.from) + "->" + std::to_string(placed.to) +
           " into one placed program (its senders share a host)");
    out.connections.push_back(placed);
  }
  return out;
}

// `p`, a plan of positions, on ranks: position i's programs run as rank rank_of[i] of a plan of
// `nranks` ranks (>= p.nranks); the ranks no position maps to are inactive and idle. For a plan
// built on an order of the ranks (a tree laid along an embedded ring: algo/double_binary_tree.hpp)
// and ranks beyond it (relays of other plans of the same algorithm).
inline Plan relabel_ranks(const Plan& p, const std::vector<Rank>& rank_of, Rank nranks) {
  const auto fail = [](const std::string& what) {
    throw Error(ErrorCode::InvalidArgument, -1, "relabel_ranks: " + what);
  };
  if (rank_of.size() != static_cast<std::size_t>(p.nranks) || nranks < p.nranks)
    fail("maps " + std::to_string(rank_of.size()) + " positions of " + std::to_string(p.nranks) +
         " onto " + std::to_string(nranks) + " ranks");
  std::vector<bool> taken(static_cast<std::size_t>(nranks), false);
  for (Rank r : rank_of) {
    if (r < 0 || r >= nranks || taken[static_cast<std::size_t>(r)])
      fail("rank " + std::to_string(r) + " is not one of " + std::to_string(nranks) +
           " distinct ranks");
    taken[static_cast<std::size_t>(r)] = true;
  }
  Plan out =
      detail::renumbered_frame(p, rank_of, nranks, static_cast<std::uint32_t>(p.channels.size()));
  for (std::size_t c = 0; c < p.channels.size(); ++c)
    for (std::size_t i = 0; i < rank_of.size(); ++i)
      out.channels[c].programs[static_cast<std::size_t>(rank_of[i])] = p.channels[c].programs[i];
  out.connections = p.connections;
  for (Connection& k : out.connections) {
    k.from = rank_of[static_cast<std::size_t>(k.from)];
    k.to = rank_of[static_cast<std::size_t>(k.to)];
  }
  return out;
}

}  // namespace ccoll::plan
