// ccoll/plan/tree.hpp: pipelined tree allreduce over any set of trees (reduce up, broadcast down).
//
// build_trees() takes trees as parent arrays. Each tree carries a contiguous `share` of the
// elements (shares proportional to tree bandwidth, [TopoSync] Property 3) and cuts it into K chunks
// that flow through the tree as a pipeline:
//   - reduce, child -> parent: a node's step for chunk k receives chunk k from all its children at
//     once (one step, several receive ports), adds its own input and sends the sum to its parent
//     (recv-reduce-send). Relays (inactive ranks, the Steiner points of [TopoSync] Sec. III-D) add
//     nothing.
//   - the root's step for chunk k completes the reduction (final: avg divides here) and writes its
//     output (recv-reduce-copy).
//   - broadcast, parent -> children: recv-copy-send; relays forward without writing output.
// The reduce tree and the broadcast tree may differ ([TopoSync] Sec. III-D's forests) but share the
// root. Branches with no active rank below them are pruned: a relay leaf has nothing to contribute
// and nobody to deliver to.
//
// Two schedules ([C-Cube] Fig. 5 and 7):
//   - phased (req.overlap = false, baseline B of [C-Cube] Sec. V-A): one channel per tree; every
//     rank runs its K reduce steps, then its K broadcast steps, and the root broadcasts from its
//     output once all K chunks are reduced. Lock-step rounds: H + D + 2K (H = reduce height, D =
//     broadcast depth; 2 log2 P + 2K for a complete binary tree).
//   - overlapped (req.overlap = true, C1 of [C-Cube] Sec. III-C): two channels per tree, one
//     running the reduce and one the broadcast, so a rank drives its uplink and its downlink at the
//     same time (as in NCCL's split tree). The root's reduce step for chunk k also sends chunk k
//     down: its send ports are connections read by the children's broadcast programs (the one place
//     where a connection's two ends are in different channels; Connection::channel is the
//     receiver's). Rounds: H + D + K (2 log2 P + K for a complete binary tree).
// Every program runs its chunks in order, which is the order of an ideal lock-step pipeline, so
// the plan is deadlock-free for every nslots >= 1: a reduce step waits only on steps of the same or
// an earlier chunk in the subtree below (which never wait on anything above them but free slots,
// freed as the parent's reduce steps run in the same chunk order); a broadcast step waits only on
// its parent's broadcast of that chunk; and in the phased schedule a rank's reduce steps all come
// before its broadcast steps. The tests confirm it through the verifier (random trees, nslots 1-4).
// req.nchannels is ignored here: each tree is its own channel (two when overlapping).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

struct TreeSpec {
  Rank root = 0;
  std::vector<Rank> reduce_parent;     // indexed by rank; -1 for the root and ranks not in the tree
  std::vector<Rank> broadcast_parent;  // same; empty: the reduce tree is also the broadcast tree
  double share = 1.0;                  // fraction of the elements (normalised over all trees)
};

// Heap layout: parent(i) = (i - 1) / 2, root 0; depth floor(log2 P) for any P.
inline std::vector<Rank> binary_tree_parents(Rank nranks) {
  std::vector<Rank> parent(static_cast<std::size_t>(std::max<Rank>(nranks, 0)));
  for (Rank i = 0; i < nranks; ++i) parent[static_cast<std::size_t>(i)] = i == 0 ? -1 : (i - 1) / 2;
  return parent;
}

// Splits `count` elements by `shares` (largest-remainder rounding, ties to the lower index):
// returns sizes that sum to `count` exactly and differ from count * share / sum by less than one.
inline std::vector<std::uint64_t> split_by_shares(std::uint64_t count,
                                                  const std::vector<double>& shares) {
  long double sum = 0;
  for (double s : shares) sum += s;
  std::vector<std::uint64_t> sizes(shares.size(), 0);
  if (shares.empty() || !(sum > 0)) return sizes;
  std::vector<long double> frac(shares.size());
  std::uint64_t assigned = 0;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    const long double exact = static_cast<long double>(count) * shares[i] / sum;
    sizes[i] = std::min<std::uint64_t>(count, static_cast<std::uint64_t>(std::floor(exact)));
    frac[i] = exact - static_cast<long double>(sizes[i]);
    assigned += sizes[i];
  }
  std::vector<std::size_t> order(shares.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return frac[a] > frac[b]; });
  for (std::size_t i = 0; assigned < count; i = (i + 1) % order.size(), ++assigned)
    ++sizes[order[i]];
  while (assigned > count)  // only reachable through rounding noise in `exact`
    for (std::size_t i = order.size(); i-- > 0 && assigned > count;)
      if (sizes[order[i]] > 0) --sizes[order[i]], --assigned;
  return sizes;
}

