// Tests for the physical topology model, presets, routes, loaders and DOT export.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/algo/embedding.hpp"
#include "ccoll/algo/hierarchical.hpp"
#include "ccoll/forest/dot.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/physical/json_loader.hpp"
#include "ccoll/physical/nccl_xml_loader.hpp"
#include "ccoll/physical/nvidia_smi_loader.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/sim/from_physical.hpp"
#include "topology_plan_runner.hpp"

namespace topology_test {
using namespace ccoll::physical;
using namespace ccoll::forest;
using namespace ccoll::solve;
using namespace ccoll::algo;

namespace {

int nvlink_lanes(const PhysicalTopology& t, int a, int b) {
  int lanes = 0;
  for (const auto& l : t.links)
    if (l.from == a && l.to == b && l.type == "nvlink") lanes += l.count;
  return lanes;
}

}  // namespace

TEST_CASE("presets: node counts, NVLink lanes per GPU, validation") {
  struct Expect {
    const char* name;
    int gpus;
    int lanes_per_gpu;  // NVLink lanes out of each GPU (0: PCIe only)
  };
  for (const Expect& e : {Expect{"dgx1p", 8, 4}, Expect{"dgx1v", 8, 6}, Expect{"dgx2", 16, 6},
                          Expect{"dgx-a100", 8, 12}, Expect{"dgx-h100", 8, 18},
                          Expect{"pcie4", 4, 0}, Expect{"pcie8", 8, 0}}) {
    CAPTURE(e.name);
    const auto t = preset(e.name);
    CHECK_NOTHROW(t.validate());
    CHECK(static_cast<int>(t.gpus().size()) == e.gpus);
    CHECK(static_cast<int>(t.active_nodes().size()) == e.gpus);
    for (int g : t.gpus()) {
      int lanes = 0;
      for (const auto& l : t.links)
        if (l.from == g && l.type == "nvlink") lanes += l.count;
      CHECK(lanes == e.lanes_per_gpu);
    }
    // Full duplex: every link has its reverse with the same capacity.
    for (const auto& l : t.links)
      CHECK(t.direct_capacity_GBps(l.to, l.from) == t.direct_capacity_GBps(l.from, l.to));
  }
}

TEST_CASE("presets: GPU-only graphs, MI300X and the cluster variants") {
  struct Expect {
    const char* name;
    int gpus;
    int gpu_links;  // links out of each GPU to other GPUs or to an NVSwitch
  };
  for (const Expect& e :
       {Expect{"ring:4", 4, 2}, Expect{"ring:2", 2, 1}, Expect{"torus:4x4", 16, 4},
        Expect{"torus:2x2x2", 8, 3}, Expect{"torus:3x3x3", 27, 6}, Expect{"mi300x", 8, 7},
        Expect{"cluster:2x8:mesh:400", 16, 7}, Expect{"cluster:2x4:nvswitch:400", 8, 1}}) {
    CAPTURE(e.name);
    const auto t = preset(e.name);
    CHECK_NOTHROW(t.validate());
    CHECK(static_cast<int>(t.gpus().size()) == e.gpus);
    for (int g : t.gpus()) {
      int n = 0;
      for (const auto& l : t.links)
        if (l.from == g &&
            (t.nodes[static_cast<std::size_t>(l.to)].kind == NodeKind::gpu ||
             t.nodes[static_cast<std::size_t>(l.to)].id.find("nvswitch") != std::string::npos))
          ++n;
      CHECK(n == e.gpu_links);
    }
    for (const auto& l : t.links)
      CHECK(t.direct_capacity_GBps(l.to, l.from) == t.direct_capacity_GBps(l.from, l.to));
  }
  CHECK(preset("torus:4x4").find("gpu3.2") >= 0);
  CHECK(preset("cluster:2x4:nvswitch:400").direct_capacity_GBps(0, 0) == 0);
  CHECK_THROWS_AS(preset("torus:4"), TopologyError);
  CHECK_THROWS_AS(preset("ring:1"), TopologyError);
  CHECK_THROWS_AS(preset("cluster:2x8:mesh:pairwise"), TopologyError);
}

TEST_CASE("routes: the fast reachability answer agrees with the route search") {
  std::vector<PhysicalTopology> graphs;
  for (const char* name : {"dgx1v", "dgx-h100", "mi300x", "ring:5", "torus:3x4",
                           "cluster:3x4:pcie:100", "cluster:2x8:nvlink:100"})
    graphs.push_back(preset(name));
  auto part = dgx1v();  // inactive GPUs are still compute nodes: they end routes
  part.set_active(std::vector<std::string>{"gpu0", "gpu5"});
  graphs.push_back(part);
  auto oneway = fully_connected(3);  // links in one direction only: searched, not indexed
  oneway.links.erase(std::remove_if(oneway.links.begin(), oneway.links.end(),
                                    [](const Link& l) { return l.from == 2 && l.to == 0; }),
                     oneway.links.end());
  graphs.push_back(oneway);
  for (const auto& t : graphs) {
    CAPTURE(t.name);
    const auto routes = all_routes(t);
    const Reachability reach(t);
    const Adjacency adj(t);
    for (int a : t.compute_nodes())
      for (int b : t.compute_nodes()) {
        if (a == b) continue;
        CAPTURE(a);
        CAPTURE(b);
        CHECK(reach.routable(a, b) == !routes(a, b).empty());
        CHECK(route(t, adj, a, b) == routes(a, b));  // the early-stopping search finds the same
      }
    if (reach.all_routable(t.compute_nodes()))
      for (int a : t.compute_nodes())
        for (int b : t.compute_nodes()) CHECK((a == b || !routes(a, b).empty()));
  }
  CHECK(Reachability(preset("cluster:2x4:pcie:100")).all_routable(preset("cluster:2x4").gpus()));
  CHECK_FALSE(Reachability(preset("ring:4")).all_routable({0, 1, 2, 3}));
}

TEST_CASE("dgx1v: the hybrid cube-mesh of [C-Cube] Fig. 10") {
  const auto t = dgx1v();
  const auto g = [&](int i) { return t.require("gpu" + std::to_string(i)); };
  CHECK(nvlink_lanes(t, g(2), g(3)) == 2);  // [C-Cube]: GPU2-GPU3 has two channels
  CHECK(nvlink_lanes(t, g(2), g(4)) == 0);  // the detour pair: no NVLink
  CHECK(nvlink_lanes(t, g(0), g(2)) == 1);
  CHECK(nvlink_lanes(t, g(0), g(4)) == 2);
  // Routes between NVLink neighbours are the direct link; GPU2 -> GPU4 goes through PCIe/CPU.
  const auto routes = all_routes(t);
  CHECK(routes(g(2), g(3)).size() == 1);
  CHECK(route_capacity_GBps(t, routes(g(2), g(3))) == doctest::Approx(50.0));
  const auto& r24 = routes(g(2), g(4));
  REQUIRE(r24.size() >= 3);
  for (std::size_t i = 0; i + 1 < r24.size(); ++i)
    CHECK(t.nodes[PhysicalTopology::idx(t.links[PhysicalTopology::idx(r24[i])].to)].kind !=
          NodeKind::gpu);
  CHECK(route_capacity_GBps(t, r24) < 25.0);
}

TEST_CASE("cluster preset: [TopoSync] Fig. 3 ToR and aggregation switch") {
  ClusterOptions o;
  o.machines = 4;
  o.gpus_per_machine = 4;
  o.nic_GBps = 1.25;
  const auto t = cluster(o);
  CHECK_NOTHROW(t.validate());
  CHECK(t.gpus().size() == 16);
  CHECK(t.find("tor") >= 0);
  CHECK(t.find("agg") >= 0);
  CHECK(t.nodes[PhysicalTopology::idx(t.gpus()[5])].id == "m1.gpu1");
  const auto routes = all_routes(t);
  const auto& r = routes(t.require("m0.gpu0"), t.require("m3.gpu2"));
  CHECK(route_capacity_GBps(t, r) == doctest::Approx(1.25));
  CHECK(route_capacity_GBps(t, routes(t.require("m0.gpu0"), t.require("m0.gpu3"))) ==
        doctest::Approx(12.5));
  // [TopoSync]'s own abstraction: one duplex edge per pair of workers, nothing shared.
  const auto pw = preset("cluster:3x8:nvlink:25:pairwise");
  CHECK(pw.node_count() == 24);
  CHECK(pw.gpus().size() == 24);
  const auto pr = all_routes(pw);
  for (int a = 0; a < 24; ++a)
    for (int b = 0; b < 24; ++b) {
      if (a == b) continue;
      REQUIRE(pr(a, b).size() == 1);
      const double cap = route_capacity_GBps(pw, pr(a, b));
      if (a / 8 != b / 8)
        CHECK(cap == doctest::Approx(25.0 / 8));
      else
        CHECK(cap == doctest::Approx(std::max(12.5, 25.0 * nvlink_lanes(pw, a, b))));
    }
  const auto big = preset("cluster:8x8:nvlink:100");
  CHECK(big.gpus().size() == 64);
  CHECK_NOTHROW(big.validate());
}

TEST_CASE("physical: clear errors") {
  PhysicalTopology t;
  t.add_node("gpu0", NodeKind::gpu);
  t.add_node("gpu1", NodeKind::gpu);
  t.add_node("gpu2", NodeKind::gpu);
  CHECK_THROWS_WITH_AS(t.add_link("gpu0", "gpu9", 10), doctest::Contains("gpu9"), TopologyError);
  CHECK_THROWS_WITH_AS(t.add_link("gpu0", "gpu1", -1), doctest::Contains("bandwidth"),
                       TopologyError);
  CHECK_THROWS_AS(t.add_node("gpu0", NodeKind::gpu), TopologyError);
  t.add_link("gpu0", "gpu1", 10);
  CHECK_THROWS_WITH_AS(t.validate(), doctest::Contains("gpu2"), TopologyError);
  t.set_active(std::vector<std::string>{"gpu0", "gpu1"});
  CHECK_NOTHROW(t.validate());
  CHECK_THROWS_WITH_AS(preset("dgx9"), doctest::Contains("dgx9"), TopologyError);
}

namespace {

std::string data(const char* name) {
  return std::string(CCOLL_SOURCE_DIR) + "/data/topologies/" + name;
}

// The NVLink lanes between GPU i and GPU j of a loaded DGX-1V, as a matrix.
std::vector<std::vector<int>> lane_matrix(const PhysicalTopology& t) {
  std::vector<std::vector<int>> m(8, std::vector<int>(8, 0));
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      if (i != j)
        m[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = nvlink_lanes(
            t, t.require("gpu" + std::to_string(i)), t.require("gpu" + std::to_string(j)));
  return m;
}

}  // namespace

TEST_CASE("json loader: the documented format, defaults, round trip") {
  const auto t = load_topology_json(data("small4.json"));
  CHECK(t.name == "small4");
  CHECK(t.gpus().size() == 4);
  CHECK(t.direct_capacity_GBps(t.require("gpu0"), t.require("gpu1")) == doctest::Approx(50));
  CHECK(t.direct_capacity_GBps(t.require("gpu1"), t.require("gpu0")) == doctest::Approx(50));
  const auto back = topology_from_json(topology_to_json(t));
  CHECK(back.links.size() == t.links.size());
  CHECK(back.nodes.size() == t.nodes.size());
  // Plain string nodes are gpus and all active.
  const auto plain = topology_from_json(nlohmann::json::parse(
      R"({"nodes": ["a", "b"], "links": [{"a": "a", "b": "b", "bandwidth_GBps": 5, "duplex": false},
                                          {"a": "b", "b": "a", "bandwidth_GBps": 3, "duplex": false}]})"));
  CHECK(plain.active_nodes().size() == 2);
  CHECK(plain.direct_capacity_GBps(1, 0) == doctest::Approx(3));
  const auto two = load_topology_json(data("two_machines.json"));
  CHECK(two.active_nodes().size() == 3);
}

TEST_CASE("json loader: clear errors name the node or link") {
  const auto load = [](const char* text) {
    return topology_from_json(nlohmann::json::parse(text));
  };
  CHECK_THROWS_WITH_AS(
      load(R"({"nodes": ["g0", "g1"], "links": [{"a": "g0", "b": "g7", "bandwidth_GBps": 1}]})"),
      doctest::Contains("unknown node \"g7\""), TopologyError);
  CHECK_THROWS_WITH_AS(
      load(R"({"nodes": ["g0", "g1"], "links": [{"a": "g0", "b": "g1", "bandwidth_GBps": -2}]})"),
      doctest::Contains("g0-g1"), TopologyError);
  CHECK_THROWS_WITH_AS(
      load(
          R"({"nodes": ["g0", "g1", "g2"], "links": [{"a": "g0", "b": "g1", "bandwidth_GBps": 2}]})"),
      doctest::Contains("\"g2\" is disconnected"), TopologyError);
  CHECK_THROWS_WITH_AS(load(R"({"nodes": ["g0"], "active": ["g5"]})"), doctest::Contains("g5"),
                       TopologyError);
  // The active set: each a worker, once.
  const char* const star =
      R"({"nodes": ["a", "b", {"id": "s", "kind": "switch"}], "links": [)"
      R"({"a": "a", "b": "s", "bandwidth_GBps": 1}, {"a": "b", "b": "s", "bandwidth_GBps": 1}],)";
  CHECK_THROWS_WITH_AS(load((std::string(star) + R"("active": ["a", "a", "b"]})").c_str()),
                       doctest::Contains("\"a\" is listed twice"), TopologyError);
  CHECK_THROWS_WITH_AS(load((std::string(star) + R"("active": ["a", "s"]})").c_str()),
                       doctest::Contains("\"s\" is a switch"), TopologyError);
  CHECK(load((std::string(star) + R"("active": ["a", "b"]})").c_str()).active_nodes().size() == 2);
  CHECK_THROWS_WITH_AS(load(R"({"nodes": [{"id": "x", "kind": "toaster"}]})"),
                       doctest::Contains("toaster"), std::invalid_argument);
  CHECK_THROWS_AS(load_topology_json(data("no_such_file.json")), TopologyError);
}

TEST_CASE("NCCL topology XML and nvidia-smi topo -m of a DGX-1V give its NVLink graph") {
  const auto expect = lane_matrix(dgx1v());
  const auto xml = load_topology_nccl_xml(data("dgx1v_nccl_topo.xml"));
  CHECK(xml.gpus().size() == 8);
  CHECK(lane_matrix(xml) == expect);
  CHECK(xml.find("cpu0") >= 0);
  CHECK(xml.find("cpu1") >= 0);
  CHECK(xml.find("nic0") >= 0);
  const auto smi = load_topology_nvidia_smi(data("dgx1v_nvidia_smi_topo.txt"));
  CHECK(smi.gpus().size() == 8);
  CHECK(lane_matrix(smi) == expect);
  // GPU0 and GPU1 share a PCIe switch; GPU0 -> GPU5 crosses the CPUs.
  const auto routes = all_routes(smi);
  CHECK(routes(smi.require("gpu0"), smi.require("gpu5")).size() ==
        5);  // via pcie, cpu0, cpu1, pcie
  for (const auto* t : {&xml, &smi}) {
    const auto r = all_routes(*t);
    CHECK(route_capacity_GBps(*t, r(t->require("gpu2"), t->require("gpu4"))) < 25);
  }
  CHECK_THROWS_AS(topology_from_nccl_xml("<system><cpu numaid=\"0\"></system>"), TopologyError);
  CHECK_THROWS_AS(topology_from_nvidia_smi("nothing here"), TopologyError);
  // The file forms name the topology after the file, and name the format of a file they miss.
  CHECK(xml.name == "dgx1v_nccl_topo.xml");
  CHECK(smi.name == "dgx1v_nvidia_smi_topo.txt");
  CHECK_THROWS_WITH_AS(load_topology_nccl_xml(data("no_such_file.xml")),
                       doctest::Contains("cannot open NCCL topology file"), TopologyError);
  CHECK_THROWS_WITH_AS(load_topology_nvidia_smi(data("no_such_file.txt")),
                       doctest::Contains("cannot open nvidia-smi topology file"), TopologyError);
}

TEST_CASE("DOT export names every node and link") {
  const auto t = dgx1v();
  const auto dot = to_dot(t);
  CHECK(dot.rfind("graph ", 0) == 0);
  for (const auto& n : t.nodes) CHECK(dot.find("\"" + n.id + "\"") != std::string::npos);
  CHECK(dot.find("25x2") != std::string::npos);
  const auto c = to_dot(cluster(ClusterOptions{}));
  CHECK(c.find("subgraph cluster_") != std::string::npos);
}

TEST_CASE("rings embedded on the fastest links") {
  const auto t = dgx1v();
  const auto e = embed_rings(t);
  REQUIRE(!e.rings.empty());
  // A ring on the doubled lanes (twice) and one on the single lanes: 3 x 25 GB/s per direction,
  // used both ways, so all 6 lanes of every GPU.
  CHECK(e.rings.size() == 3);
  for (double w : e.bandwidth_GBps) CHECK(w == doctest::Approx(25.0));
  for (const auto& r : e.rings) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      const int a = e.nodes[static_cast<std::size_t>(r[i])],
                b = e.nodes[static_cast<std::size_t>(r[(i + 1) % r.size()])];
      CHECK(nvlink_lanes(t, a, b) > 0);
    }
  }
  const auto p = embed_rings(pcie_server(8));
  CHECK(p.rings.size() >= 1);
  topology_test::verify_and_run([&](const ccoll::plan::PlanRequest& r) { return ring_plan(e, r); },
                                2003);
  auto part = dgx1v();
  part.set_active(std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu3"});
  const auto q = embed_rings(part);
  CHECK(q.bandwidth_GBps.front() == doctest::Approx(25.0));
  topology_test::verify_and_run([&](const ccoll::plan::PlanRequest& r) { return ring_plan(q, r); },
                                999);
}

