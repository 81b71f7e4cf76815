// ccoll/gradient/optimal.hpp: the best schedule over all merge and simultaneous decisions.
//
// The search space is that of [ASC-WFBP] Sec. IV: every layer typing (n / m / s per layer, layer 1
// not m), i.e. every cut of the layers into consecutive runs and, per run, whether its allreduce
// waits for the channel or starts at once (at most `max_concurrent` in flight, in issue order). The
// objective is timeline.hpp's iteration time, so "optimal" means optimal under the evaluator that
// scores every planner. With one message at a time the problem is that of [MG-WFBP] Sec. 3 and
// mg_wfbp.hpp solves it exactly in O(L^2); from two on, the state of the channel (messages in
// flight with their remaining startup and transfer, messages waiting) is continuous and
// many-dimensional, and solve_optimal proceeds in three stages, each of which can stop with a
// proof:
//
//  1. Upper bound: the best of MG-WFBP (exact merges), ASC-WFBP, the paper's MG rule, and beam
//     searches (the dynamic programme of stage 3 keeping, at each layer boundary, the w states
//     with the least backlog, and dropping a state when another has the same queue shape and no
//     more startup or transfer left in any message; w = 2, 4, 8, ... while they fit in half the
//     time budget).
//  2. Certificate: lower_bound.hpp's relaxed bound H over all schedules. If the upper bound meets
//     it, the schedule is optimal; on the shipped DenseNet profiles with the (a, b, gamma) of
//     [ASC-WFBP] Sec. VI-B this proves optimality at once.
//  3. Exact search: dynamic programming over run boundaries. Layer k's readiness does not depend
//     on communication, so at that time the channel's state summarises the past; each boundary
//     keeps every distinct state (runs that reach the same state keep it once), and states whose
//     lower bound reaches the upper bound are pruned. Both are exact. The beams' dominance is not:
//     the evaluator is not monotone in the remaining work, since a message still in flight holds
//     a slot, so that a later immediate message waits for it instead of sharing the channel at
//     once, which can end the iteration sooner. The brute-force tests check the result (every
//     typing, L <= 9). Its cost is exponential in the worst case -- a burst of layers
//     ready while the channel is busy can be split into queued messages in exponentially many
//     ways that no valid dominance removes -- so it runs under a time and state budget. Past the
//     budget the result carries the best schedule found, the lower bound still standing (the
//     least bound over the states not yet expanded) and proven_optimal = false.
//
// Budget. OptimalOptions::time_limit_s bounds the whole call: the narrowest beam of stage 1 may
// use all of it, wider ones half of it, stage 3 the rest, and all read the clock inside the
// expansion of a state (every few run lengths), not only between states, so that one expansion of a
// long model (thousands of candidate runs, each checked against a large frontier) cannot overrun
// it. The overrun past the limit is the stage-1 planners (O(L^2) for MG-WFBP: 0.03 s at L = 5000)
// and one check interval. OptimalOptions::max_states bounds memory: no stage ever holds more than
// that many DP states (a state is about kOptimalStateBytes bytes, its channel state included),
// beams included; a stage that reaches it stops as it would at the time limit, with its best
// schedule so far and proven_optimal = false. OptimalResult::stopped_by says which budget ended the
// search and peak_states how many states were held at most.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ccoll/gradient/asc_wfbp.hpp"
#include "ccoll/gradient/comm_model.hpp"
#include "ccoll/gradient/lower_bound.hpp"
#include "ccoll/gradient/mg_wfbp.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/gradient/timeline.hpp"

