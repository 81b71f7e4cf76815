// ccoll/plan/block_trees.hpp: reduce-scatter and all-gather over trees rooted at the owners of
// the blocks (plan/collective.hpp): a tree of root v reduces a part of block v towards v
// (reduce-scatter) or broadcasts it from v (all-gather); and reduce and broadcast over weighted
// trees of their root, each carrying a part of the whole buffer.
//
// These are the reduce half and the broadcast half of [TopoSync]'s packed forest (Sec. III-IV),
// which pairs a reduce tree and a broadcast tree per root; the forest's allreduce gives every root
// a share of the buffer in proportion to its trees' weights, but a reduce-scatter's or
// all-gather's block of root v is fixed by the call, so v's trees split exactly that block
// (forest/equal_share.hpp plans weights for it). Each tree is one channel; its part of the block
// is cut into chunks ([C-Cube]'s pipeline model, plan/chunking.hpp, over the tree's depth), and
// every program runs its chunks in order, so no FIFO depth can deadlock (plan/rooted_trees.hpp's
// argument: a step waits only on the same chunk one level down or up).
//
// Trees may pass through relays (inactive ranks): a relay adds nothing of its own and keeps no
// output; it only forwards.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/rooted.hpp"

namespace ccoll::plan {

// One tree: `parent[r]` is rank r's parent (-1: the root, or not in the tree), and `share` the
// part of the root's block it carries (the shares of one root's trees are normalised to 1).
struct BlockTree {
  Rank root = 0;
  std::vector<Rank> parent;
  double share = 1;
};

namespace detail {

// Levels of the tree below its root.
inline std::uint32_t block_tree_depth(const BlockTree& t) {
  std::uint32_t depth = 0;
  for (std::size_t r = 0; r < t.parent.size(); ++r) {
    std::uint32_t d = 0;
    for (Rank u = static_cast<Rank>(r); u >= 0 && u != t.root && d <= t.parent.size();
         u = t.parent[static_cast<std::size_t>(u)])
      ++d;
    if (static_cast<Rank>(r) == t.root || t.parent[r] >= 0) depth = std::max(depth, d);
  }
  return depth;
}

// Splits `n` elements among weights `w` (largest remainders, so the parts add up to n): begin of
// part i, and n at i = w.size().
inline std::vector<std::uint64_t> split_by_weight(std::uint64_t n, const std::vector<double>& w) {
  double total = 0;
  for (double x : w) total += std::max(0.0, x);
  std::vector<std::uint64_t> part(w.size(), 0);
  std::vector<std::pair<double, std::size_t>> rest;
  std::uint64_t given = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double exact = total > 0 ? static_cast<double>(n) * std::max(0.0, w[i]) / total
                                   : static_cast<double>(n) / static_cast<double>(w.size());
    part[i] = static_cast<std::uint64_t>(std::floor(exact));
    given += part[i];
    rest.emplace_back(exact - std::floor(exact), i);
  }
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (std::size_t k = 0; given < n && !rest.empty(); ++k, ++given)
    ++part[rest[k % rest.size()].second];
  std::vector<std::uint64_t> begin(w.size() + 1, 0);
  for (std::size_t i = 0; i < w.size(); ++i) begin[i + 1] = begin[i] + part[i];
  return begin;
}

}  // namespace detail