TEST_CASE("double binary tree with detours ([C-Cube] Sec. IV-A)") {
  const auto t = dgx1v();
  const auto d = double_binary_tree_with_detours(t);
  CHECK(d.nactive == 8);
  REQUIRE(!d.detours.empty());
  const auto routes = all_routes(t);
  for (const auto& det : d.detours) {
    const int c = d.rank_node[static_cast<std::size_t>(det.child)],
              p = d.rank_node[static_cast<std::size_t>(det.parent)];
    CHECK(nvlink_lanes(t, c, p) == 0);  // detours only where no NVLink joins the pair
    CHECK(nvlink_lanes(t, c, det.relay_node) > 0);
    CHECK(nvlink_lanes(t, det.relay_node, p) > 0);
  }
  // Every remaining tree edge is an NVLink, and the two trees (which run at the same time) never
  // put two edges on one link in the same direction: a relay is chosen where its links are free.
  std::vector<int> up(t.links.size(), 0);
  for (const auto& tree : d.trees)
    for (std::size_t r = 0; r < tree.reduce_parent.size(); ++r)
      if (tree.reduce_parent[r] >= 0) {
        const int a = d.rank_node[r],
                  b = d.rank_node[static_cast<std::size_t>(tree.reduce_parent[r])];
        CHECK(nvlink_lanes(t, a, b) > 0);
        for (int l : routes(a, b)) ++up[static_cast<std::size_t>(l)];
      }
  CHECK(*std::max_element(up.begin(), up.end()) == 1);
  for (bool overlap : {false, true})
    topology_test::verify_and_run(
        [&](const ccoll::plan::PlanRequest& r) {
          auto req = r;
          req.overlap = overlap;
          return detour_tree_plan(d, req);
        },
        1500);
}

