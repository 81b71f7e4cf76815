// ccoll/physical/nvidia_smi_loader.hpp: reads the matrix of `nvidia-smi topo -m`.
//
// The matrix gives, for every pair of devices (GPUs and NICs), the kind of path between them:
// NV# (# bonded NVLinks), PIX (one PCIe switch), PXB (several PCIe switches), PHB (a PCIe host
// bridge), NODE (host bridges within one NUMA node), SYS (across the CPU interconnect), X (self).
// It gives no bandwidths and no switch identities, so the physical graph is reconstructed:
//   - NV#: a direct link of # lanes at `nvlink_GBps` each;
//   - devices related by PIX share one PCIe switch ("pcie<k>", connected components of PIX);
//     PXB/PHB pairs hang off the same CPU;
//   - a CPU per NUMA group: the "NUMA Affinity" column when present, else the components of the
//     relation "not SYS";
//   - every device (or its PCIe switch) links to its CPU at `pcie_GBps`; CPUs link at `cpu_GBps`.
// Routes between GPUs then cross the same kinds of hops nvidia-smi reports, which is what the
// planners need (widest path, detours around SYS pairs). Load a JSON file for measured figures.
//
// Hostile input (docs/reliability-loaders.md): a cell must be one of X (on the diagonal only), SYS,
// NODE, PHB, PXB, PIX or NV# (# an integer in [1, 64]); the matrix must be symmetric; at most
// kMaxSmiDevices devices. Every error is a TopologyError that names the row, the column and the
// cell and quotes at most 40 characters of any input token.
#pragma once

#include <cctype>
#include <charconv>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "ccoll/physical/file_text.hpp"
#include "ccoll/physical/graph.hpp"

