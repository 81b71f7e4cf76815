// ccoll/plan/rooted_trees.hpp: broadcast and reduce (plan/collective.hpp) over pipelined trees
// rooted at any rank: one binary tree, and the double binary tree.
//
// Tree: the heap-shaped binary tree (plan/tree.hpp's binary_tree_parents) with tree position i at
// rank root + i (even channels) or root - i (odd channels), mod P; req.nchannels channels. Depth
// floor(log2 P), so a chunk reaches every rank in log2 P hops where a chain needs P - 1; but an
// internal rank sends each chunk twice, so at large sizes a tree moves half of a chain's bandwidth.
//
// Double binary tree: the root's P - 1 peers form the two trees of plan/double_binary_tree.hpp
// (NCCL's, over P - 1 ranks: every peer is a leaf in one of them), each hung under the root and
// carrying half of the data (channels: req.nchannels rounded up to an even number). A peer then
// sends each element at most once, and the root sends it once: the bandwidth of a chain with the
// depth of a tree.
//
// The steps of one chunk, in a tree with parent array `parent`:
//
//     broadcast   root: copy-send src Input, write output -> children
//                 others: recv-copy-send from the parent, write output -> children (none: a leaf)
//     reduce      every rank: recv from all its children at once, reduce with src Input -> parent;
//                 at the root: final, write output
//
// Each channel carries an even share of the buffer cut into K chunks (K from [C-Cube]'s pipeline
// model, plan/chunking.hpp, with the tree's depth - 1 fill steps). Every program runs its chunks
// in order, so, as for plan/tree.hpp's trees, no FIFO depth can deadlock: a step waits only on
// the same chunk one level up (broadcast) or down (reduce), which waits on nothing else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/plan/builder.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/rooted.hpp"
#include "ccoll/plan/tree.hpp"