namespace ccoll::gradient {

// Memory of one DP state held by the search, at most about (node, channel state and its small
// vectors with their allocator overhead, frontier and bookkeeping; 250 to 450 bytes measured
// with K = 2 on glibc): what max_states multiplies.
inline constexpr std::size_t kOptimalStateBytes = 512;

struct OptimalOptions {
  int max_concurrent = 2;
  int max_beam_width = 64;    // stage 1 widens 2, 4, 8, ... up to this; 0: no beam
  double time_limit_s = 1.0;  // whole budget (wall clock), checked inside the search; < 0: none
  // Memory budget: DP states held at once by any stage (beams and the exact search), at most
  // about kOptimalStateBytes each: the default keeps the search under about 128 MB. 0: 1.
  std::size_t max_states = 250'000;
};

struct OptimalResult {
  Schedule schedule;
  double iteration_s = 0;
  double lower_bound_s = 0;  // no schedule is faster than this
  bool proven_optimal = false;
  std::string proof;  // "bound" (stage 2), "search" (stage 3 finished) or "" (budget reached)
  std::string upper_bound_from;  // which stage-1 planner gave the starting upper bound
  std::size_t states_kept = 0;
  std::size_t states_pruned = 0;
  std::size_t max_frontier = 0;
  std::size_t peak_states = 0;  // most DP states held at once by any stage (<= max_states)
  std::string stopped_by;       // "time" or "states" when a budget ended the search, else ""
  double seconds = 0;

  double gap() const { return lower_bound_s > 0 ? iteration_s / lower_bound_s - 1 : 0; }
};

namespace detail {

struct DpNode {
  CommSim sim;
  int parent;  // node index, -1 for the root
  int lo;      // the run this node issued: layers [lo, hi]
  int hi;
  StartRule rule;
};

// a's in-flight messages can be matched one to one with b's, each with no more work left.
inline bool flight_dominates(const std::vector<CommSim::InFlight>& a,
                             const std::vector<CommSim::InFlight>& b) {
  if (a.size() > b.size()) return false;
  auto le = [](const CommSim::InFlight& x, const CommSim::InFlight& y) {
    return x.startup <= y.startup && x.work <= y.work;
  };
  if (a.empty()) return true;
  if (a.size() == 1)
    return std::any_of(b.begin(), b.end(), [&](const auto& y) { return le(a[0], y); });
  if (b.size() == 2)
    return (le(a[0], b[0]) && le(a[1], b[1])) || (le(a[0], b[1]) && le(a[1], b[0]));
  // General case (K <= 6): try the injections a -> b.
  std::array<int, 8> perm{};
  for (std::size_t i = 0; i < b.size(); ++i) perm[i] = static_cast<int>(i);
  do {
    bool ok = true;
    for (std::size_t i = 0; i < a.size() && ok; ++i)
      ok = le(a[i], b[static_cast<std::size_t>(perm[i])]);
    if (ok) return true;
  } while (
      std::next_permutation(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(b.size())));
  return false;
}

// a has the same queue shape as b and no more startup or transfer left in any message. Not a proof
// that a's best continuation is no worse than b's (the header comment says why): the beams of
// stage 1 use it to stay small, the exact search does not.
inline bool dominates(const CommSim& a, const CommSim& b) {
  const auto qa = a.waiting();
  const auto qb = b.waiting();
  if (qa.size() != qb.size()) return false;
  for (std::size_t i = 0; i < qa.size(); ++i)
    if (qa[i].rule != qb[i].rule || qa[i].work > qb[i].work || qa[i].startup > qb[i].startup)
      return false;
  return flight_dominates(a.in_flight(), b.in_flight());
}

// The part of a compacted state at a boundary that its continuations depend on: the time, the
// messages in flight (in compact()'s order) and those waiting. Not last_end(): every message still
// to issue ends after now() >= last_end().
inline bool same_state(const CommSim& a, const CommSim& b) {
  if (a.now() != b.now()) return false;
  const auto& fa = a.in_flight();
  const auto& fb = b.in_flight();
  if (fa.size() != fb.size()) return false;
  for (std::size_t i = 0; i < fa.size(); ++i)
    if (fa[i].startup != fb[i].startup || fa[i].work != fb[i].work || fa[i].lane != fb[i].lane)
      return false;
  const auto qa = a.waiting();
  const auto qb = b.waiting();
  if (qa.size() != qb.size()) return false;
  for (std::size_t i = 0; i < qa.size(); ++i)
    if (qa[i].rule != qb[i].rule || qa[i].startup != qb[i].startup || qa[i].work != qb[i].work ||
        qa[i].channel != qb[i].channel ||
        std::max(qa[i].ready, a.now()) != std::max(qb[i].ready, b.now()))
      return false;
  return true;
}

// A hash of what same_state() compares, to compare with few states in full.
inline std::uint64_t state_key(const CommSim& s) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  const auto mix = [&](double x) {
    const std::uint64_t v = x == 0 ? 0 : std::bit_cast<std::uint64_t>(x);  // -0 == 0
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 29;
  };
  mix(s.now());
  for (const auto& f : s.in_flight()) {
    mix(f.startup);
    mix(f.work);
  }
  for (const auto& w : s.waiting()) {
    mix(w.startup);
    mix(w.work);
    mix(w.rule == StartRule::immediate ? 1.0 : 2.0);
  }
  return h;
}

// The dynamic programme of stage 3, also run as a beam search in stage 1.
class TypingSearch {
 public:
  TypingSearch(const ModelProfile& p, const CommModel& c, int max_concurrent, double upper_bound)
      : c_(c),
        K_(max_concurrent),
        L_(p.num_layers()),
        ready_(p.ready_times()),
        D_(c, max_concurrent),
        ub_(upper_bound) {
    prefix_.assign(static_cast<std::size_t>(L_) + 1, 0.0);
    for (int i = 0; i < L_; ++i)
      prefix_[static_cast<std::size_t>(i) + 1] =
          prefix_[static_cast<std::size_t>(i)] +
          static_cast<double>(p.layers[static_cast<std::size_t>(i)].bytes);
    H_ = relaxed_suffix_bounds(p, c, max_concurrent, upper_bound);
  }