TEST_CASE("pack_single_root: Edmonds' bound on small graphs, never over capacity") {
  // Four GPUs, every ordered pair joined by 10 GB/s: three edge-disjoint in-trees reach the root,
  // and the root's three in-links cap any packing at 30 GB/s.
  const auto full = fully_connected(4, 10.0);
  const auto fr = all_routes(full);
  const auto loads_ok = [](const PhysicalTopology& t, const RouteTable& routes,
                           const std::vector<int>& nodes, const std::vector<RootedTree>& trees) {
    std::vector<double> load(t.links.size(), 0.0);
    for (const auto& tr : trees)
      for (std::size_t i = 0; i < tr.parent.size(); ++i)
        if (tr.parent[i] >= 0)
          for (int l : routes(nodes[i], nodes[static_cast<std::size_t>(tr.parent[i])]))
            load[static_cast<std::size_t>(l)] += tr.weight_GBps;
    for (std::size_t l = 0; l < load.size(); ++l)
      CHECK(load[l] <= t.links[l].capacity_GBps() * (1 + 1e-9));
  };
  for (int root = 0; root < 4; ++root) {
    const std::vector<int> nodes{0, 1, 2, 3};
    const auto trees = pack_single_root(full, fr, nodes, root);
    double total = 0;
    for (const auto& tr : trees) {
      total += tr.weight_GBps;
      CHECK(tr.parent[static_cast<std::size_t>(root)] == -1);
    }
    CHECK(total == doctest::Approx(30.0).epsilon(0.05));
    loads_ok(full, fr, nodes, trees);
  }
  // GPUs behind one PCIe switch: every tree edge crosses the switch, the root's downlink caps the
  // packing at one link's 12.5 GB/s, which chains reach and stars (12.5 / 3) do not.
  const auto star = cluster(ClusterOptions{1, 4, IntraConnect::pcie, 12.5, 25.0, 1.25});
  const auto sr = all_routes(star);
  const auto gpus = star.gpus();
  const auto trees = pack_single_root(star, sr, gpus, 0);
  double total = 0;
  for (const auto& tr : trees) total += tr.weight_GBps;
  CHECK(total == doctest::Approx(12.5).epsilon(0.05));
  loads_ok(star, sr, gpus, trees);
  CHECK(pack_single_root(star, sr, {gpus[0]}, 0).size() == 1);
}

