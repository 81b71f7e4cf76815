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
//
// Hostile input (docs/reliability-loaders.md): every field is checked for its JSON type before it
// is read; bandwidth_GBps must be finite in (0, 1e6], latency_us finite in [0, 1e6], count an
// integer in [1, 1024] (an integral number such as 2.0 is accepted, 2.5 or 1e12 are not); ids are
// at most 64 characters. Every error is a TopologyError (never a nlohmann::json exception) that
// names the field and quotes at most 40 characters of the offending value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ccoll/physical/graph.hpp"

namespace ccoll::physical {

// Most lanes one link entry of a topology file may have.
inline constexpr int kMaxLinkCount = 1024;

namespace json_detail {

// Most characters of a node id.
inline constexpr std::size_t kMaxIdLength = 64;

// A bounded description of a JSON value for error messages: scalars dumped (at most `max`
// characters), arrays and objects by their size (never dumped: they may be huge or deep).
inline std::string describe(const nlohmann::json& v, std::size_t max = 40) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " elements";
  if (v.is_object()) return "an object with " + std::to_string(v.size()) + " keys";
  std::string d = v.is_string() ? v.get_ref<const std::string&>() : v.dump();
  std::string out = v.is_string() ? "\"" : "";
  for (std::size_t k = 0; k < d.size() && k < max; ++k) {
    const auto c = static_cast<unsigned char>(d[k]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (d.size() > max) out += "...";
  if (v.is_string()) out += "\"";
  return out;
}

// At most 200 characters of a nlohmann::json message (its token excerpts are not bounded).
inline std::string bounded(std::string_view what, std::size_t max = 200) {
  std::string out(what.substr(0, max));
  if (what.size() > max) out += "...";
  return out;
}

[[noreturn]] inline void bad_field(std::string_view where, std::string_view field,
                                   std::string_view expected, const nlohmann::json& got) {
  std::string msg = "topology JSON: ";
  msg.append(where).append(where.empty() ? "" : ": ").append("\"").append(field);
  msg.append("\" must be ").append(expected).append(", got ").append(describe(got));
  throw TopologyError(msg);
}

inline std::string id_field(const nlohmann::json& v, std::string_view where,
                            std::string_view field) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
      v.get_ref<const std::string&>().size() > kMaxIdLength)
    bad_field(where, field, "a non-empty string of at most 64 characters", v);
  return v.get<std::string>();
}

inline std::string string_field(const nlohmann::json& obj, const char* field,
                                std::string_view where, std::string def) {
  const auto it = obj.find(field);
  if (it == obj.end()) return def;
  if (!it->is_string()) bad_field(where, field, "a string", *it);
  return it->get<std::string>();
}

inline double number_field(const nlohmann::json& obj, const char* field, std::string_view where,
                           double def, double lo, double hi, bool lo_open) {
  const auto it = obj.find(field);
  if (it == obj.end()) return def;
  const auto range = [&] {
    std::ostringstream os;
    os << "a finite number in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
    return os.str();
  };
  if (!it->is_number()) bad_field(where, field, range(), *it);
  const double x = it->get<double>();
  if (!std::isfinite(x) || x > hi || (lo_open ? !(x > lo) : !(x >= lo)))
    bad_field(where, field, range(), *it);
  return x;
}

inline long long integer_field(const nlohmann::json& obj, const char* field, std::string_view where,
                               long long def, long long lo, long long hi) {
  const auto it = obj.find(field);
  if (it == obj.end()) return def;
  const std::string expected =
      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (it->is_number_unsigned()) {
    const auto u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo)))
      bad_field(where, field, expected, *it);
    return static_cast<long long>(u);
  }
  if (it->is_number_integer()) {
    const auto x = it->get<std::int64_t>();
    if (x < lo || x > hi) bad_field(where, field, expected, *it);
    return x;
  }
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) ||
        d > static_cast<double>(hi))
      bad_field(where, field, expected, *it);
    return static_cast<long long>(d);
  }
  bad_field(where, field, expected, *it);
}

}  // namespace json_detail

