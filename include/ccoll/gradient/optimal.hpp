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
//     with the least backlog; w = 2, 4, 8, ... while they fit in half the time budget).
//  2. Certificate: lower_bound.hpp's relaxed bound H over all schedules. If the upper bound meets
//     it, the schedule is optimal; on the shipped DenseNet profiles with the (a, b, gamma) of
//     [ASC-WFBP] Sec. VI-B this proves optimality at once.
//  3. Exact search: dynamic programming over run boundaries. Layer k's readiness does not depend
//     on communication, so at that time the channel's state summarises the past; each boundary
//     keeps the Pareto set of states (a state is dropped if another at the same boundary has the
//     same queue shape and no more startup or transfer left in any message, in-flight messages
//     matched one to one), and states whose lower bound reaches the upper bound are pruned. This
//     is exact when the evaluator is monotone in the remaining work, which the brute-force tests
//     check (every typing, L <= 9). Its cost is exponential in the worst case -- a burst of layers
//     ready while the channel is busy can be split into queued messages in exponentially many
//     ways that no valid dominance removes -- so it runs under a time and state budget. Past the
//     budget the result carries the best schedule found, the lower bound still standing (the
//     least bound over the states not yet expanded) and proven_optimal = false.
#pragma once

#include <algorithm>
#include <array>
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

struct OptimalOptions {
  int max_concurrent = 2;
  int max_beam_width = 64;             // stage 1 widens 2, 4, 8, ... up to this; 0: no beam
  double time_limit_s = 1.0;           // whole budget (wall clock); < 0: unlimited
  std::size_t max_states = 1'000'000;  // stage 3 budget: states kept
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

inline bool dominates(const CommSim& a, const CommSim& b) {
  const auto qa = a.waiting();
  const auto qb = b.waiting();
  if (qa.size() != qb.size()) return false;
  for (std::size_t i = 0; i < qa.size(); ++i)
    if (qa[i].rule != qb[i].rule || qa[i].work > qb[i].work || qa[i].startup > qb[i].startup)
      return false;
  return flight_dominates(a.in_flight(), b.in_flight());
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

  // Runs the programme; beam_width <= 0 keeps every Pareto state. Returns false if the budget
  // ran out (then open_lower_bound() is what is still proven).
  bool run(int beam_width, double deadline_s, std::size_t max_states) {
    const auto t0 = std::chrono::steady_clock::now();
    nodes_.clear();
    frontier_.assign(static_cast<std::size_t>(L_) + 1, {});
    nodes_.push_back({CommSim(&c_, K_), -1, L_, L_, StartRule::after_previous});
    frontier_[static_cast<std::size_t>(L_)].push_back(0);
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
      const std::vector<int> current = cur;
      for (std::size_t ci = 0; ci < current.size(); ++ci) {
        if ((deadline_s >= 0 &&
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
                 deadline_s) ||
            nodes_.size() > max_states) {
          // Budget reached: every schedule still possible passes through an unexpanded state.
          for (std::size_t cj = ci; cj < current.size(); ++cj)
            open_lb_ = std::min(open_lb_,
                                lower_bound(nodes_[static_cast<std::size_t>(current[cj])].sim, b));
          for (int k = 0; k < b; ++k)
            for (int idx : frontier_[static_cast<std::size_t>(k)])
              open_lb_ =
                  std::min(open_lb_, lower_bound(nodes_[static_cast<std::size_t>(idx)].sim, k));
          return false;
        }
        expand(current[ci], b);
      }
    }
    return true;
  }

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

  void expand(int idx, int b) {
    CommSim sim = nodes_[static_cast<std::size_t>(idx)].sim;
    const double slack = 1e-12 * std::max(1.0, ub_);
    for (int k = b - 1; k >= 0; --k) {
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
    for (int idx : f)
      if (dominates(nodes_[static_cast<std::size_t>(idx)].sim, node.sim)) return;
    f.erase(std::remove_if(f.begin(), f.end(),
                           [&](int idx) {
                             return dominates(node.sim, nodes_[static_cast<std::size_t>(idx)].sim);
                           }),
            f.end());
    nodes_.push_back(std::move(node));
    f.push_back(static_cast<int>(nodes_.size()) - 1);
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
  int beam_ = 0;
  double open_lb_ = std::numeric_limits<double>::infinity();
  bool found_ = false;
  Schedule best_;
  std::vector<DpNode> nodes_;
  std::vector<std::vector<int>> frontier_;
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
  // Beam widths double while they fit in half the budget (each costs about three times the last).
  for (int w = 2; w <= opt.max_beam_width; w *= 2) {
    const double before = elapsed();
    search.run(w, -1, std::numeric_limits<std::size_t>::max());
    if (search.found()) {
      best = search.best();
      r.upper_bound_from = "beam";
    }
    if (search.upper_bound() <= root_lb + tol) return done(std::move(best), "bound", root_lb);
    const double cost = elapsed() - before;
    if (opt.time_limit_s >= 0 && elapsed() + 3 * cost > opt.time_limit_s / 2) break;
  }

  // Stage 3: exact search under the budget, pruning against the best upper bound so far.
  const double remaining =
      opt.time_limit_s < 0 ? -1.0 : std::max(0.0, opt.time_limit_s - elapsed());
  const bool complete = search.run(0, remaining, opt.max_states);
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
