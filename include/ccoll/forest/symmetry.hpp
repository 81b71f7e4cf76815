// ccoll/forest/symmetry.hpp: the packing LP of a cluster of identical machines, reduced by the
// rotation of its machines.
//
// Why. On a cluster of M identical machines the LP of problem.hpp has M times the rows and roots
// it needs: rotating the machines (machine m's k-th node -> machine m+1's k-th node, nodes outside
// the machines fixed) maps the graph, its capacities, routes and active set onto themselves, so it
// maps optimal forests to optimal forests, and the average of an optimal forest's M rotations is
// an optimal forest that the rotation leaves unchanged. Such a forest is given by the trees of the
// roots of one orbit representative each (machine 0's workers), every one of them repeated with
// the same weight on all M rotations. Its load on a link l of orbit O (the links the rotation
// carries l to) is (M / |O|) * sum_T w_T |T n O|: the quotient LP below has one row per link orbit,
// with capacity c_O |O| / M and the count |T n O| as the column's entry, and its optimum is the
// full optimum / M. A dual solution y of the quotient, lifted to y_l = y_O for every link l of O,
// prices every tree of the full graph as the quotient prices its representative and has M times
// the quotient's dual value, so a bound the quotient certifies, times M, bounds the full optimum
// (weak duality, as in [TopoSync] Sec. IV). On the pairwise 8 x 4 cluster the quotient has 124
// rows per pool instead of 992 and 4 roots instead of 32, which is what the dense simplex basis
// of lp.hpp needs (its cost grows with rows squared per pivot).
//
// find_machine_rotation() accepts a rotation only when it is checked to be one: same node kinds
// and activity, a link of equal capacity for every link's image, and every route's image the
// route of the images (the widest-route tie rules could break the symmetry; they are checked, not
// assumed).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ccoll/forest/problem.hpp"
#include "ccoll/forest/types.hpp"
#include "ccoll/physical/graph.hpp"

namespace ccoll::forest {

struct MachineRotation {
  int machines = 1;            // M; 1: no rotation found (nothing to reduce)
  std::vector<int> next;       // node index -> its image under one rotation step
  std::vector<int> next_link;  // topology link index -> its image
  explicit operator bool() const { return machines > 1; }
  int node_image(int v, int steps) const {
    for (int s = 0; s < steps; ++s) v = next[physical::PhysicalTopology::idx(v)];
    return v;
  }
};

// The rotation of the machines (nodes grouped by host, in order of first appearance), or an empty
// rotation when the machines differ or the rotation is not a symmetry of the graph.
inline MachineRotation find_machine_rotation(const physical::PhysicalTopology& topo) {
  using physical::PhysicalTopology;
  MachineRotation none;
  std::unordered_map<std::string, int> host_index;
  std::vector<std::vector<int>> members;
  for (int v = 0; v < topo.node_count(); ++v) {
    const std::string& h = topo.nodes[PhysicalTopology::idx(v)].host;
    if (h.empty()) continue;
    const auto [it, fresh] = host_index.emplace(h, static_cast<int>(members.size()));
    if (fresh) members.emplace_back();
    members[static_cast<std::size_t>(it->second)].push_back(v);
  }
  const int M = static_cast<int>(members.size());
  if (M < 2) return none;
  MachineRotation r;
  r.next.resize(topo.nodes.size());
  for (int v = 0; v < topo.node_count(); ++v) r.next[PhysicalTopology::idx(v)] = v;
  for (int m = 0; m < M; ++m) {
    const auto& a = members[static_cast<std::size_t>(m)];
    const auto& b = members[static_cast<std::size_t>((m + 1) % M)];
    if (a.size() != b.size()) return none;
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (topo.nodes[PhysicalTopology::idx(a[k])].kind !=
              topo.nodes[PhysicalTopology::idx(b[k])].kind ||
          topo.is_active(a[k]) != topo.is_active(b[k]) ||
          topo.is_compute(a[k]) != topo.is_compute(b[k]))
        return none;
      r.next[PhysicalTopology::idx(a[k])] = b[k];
    }
  }
  // Links by endpoints; the image of a link is the first unused one of equal capacity.
  std::unordered_map<std::uint64_t, std::vector<int>> by_ends;
  const auto key = [](int a, int b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  };
  for (int i = 0; i < static_cast<int>(topo.links.size()); ++i) {
    const auto& l = topo.links[PhysicalTopology::idx(i)];
    by_ends[key(l.from, l.to)].push_back(i);
  }
  r.next_link.assign(topo.links.size(), -1);
  std::vector<char> used(topo.links.size(), 0);
  for (int i = 0; i < static_cast<int>(topo.links.size()); ++i) {
    const auto& l = topo.links[PhysicalTopology::idx(i)];
    const auto it = by_ends.find(
        key(r.next[PhysicalTopology::idx(l.from)], r.next[PhysicalTopology::idx(l.to)]));
    if (it == by_ends.end()) return none;
    for (int j : it->second)
      if (!used[PhysicalTopology::idx(j)] &&
          topo.links[PhysicalTopology::idx(j)].capacity_GBps() == l.capacity_GBps()) {
        used[PhysicalTopology::idx(j)] = 1;
        r.next_link[PhysicalTopology::idx(i)] = j;
        break;
      }
    if (r.next_link[PhysicalTopology::idx(i)] < 0) return none;
  }
  r.machines = M;
  return r;
}

// A problem reduced by a machine rotation (see the header comment), and the way back.
struct SymmetricProblem {
  ForestProblem quotient;
  const MachineRotation* rotation = nullptr;
  int order() const { return rotation ? rotation->machines : 1; }