namespace detail {

// One tree, validated and pruned to the ranks that matter.
struct PrunedTree {
  Rank root = 0;
  std::vector<std::vector<Rank>> reduce_children, broadcast_children;  // participating only
  std::vector<Rank> reduce_parent, broadcast_parent;
  std::vector<bool> in_reduce, in_broadcast;
  int reduce_height = 0;    // H: edges on the longest leaf-to-root path
  int broadcast_depth = 0;  // D
};

// Validates a parent array and returns each rank's depth (-1: not in the tree).
inline std::vector<int> tree_depths(const std::vector<Rank>& parent, Rank root, Rank nranks,
                                    std::size_t index, const char* which) {
  const auto arg = [&] { return "trees[" + std::to_string(index) + "]." + which; };
  if (parent.size() != static_cast<std::size_t>(nranks))
    throw_invalid_argument(-1, arg(), std::to_string(nranks) + " entries",
                           std::to_string(parent.size()));
  if (parent[static_cast<std::size_t>(root)] != -1)
    throw_invalid_argument(-1, arg(), "-1 at the root " + std::to_string(root),
                           std::to_string(parent[static_cast<std::size_t>(root)]));
  std::vector<int> depth(parent.size(), -2);  // -2: unknown, -1: not in the tree
  depth[static_cast<std::size_t>(root)] = 0;
  std::vector<Rank> path;
  for (Rank r = 0; r < nranks; ++r) {
    path.clear();
    Rank u = r;
    while (depth[static_cast<std::size_t>(u)] == -2) {
      const Rank p = parent[static_cast<std::size_t>(u)];
      if (p == -1) {
        depth[static_cast<std::size_t>(u)] = -1;
        break;
      }
      if (p < 0 || p >= nranks || p == u || path.size() > static_cast<std::size_t>(nranks))
        throw_invalid_argument(-1, arg(), "a tree (parents in range, no cycles)",
                               "rank " + std::to_string(u) + " has parent " + std::to_string(p));
      path.push_back(u);
      u = p;
    }
    int d = depth[static_cast<std::size_t>(u)];
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      depth[static_cast<std::size_t>(*it)] = d < 0 ? -1 : ++d;
  }
  return depth;
}

// Marks the ranks whose subtree holds an active rank and returns (children lists, height).
inline void prune(const std::vector<Rank>& parent, const std::vector<int>& depth,
                  const std::vector<bool>& active, Rank root, std::vector<bool>& keep,
                  std::vector<std::vector<Rank>>& children, int& extent, bool height) {
  const auto n = parent.size();
  keep.assign(n, false);
  children.assign(n, {});
  std::vector<Rank> order;
  for (std::size_t r = 0; r < n; ++r)
    if (depth[r] >= 0) order.push_back(static_cast<Rank>(r));
  std::stable_sort(order.begin(), order.end(), [&](Rank a, Rank b) {
    return depth[static_cast<std::size_t>(a)] > depth[static_cast<std::size_t>(b)];
  });
  std::vector<int> h(n, 0);
  for (Rank u : order) {
    const auto uu = static_cast<std::size_t>(u);
    if (active[uu]) keep[uu] = true;
    if (keep[uu] && u != root) {
      const auto p = static_cast<std::size_t>(parent[uu]);
      keep[p] = true;
      h[p] = std::max(h[p], h[uu] + 1);
    }
  }
  keep[static_cast<std::size_t>(root)] = true;
  extent = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (!keep[r] || static_cast<Rank>(r) == root) continue;
    children[static_cast<std::size_t>(parent[r])].push_back(static_cast<Rank>(r));
    extent = std::max(extent, depth[r]);
  }
  if (height) extent = h[static_cast<std::size_t>(root)];
}