TEST_CASE("Blink-like and NCCL 2.4 hierarchical trees ([TopoSync]'s baselines)") {
  for (const char* name :
       {"cluster:2x4:pcie:10", "cluster:3x4:nvlink:25", "cluster:4x8:nvlink:100"}) {
    CAPTURE(name);
    auto t = preset(name);
    const auto b = blink_trees(t);
    const auto M = b.machines.size();
    CHECK(b.rank_node == t.active_nodes());
    double share = 0;
    for (const auto& tr : b.trees) {
      share += tr.share;
      // The reduce chain of roots ends at the tree's root; the all-gather chain runs the other way.
      const auto j = static_cast<std::size_t>(
          std::find_if(b.machines.begin(), b.machines.end(),
                       [&](const auto& m) { return m.front() == tr.root; }) -
          b.machines.begin());
      REQUIRE(j < M);
      for (std::size_t k = 0; k < M; ++k) {
        if (k == j) continue;
        const auto rk = static_cast<std::size_t>(b.machines[k].front());
        CHECK(tr.reduce_parent[rk] == b.machines[(k + 1) % M].front());
        CHECK(tr.broadcast_parent[rk] == b.machines[(k + M - 1) % M].front());
      }
      // Inside a machine, parents stay inside it.
      for (const auto& m : b.machines)
        for (std::size_t i = 1; i < m.size(); ++i) {
          const int p = tr.reduce_parent[static_cast<std::size_t>(m[i])];
          CHECK(std::find(m.begin(), m.end(), p) != m.end());
        }
    }
    CHECK(share == doctest::Approx(1.0));
    const auto h = nccl_hierarchical_trees(t);
    REQUIRE(h.trees.size() == 2);
    for (const auto& tr : h.trees) {
      CHECK(tr.share == 0.5);
      for (const auto& m : h.machines)
        for (std::size_t i = 1; i < m.size(); ++i)
          CHECK(tr.reduce_parent[static_cast<std::size_t>(m[i])] == m[i - 1]);
    }
    CHECK(h.trees[0].root != h.trees[1].root);
  }
  // Partial active workers ([TopoSync] Fig. 5): machines with 1, 2, 3 and 4 active GPUs.
  auto t = preset("cluster:4x4:pcie:10");
  t.set_active(std::vector<std::string>{"m0.gpu0", "m1.gpu0", "m1.gpu2", "m2.gpu1", "m2.gpu2",
                                        "m2.gpu3", "m3.gpu0", "m3.gpu1", "m3.gpu2", "m3.gpu3"});
  const auto b = blink_trees(t);
  REQUIRE(b.machines.size() == 4);
  CHECK(b.machines[0].size() == 1);
  CHECK(b.machines[3].size() == 4);
  for (const auto& hb : {b, nccl_hierarchical_trees(t)})
    for (bool overlap : {false, true})
      topology_test::verify_and_run(
          [&](const ccoll::plan::PlanRequest& r) {
            auto req = r;
            req.nranks = static_cast<ccoll::plan::Rank>(hb.rank_node.size());
            req.overlap = overlap;
            return ccoll::plan::build_trees(req, hb.trees,
                                            std::vector<bool>(hb.rank_node.size(), true));
          },
          1201);
}