  // Every pair of `out` (trees of representative roots) repeated on all M rotations with its
  // weight; totals and bounds scaled to the full problem.
  void expand(PackedForest& out) const {
    const int M = order();
    if (M <= 1) return;
    std::vector<ForestPair> all;
    all.reserve(out.pairs.size() * static_cast<std::size_t>(M));
    for (int k = 0; k < M; ++k)
      for (const auto& p : out.pairs) {
        ForestPair q = p;
        q.root = rotation->node_image(p.root, k);
        for (auto& [a, b] : q.reduce_edges)
          a = rotation->node_image(a, k), b = rotation->node_image(b, k);
        for (auto& [a, b] : q.broadcast_edges)
          a = rotation->node_image(a, k), b = rotation->node_image(b, k);
        all.push_back(std::move(q));
      }
    out.pairs = std::move(all);
    out.total_GBps *= M;
    out.optimum_found_GBps *= M;
    out.mwu_GBps *= M;
    if (out.upper_bound_GBps >= 0) out.upper_bound_GBps *= M;
    out.symmetry_order = M;
  }
};

// The quotient of `p` by `rot`, or nothing (order 1) when some route's image is not the route of
// the images. `p` must be make_forest_problem's problem of the graph `rot` was found on.
inline SymmetricProblem reduce_by_rotation(const ForestProblem& p, const MachineRotation& rot) {
  SymmetricProblem s;
  if (!rot) return s;
  const int M = rot.machines;
  std::vector<int> local_of_node(rot.next.size(), -1);
  for (int i = 0; i < p.n; ++i)
    local_of_node[static_cast<std::size_t>(p.node[static_cast<std::size_t>(i)])] = i;
  std::vector<int> edge_of(static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.n), -1);
  for (std::size_t e = 0; e < p.fwd.size(); ++e)
    edge_of[static_cast<std::size_t>(p.fwd[e].from) * static_cast<std::size_t>(p.n) +
            static_cast<std::size_t>(p.fwd[e].to)] = static_cast<int>(e);
  std::unordered_map<int, int> local_link;  // topology link -> local link
  for (int l = 0; l < p.links(); ++l) local_link.emplace(p.link[static_cast<std::size_t>(l)], l);
  const auto image_local = [&](int i) {
    return local_of_node[static_cast<std::size_t>(
        rot.next[static_cast<std::size_t>(p.node[static_cast<std::size_t>(i)])])];
  };
  // Routes: the image of a's route to b is the route of a's image to b's image.
  for (std::size_t e = 0; e < p.fwd.size(); ++e) {
    const int a = image_local(p.fwd[e].from), b = image_local(p.fwd[e].to);
    if (a < 0 || b < 0) return s;
    const int f = edge_of[static_cast<std::size_t>(a) * static_cast<std::size_t>(p.n) +
                          static_cast<std::size_t>(b)];
    if (f < 0) return s;
    const int len = p.route_begin[e + 1] - p.route_begin[e];
    if (p.route_begin[static_cast<std::size_t>(f) + 1] -
            p.route_begin[static_cast<std::size_t>(f)] !=
        len)
      return s;
    for (int k = 0; k < len; ++k) {
      const int at_e = p.route_begin[e] + k;
      const int at_f = p.route_begin[static_cast<std::size_t>(f)] + k;
      const int li =
          p.link[static_cast<std::size_t>(p.route_links[static_cast<std::size_t>(at_e)])];
      const int lf =
          p.link[static_cast<std::size_t>(p.route_links[static_cast<std::size_t>(at_f)])];
      if (rot.next_link[static_cast<std::size_t>(li)] != lf) return s;
    }
  }
  // Link orbits (routes map to routes, so the local links are closed under the rotation).
  std::vector<int> orbit(static_cast<std::size_t>(p.links()), -1);
  ForestProblem& q = s.quotient;
  q.schedule = p.schedule;
  q.pools = p.pools;
  q.n = p.n;
  q.node = p.node;
  q.terminal = p.terminal;
  q.all_active = p.all_active;
  q.fwd = p.fwd;
  q.rev = p.rev;
  q.route_begin = p.route_begin;
  for (int l = 0; l < p.links(); ++l) {
    if (orbit[static_cast<std::size_t>(l)] >= 0) continue;
    const int id = static_cast<int>(q.link.size());
    int size = 0;
    for (int t = p.link[static_cast<std::size_t>(l)];;) {
      const auto it = local_link.find(t);
      if (it == local_link.end()) return SymmetricProblem{};
      if (orbit[static_cast<std::size_t>(it->second)] >= 0) break;
      orbit[static_cast<std::size_t>(it->second)] = id;
      ++size;
      t = rot.next_link[static_cast<std::size_t>(t)];
    }
    q.link.push_back(p.link[static_cast<std::size_t>(l)]);
    q.link_cap.push_back(p.link_cap[static_cast<std::size_t>(l)] * size / M);
  }
  q.route_links.reserve(p.route_links.size());
  for (int l : p.route_links) q.route_links.push_back(orbit[static_cast<std::size_t>(l)]);
  // One root per orbit of roots: the first in node order.
  std::vector<char> seen(static_cast<std::size_t>(p.n), 0);
  for (int r : p.roots) {
    if (seen[static_cast<std::size_t>(r)]) continue;
    q.roots.push_back(r);
    for (int v = r, k = 0; k < M; ++k, v = image_local(v)) seen[static_cast<std::size_t>(v)] = 1;
  }
  s.rotation = &rot;
  return s;
}

}  // namespace ccoll::forest
