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
//
// Hostile input (docs/formats.md, docs/reliability-loaders.md): elements nested deeper than
// kMaxXmlDepth (64) are refused, so nothing recurses deeper than that; every attribute that becomes
// a number must be numeric as a whole, finite and in its documented range (kXmlRanges below); every
// error is a TopologyError whose message quotes at most 80 characters of the input, with the line
// and the offset of the problem.
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "ccoll/physical/file_text.hpp"
#include "ccoll/physical/graph.hpp"

namespace ccoll::physical {

// Deepest element nesting read (NCCL's dumps nest about 8 deep: system, cpu, pci bridges, pci,
// gpu, nvlink). Deeper input is refused with a TopologyError before anything recurses.
inline constexpr std::size_t kMaxXmlDepth = 64;

namespace xml_detail {

struct Element {
  std::string name;
  std::size_t line = 0;  // 1-based line of the '<' that opens it
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Element>> children;
  std::string attr(const std::string& k, const std::string& def = {}) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? def : it->second;
  }
  const std::string* find(const std::string& k) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? nullptr : &it->second;
  }
};

// At most `max` characters of `s`, non-printable bytes shown as '?', "..." when cut.
inline std::string excerpt(std::string_view s, std::size_t max = 40) {
  std::string out;
  for (std::size_t k = 0; k < s.size() && k < max; ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > max) out += "...";
  return out;
}