namespace ccoll::plan {

namespace detail {

// Levels below the root of the tree `parent` (0 for one rank).
inline std::uint32_t tree_depth(const std::vector<Rank>& parent) {
  std::uint32_t depth = 0;
  for (std::size_t r = 0; r < parent.size(); ++r) {
    std::uint32_t d = 0;
    for (Rank u = static_cast<Rank>(r); parent[static_cast<std::size_t>(u)] >= 0;
         u = parent[static_cast<std::size_t>(u)])
      ++d;
    depth = std::max(depth, d);
  }
  return depth;
}

// Broadcast or reduce over `trees` (parent arrays rooted at req.root), channel c on tree c % size;
// req.nchannels channels, rounded up to a multiple of `group` (trees that must share the data).
inline Plan build_rooted_trees(const PlanRequest& req, Collective coll,
                               const std::vector<std::vector<Rank>>& trees, std::string name,
                               std::uint32_t group) {
  check_root(req);
  const std::uint32_t wanted = std::max<std::uint32_t>(1, req.nchannels);
  const std::uint32_t nchannels = (wanted + group - 1) / group * group;
  Plan plan;
  PlanBuilder builder(plan, std::move(name), req, nchannels);
  plan.collective = coll;
  plan.root = req.root;
  const bool bcast = coll == Collective::broadcast;
  const auto up = static_cast<std::size_t>(req.nranks);
  for (std::uint32_t c = 0; c < nchannels; ++c) {
    const std::uint64_t lo = even_split_begin(req.count, nchannels, c);
    const std::uint64_t n = even_split_begin(req.count, nchannels, c + 1) - lo;
    if (n == 0) continue;
    if (up == 1) {
      builder.add(c, 0, lo, n, Source::Input, {}, {}, true, !bcast);
      continue;
    }
    const std::vector<Rank>& parent = trees[c % trees.size()];
    std::vector<std::vector<Rank>> children(up);
    for (std::size_t r = 0; r < up; ++r)
      if (parent[r] >= 0)
        children[static_cast<std::size_t>(parent[r])].push_back(static_cast<Rank>(r));
    const double fill = static_cast<double>(std::max<std::uint32_t>(1, tree_depth(parent)) - 1);
    const std::uint64_t k = resolve_chunks(req, n, 1, fill, 1.0);
    for (std::uint64_t chunk = 0; chunk < k; ++chunk) {
      const std::uint64_t off = lo + even_split_begin(n, k, chunk);
      const std::uint64_t cnt = even_split_begin(n, k, chunk + 1) - even_split_begin(n, k, chunk);
      if (cnt == 0) continue;
      for (std::size_t r = 0; r < up; ++r) {
        const auto me = static_cast<Rank>(r);
        const bool is_root = me == req.root;
        std::vector<std::uint32_t> down, up_port;
        for (Rank ch : children[r])
          down.push_back(bcast ? builder.connection(me, ch, c) : builder.connection(ch, me, c));
        if (!is_root)
          up_port.push_back(bcast ? builder.connection(parent[r], me, c)
                                  : builder.connection(me, parent[r], c));
        if (bcast)
          builder.add(c, me, off, cnt, is_root ? Source::Input : Source::None, up_port, down, true,
                      false);
        else
          builder.add(c, me, off, cnt, Source::Input, down, up_port, is_root, is_root);
      }
    }
  }
  return builder.finish();
}

// The binary tree of position i at rank root + dir * i (mod P).
inline std::vector<Rank> rooted_binary_tree(Rank nranks, Rank root, int dir) {
  const std::vector<Rank> heap = binary_tree_parents(nranks);
  const auto rank_at = [&](Rank i) { return ((root + dir * i) % nranks + nranks) % nranks; };
  std::vector<Rank> parent(static_cast<std::size_t>(nranks), -1);
  for (Rank i = 1; i < nranks; ++i)
    parent[static_cast<std::size_t>(rank_at(i))] = rank_at(heap[static_cast<std::size_t>(i)]);
  return parent;
}

// The two trees of the double binary tree over the root's peers (peer v at rank root + 1 + v),
// each hung under the root.
inline std::vector<std::vector<Rank>> rooted_double_binary_trees(Rank nranks, Rank root) {
  if (nranks <= 2) return {rooted_binary_tree(nranks, root, 1)};
  const auto [t1, t2] = double_binary_tree_parents(nranks - 1);
  std::vector<std::vector<Rank>> out;
  for (const std::vector<Rank>* t : {&t1, &t2}) {
    std::vector<Rank> parent(static_cast<std::size_t>(nranks), -1);
    for (Rank v = 0; v + 1 < nranks; ++v) {
      const Rank r = (root + 1 + v) % nranks;
      const Rank p = (*t)[static_cast<std::size_t>(v)];
      parent[static_cast<std::size_t>(r)] = p < 0 ? root : (root + 1 + p) % nranks;
    }
    out.push_back(std::move(parent));
  }
  return out;
}

// Broadcast or reduce over the two binary trees from the root, one each way round the ranks.
inline Plan build_rooted_binary_trees(const PlanRequest& req, Collective coll) {
  check_root(req);
  return build_rooted_trees(
      req, coll,
      {rooted_binary_tree(req.nranks, req.root, 1), rooted_binary_tree(req.nranks, req.root, -1)},
      "tree", 1);
}

// Broadcast or reduce over the double binary tree under the root.
inline Plan build_rooted_double_binary_trees(const PlanRequest& req, Collective coll) {
  check_root(req);
  return build_rooted_trees(req, coll, rooted_double_binary_trees(req.nranks, req.root), "dbtree",
                            2);
}

}  // namespace detail

inline Plan build_tree_broadcast(const PlanRequest& req) {
  return detail::build_rooted_binary_trees(req, Collective::broadcast);
}
inline Plan build_tree_reduce(const PlanRequest& req) {
  return detail::build_rooted_binary_trees(req, Collective::reduce);
}
inline Plan build_dbtree_broadcast(const PlanRequest& req) {
  return detail::build_rooted_double_binary_trees(req, Collective::broadcast);
}
inline Plan build_dbtree_reduce(const PlanRequest& req) {
  return detail::build_rooted_double_binary_trees(req, Collective::reduce);
}

}  // namespace ccoll::plan