  double root_lower_bound() const { return std::max(H_[static_cast<std::size_t>(L_)], ready_[0]); }

  // Runs the programme; beam_width <= 0 keeps every Pareto state. The budget: at most
  // `max_states` states held, and no work past `deadline_s` seconds after `start` (< 0: no
  // deadline). Returns false if the budget ran out (then stop_reason() says which, and
  // open_lower_bound() is what is still proven).
  bool run(int beam_width, std::chrono::steady_clock::time_point start, double deadline_s,
           std::size_t max_states) {
    start_ = start;
    deadline_s_ = deadline_s;
    max_states_ = std::max<std::size_t>(1, max_states);
    stop_ = Stop::none;
    gc_at_ = std::min(max_states_, kMinCollect);
    peak_ = 1;
    nodes_.clear();
    frontier_.assign(static_cast<std::size_t>(L_) + 1, {});
    keys_.assign(static_cast<std::size_t>(L_) + 1, {});
    nodes_.push_back({CommSim(&c_, K_), -1, L_, L_, StartRule::after_previous});
    frontier_[static_cast<std::size_t>(L_)].push_back(0);
    keys_[static_cast<std::size_t>(L_)].push_back(state_key(nodes_.front().sim));
    open_lb_ = std::numeric_limits<double>::infinity();
    found_ = false;
    beam_ = beam_width;
    kept_ = pruned_ = max_frontier_ = 0;
    for (int b = L_; b >= 1; --b) {
      std::vector<int>& cur = frontier_[static_cast<std::size_t>(b)];
      if (beam_width > 0 && static_cast<int>(cur.size()) > beam_width) {
        std::vector<std::pair<double, int>> scored;
        scored.reserve(cur.size());
        for (int idx : cur)
          scored.emplace_back(backlog_bound(nodes_[static_cast<std::size_t>(idx)].sim, b), idx);
        std::nth_element(scored.begin(), scored.begin() + beam_width, scored.end());
        cur.clear();
        for (int i = 0; i < beam_width; ++i)
          cur.push_back(scored[static_cast<std::size_t>(i)].second);
      }
      std::vector<int> current = cur;
      for (std::size_t ci = 0; ci < current.size(); ++ci) {
        if (stop_ == Stop::none && out_of_time()) stop_ = Stop::time;
        // One expansion adds at most 2b states: make room first by dropping the dead ones.
        const std::size_t room = 2 * static_cast<std::size_t>(b);
        if (stop_ == Stop::none && nodes_.size() + room >= gc_at_) {
          collect(current, ci, b);
          gc_at_ = std::min(max_states_, std::max(2 * nodes_.size(), kMinCollect));
          // Too little to gain from collecting again: the cap ends the run when reached.
          if (nodes_.size() + room >= gc_at_) gc_at_ = std::numeric_limits<std::size_t>::max();
        }
        if (stop_ == Stop::none && nodes_.size() >= max_states_) stop_ = Stop::states;
        if (stop_ == Stop::none) expand(current[ci], b);
        peak_ = std::max(peak_, nodes_.size());
        if (stop_ != Stop::none) {
          // Budget reached: every schedule still possible passes through a state not (fully)
          // expanded: current[ci..] at this boundary (current[ci] may be half done) or a state of
          // a later boundary.
          for (std::size_t cj = ci; cj < current.size(); ++cj)
            open_lb_ = std::min(open_lb_,
                                lower_bound(nodes_[static_cast<std::size_t>(current[cj])].sim, b));
          for (int k = 0; k < b; ++k)
            for (int idx : frontier_[static_cast<std::size_t>(k)])
              open_lb_ =
                  std::min(open_lb_, lower_bound(nodes_[static_cast<std::size_t>(idx)].sim, k));
          return false;
        }
      }
    }
    return true;
  }

