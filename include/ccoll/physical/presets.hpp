// ccoll/physical/presets.hpp: physical topologies of common machines and clusters.
//
// Bandwidths are nominal per direction (GB/s, 1 GB = 1e9 bytes): NVLink1 20 per lane, NVLink2-4 25
// per lane, PCIe Gen3/4/5 x16 16/32/64, InfiniBand EDR/HDR/NDR 12.5/25/50. They are the figures the
// planners optimise against, not measurements; load a JSON file (json_loader.hpp) with measured
// figures to plan for a real machine. NVSwitch fabrics are modelled as one switch node per
// baseboard whose link to each GPU has count = the GPU's NVLink lanes: every GPU can drive its full
// NVLink bandwidth to any other, which is what the switch chips provide.
//
// Node ids: single machines use "gpu0".."gpuN", "cpu0", "pcie0", "nic0", "nvswitch0"; clusters
// prefix them with the machine ("m3.gpu5") and add "tor" and "agg". GPU i of machine m is always
// the (m * G + i)-th GPU in node order, so node order is rank order for plans over all GPUs.
#pragma once

#include <array>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/physical/graph.hpp"

namespace ccoll::physical {

// Most GPUs of a preset built by name: the torus's bound, and ten times a 10,000-GPU cluster
// (docs/topology.md, "Large clusters"). Graphs with a link per GPU pair (full<N>, pairwise
// clusters) have N^2 links and stop at kMaxPresetPairwiseGpus (4 million links).
inline constexpr long long kMaxPresetGpus = 1048576;
inline constexpr long long kMaxPresetPairwiseGpus = 2048;

namespace preset_detail {

inline std::string nid(const std::string& prefix, const char* kind, int i) {
  return prefix + kind + std::to_string(i);
}

struct MachineNodes {
  std::vector<int> gpus, pcie, cpus, nics;
};

// GPUs two per PCIe switch, switches split over `ncpu` CPUs joined by `cpu_GBps`, `nics_per_switch`
// NICs on every switch. Every PCIe link runs at `pcie_GBps`.
inline MachineNodes add_pcie_tree(PhysicalTopology& t, const std::string& host, int ngpu,
                                  int gpus_per_switch, int ncpu, double pcie_GBps, double cpu_GBps,
                                  int nics_per_switch) {
  const std::string p = host.empty() ? "" : host + ".";
  MachineNodes m;
  for (int g = 0; g < ngpu; ++g)
    m.gpus.push_back(t.add_node(nid(p, "gpu", g), NodeKind::gpu, host));
  const int nsw = (ngpu + gpus_per_switch - 1) / gpus_per_switch;
  for (int c = 0; c < ncpu; ++c)
    m.cpus.push_back(t.add_node(nid(p, "cpu", c), NodeKind::cpu, host));
  for (int c = 1; c < ncpu; ++c)
    t.add_link(m.cpus[0], m.cpus[static_cast<std::size_t>(c)], cpu_GBps, 1, 0.5, "qpi");
  for (int s = 0; s < nsw; ++s) {
    const int sw = t.add_node(nid(p, "pcie", s), NodeKind::switch_, host);
    m.pcie.push_back(sw);
    t.add_link(sw, m.cpus[static_cast<std::size_t>(s * ncpu / nsw)], pcie_GBps, 1, 0.5, "pcie");
    for (int g = s * gpus_per_switch; g < std::min(ngpu, (s + 1) * gpus_per_switch); ++g)
      t.add_link(m.gpus[static_cast<std::size_t>(g)], sw, pcie_GBps, 1, 0.5, "pcie");
    for (int k = 0; k < nics_per_switch; ++k) {
      const int nic = t.add_node(nid(p, "nic", s * nics_per_switch + k), NodeKind::nic, host);
      m.nics.push_back(nic);
      t.add_link(nic, sw, pcie_GBps, 1, 0.5, "pcie");
    }
  }
  return m;
}

// DGX-1 hybrid cube-mesh: lanes[i][j] NVLinks between GPUs i and j (nvidia-smi topo -m of a
// DGX-1V: NV1/NV2 entries). The P100 version has one lane on each of these 16 pairs.
inline constexpr std::array<std::array<int, 8>, 8> kDgx1vLanes{{
    {0, 1, 1, 2, 2, 0, 0, 0},
    {1, 0, 2, 1, 0, 2, 0, 0},
    {1, 2, 0, 2, 0, 0, 1, 0},
    {2, 1, 2, 0, 0, 0, 0, 1},
    {2, 0, 0, 0, 0, 1, 1, 2},
    {0, 2, 0, 0, 1, 0, 2, 1},
    {0, 0, 1, 0, 1, 2, 0, 2},
    {0, 0, 0, 1, 2, 1, 2, 0},
}};

inline void add_cube_mesh(PhysicalTopology& t, const std::vector<int>& gpus, double lane_GBps,
                          bool double_lanes) {
  for (int i = 0; i < 8; ++i)
    for (int j = i + 1; j < 8; ++j) {
      const int lanes = kDgx1vLanes[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      if (lanes > 0)
        t.add_link(gpus[static_cast<std::size_t>(i)], gpus[static_cast<std::size_t>(j)], lane_GBps,
                   double_lanes ? lanes : 1, 0.7, "nvlink");
    }
}

inline MachineNodes add_dgx1(PhysicalTopology& t, const std::string& host, bool volta) {
  auto m = add_pcie_tree(t, host, 8, 2, 2, 16.0, 20.0, 1);
  add_cube_mesh(t, m.gpus, volta ? 25.0 : 20.0, volta);
  return m;
}

// NVSwitch machine: every GPU joined to one switch node per baseboard with `lanes` NVLinks.
inline MachineNodes add_nvswitch_machine(PhysicalTopology& t, const std::string& host, int ngpu,
                                         int lanes, int boards, double pcie_GBps, double cpu_GBps,
                                         int nics_per_switch) {
  auto m = add_pcie_tree(t, host, ngpu, 2, 2, pcie_GBps, cpu_GBps, nics_per_switch);
  const std::string p = host.empty() ? "" : host + ".";
  std::vector<int> sw;
  sw.reserve(static_cast<std::size_t>(boards));
  for (int b = 0; b < boards; ++b)
    sw.push_back(t.add_node(nid(p, "nvswitch", b), NodeKind::switch_, host));
  for (int g = 0; g < ngpu; ++g)
    t.add_link(m.gpus[static_cast<std::size_t>(g)], sw[static_cast<std::size_t>(g * boards / ngpu)],
               25.0, lanes, 0.7, "nvlink");
  // DGX-2: 6 switches per board, 8 lanes each to the other board: 48 lanes.
  for (int b = 1; b < boards; ++b)
    t.add_link(sw[0], sw[static_cast<std::size_t>(b)], 25.0, 48, 0.3, "nvlink");
  return m;
}

}  // namespace preset_detail

// DGX-1 with P100 (NVLink1, 20 GB/s per lane, one lane per connected pair).
inline PhysicalTopology dgx1p() {
  PhysicalTopology t;
  t.name = "dgx1p";
  preset_detail::add_dgx1(t, "", false);
  return t;
}

// DGX-1 with V100 (NVLink2, 25 GB/s per lane, some pairs doubled: the hybrid cube-mesh of
// [C-Cube] Fig. 10(c)).
inline PhysicalTopology dgx1v() {
  PhysicalTopology t;
  t.name = "dgx1v";
  preset_detail::add_dgx1(t, "", true);
  return t;
}

// DGX-2: 16 V100 on two baseboards of NVSwitches, 6 lanes per GPU.
inline PhysicalTopology dgx2() {
  PhysicalTopology t;
  t.name = "dgx2";
  preset_detail::add_nvswitch_machine(t, "", 16, 6, 2, 16.0, 20.0, 1);
  return t;
}

// DGX A100: 8 A100, 12 NVLink3 lanes each to the NVSwitch fabric, PCIe Gen4, 8 HDR NICs.
inline PhysicalTopology dgx_a100() {
  PhysicalTopology t;
  t.name = "dgx-a100";
  preset_detail::add_nvswitch_machine(t, "", 8, 12, 1, 32.0, 64.0, 2);
  return t;
}

// DGX H100: 8 H100, 18 NVLink4 lanes each, PCIe Gen5, 8 NDR NICs.
inline PhysicalTopology dgx_h100() {
  PhysicalTopology t;
  t.name = "dgx-h100";
  preset_detail::add_nvswitch_machine(t, "", 8, 18, 1, 64.0, 64.0, 2);
  return t;
}

// A PCIe server: GPUs two per PCIe switch (Gen3 x16 by default), two CPUs joined by QPI when
// there are more than 4 GPUs, a NIC on every PCIe switch.
inline PhysicalTopology pcie_server(int ngpu = 8, double pcie_GBps = 16.0) {
  if (ngpu < 1) throw TopologyError("pcie_server: ngpu must be >= 1");
  PhysicalTopology t;
  t.name = std::string("pcie").append(std::to_string(ngpu));
  preset_detail::add_pcie_tree(t, "", ngpu, 2, ngpu > 4 ? 2 : 1, pcie_GBps, 20.0, 1);
  return t;
}

// AMD MI300X platform: 8 GPUs joined pairwise by one Infinity Fabric (xGMI) link each, 64 GB/s
// per direction (a full mesh, 7 links per GPU), every GPU behind its own PCIe Gen5 switch with a
// 400 Gb/s NIC, two CPUs.
inline PhysicalTopology mi300x() {
  PhysicalTopology t;
  t.name = "mi300x";
  const auto m = preset_detail::add_pcie_tree(t, "", 8, 1, 2, 64.0, 64.0, 1);
  for (std::size_t i = 0; i < m.gpus.size(); ++i)
    for (std::size_t j = i + 1; j < m.gpus.size(); ++j)
      t.add_link(m.gpus[i], m.gpus[j], 64.0, 1, 0.7, "xgmi");
  return t;
}

// GPUs only, in a ring: gpu i linked to gpu i + 1 (mod n) at `GBps` per direction. No switch,
// CPU or NIC: every pair that is not adjacent talks through the GPUs between them.
inline PhysicalTopology gpu_ring(int n, double GBps = 25.0) {
  if (n < 2 || n > kMaxPresetGpus)
    throw TopologyError("ring: from 2 to " + std::to_string(kMaxPresetGpus) + " GPUs");
  PhysicalTopology t;
  t.name = std::string("ring").append(std::to_string(n));
  for (int i = 0; i < n; ++i)
    t.add_node(std::string("gpu").append(std::to_string(i)), NodeKind::gpu);
  for (int i = 0; i < n; ++i)
    if (n > 2 || i == 0) t.add_link(i, (i + 1) % n, GBps, 1, 0.7, "link");
  return t;
}

// A 2D or 3D torus of GPUs only (TPU-style): every GPU linked to its neighbours one step away in
// each dimension, wrapping around; a dimension of 2 joins its pair once, a dimension of 1 adds
// nothing. GPU ids are "gpu" followed by the coordinates ("gpu1.3" in a 4x4 torus), in row-major
// order.
inline PhysicalTopology torus(const std::vector<int>& dims, double GBps = 25.0) {
  if (dims.size() < 2 || dims.size() > 3) throw TopologyError("torus: expected 2 or 3 dimensions");
  int n = 1;
  for (int d : dims) {
    if (d < 1 || d > 1024) throw TopologyError("torus: dimensions must be from 1 to 1024");
    n *= d;
  }
  if (n < 2 || n > 1048576) throw TopologyError("torus: from 2 to 1048576 GPUs");
  PhysicalTopology t;
  t.name = "torus";
  for (int d : dims) t.name.append(t.name == "torus" ? "" : "x").append(std::to_string(d));
  const auto coords = [&](int i) {
    std::vector<int> c(dims.size());
    for (std::size_t k = dims.size(); k-- > 0;) {
      c[k] = i % dims[k];
      i /= dims[k];
    }
    return c;
  };
  for (int i = 0; i < n; ++i) {
    std::string id = "gpu";
    const auto c = coords(i);
    for (std::size_t k = 0; k < c.size(); ++k) id.append(k ? "." : "").append(std::to_string(c[k]));
    t.add_node(std::move(id), NodeKind::gpu);
  }
  for (int i = 0; i < n; ++i) {
    int stride = 1;
    for (std::size_t k = dims.size(); k-- > 0;) {
      const int d = dims[k], c = (i / stride) % d;
      const int j = i - c * stride + ((c + 1) % d) * stride;  // the next one along dimension k
      if (d > 2 || (d == 2 && c == 0)) t.add_link(i, j, GBps, 1, 0.7, "link");
      stride *= d;
    }
  }
  return t;
}

// How the GPUs of a cluster machine are joined (besides the PCIe switch they all sit on).
enum class IntraConnect { pcie, nvlink, mesh, nvswitch };

// [TopoSync] Fig. 3: M machines with G GPUs each, one NIC per machine to a ToR switch, the ToR to
// an aggregation switch. PCIe machines join their GPUs and NIC through one PCIe switch at
// `intra_GBps` ([TopoSync]: 100 Gbps = 12.5 GB/s); NVLink machines add a DGX-1V cube mesh (G = 8)
// or a full mesh (G <= 4) at `nvlink_GBps` per lane on top of that PCIe switch.
//
// `mesh` machines join every GPU pair directly at `mesh_GBps` (an MI300X-style full mesh, any G);
// `nvswitch` machines join every GPU to one NVSwitch node with `nvswitch_lanes` NVLink lanes (a
// DGX H100-style machine, any G).
//
// `pairwise` builds [TopoSync]'s own abstraction instead (Sec. III-A and Fig. 3(d)): the graph's
// vertices are the workers, and every pair of workers is one duplex edge whose bandwidth is that
// of the path between them: NVLink lanes where a machine has them, `intra_GBps` (the PCIe path)
// for other pairs in a machine, `nic_GBps` for pairs in different machines. No switch or NIC is
// shared: a machine has G^2 (M - 1) edges to the other machines, each with the NIC's bandwidth.
// docs/repro-seed001.md compares the two models.
struct ClusterOptions {
  int machines = 4;
  int gpus_per_machine = 4;
  IntraConnect intra = IntraConnect::pcie;
  double intra_GBps = 12.5;   // PCIe, per direction
  double nvlink_GBps = 25.0;  // per lane (NVLink machines)
  double nic_GBps = 1.25;     // per direction (10 Gbps)
  bool pairwise = false;      // [TopoSync]'s worker-pair abstraction (see above)
  double mesh_GBps = 64.0;    // per direction between every GPU pair (mesh: MI300X's xGMI)
  int nvswitch_lanes = 18;    // NVLink lanes per GPU to the machine's NVSwitch (nvswitch: H100)
};

inline PhysicalTopology cluster(const ClusterOptions& o) {
  if (o.machines < 1 || o.gpus_per_machine < 1)
    throw TopologyError("cluster: machines and gpus_per_machine must be >= 1");
  // As longs: machines x gpus_per_machine overflows an int.
  const long long most = o.pairwise ? kMaxPresetPairwiseGpus : kMaxPresetGpus;
  if (static_cast<long long>(o.machines) * o.gpus_per_machine > most)
    throw TopologyError("cluster: at most " + std::to_string(most) + " GPUs" +
                        (o.pairwise ? " with pairwise" : "") + ", got " +
                        std::to_string(o.machines) + " x " + std::to_string(o.gpus_per_machine));
  if (o.intra == IntraConnect::nvlink && o.gpus_per_machine != 8 && o.gpus_per_machine > 4)
    throw TopologyError("cluster: NVLink machines have 8 GPUs (DGX-1 cube mesh) or at most 4");
  if (o.pairwise && (o.intra == IntraConnect::mesh || o.intra == IntraConnect::nvswitch))
    throw TopologyError("cluster: pairwise is for pcie and nvlink machines");
  PhysicalTopology t;
  t.name = std::string("cluster-").append(std::to_string(o.machines)) + "x" +
           std::to_string(o.gpus_per_machine) +
           (o.intra == IntraConnect::nvlink     ? "-nvlink"
            : o.intra == IntraConnect::mesh     ? "-mesh"
            : o.intra == IntraConnect::nvswitch ? "-nvswitch"
                                                : "-pcie") +
           (o.pairwise ? "-pairwise" : "");
  if (o.pairwise) {
    const int G = o.gpus_per_machine;
    for (int m = 0; m < o.machines; ++m)
      for (int g = 0; g < G; ++g)
        t.add_node(
            std::string("m").append(std::to_string(m)).append(".gpu").append(std::to_string(g)),
            NodeKind::gpu, std::string("m").append(std::to_string(m)));
    for (int a = 0; a < t.node_count(); ++a)
      for (int b = a + 1; b < t.node_count(); ++b) {
        const int ma = a / G, mb = b / G, ga = a % G, gb = b % G;
        if (ma != mb) {
          t.add_link(a, b, o.nic_GBps, 1, 4.0, "net");
          continue;
        }
        int lanes = 0;
        if (o.intra == IntraConnect::nvlink)
          lanes = G == 8 ? preset_detail::kDgx1vLanes[static_cast<std::size_t>(ga)]
                                                     [static_cast<std::size_t>(gb)]
                         : 1;
        if (lanes > 0)
          t.add_link(a, b, o.nvlink_GBps, lanes, 0.7, "nvlink");
        else
          t.add_link(a, b, o.intra_GBps, 1, 1.0, "pcie");
      }
    return t;
  }
  std::vector<preset_detail::MachineNodes> ms;
  for (int m = 0; m < o.machines; ++m) {
    const std::string host = std::string("m").append(std::to_string(m));
    auto mn = preset_detail::add_pcie_tree(t, host, o.gpus_per_machine, o.gpus_per_machine, 1,
                                           o.intra_GBps, 1.0, 1);
    if (o.intra == IntraConnect::mesh) {
      for (std::size_t i = 0; i < mn.gpus.size(); ++i)
        for (std::size_t j = i + 1; j < mn.gpus.size(); ++j)
          t.add_link(mn.gpus[i], mn.gpus[j], o.mesh_GBps, 1, 0.7, "xgmi");
    } else if (o.intra == IntraConnect::nvswitch) {
      const int sw = t.add_node(host + ".nvswitch0", NodeKind::switch_, host);
      for (int g : mn.gpus) t.add_link(g, sw, o.nvlink_GBps, o.nvswitch_lanes, 0.7, "nvlink");
    } else if (o.intra == IntraConnect::nvlink) {
      if (o.gpus_per_machine == 8) {
        preset_detail::add_cube_mesh(t, mn.gpus, o.nvlink_GBps, true);
      } else {
        for (std::size_t i = 0; i < mn.gpus.size(); ++i)
          for (std::size_t j = i + 1; j < mn.gpus.size(); ++j)
            t.add_link(mn.gpus[i], mn.gpus[j], o.nvlink_GBps, 1, 0.7, "nvlink");
      }
    }
    ms.push_back(std::move(mn));
  }
  const int tor = t.add_node("tor", NodeKind::switch_);
  const int agg = t.add_node("agg", NodeKind::switch_);
  for (const auto& m : ms) t.add_link(m.nics.front(), tor, o.nic_GBps, 1, 2.0, "net");
  t.add_link(tor, agg, o.nic_GBps * o.machines, 1, 2.0, "net");
  return t;
}

// Every pair of `n` GPUs joined directly by `GBps` per direction (tests, uniform clusters).
inline PhysicalTopology fully_connected(int n, double GBps = 10.0) {
  if (n > kMaxPresetPairwiseGpus)
    throw TopologyError("full: at most " + std::to_string(kMaxPresetPairwiseGpus) + " GPUs");
  PhysicalTopology t;
  t.name = std::string("full").append(std::to_string(n));
  for (int i = 0; i < n; ++i)
    t.add_node(std::string("gpu").append(std::to_string(i)), NodeKind::gpu);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) t.add_link(i, j, GBps, 1, 1.0, "link");
  return t;
}

// Names accepted by preset(): dgx1p, dgx1v (or dgx1), dgx2, dgx-a100, dgx-h100, mi300x, pcie4,
// pcie8, full<N>, ring:<N>, torus:<A>x<B>[x<C>], and
// cluster:<M>x<G>[:pcie|:nvlink|:mesh|:nvswitch][:<Gbps>][:pairwise] (NIC bandwidth in Gbit/s,
// default 10; pairwise: [TopoSync]'s worker-pair abstraction, see ClusterOptions).
inline PhysicalTopology preset(std::string_view name) {
  if (name == "mi300x") return mi300x();
  if (name == "dgx1p") return dgx1p();
  if (name == "dgx1v" || name == "dgx1") return dgx1v();
  if (name == "dgx2") return dgx2();
  if (name == "dgx-a100" || name == "dgxa100") return dgx_a100();
  if (name == "dgx-h100" || name == "dgxh100") return dgx_h100();
  if (name == "pcie4") return pcie_server(4);
  if (name == "pcie8") return pcie_server(8);
  // Bounded as it is read: an int that wrapped past 2^31 turned ring:4294967300 into ring:4.
  const auto to_int = [&](std::string_view s) {
    int v = 0;
    if (s.empty()) throw TopologyError("preset \"" + std::string(name) + "\": expected a number");
    for (char c : s) {
      if (c < '0' || c > '9')
        throw TopologyError("preset \"" + std::string(name) + "\": bad number \"" + std::string(s) +
                            "\"");
      if (v > (kMaxPresetGpus - (c - '0')) / 10)
        throw TopologyError("preset \"" + std::string(name) + "\": number \"" +
                            std::string(s.substr(0, 20)) + (s.size() > 20 ? "..." : "") +
                            "\" above " + std::to_string(kMaxPresetGpus));
      v = v * 10 + (c - '0');
    }
    return v;
  };
  if (name.substr(0, 4) == "full") return fully_connected(to_int(name.substr(4)));
  if (name.substr(0, 5) == "ring:") return gpu_ring(to_int(name.substr(5)));
  if (name.substr(0, 6) == "torus:") {
    std::vector<int> dims;
    std::string_view rest = name.substr(6);
    for (std::size_t pos; (pos = rest.find('x')) != std::string_view::npos;
         rest = rest.substr(pos + 1))
      dims.push_back(to_int(rest.substr(0, pos)));
    dims.push_back(to_int(rest));
    return torus(dims);
  }
  if (name.substr(0, 8) == "cluster:") {
    std::string_view rest = name.substr(8);
    std::vector<std::string_view> parts;
    for (std::size_t pos; (pos = rest.find(':')) != std::string_view::npos;
         rest = rest.substr(pos + 1))
      parts.push_back(rest.substr(0, pos));
    parts.push_back(rest);
    const auto x = parts[0].find('x');
    if (x == std::string_view::npos)
      throw TopologyError("preset \"" + std::string(name) + "\": expected cluster:<M>x<G>");
    ClusterOptions o;
    o.machines = to_int(parts[0].substr(0, x));
    o.gpus_per_machine = to_int(parts[0].substr(x + 1));
    for (std::size_t i = 1; i < parts.size(); ++i) {
      if (parts[i] == "pcie")
        o.intra = IntraConnect::pcie;
      else if (parts[i] == "nvlink")
        o.intra = IntraConnect::nvlink;
      else if (parts[i] == "mesh")
        o.intra = IntraConnect::mesh;
      else if (parts[i] == "nvswitch")
        o.intra = IntraConnect::nvswitch;
      else if (parts[i] == "pairwise")
        o.pairwise = true;
      else
        o.nic_GBps = to_int(parts[i]) / 8.0;
    }
    return cluster(o);
  }
  throw TopologyError("unknown topology preset \"" + std::string(name) +
                      "\" (dgx1p, dgx1v, dgx2, dgx-a100, dgx-h100, mi300x, pcie4, pcie8, "
                      "full<N>, ring:<N>, torus:<A>x<B>[x<C>], "
                      "cluster:<M>x<G>[:pcie|:nvlink|:mesh|:nvswitch][:<Gbps>][:pairwise])");
}

inline std::vector<std::string> preset_names() {
  return {"dgx1p",
          "dgx1v",
          "dgx2",
          "dgx-a100",
          "dgx-h100",
          "mi300x",
          "pcie4",
          "pcie8",
          "full8",
          "cluster:4x4:pcie:10",
          "cluster:8x8:nvlink:100",
          "ring:4",
          "torus:4x4",
          "torus:4x4x4",
          "cluster:4x8:mesh:400",
          "cluster:4x8:nvswitch:400"};
}

}  // namespace ccoll::physical
