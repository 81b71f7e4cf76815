// ccoll/sim/simulator.hpp: discrete-event execution of a Plan on a Network.
//
// The simulator runs a plan with the executors' semantics and the network's physics:
//   - a (rank, channel) program runs its steps in order; a step starts when its previous step is
//     done, every message it receives has arrived, and every connection it sends on has a free slot
//     (message seq may be written once message seq - nslots has been consumed) -- the verifier's
//     and the executors' rules;
//   - the step then reduces (bytes x (inputs - 1) / reduce_Bps, plus a fixed per-step overhead) and
//     sends each message over its connection's route; the step is done when all its messages have
//     arrived (a writer posts `tail` after its write lands), and only then are its received slots
//     consumed (the reader posts `head`);
//   - a message is a flow over the links of its route. Concurrent flows share each link max-min
//     fairly (progressive filling, recomputed whenever a flow starts or ends); the message arrives
//     the route's latency after its last byte has left (alpha + bytes / bandwidth on an idle
//     route).
// It reports the total time, per-rank finish times, per-link bytes and utilisation, the gradient
// turnaround ([C-Cube] Sec. III-C: the first moment some element is reduced and written at every
// active rank), when every part of the buffer is complete at every active rank (`ready`: what
// [C-Cube]'s gradient queue could hand to the next forward pass, and when) and, if asked, a
// timeline for sim/chrome_trace.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ccoll/plan/plan.hpp"
#include "ccoll/sim/network.hpp"

namespace ccoll::sim {

struct SimOptions {
  std::size_t elem_size = 4;   // bytes per element (a Plan counts elements)
  double reduce_Bps = 0;       // reduction throughput per program, bytes/s; 0 = free
  double step_overhead_s = 0;  // fixed cost of every step (loop / kernel overhead)
  bool record_trace = false;   // keep per-step and per-link timelines
};

struct LinkUsage {
  int link = 0;
  std::string name;
  double capacity_Bps = 0;
  double bytes = 0;        // carried during the collective
  double busy_s = 0;       // time with at least one flow on it
  double utilisation = 0;  // bytes / (capacity x total time)
};

struct StepSpan {
  plan::Rank rank = 0;
  std::uint32_t channel = 0;
  std::uint32_t step = 0;
  double start_s = 0;
  double end_s = 0;
  std::uint64_t bytes = 0;
  const char* kind = "";
};

struct LinkRateSample {
  int link = 0;
  double time_s = 0;
  double rate_Bps = 0;
};

// Elements [begin, end) are reduced and written at every active rank from time_s on.
struct ReadyRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  double time_s = 0;
};

struct SimResult {
  double time_s = 0;
  double turnaround_s = 0;  // first element reduced and written at every active rank
  // The output, cut where writes begin or end, each piece with the time it is complete at every
  // active rank; sorted by time. turnaround_s is ready.front().time_s.
  std::vector<ReadyRange> ready;
  std::vector<double> rank_finish_s;
  std::vector<LinkUsage> links;  // links that carried bytes
  std::uint64_t steps = 0;
  std::uint64_t messages = 0;
  double bytes_sent = 0;                   // message bytes (each counted once, however many hops)
  std::vector<StepSpan> spans;             // record_trace only
  std::vector<LinkRateSample> link_rates;  // record_trace only
};

// A step's shape in NCCL's vocabulary, for traces.
inline const char* step_kind(const plan::Step& s) {
  const bool src = s.src != plan::Source::None;
  if (s.recv_count == 0) return s.send_count ? "send" : (s.write_output ? "copy" : "local");
  if (s.send_count == 0) return src ? "recv-reduce-copy" : "recv";
  if (src) return s.write_output ? "recv-reduce-copy-send" : "recv-reduce-send";
  return s.write_output ? "recv-copy-send" : "recv-forward";
}

namespace detail {

// The end times of the flows in flight, one entry per path (a path's flows share its rate and
// end in order), with O(log n) updates: a reshare changes many rates at once, and pushing a new
// event for each (leaving the old ones to be skipped) would grow the event queue with stale entries
// until it dominates the run time. An entry's key is the end time and flow id of the path's flow
// that ends first.
class EndHeap {
 public:
  bool empty() const { return heap_.empty(); }
  double top_key() const { return key_[heap_.front()]; }
  std::size_t top() const { return heap_.front(); }
  // Inserts `id` or moves it to (t, tie).
  void set(std::size_t id, double t, std::size_t tie) {
    if (id >= pos_.size()) {
      pos_.resize(id + 1, kAbsent);
      key_.resize(id + 1, 0);
      tie_.resize(id + 1, 0);
    }
    const double old = key_[id];
    const std::size_t old_tie = tie_[id];
    key_[id] = t;
    tie_[id] = tie;
    if (pos_[id] == kAbsent) {
      pos_[id] = heap_.size();
      heap_.push_back(id);
      up(pos_[id]);
    } else if (t != old ? t < old : tie < old_tie) {
      up(pos_[id]);
    } else {
      down(pos_[id]);
    }
  }
  void erase(std::size_t id) {
    if (id >= pos_.size() || pos_[id] == kAbsent) return;
    const std::size_t i = pos_[id];
    swap_at(i, heap_.size() - 1);
    heap_.pop_back();
    pos_[id] = kAbsent;
    if (i < heap_.size()) {
      up(i);
      down(i);
    }
  }

