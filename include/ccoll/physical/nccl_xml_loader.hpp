// ccoll/physical/nccl_xml_loader.hpp: reads NCCL's topology dump (NCCL_TOPO_DUMP_FILE=file.xml).
//
// NCCL writes the machine it detected as nested elements: <system> holds <cpu numaid=...>, which
// hold <pci busid class link_speed link_width> bridges and devices; a GPU is a <pci> whose child
// is <gpu dev sm ...> with <nvlink target=busid count tclass> children; a NIC is a <pci> (or a
// direct child of <cpu>) holding <nic><net name dev speed(Mb/s) .../></nic>. We map it to nodes
// "cpu<numaid>", "pci<busid>" (switches), "gpu<dev>", "nic<dev>", and "nvswitch" (every NVLink
// whose tclass is 0x068000 goes to one switch node). Bandwidths (per direction):
//   - PCIe: speed (GT/s) x width x encoding (128/130 from 8 GT/s, 8/10 below) / 8 bits;
//   - NVLink: count x 20 GB/s for sm < 70 (NVLink1), else 25 GB/s per lane (nominal, like
//     presets.hpp; NCCL itself assumes about 20 per lane of NVLink2-4);
//   - NIC: speed / 8000 GB/s to its PCIe parent is capped by the PCIe link;
//   - CPU to CPU: `cpu_GBps` (the dump carries no figure for QPI/UPI).
// Only the elements above are read; unknown elements and attributes are skipped.
#pragma once

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ccoll/physical/graph.hpp"

namespace ccoll::physical {

namespace xml_detail {

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Element>> children;
  std::string attr(const std::string& k, const std::string& def = {}) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? def : it->second;
  }
};

// A small XML reader: elements, double- or single-quoted attributes, self-closing tags, comments,
// processing instructions. Enough for NCCL's dumps; throws TopologyError on malformed input.
inline std::unique_ptr<Element> parse(const std::string& s) {
  std::size_t i = 0;
  const auto fail = [&](const std::string& what) {
    throw TopologyError("NCCL topology XML: " + what + " at offset " + std::to_string(i));
  };
  auto root = std::make_unique<Element>();
  root->name = "#document";
  std::vector<Element*> stack{root.get()};
  while (i < s.size()) {
    if (s[i] != '<') {
      ++i;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      const auto e = s.find("-->", i);
      if (e == std::string::npos) fail("unterminated comment");
      i = e + 3;
      continue;
    }
    if (s.compare(i, 2, "<?") == 0 || s.compare(i, 2, "<!") == 0) {
      const auto e = s.find('>', i);
      if (e == std::string::npos) fail("unterminated declaration");
      i = e + 1;
      continue;
    }
    if (s.compare(i, 2, "</") == 0) {
      const auto e = s.find('>', i);
      if (e == std::string::npos) fail("unterminated closing tag");
      std::string name = s.substr(i + 2, e - i - 2);
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
        name.pop_back();
      if (stack.size() < 2 || stack.back()->name != name) fail("unexpected </" + name + ">");
      stack.pop_back();
      i = e + 1;
      continue;
    }
    ++i;
    auto el = std::make_unique<Element>();
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])) && s[i] != '>' &&
           s[i] != '/')
      el->name += s[i++];
    if (el->name.empty()) fail("empty tag name");
    bool self_closing = false;
    for (;;) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) fail("unterminated tag <" + el->name + ">");
      if (s[i] == '>') {
        ++i;
        break;
      }
      if (s[i] == '/') {
        self_closing = true;
        if (i + 1 >= s.size() || s[i + 1] != '>') fail("bad '/' in <" + el->name + ">");
        i += 2;
        break;
      }
      std::string key;
      while (i < s.size() && s[i] != '=' && !std::isspace(static_cast<unsigned char>(s[i])) &&
             s[i] != '>')
        key += s[i++];
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size() || s[i] != '=') fail("attribute " + key + " without value");
      ++i;
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size() || (s[i] != '"' && s[i] != '\'')) fail("unquoted attribute " + key);
      const char q = s[i++];
      const auto e = s.find(q, i);
      if (e == std::string::npos) fail("unterminated attribute " + key);
      el->attrs[key] = s.substr(i, e - i);
      i = e + 1;
    }
    Element* raw = el.get();
    stack.back()->children.push_back(std::move(el));
    if (!self_closing) stack.push_back(raw);
  }
  if (stack.size() != 1) fail("unclosed <" + stack.back()->name + ">");
  return root;
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline double pcie_GBps(const Element& pci, double fallback) {
  const std::string sp = pci.attr("link_speed"), wd = pci.attr("link_width");
  try {
    const double gts = std::stod(sp);
    const double width = std::stod(wd);
    if (!(gts > 0) || !(width > 0)) return fallback;
    return gts * width * (gts >= 8 ? 128.0 / 130.0 : 0.8) / 8.0;
  } catch (const std::exception&) {
    return fallback;
  }
}

}  // namespace xml_detail

struct NcclXmlOptions {
  double cpu_GBps = 20.0;           // CPU-CPU (QPI/UPI/xGMI)
  double default_pcie_GBps = 16.0;  // when a link's speed or width is missing
};