// A small XML reader: elements, double- or single-quoted attributes, self-closing tags, comments,
// processing instructions. Enough for NCCL's dumps. Iterative (an explicit stack), at most
// kMaxXmlDepth deep; throws TopologyError on malformed input, naming the line and offset and
// quoting at most 40 characters of the input from there (plus at most one name, cut at 32).
inline std::unique_ptr<Element> parse(const std::string& s) {
  std::size_t i = 0;
  const auto line_of = [&](std::size_t at) {
    return 1 +
           static_cast<std::size_t>(std::count(
               s.begin(), s.begin() + static_cast<std::ptrdiff_t>(std::min(at, s.size())), '\n'));
  };
  const auto fail = [&](std::size_t at, const std::string& what) {
    std::string msg = "NCCL topology XML: ";
    msg += what;
    msg += " at line " + std::to_string(line_of(at)) + ", offset " + std::to_string(at);
    if (at < s.size()) msg += ": \"" + excerpt(std::string_view(s).substr(at, 40)) + "\"";
    throw TopologyError(msg);
  };
  // Lines of the elements, counted incrementally (elements come in increasing offsets).
  std::size_t counted = 0, line = 1;
  const auto line_at = [&](std::size_t at) {
    line += static_cast<std::size_t>(std::count(s.begin() + static_cast<std::ptrdiff_t>(counted),
                                                s.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    counted = at;
    return line;
  };
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  auto root = std::make_unique<Element>();
  root->name = "#document";
  std::vector<Element*> stack{root.get()};
  while (i < s.size()) {
    if (s[i] != '<') {
      ++i;
      continue;
    }
    const std::size_t start = i;
    if (s.compare(i, 4, "<!--") == 0) {
      const auto e = s.find("-->", i + 4);
      if (e == std::string::npos) fail(start, "unterminated comment");
      i = e + 3;
      continue;
    }
    if (s.compare(i, 2, "<?") == 0 || s.compare(i, 2, "<!") == 0) {
      const auto e = s.find('>', i);
      if (e == std::string::npos) fail(start, "unterminated declaration");
      i = e + 1;
      continue;
    }
    if (s.compare(i, 2, "</") == 0) {
      const auto e = s.find('>', i);
      if (e == std::string::npos) fail(start, "unterminated closing tag");
      std::string_view name = std::string_view(s).substr(i + 2, e - i - 2);
      while (!name.empty() && space(name.back())) name.remove_suffix(1);
      if (stack.size() < 2)
        fail(start, "closing tag without an open element");
      else if (stack.back()->name != name)
        fail(start, "mismatched closing tag (expected </" + excerpt(stack.back()->name, 32) + ">)");
      stack.pop_back();
      i = e + 1;
      continue;
    }
    if (stack.size() > kMaxXmlDepth)
      fail(start, "elements nested deeper than " + std::to_string(kMaxXmlDepth));
    ++i;
    auto el = std::make_unique<Element>();
    el->line = line_at(start);
    while (i < s.size() && !space(s[i]) && s[i] != '>' && s[i] != '/') el->name += s[i++];
    if (el->name.empty()) fail(start, "empty tag name");
    bool self_closing = false;
    for (;;) {
      while (i < s.size() && space(s[i])) ++i;
      if (i >= s.size()) fail(start, "unterminated tag");
      if (s[i] == '>') {
        ++i;
        break;
      }
      if (s[i] == '/') {
        self_closing = true;
        if (i + 1 >= s.size() || s[i + 1] != '>') fail(i, "bad '/' in a tag");
        i += 2;
        break;
      }
      const std::size_t key_at = i;
      std::string key;
      while (i < s.size() && s[i] != '=' && !space(s[i]) && s[i] != '>' && s[i] != '/')
        key += s[i++];
      if (key.empty()) fail(key_at, "unexpected character in a tag");
      while (i < s.size() && space(s[i])) ++i;
      if (i >= s.size() || s[i] != '=') fail(key_at, "attribute without a value");
      ++i;
      while (i < s.size() && space(s[i])) ++i;
      if (i >= s.size() || (s[i] != '"' && s[i] != '\'')) fail(key_at, "unquoted attribute");
      const char q = s[i++];
      const auto e = s.find(q, i);
      if (e == std::string::npos) fail(key_at, "unterminated attribute value");
      el->attrs[std::move(key)] = s.substr(i, e - i);
      i = e + 1;
    }
    Element* raw = el.get();
    stack.back()->children.push_back(std::move(el));
    if (!self_closing) stack.push_back(raw);
  }
  if (stack.size() != 1) {
    std::string msg = "NCCL topology XML: <" + excerpt(stack.back()->name, 32) +
                      "> opened at line " + std::to_string(stack.back()->line) + " is never closed";
    throw TopologyError(msg);
  }
  return root;
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "NCCL topology XML, line 7: <gpu> attribute sm="abc": expected an integer in [10, 999]"
[[noreturn]] inline void bad_attr(const Element& e, std::string_view attr, std::string_view value,
                                  std::string_view expected) {
  std::string msg = "NCCL topology XML, line " + std::to_string(e.line) + ": <" +
                    excerpt(e.name, 32) + "> attribute ";
  msg.append(attr).append("=\"").append(excerpt(value)).append("\": expected ");
  msg.append(expected);
  throw TopologyError(msg);
}

inline std::string range_text(double lo, double hi) {
  std::ostringstream os;
  os << "[" << lo << ", " << hi << "]";
  return os.str();
}

// The whole of `v` as a finite number in [lo, hi]; a TopologyError naming element, attribute and
// value otherwise.
inline double number_attr(const Element& e, std::string_view attr, std::string_view v, double lo,
                          double hi) {
  double x = 0;
  const char* b = v.data();
  const char* end = v.data() + v.size();
  const auto r = std::from_chars(b, end, x);
  if (v.empty() || r.ec != std::errc() || r.ptr != end || !std::isfinite(x) || x < lo || x > hi)
    bad_attr(e, attr, v, "a number in " + range_text(lo, hi));
  return x;
}

inline long long integer_attr(const Element& e, std::string_view attr, std::string_view v,
                              long long lo, long long hi) {
  long long x = 0;
  const char* end = v.data() + v.size();
  const auto r = std::from_chars(v.data(), end, x);
  if (v.empty() || r.ec != std::errc() || r.ptr != end || x < lo || x > hi)
    bad_attr(e, attr, v, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

// An optional integer attribute: `def` when absent.
inline long long integer_attr_or(const Element& e, const std::string& attr, long long def,
                                 long long lo, long long hi) {
  const std::string* v = e.find(attr);
  return v ? integer_attr(e, attr, *v, lo, hi) : def;
}

// Ranges of the numeric attributes read (docs/formats.md).
struct XmlRanges {
  static constexpr double link_speed_min = 1, link_speed_max = 128;  // GT/s
  static constexpr long long link_width_min = 1, link_width_max = 32;
  static constexpr long long sm_min = 10, sm_max = 999;
  static constexpr long long nvlink_count_min = 1, nvlink_count_max = 64;
  static constexpr double net_speed_min = 1, net_speed_max = 1e7;  // Mb/s (10 Tb/s)
  static constexpr long long dev_max = 65535;                      // gpu and net dev
  static constexpr long long numaid_min = -1, numaid_max = 65535;
};

// PCIe GB/s of a <pci>: `fallback` when link_speed or link_width is absent, empty or "Unknown"
// (what NCCL writes when sysfs has no figure); otherwise both must be valid.
inline double pcie_GBps(const Element& pci, double fallback) {
  const std::string* sp = pci.find("link_speed");
  const std::string* wd = pci.find("link_width");
  const auto unknown = [](const std::string* v) {
    return !v || v->empty() || *v == "Unknown" || *v == "Unknown speed";
  };
  std::optional<double> gts;
  if (!unknown(sp)) {
    // "8.0 GT/s PCIe" (Linux >= 5.7), "8 GT/s" (older), or a bare number.
    std::string_view v = *sp;
    for (std::string_view suffix : {std::string_view(" PCIe"), std::string_view("GT/s")})
      if (v.size() >= suffix.size() && v.substr(v.size() - suffix.size()) == suffix) {
        v.remove_suffix(suffix.size());
        while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      }
    if (v.empty()) bad_attr(pci, "link_speed", *sp, "a number of GT/s");
    gts = number_attr(pci, "link_speed", v, XmlRanges::link_speed_min, XmlRanges::link_speed_max);
  }
  std::optional<long long> width;
  if (wd && !wd->empty())
    width =
        integer_attr(pci, "link_width", *wd, XmlRanges::link_width_min, XmlRanges::link_width_max);
  if (!gts || !width) return fallback;
  return *gts * static_cast<double>(*width) * (*gts >= 8 ? 128.0 / 130.0 : 0.8) / 8.0;
}

// A bus id: hex digits, ':' and '.', at most 32 characters ("0000:07:00.0").
inline std::string busid_attr(const Element& e, const std::string& attr) {
  const std::string* v = e.find(attr);
  if (!v) return {};
  const bool ok = v->size() <= 32 && std::all_of(v->begin(), v->end(), [](char c) {
                    return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
                  });
  if (!ok) bad_attr(e, attr, *v, "a PCI bus id (hex digits, ':' and '.', at most 32)");
  return *v;
}

}  // namespace xml_detail

struct NcclXmlOptions {
  double cpu_GBps = 20.0;           // CPU-CPU (QPI/UPI/xGMI)
  double default_pcie_GBps = 16.0;  // when a link's speed or width is missing
};

inline PhysicalTopology topology_from_nccl_xml(const std::string& text,
                                               const NcclXmlOptions& opt = {}) {
  using namespace xml_detail;
  using R = XmlRanges;
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
      const long long dev = integer_attr_or(*net, "dev", t.node_count(), 0, R::dev_max);
      const int n = t.add_node("nic" + std::to_string(dev), NodeKind::nic);
      double speed = bw;
      if (const std::string* v = net->find("speed"))
        speed = std::min(
            bw, number_attr(*net, "speed", *v, R::net_speed_min, R::net_speed_max) / 8000.0);
      t.add_link(n, parent, speed, 1, 1.0, "pcie");
    }
  };
  // Recursion over <pci> nesting: at most kMaxXmlDepth deep (parse() refuses deeper input).
  std::function<void(const Element&, int)> walk = [&](const Element& e, int parent) {
    for (const auto& c : e.children) {
      if (c->name == "pci") {
        const double bw = pcie_GBps(*c, opt.default_pcie_GBps);
        const std::string busid = busid_attr(*c, "busid");
        const Element* gpu = nullptr;
        const Element* nic = nullptr;
        for (const auto& g : c->children) {
          if (g->name == "gpu") gpu = g.get();
          if (g->name == "nic") nic = g.get();
        }
        if (gpu) {
          const long long dev = integer_attr_or(
              *gpu, "dev", static_cast<long long>(gpu_by_bus.size()), 0, R::dev_max);
          const int n = t.add_node("gpu" + std::to_string(dev), NodeKind::gpu);
          t.add_link(n, parent, bw, 1, 0.5, "pcie");
          // NVLinks find their peer by bus id: a second GPU on one id took the first one's links.
          if (!busid.empty() && !gpu_by_bus.emplace(lower(busid), n).second)
            throw TopologyError("NCCL topology XML, line " + std::to_string(c->line) + ": gpu" +
                                std::to_string(dev) + " has the bus id \"" + excerpt(busid) +
                                "\" of " +
                                t.nodes[PhysicalTopology::idx(gpu_by_bus[lower(busid)])].id);
          const int sm = static_cast<int>(integer_attr_or(*gpu, "sm", 70, R::sm_min, R::sm_max));
          for (const auto& l : gpu->children)
            if (l->name == "nvlink") {
              const int count = static_cast<int>(
                  integer_attr_or(*l, "count", 1, R::nvlink_count_min, R::nvlink_count_max));
              nvlinks.push_back(PendingNvlink{n, lower(busid_attr(*l, "target")),
                                              lower(l->attr("tclass")), count, sm});
            }
        } else if (nic) {
          add_nets(*nic, parent, bw);
        } else {
          const int n = t.add_node("pci" + (busid.empty() ? std::to_string(t.node_count()) : busid),
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
    const long long numaid = integer_attr_or(*c, "numaid", static_cast<long long>(cpus.size()),
                                             R::numaid_min, R::numaid_max);
    const int cpu = t.add_node("cpu" + std::to_string(numaid), NodeKind::cpu);
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
      if (l.tclass.rfind("0x06", 0) == 0) continue;  // a bridge: skip
      throw TopologyError("NCCL topology XML: nvlink from " +
                          t.nodes[PhysicalTopology::idx(l.gpu)].id + " to unknown target \"" +
                          excerpt(l.target) + "\"");
    }
    t.add_link(l.gpu, it->second, lane, l.count, 0.7, "nvlink", false);  // the peer lists its own
  }
  if (t.gpus().empty()) throw TopologyError("NCCL topology XML: no <gpu> element");
  t.validate();
  return t;
}

inline PhysicalTopology load_topology_nccl_xml(const std::string& path,
                                               const NcclXmlOptions& opt = {}) {
  auto t = topology_from_nccl_xml(topology_file_text(path, "NCCL topology"), opt);
  t.name = topology_name_of_file(path);
  return t;
}

}  // namespace ccoll::physical