 private:
  static constexpr std::size_t kAbsent = static_cast<std::size_t>(-1);
  // Ties go to the smaller flow id, so runs are deterministic.
  bool before(std::size_t a, std::size_t b) const {
    return key_[a] != key_[b] ? key_[a] < key_[b] : tie_[a] < tie_[b];
  }
  void swap_at(std::size_t i, std::size_t j) {
    std::swap(heap_[i], heap_[j]);
    pos_[heap_[i]] = i;
    pos_[heap_[j]] = j;
  }
  void up(std::size_t i) {
    while (i > 0 && before(heap_[i], heap_[(i - 1) / 2])) {
      swap_at(i, (i - 1) / 2);
      i = (i - 1) / 2;
    }
  }
  void down(std::size_t i) {
    for (;;) {
      std::size_t m = i;
      for (std::size_t c = 2 * i + 1; c <= 2 * i + 2 && c < heap_.size(); ++c)
        if (before(heap_[c], heap_[m])) m = c;
      if (m == i) return;
      swap_at(i, m);
      i = m;
    }
  }
  std::vector<std::size_t> heap_, pos_, tie_;
  std::vector<double> key_;
};

// Max-min fair rates of flows over links, kept incrementally. Flows are counted per path (a link
// sequence): flows on the same links freeze in the same round of progressive filling and get the
// same rate, so the filling runs over paths, however many flows each carries. The rates of one
// connected component of the flow-link graph do not depend on the others', so reshare() refills
// only the components that hold a link whose flows changed since the last call.
//
// The filling is the straightforward one, restricted to those components: raise every unfrozen
// path's rate together; the links whose remaining capacity per unfrozen flow is smallest (within
// a relative 1e-12) fill first and freeze their paths at that level; repeat. (A heap of link
// levels was tried: plans have few distinct levels, and the heap's pushes per frozen path cost
// more than rescanning the component's links each round.)
//
// A link is left out of the filling when another link m lies on every path through it and is no
// wider (ties: m carries more paths, or has the smaller index). In every round m has no more
// capacity left (it loses at least the same shares) for at least as many unfrozen flows, so its
// level is at most the link's, in floating point too (subtraction and division round
// monotonically): the link never sets the share alone and is only tight when m is, which freezes
// its paths anyway. Leaving it out therefore gives the same rates bit for bit, while a path keeps
// only its links that can bind. On a cluster that leaves each inter-machine route its two NIC
// links instead of six: the component a flow touches keeps its paths but loses most of its links,
// and each path is a pass over two links instead of six, in the search for the component and in
// the filling alike.
class FairShare {
 public:
  FairShare() = default;
  // leave_out_dominated = false keeps every link in the filling (tests compare the two).
  explicit FairShare(std::vector<double> capacity, bool leave_out_dominated = true)
      : cap_(std::move(capacity)),
        leave_out_(leave_out_dominated),
        link_n_(cap_.size(), 0),
        link_paths_(cap_.size()),
        touched_(cap_.size(), 0),
        link_seen_(cap_.size(), 0),
        left_n_(cap_.size(), 0),
        left_cap_(cap_.size(), 0),
        level_(cap_.size(), 0) {}