inline PhysicalTopology topology_from_nccl_xml(const std::string& text,
                                               const NcclXmlOptions& opt = {}) {
  using namespace xml_detail;
  const auto doc = parse(text);
  const Element* system = nullptr;
  for (const auto& c : doc->children)
    if (c->name == "system") system = c.get();
  if (!system) throw TopologyError("NCCL topology XML: no <system> element");
  PhysicalTopology t;
  t.name = "nccl-topo";
  std::map<std::string, int> gpu_by_bus;  // lower-case busid -> node
  struct PendingNvlink {
    int gpu;
    std::string target, tclass;
    int count;
    int sm;
  };
  std::vector<PendingNvlink> nvlinks;
  std::vector<int> cpus;
  const auto add_nets = [&](const Element& nic, int parent, double bw) {
    for (const auto& net : nic.children) {
      if (net->name != "net") continue;
      const std::string id = "nic" + net->attr("dev", std::to_string(t.node_count()));
      const int n = t.add_node(id, NodeKind::nic);
      double speed = bw;
      try {
        const double mbps = std::stod(net->attr("speed", "0"));
        if (mbps > 0) speed = std::min(bw, mbps / 8000.0);
      } catch (const std::exception&) {
      }
      t.add_link(n, parent, speed, 1, 1.0, "pcie");
    }
  };
  std::function<void(const Element&, int)> walk = [&](const Element& e, int parent) {
    for (const auto& c : e.children) {
      if (c->name == "pci") {
        const double bw = pcie_GBps(*c, opt.default_pcie_GBps);
        const Element* gpu = nullptr;
        const Element* nic = nullptr;
        for (const auto& g : c->children) {
          if (g->name == "gpu") gpu = g.get();
          if (g->name == "nic") nic = g.get();
        }
        if (gpu) {
          const std::string id = "gpu" + gpu->attr("dev", std::to_string(gpu_by_bus.size()));
          const int n = t.add_node(id, NodeKind::gpu);
          t.add_link(n, parent, bw, 1, 0.5, "pcie");
          gpu_by_bus[lower(c->attr("busid"))] = n;
          int sm = 70;
          try {
            sm = std::stoi(gpu->attr("sm", "70"));
          } catch (const std::exception&) {
          }
          for (const auto& l : gpu->children)
            if (l->name == "nvlink") {
              int count = 1;
              try {
                count = std::stoi(l->attr("count", "1"));
              } catch (const std::exception&) {
              }
              nvlinks.push_back(
                  PendingNvlink{n, lower(l->attr("target")), lower(l->attr("tclass")), count, sm});
            }
        } else if (nic) {
          add_nets(*nic, parent, bw);
        } else {
          const int n = t.add_node("pci" + c->attr("busid", std::to_string(t.node_count())),
                                   NodeKind::switch_);
          t.add_link(n, parent, bw, 1, 0.5, "pcie");
          walk(*c, n);
        }
      } else if (c->name == "nic") {
        add_nets(*c, parent, opt.default_pcie_GBps);
      }
    }
  };
  for (const auto& c : system->children) {
    if (c->name != "cpu") continue;
    const int cpu =
        t.add_node("cpu" + c->attr("numaid", std::to_string(cpus.size())), NodeKind::cpu);
    cpus.push_back(cpu);
    walk(*c, cpu);
  }
  for (std::size_t i = 0; i < cpus.size(); ++i)
    for (std::size_t k = i + 1; k < cpus.size(); ++k)
      t.add_link(cpus[i], cpus[k], opt.cpu_GBps, 1, 1.0, "qpi");
  int nvswitch = -1;
  for (const auto& l : nvlinks) {
    const double lane = l.sm < 70 ? 20.0 : 25.0;
    if (l.tclass == "0x068000") {  // NVSwitch
      if (nvswitch < 0) nvswitch = t.add_node("nvswitch", NodeKind::switch_);
      t.add_link(l.gpu, nvswitch, lane, l.count, 0.7, "nvlink");
      continue;
    }
    auto it = gpu_by_bus.find(l.target);
    if (it == gpu_by_bus.end()) {
      if (l.tclass == "0x068000" || l.tclass.rfind("0x06", 0) == 0) continue;  // a bridge: skip
      throw TopologyError("NCCL topology XML: nvlink from " +
                          t.nodes[PhysicalTopology::idx(l.gpu)].id + " to unknown target " +
                          l.target);
    }
    t.add_link(l.gpu, it->second, lane, l.count, 0.7, "nvlink", false);  // the peer lists its own
  }
  if (t.gpus().empty()) throw TopologyError("NCCL topology XML: no <gpu> element");
  t.validate();
  return t;
}

inline PhysicalTopology load_topology_nccl_xml(const std::string& path,
                                               const NcclXmlOptions& opt = {}) {
  std::ifstream in(path);
  if (!in) throw TopologyError("cannot open NCCL topology file \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = topology_from_nccl_xml(ss.str(), opt);
  t.name = path.substr(path.find_last_of('/') + 1);
  return t;
}

}  // namespace ccoll::physical