inline PrunedTree make_tree(const TreeSpec& spec, std::size_t index,
                            const std::vector<bool>& active, Rank nranks) {
  if (spec.root < 0 || spec.root >= nranks)
    throw_invalid_argument(-1, "trees[" + std::to_string(index) + "].root",
                           "a rank in [0," + std::to_string(nranks) + ")",
                           std::to_string(spec.root));
  PrunedTree t;
  t.root = spec.root;
  t.reduce_parent = spec.reduce_parent;
  t.broadcast_parent = spec.broadcast_parent.empty() ? spec.reduce_parent : spec.broadcast_parent;
  const auto dr = tree_depths(t.reduce_parent, t.root, nranks, index, "reduce_parent");
  const auto db = tree_depths(t.broadcast_parent, t.root, nranks, index, "broadcast_parent");
  for (Rank r = 0; r < nranks; ++r)
    if (active[static_cast<std::size_t>(r)] &&
        (dr[static_cast<std::size_t>(r)] < 0 || db[static_cast<std::size_t>(r)] < 0))
      throw_invalid_argument(-1, "trees[" + std::to_string(index) + "]",
                             "every active rank in the reduce and the broadcast tree",
                             "active rank " + std::to_string(r) + " is missing from the " +
                                 (dr[static_cast<std::size_t>(r)] < 0 ? "reduce" : "broadcast") +
                                 " tree");
  prune(t.reduce_parent, dr, active, t.root, t.in_reduce, t.reduce_children, t.reduce_height, true);
  prune(t.broadcast_parent, db, active, t.root, t.in_broadcast, t.broadcast_children,
        t.broadcast_depth, false);
  return t;
}

inline std::vector<std::uint32_t> connections_to(PlanBuilder& b, const std::vector<Rank>& peers,
                                                 Rank me, std::uint32_t channel, bool incoming) {
  std::vector<std::uint32_t> out;
  out.reserve(peers.size());
  for (Rank q : peers)
    out.push_back(incoming ? b.connection(q, me, channel) : b.connection(me, q, channel));
  return out;
}

// Adds one tree's steps for elements [lo, lo + n) on channel `ch` (and ch + 1 when overlapping).
inline void add_tree(PlanBuilder& b, const PlanRequest& req, const PrunedTree& t,
                     const std::vector<bool>& active, std::uint64_t lo, std::uint64_t n,
                     std::uint32_t ch) {
  if (n == 0) return;
  const Rank root = t.root;
  const auto ur = static_cast<std::size_t>(root);
  const bool root_active = active[ur];
  const std::uint32_t bch = req.overlap ? ch + 1 : ch;  // the broadcast's channel
  if (t.reduce_children[ur].empty() && t.broadcast_children[ur].empty()) {
    // Nobody else in this tree: a local copy, no messages (so no slot limit either).
    if (root_active) b.add(ch, root, lo, n, Source::Input, {}, {}, true, true);
    return;
  }
  if (!root_active && !req.overlap)
    throw_invalid_argument(-1, "trees: root " + std::to_string(root),
                           "an active root for the phased schedule (it keeps the reduced chunks in "
                           "its output until the broadcast); a relay root needs overlap",
                           "a relay");
  const std::uint64_t k = resolve_chunks(
      req, n, 1, static_cast<double>(t.reduce_height + t.broadcast_depth), req.overlap ? 1.0 : 2.0);
  const auto chunk = [&](std::uint64_t c, std::uint64_t& off, std::uint64_t& cnt) {
    off = lo + even_split_begin(n, k, c);
    cnt = lo + even_split_begin(n, k, c + 1) - off;
  };
  const auto P = static_cast<std::size_t>(req.nranks);
  for (std::size_t u = 0; u < P; ++u) {
    const auto me = static_cast<Rank>(u);
    const Source src = active[u] ? Source::Input : Source::None;
    const auto down = connections_to(b, t.broadcast_children[u], me, bch, false);
    // Reduce steps.
    if (t.in_reduce[u]) {
      const auto from_children = connections_to(b, t.reduce_children[u], me, ch, true);
      std::vector<std::uint32_t> up;
      if (me != root) up.push_back(b.connection(me, t.reduce_parent[u], ch));
      for (std::uint64_t c = 0; c < k; ++c) {
        std::uint64_t off, cnt;
        chunk(c, off, cnt);
        if (me != root)
          b.add(ch, me, off, cnt, src, from_children, up, false, false);
        else
          b.add(ch, me, off, cnt, src, from_children, req.overlap ? down : up, active[u], true);
      }
    }
    // Broadcast steps (the overlapped root already sent down in its reduce steps).
    if (t.in_broadcast[u] && !(me == root && req.overlap)) {
      std::vector<std::uint32_t> from_parent;
      if (me != root) from_parent.push_back(b.connection(t.broadcast_parent[u], me, bch));
      if (me == root && down.empty()) continue;
      for (std::uint64_t c = 0; c < k; ++c) {
        std::uint64_t off, cnt;
        chunk(c, off, cnt);
        if (me == root)
          b.add(bch, me, off, cnt, Source::Output, {}, down, false, false);
        else
          b.add(bch, me, off, cnt, Source::None, from_parent, down, active[u], false);
      }
    }
  }
}