  // Registers a path over `links` (link indices, each at most once) and returns its id. Paths
  // are registered before the first flow: which links can bind depends on all of them.
  std::uint32_t add_path(std::vector<int> links) {
    if (sealed_) throw std::logic_error("FairShare::add_path after the first flow");
    path_links_.push_back(std::move(links));
    path_n_.push_back(0);
    rate_.push_back(0);
    frozen_.push_back(0);
    grew_.push_back(0);
    return static_cast<std::uint32_t>(path_links_.size() - 1);
  }
  void add_flow(std::uint32_t p) {
    if (!sealed_) seal();
    if (path_n_[p]++ == 0) {
      auto& slots = path_slot_[p];
      for (std::size_t h = 0; h < slots.size(); ++h) {
        auto& lp = link_paths_[static_cast<std::size_t>(fill_links_[p][h])];
        slots[h] = static_cast<std::uint32_t>(lp.size());
        lp.push_back(p);
      }
    }
    grew_[p] = 1;
    for (int l : path_links_[p]) ++link_n_[static_cast<std::size_t>(l)];
    for (int l : fill_links_[p]) touch(l);
  }
  void remove_flow(std::uint32_t p) {
    if (--path_n_[p] == 0) {
      grew_[p] = 0;
      const auto& links = fill_links_[p];
      for (std::size_t h = 0; h < links.size(); ++h) {
        // Swap-remove: the order of a link's paths does not matter to the filling (every path
        // frozen in a round gets the same level, and each link loses that level once per flow).
        auto& lp = link_paths_[static_cast<std::size_t>(links[h])];
        const std::uint32_t slot = path_slot_[p][h];
        const std::uint32_t moved = lp.back();
        lp[slot] = moved;
        lp.pop_back();
        if (moved != p) slot_of(moved, links[h]) = slot;
      }
    }
    for (int l : path_links_[p]) --link_n_[static_cast<std::size_t>(l)];
    for (int l : fill_links_[p]) touch(l);
  }
  std::uint32_t flows(std::uint32_t p) const { return path_n_[p]; }
  std::size_t link_flows(int l) const { return link_n_[static_cast<std::size_t>(l)]; }
  const std::vector<int>& links(std::uint32_t p) const { return path_links_[p]; }
  // The links of path p that the filling keeps (see the class comment).
  const std::vector<int>& binding_links(std::uint32_t p) const {
    return sealed_ ? fill_links_[p] : path_links_[p];
  }
  // The rate of each flow on path p, as of the last reshare() that reached p.
  double rate(std::uint32_t p) const { return rate_[p]; }

  // Refills the components touched since the last call. `changed` receives the paths whose rate
  // differs from the one the previous call gave them, and those that gained a flow since: the
  // flows of any other path keep their rates.
  void reshare(std::vector<std::uint32_t>& changed) {
    changed.clear();
    ++stamp_;
    comp_links_.clear();
    for (int l : touched_list_) {
      const auto ul = static_cast<std::size_t>(l);
      touched_[ul] = 0;
      if (link_n_[ul] > 0 && link_seen_[ul] != stamp_) {
        link_seen_[ul] = stamp_;
        comp_links_.push_back(ul);
      }
    }
    touched_list_.clear();
    // The component's links: every path on a link in it is refilled, so its frozen_ stamp marks
    // it as reached as well.
    for (std::size_t i = 0; i < comp_links_.size(); ++i)
      for (std::uint32_t p : link_paths_[comp_links_[i]]) {
        if (frozen_[p] == stamp_) continue;
        frozen_[p] = stamp_;
        for (int m : fill_links_[p]) {
          const auto um = static_cast<std::size_t>(m);
          if (link_seen_[um] == stamp_) continue;
          link_seen_[um] = stamp_;
          comp_links_.push_back(um);
        }
      }
    ++stamp_;
    for (std::size_t l : comp_links_) {
      left_cap_[l] = cap_[l];
      left_n_[l] = link_n_[l];
    }
    for (;;) {
      double share = std::numeric_limits<double>::infinity();
      // Each level once per round, for the minimum and the tight test alike: one division each.
      for (std::size_t l : comp_links_) {
        level_[l] = left_cap_[l] / static_cast<double>(left_n_[l]);
        share = std::min(share, level_[l]);
      }
      if (!std::isfinite(share)) break;
      tight_.clear();
      for (std::size_t l : comp_links_)
        if (level_[l] <= share * (1 + 1e-12)) tight_.push_back(l);
      for (std::size_t l : tight_)
        for (std::uint32_t p : link_paths_[l]) {
          if (frozen_[p] == stamp_) continue;
          frozen_[p] = stamp_;
          if (rate_[p] != share || grew_[p]) changed.push_back(p);
          rate_[p] = share;
          grew_[p] = 0;
          const std::size_t k = path_n_[p];
          for (int m : fill_links_[p]) {
            const auto um = static_cast<std::size_t>(m);
            // Once per flow, as filling flow by flow would: k x share rounds differently.
            for (std::size_t i = 0; i < k; ++i)
              left_cap_[um] = std::max(0.0, left_cap_[um] - share);
            left_n_[um] -= k;
          }
        }
      // Links with no unfrozen flow left drop out of the scans.
      std::erase_if(comp_links_, [&](std::size_t l) { return left_n_[l] == 0; });
    }
  }