  // Why the last run() stopped early: "time", "states" or "" (it finished).
  const char* stop_reason() const {
    return stop_ == Stop::time ? "time" : stop_ == Stop::states ? "states" : "";
  }
  // Most states the last run() held at once (its node store, dead states not yet collected
  // included): at most its max_states.
  std::size_t peak_states() const { return peak_; }

  double upper_bound() const { return ub_; }
  const Schedule& best() const { return best_; }
  bool found() const { return found_; }
  double open_lower_bound() const { return open_lb_; }
  std::size_t states_kept() const { return kept_; }
  std::size_t states_pruned() const { return pruned_; }
  std::size_t max_frontier() const { return max_frontier_; }

 private:
  // The channel's own share of the bound: now + D(work, startups left, this state's and the
  // layers still to issue). All states at one boundary share `now` and the layers to come, so this
  // ranks them by backlog; the full bound adds the parts that do not depend on the state.
  double backlog_bound(const CommSim& s, int b) const {
    double work = 0, startup = 0, longest = 0;
    for (const auto& f : s.in_flight()) {
      work += f.work;
      startup += f.startup;
      longest = std::max(longest, f.startup + f.work);
    }
    for (const auto& w : s.waiting()) {
      work += w.work;
      startup += w.startup;
    }
    if (b > 0) {
      work += c_.transfer_s(prefix_[static_cast<std::size_t>(b)]);
      startup += c_.startup_s();
    }
    return s.now() + std::max(D_(work, startup), longest);
  }

  // No schedule continuing from `s` (layers [0, b) still to issue) ends before this.
  double lower_bound(const CommSim& s, int b) const {
    return std::max({backlog_bound(s, b), H_[static_cast<std::size_t>(b)], ready_[0]});
  }

  enum class Stop { none, time, states };
  static constexpr std::size_t kMinCollect = 1 << 16;

