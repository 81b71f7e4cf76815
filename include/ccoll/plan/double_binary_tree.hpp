// ccoll/plan/double_binary_tree.hpp: NCCL's double binary tree (Sanders, Speck and Traeff's
// two-tree construction, [C-Cube] ref. [45]), for any P.
//
// Tree 1 is the in-order binary tree over ranks 0..P-1 with root 0 (NCCL's ncclGetBtree): a rank's
// parent is found from its lowest set bit, so odd ranks are leaves and every rank has at most two
// children. Tree 2 is tree 1 mirrored (rank r -> P-1-r) when P is even, or shifted by one (r -> r+1
// mod P) when P is odd. Mirroring maps odd ranks to even ones, so for even P every rank is a leaf
// in one tree and internal in at most one; for odd P the shift achieves this for every rank but
// one. Each tree carries half of the data, so every rank sends and receives about N per direction:
// the pair uses the links' full bandwidth where one tree would leave the leaves' links idle.
//
//   P = 8, tree 1 (root 0)           P = 8, tree 2 (mirror, root 7)
//     0 - 4                            7 - 3
//        / \     (children of 4)         / \     (children of 3)
//       2   6                            5   1
//      / \ / \   (leaves: odd ranks)    / \ / \   (leaves: even ranks)
//     1  3 5  7                        6  4 2  0
//
// req.nchannels rounds up to an even number of trees (at least 2) alternating between the two
// shapes, each carrying 1/ntrees of the elements; req.overlap as in plan/tree.hpp (phased: one
// channel per tree, overlapped: two).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/tree.hpp"

namespace ccoll::plan {

// Parent of `rank` in NCCL's in-order binary tree over 0..nranks-1 (root 0; -1 for the root).
inline Rank in_order_btree_parent(Rank nranks, Rank rank) {
  if (rank <= 0 || rank >= nranks) return -1;
  const Rank bit = rank & -rank;  // lowest set bit
  const Rank up = (rank ^ bit) | (bit << 1);
  return up < nranks ? up : rank ^ bit;
}

// The two trees' parent arrays (root of tree 1: 0; of tree 2: P-1 for even P, 1 for odd P > 1).
inline std::pair<std::vector<Rank>, std::vector<Rank>> double_binary_tree_parents(Rank nranks) {
  const auto n = static_cast<std::size_t>(std::max<Rank>(nranks, 0));
  std::vector<Rank> t1(n), t2(n);
  for (Rank r = 0; r < nranks; ++r) {
    t1[static_cast<std::size_t>(r)] = in_order_btree_parent(nranks, r);
    if (nranks % 2 == 0) {
      const Rank u = in_order_btree_parent(nranks, nranks - 1 - r);
      t2[static_cast<std::size_t>(r)] = u < 0 ? -1 : nranks - 1 - u;
    } else {
      const Rank u = in_order_btree_parent(nranks, (r - 1 + nranks) % nranks);
      t2[static_cast<std::size_t>(r)] = u < 0 ? -1 : (u + 1) % nranks;
    }
  }
  return {std::move(t1), std::move(t2)};
}

inline Plan build_double_binary_tree(const PlanRequest& req) {
  check_request(req);
  const auto [t1, t2] = double_binary_tree_parents(req.nranks);
  const std::uint32_t ntrees = 2 * std::max<std::uint32_t>(1, (req.nchannels + 1) / 2);
  std::vector<TreeSpec> trees(ntrees);
  for (std::uint32_t i = 0; i < ntrees; ++i) {
    const std::vector<Rank>& parent = i % 2 == 0 ? t1 : t2;
    trees[i].reduce_parent = parent;
    trees[i].root = static_cast<Rank>(std::find(parent.begin(), parent.end(), -1) - parent.begin());
    trees[i].share = 1.0;
  }
  return detail::build_trees_named(
      req, trees, std::vector<bool>(static_cast<std::size_t>(req.nranks), true), "dbtree");
}

}  // namespace ccoll::plan