 private:
  // Decides which links bind (see the class comment) once all paths are known.
  void seal() {
    sealed_ = true;
    const std::size_t L = cap_.size(), P = path_links_.size();
    std::vector<char> out(L, 0);
    if (leave_out_) {
      std::vector<std::vector<std::uint32_t>> through(L);
      for (std::uint32_t p = 0; p < P; ++p)
        for (int l : path_links_[p]) through[static_cast<std::size_t>(l)].push_back(p);
      // on[m]: how many of the current link's paths pass m (valid where at[m] is that link).
      std::vector<std::size_t> on(L, 0), at(L, L);
      for (std::size_t l = 0; l < L; ++l) {
        const auto& tl = through[l];
        if (tl.empty()) continue;
        for (std::uint32_t p : tl)
          for (int m : path_links_[p]) {
            const auto um = static_cast<std::size_t>(m);
            if (at[um] != l) {
              at[um] = l;
              on[um] = 0;
            }
            ++on[um];
          }
        for (int m : path_links_[tl.front()]) {
          const auto um = static_cast<std::size_t>(m);
          if (um == l || on[um] != tl.size()) continue;
          const std::size_t nm = through[um].size();
          if (cap_[um] < cap_[l] ||
              (cap_[um] == cap_[l] && (nm > tl.size() || (nm == tl.size() && um < l)))) {
            out[l] = 1;
            break;
          }
        }
      }
    }
    fill_links_.resize(P);
    path_slot_.resize(P);
    for (std::size_t p = 0; p < P; ++p) {
      for (int l : path_links_[p])
        if (!out[static_cast<std::size_t>(l)]) fill_links_[p].push_back(l);
      path_slot_[p].assign(fill_links_[p].size(), 0);
    }
  }
  std::uint32_t& slot_of(std::uint32_t p, int link) {
    const auto& links = fill_links_[p];
    const auto h =
        static_cast<std::size_t>(std::find(links.begin(), links.end(), link) - links.begin());
    return path_slot_[p][h];
  }
  void touch(int l) {
    const auto ul = static_cast<std::size_t>(l);
    if (touched_[ul]) return;
    touched_[ul] = 1;
    touched_list_.push_back(l);
  }

  std::vector<double> cap_;
  bool leave_out_ = true;
  bool sealed_ = false;
  std::vector<std::size_t> link_n_;                     // flows on each link
  std::vector<std::vector<std::uint32_t>> link_paths_;  // paths with flows on each binding link
  std::vector<std::vector<int>> path_links_;
  std::vector<std::vector<int>> fill_links_;           // each path's binding links
  std::vector<std::vector<std::uint32_t>> path_slot_;  // a path's index in each link's list
  std::vector<std::uint32_t> path_n_;                  // flows on each path
  std::vector<double> rate_;
  std::vector<char> grew_;  // gained a flow since the last reshare()
  std::vector<char> touched_;
  std::vector<int> touched_list_;
  std::vector<std::uint64_t> link_seen_, frozen_;
  std::uint64_t stamp_ = 0;
  std::vector<std::size_t> comp_links_, tight_, left_n_;
  std::vector<double> left_cap_, level_;
};

class Simulation {
 public:
  Simulation(const plan::Plan& plan, const Network& net, const std::vector<int>& rank_node,
             const SimOptions& opt)
      : plan_(plan), net_(net), opt_(opt) {
    const auto P = static_cast<std::size_t>(plan.nranks);
    node_of_.resize(P);
    for (std::size_t r = 0; r < P; ++r) {
      node_of_[r] = rank_node.empty() ? static_cast<int>(r) : rank_node.at(r);
      if (node_of_[r] < 0 || node_of_[r] >= static_cast<int>(net_.nodes.size()))
        throw std::invalid_argument("simulate: rank " + std::to_string(r) +
                                    " is placed on a node the network does not have");
    }
    nch_ = plan.channels.size();
    programs_.resize(nch_ * P);
    build_routes();
    const auto C = plan.connections.size();
    std::vector<std::uint32_t> nmsg(C, 0);
    // A connection's sender and receiver may run it on different channels (the overlapped tree's
    // root sends the broadcast from its reduce channel), so find each end's program.
    send_ch_.assign(C, 0);
    recv_ch_.assign(C, 0);
    for (std::uint32_t ch = 0; ch < nch_; ++ch)
      for (const auto& prog : plan.channels[ch].programs)
        for (const auto& s : prog.steps) {
          for (std::uint32_t p = 0; p < s.send_count; ++p) {
            const auto c = plan.ports[s.send_begin + p].connection;
            ++nmsg[c];
            send_ch_[c] = ch;
          }
          for (std::uint32_t p = 0; p < s.recv_count; ++p)
            recv_ch_[plan.ports[s.recv_begin + p].connection] = ch;
        }
    arrived_.resize(C);
    consumed_.resize(C);
    for (std::size_t c = 0; c < C; ++c) {
      arrived_[c].assign(nmsg[c], false);
      consumed_[c].assign(nmsg[c], false);
    }
    link_rate_.assign(net_.links.size(), 0);
    link_bytes_.assign(net_.links.size(), 0);
    link_busy_.assign(net_.links.size(), 0);
    link_busy_since_.assign(net_.links.size(), 0);
  }

