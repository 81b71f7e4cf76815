// ccoll/forest/dot.hpp: Graphviz DOT export of physical topologies and packed forests.
//
// to_dot(topology): one node per device (shape by kind, active workers filled), machines as
// clusters, one edge per duplex pair labelled with its bandwidth ("25x2" = two 25 GB/s lanes).
// to_dot(topology, forest): the forest's trees, one cluster per tree, edges in the direction data
// flows, labelled with the tree weight. Render with `dot -Tsvg file.dot -o file.svg`.
#pragma once

#include <map>
#include <sstream>
#include <string>

#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/physical/graph.hpp"

namespace ccoll::forest {

namespace dot_detail {

inline std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

inline const char* shape(physical::NodeKind k) {
  switch (k) {
    case physical::NodeKind::gpu:
      return "box";
    case physical::NodeKind::cpu:
      return "ellipse";
    case physical::NodeKind::nic:
      return "hexagon";
    case physical::NodeKind::switch_:
      return "diamond";
  }
  return "box";
}

inline std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace dot_detail

inline std::string to_dot(const physical::PhysicalTopology& t) {
  using namespace dot_detail;
  std::ostringstream o;
  o << "graph " << quote(t.name.empty() ? "topology" : t.name) << " {\n  node [fontsize=10];\n";
  std::map<std::string, std::vector<int>> by_host;
  for (int i = 0; i < t.node_count(); ++i)
    by_host[t.nodes[physical::PhysicalTopology::idx(i)].host].push_back(i);
  int cluster = 0;
  for (const auto& [host, ids] : by_host) {
    const std::string indent = host.empty() ? "  " : "    ";
    if (!host.empty())
      o << "  subgraph cluster_" << cluster++ << " {\n    label=" << quote(host) << ";\n";
    for (int i : ids) {
      const physical::Node& n = t.nodes[physical::PhysicalTopology::idx(i)];
      o << indent << quote(n.id) << " [shape=" << shape(n.kind);
      if (t.is_active(i)) o << ", style=filled, fillcolor=palegreen";
      o << "];\n";
    }
    if (!host.empty()) o << "  }\n";
  }
  std::vector<bool> done(t.links.size(), false);
  for (std::size_t i = 0; i < t.links.size(); ++i) {
    if (done[i]) continue;
    done[i] = true;
    const physical::Link& l = t.links[i];
    bool duplex = false;
    for (std::size_t k = i + 1; k < t.links.size(); ++k)
      if (!done[k] && t.links[k].from == l.to && t.links[k].to == l.from &&
          t.links[k].capacity_GBps() == l.capacity_GBps()) {
        done[k] = duplex = true;
        break;
      }
    std::string label =
        number(l.bandwidth_GBps) + (l.count > 1 ? "x" + std::to_string(l.count) : "");
    o << "  " << quote(t.nodes[physical::PhysicalTopology::idx(l.from)].id) << " -- "
      << quote(t.nodes[physical::PhysicalTopology::idx(l.to)].id) << " [label=" << quote(label);
    if (!duplex) o << ", dir=forward";
    if (l.type == "nvlink") o << ", color=forestgreen";
    if (l.type == "net") o << ", color=steelblue";
    if (l.count > 1) o << ", penwidth=" << l.count;
    o << "];\n";
  }
  o << "}\n";
  return o.str();
}

inline std::string to_dot(const physical::PhysicalTopology& t, const PackedForest& f) {
  using namespace dot_detail;
  std::ostringstream o;
  o << "digraph " << quote((t.name.empty() ? std::string("topology") : t.name) + " forest")
    << " {\n  node [fontsize=10, shape=box];\n";
  int k = 0;
  for (const auto& tree : f.trees()) {
    const std::string phase = tree.phase == TreePhase::reduce ? "reduce" : "broadcast";
    const std::string prefix = "t" + std::to_string(k) + ":";
    o << "  subgraph cluster_" << k << " {\n    label="
      << quote(phase + " to/from " + t.nodes[physical::PhysicalTopology::idx(tree.root)].id + ", " +
               number(tree.weight_GBps) + " GB/s")
      << ";\n";
    std::map<int, bool> seen;
    seen[tree.root] = true;
    for (auto [a, b] : tree.edges) seen[a] = seen[b] = true;
    for (const auto& [v, unused] : seen) {
      (void)unused;
      o << "    " << quote(prefix + t.nodes[physical::PhysicalTopology::idx(v)].id)
        << " [label=" << quote(t.nodes[physical::PhysicalTopology::idx(v)].id)
        << (v == tree.root ? ", style=filled, fillcolor=gold"
                           : (t.is_active(v) ? "" : ", style=dashed"))
        << "];\n";
    }
    for (auto [a, b] : tree.edges)
      o << "    " << quote(prefix + t.nodes[physical::PhysicalTopology::idx(a)].id) << " -> "
        << quote(prefix + t.nodes[physical::PhysicalTopology::idx(b)].id) << ";\n";
    o << "  }\n";
    ++k;
  }
  o << "}\n";
  return o.str();
}

}  // namespace ccoll::forest
