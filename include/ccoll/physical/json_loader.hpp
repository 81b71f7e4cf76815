// ccoll/physical/json_loader.hpp: the topology JSON format (docs/formats.md), read and written.
//
// Needs nlohmann-json (header-only; find_package(nlohmann_json) and link nlohmann_json::
// nlohmann_json, or put its include directory on the path). The rest of ccoll/topology does not.
//
//   {"name": "...",
//    "nodes": ["gpu0", ...]  or  [{"id": "gpu0", "kind": "gpu", "host": "m0"}, ...],
//    "links": [{"a": "gpu0", "b": "gpu1", "bandwidth_GBps": 25, "count": 1, "latency_us": 1.0,
//               "duplex": true, "type": "nvlink"}, ...],
//    "active": ["gpu0", ...]}
//
// Bandwidth is per direction and per lane; count multiplies it; duplex (default true) adds both
// directions. active defaults to every gpu node; a node given as a plain string is a gpu (so a file
// without kinds makes every node an active worker). Errors name the offending node or link.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ccoll/physical/graph.hpp"

namespace ccoll::physical {

inline PhysicalTopology topology_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw TopologyError("topology JSON: expected an object at the top level");
  PhysicalTopology t;
  t.name = j.value("name", std::string("topology"));
  if (!j.contains("nodes") || !j["nodes"].is_array())
    throw TopologyError("topology JSON: \"nodes\" must be an array");
  for (const auto& n : j["nodes"]) {
    if (n.is_string()) {
      t.add_node(n.get<std::string>(), NodeKind::gpu);
    } else if (n.is_object() && n.contains("id") && n["id"].is_string()) {
      t.add_node(n["id"].get<std::string>(), parse_node_kind(n.value("kind", std::string("gpu"))),
                 n.value("host", std::string()));
    } else {
      throw TopologyError("topology JSON: a node must be a string or an object with \"id\", got " +
                          n.dump());
    }
  }
  if (j.contains("links")) {
    if (!j["links"].is_array()) throw TopologyError("topology JSON: \"links\" must be an array");
    for (const auto& l : j["links"]) {
      if (!l.is_object() || !l.contains("a") || !l.contains("b") || !l["a"].is_string() ||
          !l["b"].is_string())
        throw TopologyError("topology JSON: a link needs string fields \"a\" and \"b\", got " +
                            l.dump());
      const auto a = l["a"].get<std::string>(), b = l["b"].get<std::string>();
      const auto fail = [&](const std::string& what) {
        std::string msg = "link ";
        msg.append(a).append("-").append(b).append(": ").append(what);
        throw TopologyError(msg);
      };
      if (t.find(a) < 0) fail("unknown node \"" + a + "\"");
      if (t.find(b) < 0) fail("unknown node \"" + b + "\"");
      if (!l.contains("bandwidth_GBps") || !l["bandwidth_GBps"].is_number())
        fail("\"bandwidth_GBps\" (a number) is required");
      t.add_link(a, b, l["bandwidth_GBps"].get<double>(), l.value("count", 1),
                 l.value("latency_us", 0.0), l.value("type", std::string()),
                 l.value("duplex", true));
    }
  }
  if (j.contains("active")) {
    if (!j["active"].is_array()) throw TopologyError("topology JSON: \"active\" must be an array");
    std::vector<std::string> ids;
    for (const auto& a : j["active"]) ids.push_back(a.get<std::string>());
    t.set_active(ids);
  }
  t.validate();
  return t;
}

inline PhysicalTopology load_topology_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TopologyError("cannot open topology file \"" + path + "\"");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw TopologyError("topology file \"" + path + "\": " + e.what());
  }
  return topology_from_json(j);
}

// Writes the format back; duplex pairs (a->b and b->a with equal figures) become one link.
inline nlohmann::json topology_to_json(const PhysicalTopology& t) {
  nlohmann::json j;
  j["name"] = t.name;
  j["nodes"] = nlohmann::json::array();
  for (const auto& n : t.nodes) {
    nlohmann::json o{{"id", n.id}, {"kind", std::string(to_string(n.kind))}};
    if (!n.host.empty()) o["host"] = n.host;
    j["nodes"].push_back(o);
  }
  j["links"] = nlohmann::json::array();
  std::vector<bool> done(t.links.size(), false);
  for (std::size_t i = 0; i < t.links.size(); ++i) {
    if (done[i]) continue;
    const Link& l = t.links[i];
    bool duplex = false;
    for (std::size_t k = i + 1; k < t.links.size(); ++k) {
      const Link& r = t.links[k];
      if (!done[k] && r.from == l.to && r.to == l.from && r.bandwidth_GBps == l.bandwidth_GBps &&
          r.count == l.count && r.latency_us == l.latency_us && r.type == l.type) {
        done[k] = true;
        duplex = true;
        break;
      }
    }
    done[i] = true;
    nlohmann::json o{{"a", t.nodes[PhysicalTopology::idx(l.from)].id},
                     {"b", t.nodes[PhysicalTopology::idx(l.to)].id},
                     {"bandwidth_GBps", l.bandwidth_GBps},
                     {"count", l.count},
                     {"latency_us", l.latency_us},
                     {"duplex", duplex}};
    if (!l.type.empty()) o["type"] = l.type;
    j["links"].push_back(o);
  }
  j["active"] = nlohmann::json::array();
  for (int a : t.active_nodes()) j["active"].push_back(t.nodes[PhysicalTopology::idx(a)].id);
  return j;
}

}  // namespace ccoll::physical