  SimResult run() {
    for (std::size_t ch = 0; ch < nch_; ++ch)
      for (plan::Rank r = 0; r < plan_.nranks; ++r) try_start(static_cast<std::uint32_t>(ch), r);
    for (;;) {
      // The next event: a step's compute or a message's arrival (events_), or the end of a flow
      // (ends_, one entry per path, moved whenever its first flow's end changes).
      const bool have_event = !events_.empty(), have_end = !ends_.empty();
      if (!have_event && !have_end) break;
      if (have_end && (!have_event || ends_.top_key() <= events_.top().t)) {
        if (!std::isfinite(ends_.top_key())) break;  // reported as a stall below
        now_ = ends_.top_key();
        flow_done(first_flow_[ends_.top()]);
      } else {
        const Event e = events_.top();
        events_.pop();
        now_ = e.t;
        if (e.kind == Kind::ComputeDone)
          compute_done(static_cast<std::uint32_t>(e.a), e.b);
        else
          arrival(static_cast<std::uint32_t>(e.a), e.seq);
      }
      // Flows that start or end at the same instant share links from that instant on: one
      // max-min computation after the last of them gives the same rates as one per flow (the
      // rates in between would hold for zero time) at a fraction of the cost.
      if (dirty_ && next_time() > now_) {
        dirty_ = false;
        reshare();
      }
    }
    for (std::size_t ch = 0; ch < nch_; ++ch)
      for (plan::Rank r = 0; r < plan_.nranks; ++r) {
        const Prog& p = prog(static_cast<std::uint32_t>(ch), r);
        const auto& steps = plan_.channels[ch].programs[static_cast<std::size_t>(r)].steps;
        if (p.next < steps.size())
          throw std::runtime_error("simulate: the plan stalls at rank " + std::to_string(r) +
                                   ", channel " + std::to_string(ch) + ", step " +
                                   std::to_string(p.next) + " (run it through plan::verify)");
      }
    return finish();
  }

 private:
  enum class Kind : std::uint8_t { ComputeDone, Arrival };
  struct Event {
    double t;
    std::uint64_t order;
    Kind kind;
    std::int64_t a;
    std::int32_t b;
    std::uint32_t seq;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
  };
  struct Prog {
    std::size_t next = 0;
    bool busy = false;
    std::uint32_t pending = 0;
    double start = 0;
    double finish = 0;
  };
  struct Flow {
    std::uint32_t conn = 0;
    std::uint32_t seq = 0;
    std::uint32_t path = 0;
    std::uint32_t pos = 0;  // index in path_flows_[path]
    double bytes = 0;
    double remaining = 0;
    double rate = 0;
    double last_t = 0;
    double end = 0;
  };

  Prog& prog(std::uint32_t ch, plan::Rank r) {
    return programs_[ch * static_cast<std::size_t>(plan_.nranks) + static_cast<std::size_t>(r)];
  }
  const plan::Step& step_of(std::uint32_t ch, plan::Rank r, std::size_t i) const {
    return plan_.channels[ch].programs[static_cast<std::size_t>(r)].steps[i];
  }
  void push(double t, Kind k, std::int64_t a, std::int32_t b, std::uint32_t seq = 0) {
    events_.push(Event{t, order_++, k, a, b, seq});
  }