inline Plan build_trees_named(const PlanRequest& req, const std::vector<TreeSpec>& trees,
                              std::vector<bool> active, const std::string& name) {
  check_request(req);
  if (active.size() != static_cast<std::size_t>(req.nranks))
    throw_invalid_argument(-1, "active", std::to_string(req.nranks) + " entries",
                           std::to_string(active.size()));
  if (std::count(active.begin(), active.end(), true) == 0)
    throw_invalid_argument(-1, "active", "at least one active rank", "none");
  if (trees.empty()) throw_invalid_argument(-1, "trees", "at least one tree", "none");
  std::vector<double> shares;
  for (std::size_t i = 0; i < trees.size(); ++i) {
    if (!(trees[i].share >= 0) || !std::isfinite(trees[i].share))
      throw_invalid_argument(-1, "trees[" + std::to_string(i) + "].share", ">= 0",
                             std::to_string(trees[i].share));
    shares.push_back(trees[i].share);
  }
  if (!(std::accumulate(shares.begin(), shares.end(), 0.0) > 0))
    throw_invalid_argument(-1, "trees[*].share", "a positive sum", "0");
  std::vector<PrunedTree> pruned;
  for (std::size_t i = 0; i < trees.size(); ++i)
    pruned.push_back(make_tree(trees[i], i, active, req.nranks));
  const std::uint32_t per_tree = req.overlap ? 2 : 1;
  Plan plan;
  PlanBuilder b(plan, name + (req.overlap ? "-overlap" : ""), req,
                static_cast<std::uint32_t>(trees.size()) * per_tree, active);
  const auto sizes = split_by_shares(req.count, shares);
  std::uint64_t lo = 0;
  for (std::size_t i = 0; i < trees.size(); ++i) {
    add_tree(b, req, pruned[i], active, lo, sizes[i], static_cast<std::uint32_t>(i) * per_tree);
    lo += sizes[i];
  }
  return b.finish();
}

}  // namespace detail

// Trees over ranks with an explicit active set (inactive ranks are relays).
inline Plan build_trees(const PlanRequest& req, const std::vector<TreeSpec>& trees,
                        const std::vector<bool>& active) {
  return detail::build_trees_named(req, trees, active, "forest");
}

// Trees over ranks 0..P-1; nactive_hint >= 0 makes ranks [0, nactive_hint) active and the rest
// relays (the convention of the physical-topology helpers: workers first, switches after).
inline Plan build_trees(const PlanRequest& req, const std::vector<TreeSpec>& trees,
                        int nactive_hint = -1) {
  std::vector<bool> active(static_cast<std::size_t>(std::max<Rank>(req.nranks, 0)), true);
  if (nactive_hint >= 0)
    for (std::size_t r = static_cast<std::size_t>(nactive_hint); r < active.size(); ++r)
      active[r] = false;
  return detail::build_trees_named(req, trees, active, "forest");
}

// One binary tree (heap layout, root 0) per channel, each carrying 1/nchannels of the elements.
// req.overlap selects [C-Cube]'s overlapped C1 or the phased baseline B.
inline Plan build_tree(const PlanRequest& req) {
  check_request(req);
  const std::uint32_t n = std::max<std::uint32_t>(1, req.nchannels);
  std::vector<TreeSpec> trees(n);
  for (auto& t : trees) {
    t.root = 0;
    t.reduce_parent = binary_tree_parents(req.nranks);
    t.share = 1.0;
  }
  return detail::build_trees_named(
      req, trees, std::vector<bool>(static_cast<std::size_t>(req.nranks), true), "tree");
}

}  // namespace ccoll::plan