  // Drops every state that no live state descends from: the live ones are current[ci..] (the
  // states of boundary b not expanded yet), the frontiers of the boundaries below b and their
  // ancestors. Beams trim their frontiers and dominance removes states, so most of the store is
  // dead after a while; without this the store would grow with every insertion.
  void collect(std::vector<int>& current, std::size_t ci, int b) {
    std::vector<int> remap(nodes_.size(), -1);
    auto mark = [&](int idx) {
      for (int i = idx; i >= 0 && remap[static_cast<std::size_t>(i)] < 0;
           i = nodes_[static_cast<std::size_t>(i)].parent)
        remap[static_cast<std::size_t>(i)] = 0;
    };
    for (std::size_t cj = ci; cj < current.size(); ++cj) mark(current[cj]);
    for (int k = 0; k < b; ++k)
      for (int idx : frontier_[static_cast<std::size_t>(k)]) mark(idx);
    int next = 0;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (remap[i] < 0) continue;
      remap[i] = next;
      DpNode& n = nodes_[i];
      if (n.parent >= 0) n.parent = remap[static_cast<std::size_t>(n.parent)];  // parent < i
      if (static_cast<std::size_t>(next) != i)
        nodes_[static_cast<std::size_t>(next)] = std::move(n);
      ++next;
    }
    nodes_.erase(nodes_.begin() + next, nodes_.end());
    for (std::size_t cj = ci; cj < current.size(); ++cj)
      current[cj] = remap[static_cast<std::size_t>(current[cj])];
    for (int k = 0; k < b; ++k)
      for (int& idx : frontier_[static_cast<std::size_t>(k)])
        idx = remap[static_cast<std::size_t>(idx)];
    for (int k = b; k <= L_; ++k) {  // done with: their live states are in `current`
      frontier_[static_cast<std::size_t>(k)].clear();
      frontier_[static_cast<std::size_t>(k)].shrink_to_fit();
      keys_[static_cast<std::size_t>(k)].clear();
      keys_[static_cast<std::size_t>(k)].shrink_to_fit();
    }
  }

  bool out_of_time() const {
    return deadline_s_ >= 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() >
               deadline_s_;
  }

  // Issues every run [k, b-1] from the state `idx` at boundary b. Stops early (stop_ set) when the
  // budget runs out: the clock is read every kClockEvery run lengths, the state count at every
  // insertion.
  void expand(int idx, int b) {
    constexpr int kClockEvery = 8;
    CommSim sim = nodes_[static_cast<std::size_t>(idx)].sim;
    const double slack = 1e-12 * std::max(1.0, ub_);
    for (int k = b - 1; k >= 0; --k) {
      if ((b - 1 - k) % kClockEvery == kClockEvery - 1 && out_of_time()) {
        stop_ = Stop::time;
        return;
      }
      sim.advance_to(ready_[static_cast<std::size_t>(k)]);
      // Every run [k', b-1] with k' <= k passes through this state: once its bound reaches the
      // upper bound, longer runs from here cannot help (the bound only grows with time).
      if (lower_bound(sim, b) > ub_ - slack) {
        ++pruned_;
        break;
      }
      const bool idle = sim.idle();
      for (StartRule rule : {StartRule::after_previous, StartRule::immediate}) {
        if (rule == StartRule::immediate && (idle || K_ == 1)) continue;  // same as after_previous
        DpNode node{sim, idx, k, b - 1, rule};
        node.sim.issue(-1, ready_[static_cast<std::size_t>(k)],
                       prefix_[static_cast<std::size_t>(b)] - prefix_[static_cast<std::size_t>(k)],
                       rule);
        node.sim.compact();
        if (k == 0) {
          finish(std::move(node));
          continue;
        }
        if (lower_bound(node.sim, k) > ub_ - slack) {
          ++pruned_;
          continue;
        }
        insert(k, std::move(node));
        if (stop_ != Stop::none) return;
      }
    }
  }

  void finish(DpNode&& node) {
    CommSim sim = node.sim;
    const double t = std::max(ready_[0], sim.run_to_completion());
    if (t >= ub_) return;
    ub_ = t;
    found_ = true;
    best_ = Schedule{};
    best_.max_concurrent = K_;
    best_.messages.push_back({node.lo, node.hi, node.rule, 0.0});
    for (int i = node.parent; nodes_[static_cast<std::size_t>(i)].parent >= 0;
         i = nodes_[static_cast<std::size_t>(i)].parent) {
      const auto& n = nodes_[static_cast<std::size_t>(i)];
      best_.messages.push_back({n.lo, n.hi, n.rule, 0.0});
    }
    std::reverse(best_.messages.begin(), best_.messages.end());
  }

