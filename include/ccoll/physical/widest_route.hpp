// ccoll/physical/widest_route.hpp: the routing rule every consumer of a physical graph shares:
// the planners (physical/graph.hpp) and the simulator (sim/network.hpp) run this one search, so
// the simulator charges the links the planners planned for.
//
// The route from a source to a node is the widest path (largest bottleneck capacity) through
// nodes that forward; among the widest, the fewest hops, then the least latency, then the one
// whose nodes settle first in index order. Latencies are compared in whole picoseconds, so that
// a graph given in microseconds and the same graph in seconds tie and break ties alike.
//
// That order is not kept by extending a path: a wider, longer path to a switch loses nothing
// there, but once a narrower link follows both paths are as wide and the shorter one wins. So one
// Dijkstra over (width, hops, latency) labels is not exact. The search runs in two phases: a
// widest-path search gives every node's width W(v) (a bottleneck is kept by extension), then for
// each distinct W a (hops, latency) search over the links at least that wide gives the routes of
// the nodes of that width.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace ccoll::physical {

// A latency as the search compares it.
inline std::int64_t latency_picoseconds(double seconds) {
  return static_cast<std::int64_t>(std::llround(seconds * 1e12));
}

// Graph: int node_count(); const std::vector<int>& out(int node) (link indices);
// int link_from(int link), link_to(int link); double link_width(int link) (> 0);
// std::int64_t link_latency_ps(int link) (>= 0); bool forwards(int node).
template <class Graph>
class WidestRouteSearch {
 public:
  explicit WidestRouteSearch(const Graph& g)
      : g_(g),
        n_(static_cast<std::size_t>(g.node_count())),
        width_(n_),
        hops_(n_),
        latency_(n_),
        via_(n_),
        routes_(n_),
        done_(n_),
        seen_(n_) {}

  // Routes from `src` to every node, or, with stop >= 0, to `stop` (the same route as without).
  void from(int src, int stop = -1) {
    src_ = src;
    for (auto& r : routes_) r.clear();
    widest(src, stop);
    std::vector<double> widths;
    if (stop >= 0) {
      if (stop != src && reached(stop)) widths.push_back(width_[idx(stop)]);
    } else {
      for (std::size_t v = 0; v < n_; ++v)
        if (static_cast<int>(v) != src && width_[v] > 0) widths.push_back(width_[v]);
      std::sort(widths.begin(), widths.end(), std::greater<>());
      widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
    }
    for (const double w : widths) shortest_at_least(w, stop);
  }

  bool reached(int v) const { return v == src_ || width_[idx(v)] > 0; }
  // The links from the source to v in order (empty: v is the source or unreached).
  const std::vector<int>& route(int v) const { return routes_[idx(v)]; }
  double width(int v) const { return width_[idx(v)]; }

 private:
  static std::size_t idx(int v) { return static_cast<std::size_t>(v); }
  bool expands(int u) const { return u == src_ || g_.forwards(u); }

  // Phase 1: W(v), the widest bottleneck from src (0: unreached), by a max-min Dijkstra.
  void widest(int src, int stop) {
    std::fill(width_.begin(), width_.end(), 0.0);
    std::fill(done_.begin(), done_.end(), false);
    width_[idx(src)] = std::numeric_limits<double>::infinity();
    using Entry = std::pair<double, int>;  // width, node: widest first, then smaller node
    const auto after = [](const Entry& a, const Entry& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    };
    std::vector<Entry> heap{{width_[idx(src)], src}};
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), after);
      const int u = heap.back().second;
      heap.pop_back();
      if (done_[idx(u)]) continue;
      done_[idx(u)] = true;
      if (u == stop) break;
      if (!expands(u)) continue;
      for (const int l : g_.out(u)) {
        const int v = g_.link_to(l);
        const double w = std::min(width_[idx(u)], g_.link_width(l));
        if (done_[idx(v)] || w <= width_[idx(v)]) continue;
        width_[idx(v)] = w;
        heap.emplace_back(w, v);
        std::push_heap(heap.begin(), heap.end(), after);
      }
    }
  }

  // Phase 2 for one width: the fewest hops, then least latency, over links at least `w` wide;
  // records the routes of the nodes whose W is w.
  void shortest_at_least(double w, int stop) {
    std::fill(done_.begin(), done_.end(), false);
    std::fill(seen_.begin(), seen_.end(), false);
    std::fill(via_.begin(), via_.end(), -1);
    struct Entry {
      int hops;
      std::int64_t latency;
      int node;
    };
    const auto after = [](const Entry& a, const Entry& b) {
      if (a.hops != b.hops) return a.hops > b.hops;
      if (a.latency != b.latency) return a.latency > b.latency;
      return a.node > b.node;
    };
    hops_[idx(src_)] = 0;
    latency_[idx(src_)] = 0;
    seen_[idx(src_)] = true;
    std::vector<Entry> heap{{0, 0, src_}};
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), after);
      const int u = heap.back().node;
      heap.pop_back();
      if (done_[idx(u)]) continue;
      done_[idx(u)] = true;
      if (u != src_ && width_[idx(u)] == w) record(u);
      if (u == stop) break;
      if (!expands(u)) continue;
      for (const int l : g_.out(u)) {
        if (g_.link_width(l) < w) continue;
        const int v = g_.link_to(l);
        if (done_[idx(v)]) continue;
        const int h = hops_[idx(u)] + 1;
        const std::int64_t lat = latency_[idx(u)] + g_.link_latency_ps(l);
        if (seen_[idx(v)] && (h > hops_[idx(v)] || (h == hops_[idx(v)] && lat >= latency_[idx(v)])))
          continue;
        seen_[idx(v)] = true;
        hops_[idx(v)] = h;
        latency_[idx(v)] = lat;
        via_[idx(v)] = l;
        heap.push_back(Entry{h, lat, v});
        std::push_heap(heap.begin(), heap.end(), after);
      }
    }
  }

  void record(int v) {
    std::vector<int>& r = routes_[idx(v)];
    r.clear();
    for (int at = v; at != src_;) {
      const int l = via_[idx(at)];
      r.push_back(l);
      at = g_.link_from(l);
    }
    std::reverse(r.begin(), r.end());
  }

  const Graph& g_;
  std::size_t n_;
  std::vector<double> width_;
  std::vector<int> hops_;
  std::vector<std::int64_t> latency_;
  std::vector<int> via_;
  std::vector<std::vector<int>> routes_;
  std::vector<bool> done_, seen_;
  int src_ = 0;
};

}  // namespace ccoll::physical