// `unnamed`: the name of a topology without "name" (a file's loader passes the file's), which
// the errors of its validation quote.
inline PhysicalTopology topology_from_json(const nlohmann::json& j,
                                           const std::string& unnamed = "topology") {
  using namespace json_detail;
  if (!j.is_object())
    throw TopologyError("topology JSON: expected an object at the top level, got " + describe(j));
  PhysicalTopology t;
  t.name = string_field(j, "name", "", unnamed);
  if (!j.contains("nodes") || !j["nodes"].is_array())
    throw TopologyError("topology JSON: \"nodes\" must be an array");
  for (const auto& n : j["nodes"]) {
    if (n.is_string()) {
      t.add_node(id_field(n, "nodes[]", "id"), NodeKind::gpu);
    } else if (n.is_object() && n.contains("id")) {
      std::string id = id_field(n["id"], "nodes[]", "id");
      const std::string where = "node " + id;
      const std::string kind = string_field(n, "kind", where, "gpu");
      NodeKind k{};
      try {
        k = parse_node_kind(kind);
      } catch (const std::invalid_argument&) {
        bad_field(where, "kind", "gpu, cpu, nic or switch", n["kind"]);
      }
      t.add_node(std::move(id), k, string_field(n, "host", where, std::string()));
    } else {
      throw TopologyError("topology JSON: a node must be a string or an object with \"id\", got " +
                          describe(n));
    }
  }
  if (j.contains("links")) {
    if (!j["links"].is_array()) throw TopologyError("topology JSON: \"links\" must be an array");
    for (const auto& l : j["links"]) {
      if (!l.is_object() || !l.contains("a") || !l.contains("b") || !l["a"].is_string() ||
          !l["b"].is_string())
        throw TopologyError("topology JSON: a link needs string fields \"a\" and \"b\", got " +
                            describe(l));
      const auto a = id_field(l["a"], "link", "a"), b = id_field(l["b"], "link", "b");
      std::string where = "link ";
      where.append(a).append("-").append(b);
      const auto fail = [&](const std::string& what) {
        std::string msg = "link ";
        msg.append(a).append("-").append(b).append(": ").append(what);
        throw TopologyError(msg);
      };
      if (t.find(a) < 0) fail("unknown node \"" + a + "\"");
      if (t.find(b) < 0) fail("unknown node \"" + b + "\"");
      if (!l.contains("bandwidth_GBps") || !l["bandwidth_GBps"].is_number())
        fail("\"bandwidth_GBps\" (a number) is required");
      const double bw = number_field(l, "bandwidth_GBps", where, 0, 0, 1e6, true);
      const auto count = static_cast<int>(integer_field(l, "count", where, 1, 1, kMaxLinkCount));
      const double lat = number_field(l, "latency_us", where, 0.0, 0, 1e6, false);
      std::string type = string_field(l, "type", where, std::string());
      bool duplex = true;
      if (const auto it = l.find("duplex"); it != l.end()) {
        if (!it->is_boolean()) bad_field(where, "duplex", "true or false", *it);
        duplex = it->get<bool>();
      }
      t.add_link(a, b, bw, count, lat, std::move(type), duplex);
    }
  }
  if (j.contains("active")) {
    if (!j["active"].is_array()) throw TopologyError("topology JSON: \"active\" must be an array");
    std::vector<std::string> ids;
    for (const auto& a : j["active"]) ids.push_back(id_field(a, "active[]", "id"));
    t.set_active(ids);
  }
  t.validate();
  return t;
}

// The text of a topology JSON file; malformed JSON is a TopologyError naming `where`.
inline PhysicalTopology topology_from_json_text(std::string_view text,
                                                const std::string& where = "topology JSON") {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw TopologyError(where + ": not valid JSON: " + json_detail::bounded(e.what()));
  }
  return topology_from_json(j);
}

inline PhysicalTopology load_topology_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TopologyError("cannot open topology file \"" + path + "\"");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw TopologyError("topology file \"" + path + "\": " + json_detail::bounded(e.what()));
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
    // Parallel links merge into one of their summed count, which may exceed what one entry may
    // hold: entries of at most kMaxLinkCount lanes, which the reader merges back into this link.
    for (int left = l.count; left > 0; left -= kMaxLinkCount) {
      nlohmann::json o{{"a", t.nodes[PhysicalTopology::idx(l.from)].id},
                       {"b", t.nodes[PhysicalTopology::idx(l.to)].id},
                       {"bandwidth_GBps", l.bandwidth_GBps},
                       {"count", std::min(left, kMaxLinkCount)},
                       {"latency_us", l.latency_us},
                       {"duplex", duplex}};
      if (!l.type.empty()) o["type"] = l.type;
      j["links"].push_back(o);
    }
  }
  j["active"] = nlohmann::json::array();
  for (int a : t.active_nodes()) j["active"].push_back(t.nodes[PhysicalTopology::idx(a)].id);
  return j;
}

}  // namespace ccoll::physical