  void insert(int boundary, DpNode&& node) {
    auto& f = frontier_[static_cast<std::size_t>(boundary)];
    if (beam_ > 0 && f.size() >= 4 * static_cast<std::size_t>(beam_)) {
      // Beam mode: keep the frontier small; the states with the lowest bounds survive.
      std::vector<std::pair<double, int>> scored;
      scored.reserve(f.size());
      for (int idx : f)
        scored.emplace_back(backlog_bound(nodes_[static_cast<std::size_t>(idx)].sim, boundary),
                            idx);
      std::nth_element(scored.begin(), scored.begin() + beam_, scored.end());
      f.clear();
      for (int i = 0; i < beam_; ++i) f.push_back(scored[static_cast<std::size_t>(i)].second);
    }
    // The exact search merges identical states only (dominates() says why no more); keys_ holds
    // each frontier state's state_key(), in the frontier's order, to compare few in full.
    auto& keys = keys_[static_cast<std::size_t>(boundary)];
    const std::uint64_t key = beam_ > 0 ? 0 : state_key(node.sim);
    if (beam_ > 0) {
      for (int idx : f)
        if (dominates(nodes_[static_cast<std::size_t>(idx)].sim, node.sim)) return;
    } else {
      for (std::size_t i = 0; i < f.size(); ++i)
        if (keys[i] == key && same_state(nodes_[static_cast<std::size_t>(f[i])].sim, node.sim))
          return;
    }
    if (nodes_.size() >= max_states_) {  // memory budget: keep nothing more
      stop_ = Stop::states;
      return;
    }
    if (beam_ > 0)
      f.erase(std::remove_if(f.begin(), f.end(),
                             [&](int idx) {
                               return dominates(node.sim,
                                                nodes_[static_cast<std::size_t>(idx)].sim);
                             }),
              f.end());
    if (nodes_.size() == nodes_.capacity())  // grow by doubling, but never past the budget
      nodes_.reserve(std::min(max_states_, std::max<std::size_t>(64, 2 * nodes_.capacity())));
    nodes_.push_back(std::move(node));
    f.push_back(static_cast<int>(nodes_.size()) - 1);
    if (beam_ <= 0) keys.push_back(key);
    ++kept_;
    max_frontier_ = std::max(max_frontier_, f.size());
  }

  const CommModel& c_;
  int K_;
  int L_;
  std::vector<double> ready_;
  std::vector<double> prefix_;
  CapacityBound D_;
  std::vector<double> H_;
  double ub_;
  std::chrono::steady_clock::time_point start_{};
  double deadline_s_ = -1;
  std::size_t max_states_ = 1;
  std::size_t gc_at_ = 1;  // collect() when the store reaches this
  std::size_t peak_ = 0;
  Stop stop_ = Stop::none;
  int beam_ = 0;
  double open_lb_ = std::numeric_limits<double>::infinity();
  bool found_ = false;
  Schedule best_;
  std::vector<DpNode> nodes_;
  std::vector<std::vector<int>> frontier_;
  std::vector<std::vector<std::uint64_t>> keys_;  // exact search: per frontier_ entry, its key
  std::size_t kept_ = 0, pruned_ = 0, max_frontier_ = 0;
};

}  // namespace detail