// Reduce-scatter, all-gather, reduce or broadcast (`coll`) over `trees`, one channel per tree,
// over ranks whose activity is `active` (empty: all active). Reduce-scatter and all-gather: every
// active rank roots at least one tree; reduce and broadcast: every tree is rooted at req.root.
// Every tree must reach every active rank from its root through in-range parents without a cycle
// (relays may hang in it; they only forward), or the request is refused with InvalidPlan.
inline Plan build_block_trees(const PlanRequest& req, Collective coll,
                              const std::vector<BlockTree>& trees, std::vector<bool> active,
                              std::string name) {
  check_request(req);
  if (coll == Collective::allreduce)
    throw Error(ErrorCode::InvalidArgument, -1,
                "block trees plan no allreduce (plan/tree.hpp does)");
  const auto up = static_cast<std::size_t>(req.nranks);
  if (active.empty()) active.assign(up, true);
  const bool blocked = has_blocks(coll);
  std::vector<std::uint64_t> block_of(up, 0);
  std::uint64_t nactive = 0;
  for (std::size_t r = 0; r < up; ++r)
    if (active[r]) block_of[r] = nactive++;
  if (blocked && (nactive == 0 || req.count % nactive != 0))
    throw_invalid_argument(
        -1, "count",
        "a multiple of the " + std::to_string(nactive) + " active ranks (one block each)",
        std::to_string(req.count));
  if (!blocked) {
    detail::check_root(req);
    std::fill(block_of.begin(), block_of.end(), 0);  // every tree carries a part of the buffer
  }
  const std::uint64_t b = blocked ? req.count / nactive : req.count;
  // Each root's range, split among its trees by share.
  std::vector<std::vector<std::size_t>> of_root(up);
  for (std::size_t t = 0; t < trees.size(); ++t) {
    const BlockTree& tree = trees[t];
    const auto root = static_cast<std::size_t>(tree.root);
    const auto refuse = [&](const std::string& why) {
      throw Error(ErrorCode::InvalidPlan, -1, "block tree " + std::to_string(t) + ": " + why);
    };
    if (tree.root < 0 || root >= up || !active[root] || (!blocked && tree.root != req.root))
      refuse("its root must be an active rank" +
             (blocked ? std::string() : " and the root " + std::to_string(req.root)));
    if (tree.parent.size() != up) refuse("expected a parent per rank");
    if (!(tree.share >= 0) || !std::isfinite(tree.share)) refuse("its share must be finite, >= 0");
    for (std::size_t r = 0; r < up; ++r) {
      const bool in_tree = static_cast<Rank>(r) == tree.root || tree.parent[r] >= 0;
      if (tree.parent[r] >= static_cast<Rank>(up)) refuse("a parent out of range");
      if (active[r] && !in_tree) refuse("it misses active rank " + std::to_string(r));
      std::size_t hops = 0;
      for (Rank u = static_cast<Rank>(r); in_tree && u != tree.root; ++hops) {
        if (u < 0 || hops > up) refuse("rank " + std::to_string(r) + " does not reach the root");
        u = tree.parent[static_cast<std::size_t>(u)];
      }
    }
    of_root[root].push_back(t);
  }
  for (std::size_t r = 0; r < up; ++r)
    if (active[r] && of_root[r].empty() && (blocked || static_cast<Rank>(r) == req.root))
      throw Error(ErrorCode::InvalidPlan, -1,
                  "block trees: active rank " + std::to_string(r) + " roots no tree");
  std::vector<std::uint64_t> lo(trees.size(), 0), n(trees.size(), 0);
  for (std::size_t r = 0; r < up; ++r) {
    if (of_root[r].empty()) continue;
    std::vector<double> w;
    for (std::size_t t : of_root[r]) w.push_back(trees[t].share);
    const auto begin = detail::split_by_weight(b, w);
    for (std::size_t k = 0; k < of_root[r].size(); ++k) {
      lo[of_root[r][k]] = block_of[r] * b + begin[k];
      n[of_root[r][k]] = begin[k + 1] - begin[k];
    }
  }
  const auto nchannels = static_cast<std::uint32_t>(std::max<std::size_t>(1, trees.size()));
  Plan plan;
  PlanBuilder builder(plan, std::move(name), req, nchannels, active);
  plan.collective = coll;
  if (!blocked) plan.root = req.root;
  const bool gather = coll == Collective::all_gather || coll == Collective::broadcast;
  for (std::uint32_t c = 0; c < trees.size(); ++c) {
    const BlockTree& t = trees[c];
    if (n[c] == 0) continue;
    // Only ranks with an active rank at or below them take part: a relay leaf would send a
    // value it neither has nor received (a reduction) or receive one nobody reads (a gather).
    std::vector<bool> keep(up, false);
    for (std::size_t r = 0; r < up; ++r) {
      if (!active[r] || (t.parent[r] < 0 && static_cast<Rank>(r) != t.root)) continue;
      for (auto at = static_cast<Rank>(r); at >= 0 && !keep[static_cast<std::size_t>(at)];
           at = at == t.root ? -1 : t.parent[static_cast<std::size_t>(at)])
        keep[static_cast<std::size_t>(at)] = true;
    }
    keep[static_cast<std::size_t>(t.root)] = true;
    std::vector<std::vector<Rank>> children(up);
    for (std::size_t r = 0; r < up; ++r)
      if (t.parent[r] >= 0 && keep[r])
        children[static_cast<std::size_t>(t.parent[r])].push_back(static_cast<Rank>(r));
    const double fill =
        static_cast<double>(std::max<std::uint32_t>(1, detail::block_tree_depth(t)) - 1);
    const std::uint64_t k = resolve_chunks(req, n[c], 1, fill, 1.0);
    for (std::uint64_t chunk = 0; chunk < k; ++chunk) {
      const std::uint64_t off = lo[c] + even_split_begin(n[c], k, chunk);
      const std::uint64_t cnt =
          even_split_begin(n[c], k, chunk + 1) - even_split_begin(n[c], k, chunk);
      if (cnt == 0) continue;
      for (std::size_t r = 0; r < up; ++r) {
        const auto me = static_cast<Rank>(r);
        const bool is_root = me == t.root;
        if ((!is_root && t.parent[r] < 0) || !keep[r]) continue;  // not in this tree
        std::vector<std::uint32_t> down, to_parent;
        for (Rank ch : children[r])
          down.push_back(gather ? builder.connection(me, ch, c) : builder.connection(ch, me, c));
        if (!is_root)
          to_parent.push_back(gather ? builder.connection(t.parent[r], me, c)
                                     : builder.connection(me, t.parent[r], c));
        if (gather)
          builder.add(c, me, off, cnt, is_root ? Source::Input : Source::None, to_parent, down,
                      active[r], false);
        else
          builder.add(c, me, off, cnt, active[r] ? Source::Input : Source::None, down, to_parent,
                      is_root, is_root);
      }
    }
  }
  return builder.finish();
}

}  // namespace ccoll::plan