TEST_CASE("parallel links: one link per ordered pair, of the summed capacity, from every source") {
  // Graph construction: a second link joins the first as more lanes.
  PhysicalTopology t;
  t.add_node("a", NodeKind::gpu);
  t.add_node("b", NodeKind::gpu);
  t.add_link(0, 1, 25, 1, 0.7, "nvlink");
  t.add_link(0, 1, 25, 1, 0.7, "nvlink");
  REQUIRE(t.links.size() == 2);
  CHECK(t.links[0].count == 2);
  CHECK(t.links[0].bandwidth_GBps == 25);
  CHECK(t.direct_capacity_GBps(0, 1) == doctest::Approx(50));
  CHECK(t.direct_capacity_GBps(1, 0) == doctest::Approx(50));
  // Unequal lanes: the capacity adds up, the latency is the larger one, the type the first one.
  t.add_link(0, 1, 10, 3, 2.0, "pcie", false);
  REQUIRE(t.links.size() == 2);
  CHECK(t.link_between(0, 1) == 0);
  CHECK(t.links[0].count == 5);
  CHECK(t.links[0].capacity_GBps() == doctest::Approx(80));
  CHECK(t.links[0].latency_us == 2.0);
  CHECK(t.links[0].type == "nvlink");
  CHECK(t.direct_capacity_GBps(1, 0) == doctest::Approx(50));
  // Routes, the simulator's network and DOT see that one link.
  CHECK(route_capacity_GBps(t, route(t, Adjacency(t), 0, 1)) == doctest::Approx(80));
  const auto net = ccoll::sim::to_network(t);
  CHECK(net.links.size() == 2);
  CHECK(to_dot(t).find("\"a\" -- \"b\" [label=\"16x5\"") != std::string::npos);
  // A list edited in place is re-indexed.
  t.links.erase(t.links.begin());
  CHECK(t.link_between(0, 1) == -1);
  CHECK(t.link_between(1, 0) == 0);
  t.add_link(0, 1, 25, 1, 0.7, "nvlink", false);
  CHECK(t.links.size() == 2);
  CHECK(t.link_between(0, 1) == 1);

  // JSON: a pair listed twice is the pair listed once with both lanes.
  const auto twice = topology_from_json(nlohmann::json::parse(
      R"({"nodes": ["g0", "g1", "g2"], "links": [{"a": "g0", "b": "g1", "bandwidth_GBps": 25},
          {"a": "g1", "b": "g0", "bandwidth_GBps": 25}, {"a": "g1", "b": "g2", "bandwidth_GBps": 5}]})"));
  const auto once = topology_from_json(nlohmann::json::parse(
      R"({"nodes": ["g0", "g1", "g2"], "links": [{"a": "g0", "b": "g1", "bandwidth_GBps": 25,
          "count": 2}, {"a": "g1", "b": "g2", "bandwidth_GBps": 5}]})"));
  REQUIRE(twice.links.size() == once.links.size());
  for (std::size_t i = 0; i < once.links.size(); ++i) {
    CHECK(twice.links[i].from == once.links[i].from);
    CHECK(twice.links[i].to == once.links[i].to);
    CHECK(twice.links[i].count == once.links[i].count);
    CHECK(twice.links[i].capacity_GBps() == once.links[i].capacity_GBps());
  }
  CHECK(topology_to_json(twice) == topology_to_json(once));
  // Merged lanes beyond what one entry may hold are written as several entries, read back as one.
  PhysicalTopology wide;
  wide.add_node("g0", NodeKind::gpu);
  wide.add_node("g1", NodeKind::gpu);
  wide.add_link("g0", "g1", 2.0, kMaxLinkCount);
  wide.add_link("g0", "g1", 2.0, kMaxLinkCount);
  wide.add_link("g1", "g0", 2.0, 5, 0, {}, false);
  const auto wide_back = topology_from_json(topology_to_json(wide));
  REQUIRE(wide_back.links.size() == 2);
  CHECK(wide_back.links[0].count == 2 * kMaxLinkCount);
  CHECK(wide_back.links[1].count == 2 * kMaxLinkCount + 5);
  CHECK(wide_back.direct_capacity_GBps(1, 0) == doctest::Approx(wide.direct_capacity_GBps(1, 0)));

  // NCCL XML: NVLinks to several NVSwitch chips (one switch node here) add up, and so do a peer
  // listed twice; the figures match nvidia-smi's lane count.
  const std::string xml =
      "<system version=\"1\"><cpu numaid=\"0\">"
      "<pci busid=\"0000:01:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<gpu dev=\"0\" sm=\"80\">"
      "<nvlink target=\"0000:a0:00.0\" count=\"2\" tclass=\"0x068000\"/>"
      "<nvlink target=\"0000:a1:00.0\" count=\"2\" tclass=\"0x068000\"/>"
      "<nvlink target=\"0000:02:00.0\" count=\"1\" tclass=\"0x030200\"/>"
      "<nvlink target=\"0000:02:00.0\" count=\"1\" tclass=\"0x030200\"/></gpu></pci>"
      "<pci busid=\"0000:02:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
      "<gpu dev=\"1\" sm=\"80\">"
      "<nvlink target=\"0000:a0:00.0\" count=\"2\" tclass=\"0x068000\"/>"
      "<nvlink target=\"0000:a1:00.0\" count=\"2\" tclass=\"0x068000\"/>"
      "<nvlink target=\"0000:01:00.0\" count=\"2\" tclass=\"0x030200\"/></gpu></pci>"
      "</cpu></system>";
  const auto x = topology_from_nccl_xml(xml);
  const int g0 = x.require("gpu0"), g1 = x.require("gpu1"), sw = x.require("nvswitch");
  for (const auto& [a, b] : std::vector<std::pair<int, int>>{{g0, sw}, {sw, g0}, {g1, sw}}) {
    REQUIRE(x.link_between(a, b) >= 0);
    CHECK(x.links[static_cast<std::size_t>(x.link_between(a, b))].count == 4);
    CHECK(x.direct_capacity_GBps(a, b) == doctest::Approx(100));
  }
  CHECK(x.direct_capacity_GBps(g0, g1) == doctest::Approx(50));
  CHECK(x.direct_capacity_GBps(g1, g0) == doctest::Approx(50));
  std::set<std::pair<int, int>> pairs;
  for (const auto& l : x.links) CHECK(pairs.insert({l.from, l.to}).second);
  const auto smi = topology_from_nvidia_smi(
      "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV2\t0-7\t0\nGPU1\tNV2\t X "
      "\t0-7\t0\n");
  CHECK(smi.direct_capacity_GBps(smi.require("gpu0"), smi.require("gpu1")) == doctest::Approx(50));
  // Presets list each pair once: doubled NVLinks are a count.
  for (const char* name : {"dgx1v", "dgx2", "cluster:2x8:nvlink", "torus:2x4", "ring:2"}) {
    CAPTURE(name);
    const auto p = preset(name);
    std::set<std::pair<int, int>> seen;
    for (const auto& l : p.links) CHECK(seen.insert({l.from, l.to}).second);
  }
}
}  // namespace topology_test