namespace ccoll::physical {

// Most devices (GPUs and NICs) in one matrix; a real machine has a few dozen.
inline constexpr std::size_t kMaxSmiDevices = 256;

namespace smi_detail {

// At most `max` characters of `s`, non-printable bytes shown as '?', "..." when cut.
inline std::string excerpt(const std::string& s, std::size_t max = 40) {
  std::string out;
  for (std::size_t k = 0; k < s.size() && k < max; ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > max) out += "...";
  return out;
}

// Lanes of an "NV#" cell (# in [1, 64]); 0 for the other known cells; -1 for an unknown cell.
inline int cell_lanes(const std::string& c) {
  if (c == "SYS" || c == "NODE" || c == "PHB" || c == "PXB" || c == "PIX") return 0;
  if (c.size() < 3 || c.size() > 4 || c.compare(0, 2, "NV") != 0) return -1;
  int lanes = 0;
  const char* end = c.data() + c.size();
  const auto r = std::from_chars(c.data() + 2, end, lanes);
  if (r.ec != std::errc() || r.ptr != end || lanes < 1 || lanes > 64) return -1;
  return lanes;
}

}  // namespace smi_detail

struct NvidiaSmiOptions {
  double nvlink_GBps = 25.0;  // per lane
  double pcie_GBps = 16.0;
  double cpu_GBps = 20.0;
};

inline PhysicalTopology topology_from_nvidia_smi(const std::string& text,
                                                 const NvidiaSmiOptions& opt = {}) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header;
  // Header: the first line whose first token is GPU0 (after optional leading whitespace/escapes).
  // nvidia-smi underlines the header ("\x1b[4mGPU0 ... \x1b[0m") even into a file: a whole
  // escape sequence goes, not only its ESC, or "[4mGPU0" hid the header and the GPU0 row was
  // taken for it.
  const auto split = [](const std::string& l) {
    std::vector<std::string> out;
    std::string cur;
    for (std::size_t i = 0; i <= l.size(); ++i) {
      if (i == l.size() || l[i] == '\t' || l[i] == ' ') {
        if (!cur.empty()) out.push_back(cur), cur.clear();
      } else if (l[i] == '\x1b') {
        if (i + 1 < l.size() && l[i + 1] == '[') {  // CSI: parameters up to a final byte @..~
          for (i += 2; i < l.size() && !(l[i] >= '@' && l[i] <= '~');) ++i;
          if (i == l.size()) --i;  // unterminated: the loop's end flushes the token
        }
      } else {
        cur += l[i];
      }
    }
    return out;
  };
  while (std::getline(in, line)) {
    auto tok = split(line);
    if (!tok.empty() && tok[0] == "GPU0") {
      header = tok;
      break;
    }
  }
  using smi_detail::excerpt;
  if (header.empty()) throw TopologyError("nvidia-smi topo -m: no header line starting with GPU0");
  std::vector<std::string> devices;
  for (const auto& h : header) {
    if (h.rfind("GPU", 0) == 0 || h.rfind("NIC", 0) == 0 || h.rfind("mlx", 0) == 0)
      devices.push_back(h);
    else
      break;  // "CPU Affinity", "NUMA Affinity" ...
  }
  if (devices.size() > kMaxSmiDevices)
    throw TopologyError("nvidia-smi topo -m: " + std::to_string(devices.size()) +
                        " devices in the header, more than " + std::to_string(kMaxSmiDevices));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].size() > 32)
      throw TopologyError("nvidia-smi topo -m: device name \"" + excerpt(devices[i]) +
                          "\" in the header is longer than 32 characters");
    for (std::size_t k = 0; k < i; ++k)
      if (devices[k] == devices[i])
        throw TopologyError("nvidia-smi topo -m: device " + devices[i] +
                            " appears twice in the header");
  }
  const std::size_t nd = devices.size();
  std::vector<std::vector<std::string>> rel(nd, std::vector<std::string>(nd));
  std::vector<std::string> numa(nd);
  const bool has_numa = line.find("NUMA Affinity") != std::string::npos;
  std::size_t rows = 0;
  while (rows < nd && std::getline(in, line)) {
    auto tok = split(line);
    if (tok.empty()) continue;
    if (tok[0] != devices[rows])
      throw TopologyError("nvidia-smi topo -m: expected a row for " + devices[rows] + ", got \"" +
                          excerpt(tok[0]) + "\"");
    if (tok.size() < nd + 1)
      throw TopologyError("nvidia-smi topo -m: row " + tok[0] + " has " +
                          std::to_string(tok.size() - 1) + " cells, expected " +
                          std::to_string(nd));
    for (std::size_t j = 0; j < nd; ++j) {
      const std::string& c = tok[j + 1];
      const bool diagonal = j == rows;
      if (diagonal ? c != "X" : smi_detail::cell_lanes(c) < 0)
        throw TopologyError("nvidia-smi topo -m: row " + devices[rows] + ", column " + devices[j] +
                            ": " + (diagonal ? "expected X on the diagonal" : "unknown cell") +
                            ", got \"" + excerpt(c) +
                            "\" (expected X, SYS, NODE, PHB, PXB, PIX or NV1..NV64)");
      rel[rows][j] = c;
    }
    // GPUs report CPU affinity then NUMA affinity; NICs leave them empty.
    if (has_numa && tok.size() >= nd + 3 && tok[0].rfind("GPU", 0) == 0) numa[rows] = tok[nd + 2];
    ++rows;
  }
  if (rows < nd) throw TopologyError("nvidia-smi topo -m: matrix has fewer rows than columns");
  for (std::size_t i = 0; i < nd; ++i)
    for (std::size_t j = i + 1; j < nd; ++j)
      if (rel[i][j] != rel[j][i])
        throw TopologyError("nvidia-smi topo -m: asymmetric entries: row " + devices[i] +
                            ", column " + devices[j] + " is " + rel[i][j] + " but row " +
                            devices[j] + ", column " + devices[i] + " is " + rel[j][i]);
  PhysicalTopology t;
  t.name = "nvidia-smi";
  std::vector<int> node(nd);
  for (std::size_t i = 0; i < nd; ++i) {
    std::string id = devices[i];
    for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    node[i] = t.add_node(id, id.rfind("gpu", 0) == 0 ? NodeKind::gpu : NodeKind::nic);
  }
  // Union-find helper.
  const auto components = [&](auto related) {
    std::vector<int> comp(nd, -1);
    int k = 0;
    for (std::size_t i = 0; i < nd; ++i) {
      if (comp[i] >= 0) continue;
      std::vector<std::size_t> stack{i};
      comp[i] = k;
      while (!stack.empty()) {
        const auto u = stack.back();
        stack.pop_back();
        for (std::size_t v = 0; v < nd; ++v)
          if (comp[v] < 0 && related(u, v)) comp[v] = k, stack.push_back(v);
      }
      ++k;
    }
    return std::pair{comp, k};
  };
  // NUMA groups: from the affinity column (NICs join the group of a GPU they are not SYS to), else
  // from "not SYS".
  std::map<std::string, int> numa_ids;
  auto [cpu_of, ncpu] =
      components([&](std::size_t a, std::size_t b) { return rel[a][b] != "SYS"; });
  if (has_numa) {
    bool ok = true;
    for (std::size_t i = 0; i < nd; ++i)
      if (!numa[i].empty() && numa[i] != "N/A")
        numa_ids.emplace(numa[i], static_cast<int>(numa_ids.size()));
    if (!numa_ids.empty()) {
      std::vector<int> c(nd, -1);
      for (std::size_t i = 0; i < nd; ++i)
        if (numa_ids.count(numa[i])) c[i] = numa_ids[numa[i]];
      for (std::size_t i = 0; i < nd; ++i)
        if (c[i] < 0)
          for (std::size_t j = 0; j < nd && c[i] < 0; ++j)
            if (c[j] >= 0 && rel[i][j] != "SYS") c[i] = c[j];
      for (int v : c) ok = ok && v >= 0;
      if (ok) cpu_of = c, ncpu = static_cast<int>(numa_ids.size());
    }
  }
  std::vector<int> cpus;
  cpus.reserve(static_cast<std::size_t>(ncpu));
  for (int c = 0; c < ncpu; ++c)
    cpus.push_back(t.add_node("cpu" + std::to_string(c), NodeKind::cpu));
  for (std::size_t i = 0; i < cpus.size(); ++i)
    for (std::size_t k = i + 1; k < cpus.size(); ++k)
      t.add_link(cpus[i], cpus[k], opt.cpu_GBps, 1, 1.0, "qpi");
  auto [sw_of, nsw] = components([&](std::size_t a, std::size_t b) { return rel[a][b] == "PIX"; });
  std::vector<int> sw_size(static_cast<std::size_t>(nsw), 0);
  for (std::size_t i = 0; i < nd; ++i) ++sw_size[static_cast<std::size_t>(sw_of[i])];
  std::map<int, int> sw_node;
  for (std::size_t i = 0; i < nd; ++i) {
    const int cpu = cpus[static_cast<std::size_t>(cpu_of[i])];
    if (sw_size[static_cast<std::size_t>(sw_of[i])] < 2) {
      t.add_link(node[i], cpu, opt.pcie_GBps, 1, 0.5, "pcie");
      continue;
    }
    auto it = sw_node.find(sw_of[i]);
    if (it == sw_node.end()) {
      const int s = t.add_node("pcie" + std::to_string(sw_node.size()), NodeKind::switch_);
      t.add_link(s, cpu, opt.pcie_GBps, 1, 0.5, "pcie");
      it = sw_node.emplace(sw_of[i], s).first;
    }
    t.add_link(node[i], it->second, opt.pcie_GBps, 1, 0.5, "pcie");
  }
  for (std::size_t i = 0; i < nd; ++i)
    for (std::size_t j = i + 1; j < nd; ++j) {
      const int lanes = smi_detail::cell_lanes(rel[i][j]);  // checked above: >= 0
      if (lanes > 0) t.add_link(node[i], node[j], opt.nvlink_GBps, lanes, 0.7, "nvlink");
    }
  t.validate();
  return t;
}

inline PhysicalTopology load_topology_nvidia_smi(const std::string& path,
                                                 const NvidiaSmiOptions& opt = {}) {
  auto t = topology_from_nvidia_smi(topology_file_text(path, "nvidia-smi topology"), opt);
  t.name = topology_name_of_file(path);
  return t;
}

}  // namespace ccoll::physical