  // One route per pair of nodes that a connection joins, shared by the connections between them:
  // the route is the rate-sharing path of their flows (FairShare).
  void build_routes() {
    const auto C = plan_.connections.size();
    conn_route_.resize(C);
    std::unordered_map<std::uint64_t, std::uint32_t> route_of;
    std::vector<std::vector<std::uint32_t>> by_source(net_.nodes.size());
    for (std::size_t c = 0; c < C; ++c) {
      const auto& conn = plan_.connections[c];
      const int u = node_of_.at(static_cast<std::size_t>(conn.from));
      const int v = node_of_.at(static_cast<std::size_t>(conn.to));
      const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(u)) << 32) |
                                static_cast<std::uint32_t>(v);
      const auto [it, added] =
          route_of.emplace(key, static_cast<std::uint32_t>(route_ends_.size()));
      if (added) {
        route_ends_.emplace_back(u, v);
        by_source[static_cast<std::size_t>(u)].push_back(it->second);
      }
      conn_route_[c] = it->second;
    }
    routes_.resize(route_ends_.size());
    if (net_.uniform) {
      for (std::size_t r = 0; r < routes_.size(); ++r) {
        const auto [u, v] = route_ends_[r];
        if (u == v) continue;
        routes_[r].links = {net_.add_link(u, v, net_.uniform_capacity_Bps, net_.uniform_latency_s)};
        routes_[r].latency_s = net_.uniform_latency_s;
        routes_[r].bottleneck_Bps = net_.uniform_capacity_Bps;
      }
    } else {
      WidestRouter router(net_);
      for (std::size_t u = 0; u < by_source.size(); ++u) {
        if (by_source[u].empty()) continue;
        router.from(static_cast<int>(u));
        for (std::uint32_t r : by_source[u]) {
          const int v = route_ends_[r].second;
          if (v == static_cast<int>(u)) continue;
          routes_[r] = router.route_to(v);
        }
      }
      for (std::size_t c = 0; c < C; ++c) {
        const auto [u, v] = route_ends_[conn_route_[c]];
        if (u == v || !routes_[conn_route_[c]].links.empty()) continue;
        const auto& conn = plan_.connections[c];
        throw std::invalid_argument(
            "simulate: no route from " + net_.nodes[static_cast<std::size_t>(u)].name + " (rank " +
            std::to_string(conn.from) + ") to " + net_.nodes[static_cast<std::size_t>(v)].name +
            " (rank " + std::to_string(conn.to) + ")");
      }
    }
    std::vector<double> capacity(net_.links.size());
    for (std::size_t l = 0; l < capacity.size(); ++l) capacity[l] = net_.links[l].capacity_Bps;
    fair_ = FairShare(std::move(capacity));
    for (const Route& r : routes_) fair_.add_path(r.links);
    path_flows_.resize(routes_.size());
    first_flow_.resize(routes_.size());
  }

  void try_start(std::uint32_t ch, plan::Rank r) {
    Prog& p = prog(ch, r);
    const auto& steps = plan_.channels[ch].programs[static_cast<std::size_t>(r)].steps;
    if (p.busy || p.next >= steps.size()) return;
    const plan::Step& s = steps[p.next];
    for (std::uint32_t i = 0; i < s.recv_count; ++i) {
      const plan::Port& port = plan_.ports[s.recv_begin + i];
      if (!arrived_[port.connection][port.seq]) return;
    }
    for (std::uint32_t i = 0; i < s.send_count; ++i) {
      const plan::Port& port = plan_.ports[s.send_begin + i];
      if (port.seq >= plan_.nslots && !consumed_[port.connection][port.seq - plan_.nslots]) return;
    }
    p.busy = true;
    p.start = now_;
    const double bytes = static_cast<double>(s.count) * static_cast<double>(opt_.elem_size);
    const int inputs = static_cast<int>(s.recv_count) + (s.src != plan::Source::None ? 1 : 0);
    double compute = opt_.step_overhead_s;
    if (opt_.reduce_Bps > 0 && inputs > 1) compute += bytes * (inputs - 1) / opt_.reduce_Bps;
    push(now_ + compute, Kind::ComputeDone, ch, r);
  }

  void compute_done(std::uint32_t ch, plan::Rank r) {
    Prog& p = prog(ch, r);
    const plan::Step& s = step_of(ch, r, p.next);
    p.pending = s.send_count;
    if (s.send_count == 0) {
      complete(ch, r);
      return;
    }
    const double bytes = static_cast<double>(s.count) * static_cast<double>(opt_.elem_size);
    for (std::uint32_t i = 0; i < s.send_count; ++i) {
      const plan::Port& port = plan_.ports[s.send_begin + i];
      ++messages_;
      bytes_sent_ += bytes;
      const Route& route = routes_[conn_route_[port.connection]];
      if (route.links.empty() || !(bytes > 0)) {
        push(now_ + route.latency_s, Kind::Arrival, port.connection, 0, port.seq);
        continue;
      }
      start_flow(port.connection, port.seq, bytes);
    }
  }

  void start_flow(std::uint32_t conn, std::uint32_t seq, double bytes) {
    std::size_t id;
    if (!free_flows_.empty()) {
      id = free_flows_.back();
      free_flows_.pop_back();
    } else {
      id = flows_.size();
      flows_.emplace_back();
    }
    Flow& f = flows_[id];
    f.conn = conn;
    f.seq = seq;
    f.path = conn_route_[conn];
    f.bytes = f.remaining = bytes;
    f.rate = 0;
    f.last_t = now_;
    f.end = std::numeric_limits<double>::infinity();  // until reshare() gives it a rate
    auto& pf = path_flows_[f.path];
    f.pos = static_cast<std::uint32_t>(pf.size());
    pf.push_back(id);
    for (int l : fair_.links(f.path))
      if (fair_.link_flows(l) == 0) link_busy_since_[static_cast<std::size_t>(l)] = now_;
    fair_.add_flow(f.path);
    dirty_ = true;  // run() reshares once the events of this instant are done
  }

  // Moves flow `id` to `rate` from now on; the caller re-keys its path (end_moved).
  void set_rate(std::size_t id, double rate) {
    Flow& f = flows_[id];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now_ - f.last_t));
    f.last_t = now_;
    if (opt_.record_trace)
      for (int l : fair_.links(f.path))
        note_rate(l, link_rate_[static_cast<std::size_t>(l)] + rate - f.rate);
    f.rate = rate;
    f.end = now_ + (rate > 0 ? f.remaining / rate : std::numeric_limits<double>::infinity());
  }

  // Re-keys path p in ends_ by its flow that ends first (ties: the smaller flow id).
  void end_moved(std::uint32_t p) {
    const auto& pf = path_flows_[p];
    if (pf.empty()) {
      ends_.erase(p);
      return;
    }
    std::size_t first = pf.front();
    for (std::size_t id : pf) {
      const Flow& f = flows_[id];
      const Flow& b = flows_[first];
      if (f.end < b.end || (f.end == b.end && id < first)) first = id;
    }
    first_flow_[p] = first;
    ends_.set(p, flows_[first].end, first);
  }

  double next_time() const {
    double t = std::numeric_limits<double>::infinity();
    if (!events_.empty()) t = events_.top().t;
    if (!ends_.empty()) t = std::min(t, ends_.top_key());
    return t;
  }

  void note_rate(int l, double rate) {
    const auto ul = static_cast<std::size_t>(l);
    if (std::abs(rate - link_rate_[ul]) > 1e-9 * net_.links[ul].capacity_Bps)
      link_rates_.push_back(LinkRateSample{l, now_, std::max(0.0, rate)});
    link_rate_[ul] = rate;
  }

  // Max-min fair rates (FairShare) for the components of the links whose flows changed; a flow
  // whose rate moves by more than a relative 1e-12 gets the new rate and a new end time.
  void reshare() {
    fair_.reshare(changed_paths_);
    if (!opt_.record_trace) {
      for (std::uint32_t p : changed_paths_) {
        const double rate = fair_.rate(p);
        bool moved = false;
        for (std::size_t id : path_flows_[p])
          if (std::abs(rate - flows_[id].rate) > 1e-12 * rate) {
            set_rate(id, rate);
            moved = true;
          }
        if (moved) end_moved(p);
      }
      return;
    }
    // The trace samples a link's rate after each flow's change: change flows in id order, so the
    // samples do not depend on the order of the paths.
    changed_.clear();
    for (std::uint32_t p : changed_paths_)
      for (std::size_t id : path_flows_[p])
        if (std::abs(fair_.rate(p) - flows_[id].rate) > 1e-12 * fair_.rate(p))
          changed_.push_back(id);
    std::sort(changed_.begin(), changed_.end());
    for (std::size_t id : changed_) set_rate(id, fair_.rate(flows_[id].path));
    for (std::uint32_t p : changed_paths_) end_moved(p);
  }

  void flow_done(std::size_t id) {
    Flow& f = flows_[id];
    f.remaining = 0;
    const std::uint32_t conn = f.conn, seq = f.seq, p = f.path;
    auto& pf = path_flows_[p];
    flows_[pf.back()].pos = f.pos;
    pf[f.pos] = pf.back();
    pf.pop_back();
    fair_.remove_flow(p);
    for (int l : fair_.links(p)) {
      const auto ul = static_cast<std::size_t>(l);
      const bool empty = fair_.link_flows(l) == 0;
      if (empty) link_busy_[ul] += now_ - link_busy_since_[ul];
      link_bytes_[ul] += f.bytes;
      if (opt_.record_trace) note_rate(l, empty ? 0.0 : link_rate_[ul] - f.rate);
    }
    f.rate = 0;
    end_moved(p);
    free_flows_.push_back(id);
    dirty_ = true;
    push(now_ + routes_[conn_route_[conn]].latency_s, Kind::Arrival, conn, 0, seq);
  }

  void arrival(std::uint32_t conn, std::uint32_t seq) {
    arrived_[conn][seq] = true;
    const auto& c = plan_.connections[conn];
    Prog& sender = prog(send_ch_[conn], c.from);
    if (--sender.pending == 0) complete(send_ch_[conn], c.from);
    try_start(recv_ch_[conn], c.to);
  }

  void complete(std::uint32_t ch, plan::Rank r) {
    Prog& p = prog(ch, r);
    const plan::Step& s = step_of(ch, r, p.next);
    ++steps_;
    if (opt_.record_trace)
      spans_.push_back(StepSpan{r, ch, static_cast<std::uint32_t>(p.next), p.start, now_,
                                s.count * opt_.elem_size, step_kind(s)});
    if (s.write_output && plan_.active.at(static_cast<std::size_t>(r)))
      writes_.push_back(Write{r, s.offset, s.offset + s.count, now_});
    p.busy = false;
    ++p.next;
    p.finish = now_;
    for (std::uint32_t i = 0; i < s.recv_count; ++i) {
      const plan::Port& port = plan_.ports[s.recv_begin + i];
      consumed_[port.connection][port.seq] = true;
      try_start(send_ch_[port.connection], plan_.connections[port.connection].from);
    }
    try_start(ch, r);
  }

  struct Write {
    plan::Rank rank;
    std::uint64_t begin, end;
    double t;
  };

  // When each piece of the output has been written at every active rank (see SimResult::ready).
  std::vector<ReadyRange> ready() const {
    std::vector<std::uint64_t> cuts;
    for (const auto& w : writes_)
      if (w.end > w.begin) {
        cuts.push_back(w.begin);
        cuts.push_back(w.end);
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (cuts.size() < 2) return {};
    const std::size_t nseg = cuts.size() - 1;
    std::vector<double> latest(nseg, 0);
    std::vector<int> writers(nseg, 0);
    // Count distinct writer ranks per segment: walk each rank's writes separately.
    std::vector<std::vector<const Write*>> by_rank(static_cast<std::size_t>(plan_.nranks));
    for (const auto& w : writes_) by_rank[static_cast<std::size_t>(w.rank)].push_back(&w);
    std::vector<int> stamp(nseg, -1);
    for (std::size_t r = 0; r < by_rank.size(); ++r)
      for (const Write* w : by_rank[r]) {
        if (w->end <= w->begin) continue;
        auto lo = static_cast<std::size_t>(std::lower_bound(cuts.begin(), cuts.end(), w->begin) -
                                           cuts.begin());
        for (std::size_t i = lo; i < nseg && cuts[i] < w->end; ++i) {
          latest[i] = std::max(latest[i], w->t);
          if (stamp[i] != static_cast<int>(r)) {
            stamp[i] = static_cast<int>(r);
            ++writers[i];
          }
        }
      }
    const int need = plan_.nactive();
    std::vector<ReadyRange> out;
    for (std::size_t i = 0; i < nseg; ++i)
      if (writers[i] >= need) {
        if (!out.empty() && out.back().end == cuts[i] && out.back().time_s == latest[i])
          out.back().end = cuts[i + 1];  // a chunk written in several pieces at the same time
        else
          out.push_back(ReadyRange{cuts[i], cuts[i + 1], latest[i]});
      }
    std::stable_sort(out.begin(), out.end(),
                     [](const ReadyRange& a, const ReadyRange& b) { return a.time_s < b.time_s; });
    return out;
  }

  SimResult finish() {
    SimResult res;
    res.steps = steps_;
    res.messages = messages_;
    res.bytes_sent = bytes_sent_;
    res.rank_finish_s.assign(static_cast<std::size_t>(plan_.nranks), 0);
    for (std::size_t ch = 0; ch < nch_; ++ch)
      for (plan::Rank r = 0; r < plan_.nranks; ++r) {
        const double t = prog(static_cast<std::uint32_t>(ch), r).finish;
        auto& f = res.rank_finish_s[static_cast<std::size_t>(r)];
        f = std::max(f, t);
        res.time_s = std::max(res.time_s, t);
      }
    for (std::size_t l = 0; l < net_.links.size(); ++l) {
      if (!(link_bytes_[l] > 0)) continue;
      const NetLink& link = net_.links[l];
      res.links.push_back(LinkUsage{
          static_cast<int>(l), link.name, link.capacity_Bps, link_bytes_[l], link_busy_[l],
          res.time_s > 0 ? link_bytes_[l] / (link.capacity_Bps * res.time_s) : 0.0});
    }
    res.ready = ready();
    res.turnaround_s = res.ready.empty() ? 0 : res.ready.front().time_s;
    res.spans = std::move(spans_);
    res.link_rates = std::move(link_rates_);
    return res;
  }

  const plan::Plan& plan_;
  Network net_;  // a copy: uniform networks grow their links on demand
  SimOptions opt_;
  std::vector<int> node_of_;
  std::size_t nch_ = 0;
  std::vector<Prog> programs_;
  std::vector<Route> routes_;  // per pair of nodes (route_ends_)
  std::vector<std::pair<int, int>> route_ends_;
  std::vector<std::uint32_t> conn_route_;
  std::vector<std::uint32_t> send_ch_, recv_ch_;
  std::vector<std::vector<bool>> arrived_, consumed_;
  std::vector<Flow> flows_;
  std::vector<std::size_t> free_flows_;
  FairShare fair_;                                    // paths are routes_
  std::vector<std::vector<std::size_t>> path_flows_;  // flows in flight per path
  std::vector<std::size_t> first_flow_;               // per path in ends_: its flow that ends first
  std::vector<std::uint32_t> changed_paths_;
  std::vector<std::size_t> changed_;
  std::vector<double> link_rate_;  // record_trace only
  std::vector<double> link_bytes_, link_busy_, link_busy_since_;
  bool dirty_ = false;  // flows started or ended since the last reshare()
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  EndHeap ends_;
  std::uint64_t order_ = 0;
  double now_ = 0;
  std::uint64_t steps_ = 0, messages_ = 0;
  double bytes_sent_ = 0;
  std::vector<Write> writes_;
  std::vector<StepSpan> spans_;
  std::vector<LinkRateSample> link_rates_;
};

}  // namespace detail

// Runs `plan` on `net` with rank r on node rank_node[r] (empty: rank r on node r).
inline SimResult simulate(const plan::Plan& plan, const Network& net,
                          const std::vector<int>& rank_node = {}, const SimOptions& opt = {}) {
  detail::Simulation sim(plan, net, rank_node, opt);
  return sim.run();
}

}  // namespace ccoll::sim