inline OptimalResult solve_optimal(const ModelProfile& p, const CommModel& c,
                                   const OptimalOptions& opt = {}) {
  const auto t0 = std::chrono::steady_clock::now();
  const int K = opt.max_concurrent;
  if (K < 1) throw_invalid_argument(-1, "max_concurrent", ">= 1", std::to_string(K));
  if (K > 6)
    throw_invalid_argument(-1, "max_concurrent", "<= 6 for the exact optimum", std::to_string(K));
  OptimalResult r;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto done = [&](Schedule s, const std::string& proof, double lb) {
    s.policy = "optimal";
    s.max_concurrent = K;
    r.iteration_s = iteration_time(p, s, c);
    r.schedule = std::move(s);
    r.lower_bound_s = std::min(lb, r.iteration_s);
    r.proven_optimal = !proof.empty();
    r.proof = proof;
    r.seconds = elapsed();
    return r;
  };
  if (K == 1) {  // one number of state: the merge DP is the exact optimum
    Schedule s = plan_mg_wfbp(p, c);
    const double t = iteration_time(p, s, c);
    r.upper_bound_from = "mg";
    return done(std::move(s), "search", t);
  }

  // Stage 1: upper bound from the planners.
  struct Candidate {
    const char* name;
    Schedule s;
  };
  Candidate cands[] = {{"mg", plan_mg_wfbp(p, c)},
                       {"asc", plan_asc_wfbp(p, c, K)},
                       {"mg-paper", plan_mg_wfbp_paper(p, c)}};
  Schedule best;
  double ub = std::numeric_limits<double>::infinity();
  for (auto& cand : cands) {
    cand.s.max_concurrent = K;
    const double t = iteration_time(p, cand.s, c);
    if (t < ub) {
      ub = t;
      best = cand.s;
      r.upper_bound_from = cand.name;
    }
  }
  const double tol = 1e-12 * std::max(1.0, ub);
  detail::TypingSearch search(p, c, K, ub);
  const double root_lb = search.root_lower_bound();
  if (ub <= root_lb + tol) return done(std::move(best), "bound", root_lb);  // Stage 2
  // Beam widths double while they fit in half the budget (each costs about three times the last);
  // the first, narrowest one may use all of it (it costs O(w L^2): seconds at L = 2000; cut short,
  // it still has completed every state it expanded into a schedule). A beam that runs out of time
  // or states ends the widening.
  for (int w = 2; w <= opt.max_beam_width; w *= 2) {
    const double before = elapsed();
    const double beam_deadline =
        opt.time_limit_s < 0 ? -1.0 : (w == 2 ? opt.time_limit_s : opt.time_limit_s / 2);
    const bool beam_done = search.run(w, t0, beam_deadline, opt.max_states);
    r.peak_states = std::max(r.peak_states, search.peak_states());
    if (search.found()) {
      best = search.best();
      r.upper_bound_from = "beam";
    }
    if (search.upper_bound() <= root_lb + tol) return done(std::move(best), "bound", root_lb);
    if (!beam_done) break;
    const double cost = elapsed() - before;
    if (opt.time_limit_s >= 0 && elapsed() + 3 * cost > opt.time_limit_s / 2) break;
  }

  // Stage 3: exact search under the budget, pruning against the best upper bound so far.
  const bool complete =
      search.run(0, t0, opt.time_limit_s < 0 ? -1.0 : opt.time_limit_s, opt.max_states);
  r.peak_states = std::max(r.peak_states, search.peak_states());
  r.stopped_by = search.stop_reason();
  r.states_kept = search.states_kept();
  r.states_pruned = search.states_pruned();
  r.max_frontier = search.max_frontier();
  if (search.found()) best = search.best();
  if (complete) {  // the search saw every schedule: its best is optimal, its own lower bound
    const double t = iteration_time(p, best, c);
    return done(std::move(best), "search", t);
  }
  const double lb = std::max(root_lb, std::min(search.open_lower_bound(), search.upper_bound()));
  return done(std::move(best), "", lb);
}

inline Schedule plan_optimal(const ModelProfile& p, const CommModel& c, int max_concurrent = 2) {
  OptimalOptions opt;
  opt.max_concurrent = max_concurrent;
  return solve_optimal(p, c, opt).schedule;
}

}  // namespace ccoll::gradient
