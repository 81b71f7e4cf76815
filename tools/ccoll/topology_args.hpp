// tools/ccoll/topology_args.hpp: what `ccoll plan` and `ccoll simulate` share -- options, the
// topology (file, preset or uniform network), plan construction per algorithm, prediction, and
// JSON / DOT / text rendering. Header-only so that tests/cli_test.cpp exercises the same code.
#pragma once

#include <algorithm>
#include <any>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// GCC 12 at -O3 reports a false -Wrestrict (GCC bug 105329) inside physical::cluster()'s
// "m" + std::to_string(m) once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "ccoll/physical/load.hpp"
#include "ccoll/physical/presets.hpp"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include "ccoll/algo/registry.hpp"
#include "ccoll/forest/packed_forest.hpp"
#include "ccoll/forest/to_plan.hpp"
#include "ccoll/model/alpha_beta.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/direct.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/sim/chrome_trace.hpp"
#include "ccoll/sim/from_physical.hpp"
#include "ccoll/sim/simulator.hpp"
#include "cli_common.hpp"

namespace ccoll::cli {

struct Options {
  std::string topology;  // FILE (JSON, NCCL XML, nvidia-smi) | PRESET | uniform:P[:GBps[:us]]
  std::vector<std::string> algos{"forest"};
  std::vector<std::string> active;  // node ids; empty: the topology's default
  bool overlap = false;
  std::vector<double> bytes{64.0 * 1024 * 1024};
  bool json = false, dot = false, csv = false;
  std::string trace;  // Chrome trace output file (simulate)
  std::size_t elem_size = 4;
  std::uint32_t chunks = 0;      // 0: the cost model's optimum
  std::uint64_t slot_bytes = 0;  // 0: large enough that chunking follows the model only
  std::uint32_t nslots = 4;
  double alpha_us = -1;    // chunk model latency; < 0: from the topology
  double reduce_GBps = 0;  // reduction throughput per rank; 0: free
  double step_overhead_us = 0;
  int max_links = 12;  // links listed by `simulate` (by utilisation)
  // forest, blink, hdbtree: cut trees into about this many equal-rate channels; the default lets
  // the planner choose channels and chunks (forest::tree_plan_shape).
  int split = forest::kAutoSplit;
  // --collective, --root: what the plans compute (plan/collective.hpp).
  plan::Collective collective = plan::Collective::allreduce;
  int root = 0;
};

// Limits on the inputs of `plan` and `simulate` (docs/reliability-tools.md): each bounds the
// memory or time one option can make the CLI spend, so that a typo or a hostile value is a usage
// error rather than memory exhaustion, a hang or a silent wrong result.
inline constexpr double kMaxBytes = 1125899906842624.0;   // --bytes: 2^50 (1 PiB)
inline constexpr double kMaxSlotBytes = 1099511627776.0;  // --slot-bytes: 2^40
inline constexpr int kMaxChunks = 65536;                  // --chunks
inline constexpr int kMaxSplit = 4096;                    // --split
inline constexpr int kMaxSlots = 4096;                    // --nslots
inline constexpr int kMaxUniformRanks = 4096;             // uniform:P
inline constexpr int kMaxGraphRanks = 1024;  // fullN, cluster:MxG (M*G) and active nodes of a graph
inline constexpr int kMaxForestCompleteRanks = 32;  // forest on uniform:P or fullN
// Plans above this many steps (channels x ranks x steps per rank, estimated before building) are
// refused: a step costs about 110 bytes between the plan and the simulation, so about 0.45 GB.
inline constexpr double kMaxPlanSteps = 4194304.0;  // 2^22

// Sizes: plain numbers (1e6, 1330000000) or with a binary suffix K, M, G (16K = 16384), at least
// one element (`min`) and at most `max`; errors name `flag`.
inline double parse_bytes(const std::string& s, const std::string& flag = "--bytes", double min = 1,
                          double max = kMaxBytes) {
  if (s.empty()) throw UsageError(flag + ": empty size");
  const std::optional<double> v = parse_scaled_size(s);
  if (!v || !(*v > 0))
    throw UsageError(flag + ": expected a positive size like 1048576, 64M or 1.33e9, got \"" + s +
                     "\"");
  char range[128];
  std::snprintf(range, sizeof range, "from %.0f to %.0f bytes", min, max);
  if (*v < min || *v > max)
    throw UsageError(flag + ": expected a size " + range + ", got \"" + s + "\"");
  return *v;
}

// An --algo name: a registered algorithm (algo/registry.hpp), optionally with -overlap or -phased.
inline algo::AlgorithmSpec find_algo(const std::string& name) {
  return find_algorithm(name, [&](const std::string& names) {
    return "--algo: unknown algorithm \"" + name + "\" (expected one of " + names +
           ", optionally with -overlap or -phased)";
  });
}

inline Options parse_options(const std::vector<std::string>& args) {
  Options o;
  const auto value = [&](std::size_t& i) -> const std::string& {
    if (i + 1 >= args.size()) throw UsageError(args[i] + ": missing value");
    return args[++i];
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--topology") {
      o.topology = value(i);
    } else if (a == "--algo") {
      o.algos = split_list(value(i), a);
      for (const auto& al : o.algos) find_algo(al);
      if (o.algos.empty()) throw UsageError("--algo: expected one of " + algo::algorithm_names());
    } else if (a == "--active") {
      o.active = split_list(value(i), a);
    } else if (a == "--collective") {
      const std::string& v = value(i);
      bool known = false;
      for (plan::Collective c :
           {plan::Collective::allreduce, plan::Collective::reduce_scatter,
            plan::Collective::all_gather, plan::Collective::broadcast, plan::Collective::reduce})
        if (v == plan::collective_name(c)) {
          o.collective = c;
          known = true;
        }
      if (!known)
        throw UsageError(
            "--collective: expected allreduce, reduce_scatter, all_gather, broadcast or reduce, "
            "got \"" +
            v + "\"");
    } else if (a == "--root") {
      o.root = static_cast<int>(parse_integer(a, value(i), 0, kMaxGraphRanks - 1));
    } else if (a == "--overlap") {
      o.overlap = true;
    } else if (a == "--bytes") {
      o.bytes.clear();
      for (const auto& b : split_list(value(i), a))
        o.bytes.push_back(parse_bytes(b, a, static_cast<double>(o.elem_size)));
      if (o.bytes.empty()) throw UsageError("--bytes: expected at least one size");
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--dot") {
      o.dot = true;
    } else if (a == "--csv") {
      o.csv = true;
    } else if (a == "--trace") {
      o.trace = value(i);
    } else if (a == "--chunks") {
      o.chunks = static_cast<std::uint32_t>(parse_integer(a, value(i), 0, kMaxChunks));
    } else if (a == "--slot-bytes") {
      o.slot_bytes = static_cast<std::uint64_t>(
          parse_bytes(value(i), a, static_cast<double>(o.elem_size), kMaxSlotBytes));
    } else if (a == "--nslots") {
      o.nslots = static_cast<std::uint32_t>(parse_integer(a, value(i), 1, kMaxSlots));
    } else if (a == "--alpha-us") {  // < 0: from the topology
      o.alpha_us = parse_bounded(a, value(i), -1e300, 1e9);
    } else if (a == "--reduce-GBps") {  // 0: free
      o.reduce_GBps = parse_bounded(a, value(i), 0, 1e9);
    } else if (a == "--step-overhead-us") {
      o.step_overhead_us = parse_bounded(a, value(i), 0, 1e9);
    } else if (a == "--split") {
      o.split = static_cast<int>(parse_integer(a, value(i), 0, kMaxSplit));
    } else if (a == "--links") {
      o.max_links = static_cast<int>(parse_integer(a, value(i), 0, 1000000));
    } else {
      throw UsageError("unknown option \"" + a + "\" (see --help)");
    }
  }
  if (o.topology.empty()) throw UsageError("--topology FILE|PRESET is required");
  if (static_cast<int>(o.json) + static_cast<int>(o.dot) + static_cast<int>(o.csv) > 1)
    throw UsageError("--json, --dot and --csv are exclusive");
  if (!plan::has_root(o.collective) && o.root != 0)
    throw UsageError("--root: only with --collective broadcast or reduce");
  return o;
}

// Topology input ------------------------------------------------------------------------------
// A file is read by its first character (physical::topology_from_file_text, physical/load.hpp:
// JSON, NCCL's XML dump or `nvidia-smi topo -m`; docs/formats.md), anything else is a preset, and
// uniform:P[:GBps[:us]] is a network of P ranks with a link per ordered pair and no graph.
struct Setup {
  std::string name;
  std::optional<physical::PhysicalTopology> topo;  // absent for uniform networks
  sim::Network net;
  int uniform_ranks = 0;
  double uniform_GBps = 0, uniform_latency_us = 0;
};

// A decimal integer made of digits only (no sign, no exponent), or -1 (also past 10^9).
inline long preset_integer(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// The parameters of the preset families full<N> and cluster:<M>x<G>[...] (physical/presets.hpp),
// checked against the CLI's limits before the preset is built: a bad one is a usage error, in the
// style of uniform:P's. Other names are left to physical::preset.
inline void check_preset_parameters(const std::string& name) {
  const auto bad = [&](const std::string& what) {
    return UsageError("--topology " + what + ", got \"" + name + "\"");
  };
  if (name.rfind("full", 0) == 0 && name.size() > 4 &&
      std::isdigit(static_cast<unsigned char>(name[4]))) {
    const long n = preset_integer(std::string_view(name).substr(4));
    if (n < 1 || n > kMaxGraphRanks)
      throw bad("fullN: N must be an integer from 1 to " + std::to_string(kMaxGraphRanks));
    return;
  }
  if (name.rfind("ring:", 0) == 0) {
    const long n = preset_integer(std::string_view(name).substr(5));
    if (n < 2 || n > kMaxGraphRanks)
      throw bad("ring:N: N must be an integer from 2 to " + std::to_string(kMaxGraphRanks));
    return;
  }
  if (name.rfind("torus:", 0) == 0) {
    std::vector<long> dims;
    std::stringstream ss(name.substr(6));
    for (std::string x; std::getline(ss, x, 'x');) dims.push_back(preset_integer(x));
    long n = 1;
    for (long d : dims) n = d < 1 || n > kMaxGraphRanks ? -1 : n * d;
    if (dims.size() < 2 || dims.size() > 3 || n < 2 || n > kMaxGraphRanks)
      throw bad("torus:AxB[xC]: two or three integer dimensions >= 1, from 2 to " +
                std::to_string(kMaxGraphRanks) + " GPUs in all");
    return;
  }
  if (name.rfind("cluster:", 0) != 0) return;
  std::vector<std::string> parts;
  std::stringstream ss(name.substr(8));
  for (std::string x; std::getline(ss, x, ':');) parts.push_back(x);
  const std::string shape =
      "cluster:MxG[:pcie|:nvlink|:mesh|:nvswitch][:Gbps][:pairwise]: M and G must be integers >= "
      "1 with M*G <= " +
      std::to_string(kMaxGraphRanks);
  if (parts.empty() || parts[0].find('x') == std::string::npos) throw bad(shape);
  const auto x = parts[0].find('x');
  const long m = preset_integer(std::string_view(parts[0]).substr(0, x));
  const long g = preset_integer(std::string_view(parts[0]).substr(x + 1));
  if (m < 1 || g < 1 || m * g > kMaxGraphRanks) throw bad(shape);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "pcie" || parts[i] == "nvlink" || parts[i] == "mesh" ||
        parts[i] == "nvswitch" || parts[i] == "pairwise")
      continue;
    const long gbps = preset_integer(parts[i]);
    if (gbps < 1 || gbps > 1000000)
      throw bad("cluster:...:Gbps: the NIC bandwidth must be an integer from 1 to 1000000 Gbit/s");
  }
}

inline Setup load_setup(const Options& o) {
  Setup s;
  s.name = o.topology;
  if (o.topology.rfind("uniform:", 0) == 0) {
    std::vector<std::string> p;
    std::stringstream ss(o.topology.substr(8));
    for (std::string x; std::getline(ss, x, ':');) p.push_back(x);
    const auto bad = [&](const std::string& what) {
      return UsageError("--topology " + what + ", got \"" + o.topology + "\"");
    };
    if (p.empty() || p.size() > 3) throw bad("uniform:P[:GBps[:latency_us]]");
    const double P = parse_number("--topology uniform:P", p[0]);
    if (P < 2 || P > kMaxUniformRanks || P != std::floor(P))
      throw bad("uniform:P: P must be an integer from 2 to " + std::to_string(kMaxUniformRanks));
    s.uniform_ranks = static_cast<int>(P);
    s.uniform_GBps = p.size() > 1 ? parse_number("--topology uniform GBps", p[1]) : 10.0;
    s.uniform_latency_us = p.size() > 2 ? parse_number("--topology uniform latency_us", p[2]) : 5.0;
    if (!(s.uniform_GBps > 0) || s.uniform_GBps > 1e9)
      throw bad("uniform:P:GBps: GBps must be > 0 and <= 1e9");
    if (s.uniform_latency_us < 0 || s.uniform_latency_us > 1e9)
      throw bad("uniform:P:GBps:latency_us: latency_us must be >= 0 and <= 1e9");
    s.net =
        sim::uniform_network(s.uniform_ranks, s.uniform_GBps * 1e9, s.uniform_latency_us * 1e-6);
    if (!o.active.empty()) throw UsageError("--active: not supported on uniform networks");
    return s;
  }
  // A path that exists is a file to read, even one that is a directory (an error naming it),
  // never a preset of the same name.
  std::error_code exists_error;
  if (std::filesystem::exists(o.topology, exists_error)) {
    s.topo = physical::topology_from_file_text(read_text_file(o.topology), o.topology);
  } else {
    check_preset_parameters(o.topology);
    try {
      s.topo = physical::preset(o.topology);
    } catch (const physical::TopologyError& e) {
      if (o.topology.rfind("cluster:", 0) == 0 || o.topology.rfind("full", 0) == 0)
        throw UsageError("--topology \"" + o.topology + "\": " + e.what());  // a preset's parameter
      throw physical::TopologyError("--topology: \"" + o.topology +
                                    "\" is neither a readable file nor a preset (" + e.what() +
                                    ")");
    }
  }
  if (!o.active.empty()) s.topo->set_active(o.active);
  // Every active node reaches every other one through some nodes (validate); pairs that no
  // route joins are bridged by relay ranks on the GPUs between them (algo/relay_routing.hpp).
  s.topo->validate();
  const auto active = s.topo->active_nodes();
  if (active.size() > static_cast<std::size_t>(kMaxGraphRanks))
    throw physical::TopologyError("--topology: " + std::to_string(active.size()) +
                                  " active nodes, more than the CLI's limit of " +
                                  std::to_string(kMaxGraphRanks) + " (narrow them with --active)");
  s.net = sim::to_network(*s.topo);
  return s;
}

// Plans --------------------------------------------------------------------------------------
// Every plan comes from the algorithm registry (algo/registry.hpp): the CLI makes
// the registered algorithm for the topology (or for P abstract ranks on uniform:P), builds its plan
// with the request below, and takes the physical node of each rank from it. What it reports beyond
// the plan (trees, rings, the forest's solution) is read from the same registered object.

struct TreeOut {
  std::string root;
  std::string phase;        // "reduce" | "broadcast"
  double share = 0;         // fraction of the elements
  double weight_GBps = -1;  // the planner's rate for this tree (forest); < 0: from the prediction
  std::vector<std::pair<std::string, std::string>> edges;  // direction data flows
};

struct Built {
  std::string algo;      // the name given to --algo
  bool overlap = false;  // the schedule planned (--overlap, or the name's -overlap / -phased)
  plan::Plan plan;
  std::vector<int> rank_node;  // network node of each rank
  std::vector<std::string> rank_id;
  int hosted_relays = 0;  // relay ranks whose programs run in the ranks on their GPUs
  std::vector<TreeOut> trees;
  std::vector<std::vector<std::string>> rings;
  std::optional<forest::PackedForest> forest;  // the forest the plan was built from
  double estimated_steps = 0;                  // estimate_plan_size's, made before building
  std::vector<std::string> warnings;           // for stderr: choices that cost predicted time
};

inline plan::PlanRequest make_request(const Options& o, const Setup& s, int nranks, double bytes) {
  if (plan::has_root(o.collective) && o.root >= nranks)
    throw UsageError("--root: expected a rank from 0 to " + std::to_string(nranks - 1) +
                     " (the plan's ranks), got " + std::to_string(o.root));
  plan::PlanRequest req;
  req.nranks = nranks;
  req.elem_size = o.elem_size;
  req.count = static_cast<std::uint64_t>(std::llround(bytes / static_cast<double>(o.elem_size)));
  req.overlap = o.overlap;
  req.collective = o.collective;
  req.root = o.root;
  // Reduce-scatter and all-gather cut the buffer into one block per active rank (relays through
  // inactive nodes hold none): whole blocks only.
  if (plan::has_blocks(o.collective)) {
    const auto blocks =
        static_cast<std::uint64_t>(s.topo ? std::max<std::size_t>(1, s.topo->active_nodes().size())
                                          : static_cast<std::size_t>(nranks));
    req.count = std::max<std::uint64_t>(1, req.count / blocks) * blocks;
  }
  req.nchunks = o.chunks;
  req.nslots = o.nslots;
  req.slot_bytes = o.slot_bytes ? o.slot_bytes : std::uint64_t{1} << 40;
  // Chunk model: the slowest link a plan connection may cross and its latency.
  double alpha_us = 5, gbps = 10;
  if (s.topo) {
    double lat = 0, bw = std::numeric_limits<double>::infinity();
    for (const auto& l : s.topo->links) {
      lat = std::max(lat, l.latency_us);
      bw = std::min(bw, l.capacity_GBps());
    }
    alpha_us = 2 * lat;
    gbps = bw;
  } else {
    alpha_us = s.uniform_latency_us;
    gbps = s.uniform_GBps;
  }
  if (o.alpha_us >= 0) alpha_us = o.alpha_us;
  req.alpha_s = std::max(alpha_us, 1e-3) * 1e-6;
  req.beta_s_per_byte = 1.0 / (gbps * 1e9);
  return req;
}

// The registered algorithm `spec` for the CLI's topology: on a graph, the graph; on uniform:P,
// P abstract ranks, except for algorithms planned on a graph: the forest then plans on
// physical::fully_connected(P) (the uniform network as a graph), the others are usage errors.
inline algo::Registered make_registered(const Options& o, const Setup& s,
                                        const algo::AlgorithmSpec& spec, const std::string& name) {
  algo::AlgorithmRequest ar;
  ar.split = o.split;
  std::optional<physical::PhysicalTopology> full;
  if (s.topo) {
    ar.topology = &*s.topo;
  } else if (!spec.algorithm.needs_topology) {
    ar.nranks = s.uniform_ranks;
  } else if (spec.algorithm.name == "forest") {
    full = physical::fully_connected(s.uniform_ranks, s.uniform_GBps);
    ar.topology = &*full;
  } else {
    throw UsageError("--algo " + name +
                     ": needs a topology with machines (a file or a preset), not uniform:P");
  }
  return algo::make_algorithm(spec.algorithm, ar);  // copies what it keeps of the topology
}

// `ids`: the name of each rank the parents index (the plan's ranks when null).
inline void add_parent_tree(Built& b, plan::Rank root, const std::vector<plan::Rank>& parent,
                            const char* phase, double share,
                            const std::vector<std::string>* ids = nullptr) {
  const std::vector<std::string>& rank_id = ids != nullptr ? *ids : b.rank_id;
  TreeOut t;
  t.root = rank_id[static_cast<std::size_t>(root)];
  t.phase = phase;
  t.share = share;
  const bool reduce = std::string(phase) == "reduce";
  for (std::size_t r = 0; r < parent.size(); ++r) {
    if (parent[r] < 0) continue;
    const auto& child = rank_id[r];
    const auto& par = rank_id[static_cast<std::size_t>(parent[r])];
    t.edges.emplace_back(reduce ? child : par, reduce ? par : child);
  }
  b.trees.push_back(std::move(t));
}

// The trees (or rings) of the plan just built, for the report.
inline void add_report(Built& b, const algo::Registered& reg, const plan::PlanRequest& req,
                       const physical::PhysicalTopology* graph) {
  const plan::Rank P = req.nranks;
  const std::string& algo = reg.name;
  if (const auto* e = std::any_cast<std::shared_ptr<const algo::EmbeddedRings>>(&reg.details())) {
    for (const auto& ring : (*e)->rings)  // each ring both ways (algo::ring_plan)
      for (int dir = 0; dir < (ring.size() > 2 ? 2 : 1); ++dir) {
        b.rings.emplace_back();
        for (std::size_t i = 0; i < ring.size(); ++i)
          b.rings.back().push_back(
              b.rank_id[static_cast<std::size_t>(ring[dir ? ring.size() - 1 - i : i])]);
      }
  } else if (const auto* d =
                 std::any_cast<std::shared_ptr<const algo::DetourTrees>>(&reg.details())) {
    // The trees' ranks include their detours' relays, which may run inside other ranks: named
    // by their GPUs.
    std::vector<std::string> ids;
    for (int n : (*d)->rank_node)
      ids.push_back(graph != nullptr ? graph->nodes[static_cast<std::size_t>(n)].id
                                     : std::to_string(n));
    for (const auto& t : (*d)->trees) {
      add_parent_tree(b, t.root, t.reduce_parent, "reduce", t.share, &ids);
      add_parent_tree(b, t.root, t.reduce_parent, "broadcast", t.share, &ids);
    }
  } else if (algo == "ring") {
    // plan::build_ring's rings: ranks in order, odd channels reversed.
    for (std::uint32_t c = 0; c < std::max<std::uint32_t>(1, req.nchannels); ++c) {
      b.rings.emplace_back();
      for (plan::Rank r = 0; r < P; ++r)
        b.rings.back().push_back(b.rank_id[static_cast<std::size_t>(c % 2 ? P - 1 - r : r)]);
    }
  } else if (algo == "dbtree") {
    const auto [t1, t2] = plan::double_binary_tree_parents(P);
    for (const auto* t : {&t1, &t2}) {
      const auto root = static_cast<plan::Rank>(std::find(t->begin(), t->end(), -1) - t->begin());
      add_parent_tree(b, root, *t, "reduce", 0.5);
      add_parent_tree(b, root, *t, "broadcast", 0.5);
    }
  } else if (algo == "tree") {
    const auto parent = plan::binary_tree_parents(P);
    add_parent_tree(b, 0, parent, "reduce", 1.0);
    add_parent_tree(b, 0, parent, "broadcast", 1.0);
  } else if (algo == "ps") {
    for (const auto& t : algo::ParameterServer::stars(P)) {
      add_parent_tree(b, t.root, t.reduce_parent, "reduce", 1.0 / P);
      add_parent_tree(b, t.root, t.reduce_parent, "broadcast", 1.0 / P);
    }
  } else if (const auto* h =
                 std::any_cast<std::shared_ptr<const algo::HierarchicalTrees>>(&reg.details())) {
    for (const auto& t : (*h)->trees) {  // blink, hdbtree: the trees before --split cuts them
      add_parent_tree(b, t.root, t.reduce_parent, "reduce", t.share);
      add_parent_tree(b, t.root, t.broadcast_parent.empty() ? t.reduce_parent : t.broadcast_parent,
                      "broadcast", t.share);
    }
  } else if (const auto* pf = std::any_cast<algo::PackedForest>(&reg.details())) {
    // Solved (and cached) by the build just done: reduce-scatter and all-gather plan one stage's
    // trees of the equal-share forest (forest/equal_share.hpp), the others the allreduce forest.
    const bool blocked = req.collective != plan::Collective::allreduce;
    const bool scatter = plan::reduces(req.collective);
    const int root_node =
        plan::has_root(req.collective) ? pf->rank_node()[static_cast<std::size_t>(req.root)] : -1;
    b.forest = blocked ? pf->equal_share(
                             scatter ? forest::ShareStage::reduce : forest::ShareStage::broadcast,
                             root_node)
                       : pf->forest(req.overlap);
    const auto& topo = pf->physical();
    double total = 0;
    for (const auto& p : b.forest->pairs) total += p.weight_GBps;
    for (const auto& ft : b.forest->trees()) {
      if (blocked && (ft.phase == forest::TreePhase::reduce) != scatter) continue;
      TreeOut t;
      t.root = topo.nodes[static_cast<std::size_t>(ft.root)].id;
      t.phase = ft.phase == forest::TreePhase::reduce ? "reduce" : "broadcast";
      t.weight_GBps = ft.weight_GBps;
      t.share = total > 0 && std::isfinite(total) ? ft.weight_GBps / total : 1.0;
      for (const auto& [from, to] : ft.edges)
        t.edges.emplace_back(topo.nodes[static_cast<std::size_t>(from)].id,
                             topo.nodes[static_cast<std::size_t>(to)].id);
      b.trees.push_back(std::move(t));
    }
  }
}

// Plan size ---------------------------------------------------------------------------------
// An estimate of the plan's steps from the request, made before building it: channels x ranks x
// steps per rank (steps per chunk x chunks per channel), with the builders' own chunk rules
// (plan/chunking.hpp, plan/direct.hpp) and, for trees, a balanced tree's depth. Rings and direct
// plans take 2P - 1 steps per rank and chunk, one-shot 2, recursive doubling about log2 P + 2;
// trees take about 2 (reduce and broadcast) per rank,
// chunk and tree; the forest, Blink and hdbtree have about --split trees (2P with --split 0).
struct PlanSize {
  double channels = 1;  // trees or rings, each with its share of the data (tree channels, not
                        // the overlapped schedule's two per tree)
  double ranks = 1;
  double steps_per_chunk = 1;  // per rank and channel
  double chunks = 1;           // per channel
  bool chunks_from_option = false, chunks_from_slots = false, channels_from_split = false;
  double steps() const { return channels * ranks * steps_per_chunk * chunks; }
};

// `ring_channels`: the channels of a ring embedded in a graph (each ring both ways; 0: one).
inline PlanSize estimate_plan_size(const Options& o, const std::string& requested, int nranks,
                                   const plan::PlanRequest& req, int ring_channels = 0) {
  // auto builds the plan of the algorithm its table picks for this size.
  const std::string algorithm =
      requested == "auto"
          ? algo::BySize{}
                .choose(std::max(1, nranks), req.count * req.elem_size, req.collective)
                .algorithm
          : requested;
  PlanSize z;
  const double P = std::max(1, nranks);
  z.ranks = P;
  const std::uint64_t up = static_cast<std::uint64_t>(P);
  const double depth = 1 + std::ceil(std::log2(P));
  std::uint64_t pieces = 1;
  double fill = 2 * depth, per_chunk = req.overlap ? 1 : 2;
  if (algorithm == "ring" || algorithm == "direct") {
    z.channels = algorithm == "ring" ? std::max(1, ring_channels) : 1;
    z.steps_per_chunk = 2 * P - 1;
    pieces = up;
    fill = 0;
  } else if (algorithm == "ps") {
    z.channels = P;  // one star per rank, 1/P of the data each
    z.steps_per_chunk = 2;
    fill = 2;
  } else if (algorithm == "oneshot" || algorithm == "recdoubling") {
    z.channels = 1;  // whole messages, one after the other: no pipeline to fill
    z.steps_per_chunk = algorithm == "oneshot" ? 2 : 1 + std::floor(std::log2(P)) + 1;
    fill = 0;
  } else if (algorithm == "tree" || algorithm == "dbtree") {
    z.channels = algorithm == "dbtree" ? 2 : 1;
    z.steps_per_chunk = 2;
  } else {  // forest, blink, hdbtree and anything else made of trees on a graph
    z.channels = o.split > 0 ? o.split : 2 * P;
    z.channels_from_split = o.split > 0;
    z.steps_per_chunk = 2;
  }
  const auto elems = static_cast<std::uint64_t>(
      std::max(1.0, static_cast<double>(req.count) / std::max(1.0, z.channels)));
  const std::uint64_t slot_elems = req.slot_bytes / std::max<std::size_t>(1, req.elem_size);
  const std::uint64_t by_slots = plan::min_chunks_for_slots(elems, pieces, slot_elems);
  std::uint64_t k = 0;
  if (algorithm == "direct") {
    k = plan::direct_chunks(req, elems);
  } else if (algorithm == "oneshot" || algorithm == "recdoubling") {
    k = std::min(elems, std::max<std::uint64_t>(req.nchunks, by_slots));  // their builders' rule
  } else {  // fill 0: the ring's model optimum is one chunk
    k = plan::resolve_chunks(req, elems, pieces, fill, per_chunk);
  }
  z.chunks = static_cast<double>(k);
  z.chunks_from_slots = k == by_slots && by_slots > 1;
  z.chunks_from_option = !z.chunks_from_slots && req.nchunks > 1 && k > 1;
  return z;
}

// Refuses a plan whose estimate is above kMaxPlanSteps, saying which options would shrink it.
inline void check_plan_size(const std::string& name, const PlanSize& z) {
  if (z.steps() <= kMaxPlanSteps) return;
  std::vector<std::string> levers;
  if (z.chunks_from_option) levers.push_back("lower --chunks");
  if (z.chunks_from_slots) levers.push_back("raise --slot-bytes or lower --bytes");
  if (z.channels_from_split) levers.push_back("lower --split");
  if (!z.chunks_from_option && !z.chunks_from_slots && z.chunks > 64)
    levers.push_back("raise --alpha-us (the chunk model's latency) or set --chunks");
  if (z.steps_per_chunk > 2) levers.push_back("use a tree algorithm (--algo tree, dbtree)");
  levers.push_back("use fewer ranks (--topology, --active)");
  std::string advice;
  for (std::size_t i = 0; i < levers.size(); ++i)
    advice += (i == 0 ? "" : i + 1 == levers.size() ? " or " : ", ") + levers[i];
  char buf[256];
  std::snprintf(buf, sizeof buf,
                ": the plan would have about %.3g steps (%.0f channels x %.0f ranks x %.0f steps "
                "per rank), more than the limit of %.0f; ",
                z.steps(), z.channels, z.ranks, z.steps_per_chunk * z.chunks, kMaxPlanSteps);
  throw UsageError("--algo " + name + buf + advice);
}

// The trees a tree-set algorithm (forest, blink, hdbtree) cuts into channels, before cutting; the
// forest is solved here (and cached for the build). Empty for other algorithms.
inline std::optional<std::vector<plan::TreeSpec>> tree_set_specs(const algo::Registered& reg,
                                                                 const plan::PlanRequest& req) {
  if (const auto* pf = std::any_cast<algo::PackedForest>(&reg.details()))
    return forest::forest_tree_specs(pf->forest(req.overlap), pf->ranks());
  if (const auto* h = std::any_cast<std::shared_ptr<const algo::HierarchicalTrees>>(&reg.details()))
    return (*h)->trees;
  return std::nullopt;
}

// The size of a tree set's default plan, whose channels and chunks the planner chooses within
// forest::kDefaultPlanSteps (forest::tree_plan_shape, as the build does); only an explicit
// --chunks or --slot-bytes can take it over the limit. When that budget, not the chunk model, sets
// the chunks, `warnings` says so.
inline PlanSize shaped_plan_size(const std::string& name, const std::vector<plan::TreeSpec>& specs,
                                 const plan::PlanRequest& req, std::vector<std::string>& warnings) {
  const forest::TreePlanShape shape = forest::tree_plan_shape(specs, req, forest::kAutoSplit);
  PlanSize z;
  z.channels = shape.channels / (req.overlap ? 2 : 1);
  z.chunks = static_cast<double>(shape.chunks);
  z.steps_per_chunk = 2;
  z.ranks = shape.steps / std::max(1.0, z.channels * z.steps_per_chunk * z.chunks);
  z.chunks_from_option = req.nchunks > 1;
  z.chunks_from_slots = !z.chunks_from_option && z.steps() > forest::kDefaultPlanSteps;
  if (shape.limited && shape.cost > 1 + forest::kChunkTimeSlack + 1e-9) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "--algo %s: the default plan is kept within %.0f steps: %.0f channels x %.0f "
                  "chunks, where the chunk model asks for %.0f per channel (more time in "
                  "pipeline fill); --chunks and --split choose them",
                  name.c_str(), forest::kDefaultPlanSteps, shape.channels, z.chunks,
                  static_cast<double>(shape.wanted_chunks));
    warnings.emplace_back(buf);
  }
  return z;
}

inline Built build(const Options& o, const Setup& s, const std::string& name, double bytes) {
  const algo::AlgorithmSpec spec = find_algo(name);
  if (spec.algorithm.name == "forest" && s.uniform_ranks > kMaxForestCompleteRanks)
    throw UsageError("--algo " + name + ": the forest plans uniform:P on the complete graph of P " +
                     "nodes, whose solve grows fast: P must be at most " +
                     std::to_string(kMaxForestCompleteRanks) + ", got " +
                     std::to_string(s.uniform_ranks));
  if (spec.algorithm.name == "forest" && s.topo && o.topology.rfind("full", 0) == 0 &&
      s.topo->active_nodes().size() > static_cast<std::size_t>(kMaxForestCompleteRanks))
    throw UsageError("--algo " + name + ": the forest on the complete graph " + o.topology +
                     " grows fast: at most full" + std::to_string(kMaxForestCompleteRanks));
  const algo::Registered reg = make_registered(o, s, spec, name);
  Built b;
  b.algo = name;
  if (s.topo) {
    b.rank_node = reg.rank_node();
    for (int n : b.rank_node) b.rank_id.push_back(s.topo->nodes[static_cast<std::size_t>(n)].id);
  } else {
    const int P = reg.nranks() > 0 ? reg.nranks() : s.uniform_ranks;
    for (int r = 0; r < P; ++r) {
      b.rank_node.push_back(r);
      b.rank_id.push_back(s.net.nodes[static_cast<std::size_t>(r)].name);
    }
  }
  auto req = make_request(o, s, static_cast<int>(b.rank_node.size()), bytes);
  // The CLI's schedule is --overlap (phased without it); a name's -overlap or -phased overrides it.
  if (spec.algorithm.name != name) req.overlap = spec.overlap;
  b.overlap = req.overlap;
  int ring_channels = 0;
  if (const auto* e = std::any_cast<std::shared_ptr<const algo::EmbeddedRings>>(&reg.details()))
    for (const auto& ring : (*e)->rings) ring_channels += ring.size() > 2 ? 2 : 1;
  PlanSize size = estimate_plan_size(o, spec.algorithm.name, static_cast<int>(b.rank_node.size()),
                                     req, ring_channels);
  if (o.split < 0)
    if (const auto specs = tree_set_specs(reg, req))
      size = shaped_plan_size(name, *specs, req, b.warnings);
  check_plan_size(name, size);
  b.estimated_steps = size.steps();
  b.plan = reg.build(req);
  if (b.plan.collective != o.collective)
    throw UsageError("--algo " + name + " plans no " +
                     std::string(plan::collective_name(o.collective)) +
                     " (docs/collectives.md lists the plans of each collective)");
  b.hosted_relays = reg.hosted_relays;
  add_report(b, reg, req, s.topo ? &*s.topo : nullptr);
  return b;
}

// Prediction ---------------------------------------------------------------------------------

struct Prediction {
  double bytes = 0;
  double time_s = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  sim::SimResult sim;
};

inline Prediction predict(const Options& o, const Setup& s, const Built& b, double bytes,
                          bool trace = false) {
  sim::SimOptions so;
  so.elem_size = o.elem_size;
  so.reduce_Bps = o.reduce_GBps * 1e9;
  so.step_overhead_s = o.step_overhead_us * 1e-6;
  so.record_trace = trace;
  Prediction p;
  p.bytes = static_cast<double>(b.plan.count) * static_cast<double>(o.elem_size);
  p.sim = sim::simulate(b.plan, s.net, b.rank_node, so);
  p.time_s = p.sim.time_s;
  if (p.time_s > 0) {
    p.algbw_GBps = p.bytes / p.time_s / 1e9;
    p.busbw_GBps = p.algbw_GBps * plan::bus_factor(b.plan.collective, b.plan.nactive());
  }
  (void)bytes;
  return p;
}

// Rendering ----------------------------------------------------------------------------------

inline nlohmann::json plan_json(const Built& b, const Prediction& p) {
  nlohmann::json j;
  j["algorithm"] = b.algo;
  j["overlap"] = b.overlap;
  j["ranks"] = b.rank_id;
  std::vector<bool> act(b.plan.active.begin(), b.plan.active.end());
  j["active"] = nlohmann::json::array();
  for (std::size_t r = 0; r < act.size(); ++r)
    if (act[r]) j["active"].push_back(b.rank_id[r]);
  j["trees"] = nlohmann::json::array();
  for (const auto& t : b.trees) {
    nlohmann::json e = nlohmann::json::array();
    for (const auto& [from, to] : t.edges) e.push_back({from, to});
    j["trees"].push_back(
        {{"root", t.root},
         {"phase", t.phase},
         {"share", t.share},
         {"weight_GBps", t.weight_GBps >= 0 ? t.weight_GBps : t.share * p.algbw_GBps},
         {"edges", e}});
  }
  if (!b.rings.empty()) j["rings"] = b.rings;
  if (b.forest) {
    // One active rank moves nothing: its rates and bound are null (not inf and -1), and pruning
    // gave up nothing.
    const bool moves = b.forest->active.size() > 1;
    const auto rate = [moves](double GBps) {
      return moves ? nlohmann::json(GBps) : nlohmann::json();
    };
    j["forest"] = {{"schedule", forest::to_string(b.forest->schedule)},
                   {"method", forest::to_string(b.forest->method)},
                   {"total_GBps", rate(b.forest->total_GBps)},
                   {"optimum_found_GBps", rate(b.forest->optimum_found_GBps)},
                   {"prune_loss", moves ? b.forest->prune_loss() : 0.0},
                   {"upper_bound_GBps", rate(b.forest->upper_bound_GBps)},
                   {"exact_oracle", b.forest->exact_oracle},
                   {"pairs", b.forest->pairs.size()},
                   {"planning_s", b.forest->seconds},
                   // A reduce-scatter or all-gather is one stage of |C| / P per root, a broadcast
                   // or reduce one of |C| from its root.
                   {"bandwidth_only_time_s", b.plan.collective != plan::Collective::allreduce
                                                 ? p.bytes / (b.forest->total_GBps * 1e9)
                                                 : b.forest->time_s(p.bytes)}};
  }
  std::uint64_t steps = 0;
  for (const auto& ch : b.plan.channels)
    for (const auto& pr : ch.programs) steps += pr.steps.size();
  j["plan"] = {{"name", b.plan.algorithm},
               {"nranks", b.plan.nranks},
               {"hosted_relays", b.hosted_relays},
               {"channels", b.plan.channels.size()},
               {"connections", b.plan.connections.size()},
               {"steps", steps},
               {"estimated_steps", b.estimated_steps}};
  j["predicted"] = {{"bytes", p.bytes},
                    {"time_s", p.time_s},
                    {"algbw_GBps", p.algbw_GBps},
                    {"busbw_GBps", p.busbw_GBps},
                    {"turnaround_s", p.sim.turnaround_s}};
  return j;
}

// Graphviz: the physical links (grey) and every tree edge (one colour per tree, dashed for
// broadcast trees), labelled with the tree's weight.
inline std::string plan_dot(const Setup& s, const Built& b, const Prediction& p) {
  static const char* colours[] = {"red",   "blue",  "darkgreen", "orange", "purple",
                                  "brown", "cyan4", "magenta",   "gold3",  "navy"};
  std::ostringstream os;
  os << "digraph ccoll {\n  rankdir=LR;\n  node [shape=box, fontsize=10];\n";
  if (s.topo) {
    for (std::size_t n = 0; n < s.topo->nodes.size(); ++n) {
      const auto& node = s.topo->nodes[n];
      os << "  \"" << node.id
         << "\" [shape=" << (s.topo->is_compute(static_cast<int>(n)) ? "box" : "ellipse")
         << (s.topo->is_active(static_cast<int>(n)) ? ", style=bold" : ", style=dashed") << "];\n";
    }
    for (const auto& l : s.topo->links)
      if (l.from < l.to)
        os << "  \"" << s.topo->nodes[static_cast<std::size_t>(l.from)].id << "\" -> \""
           << s.topo->nodes[static_cast<std::size_t>(l.to)].id
           << "\" [dir=none, color=grey80, label=\"" << l.capacity_GBps() << "\", fontsize=8];\n";
  }
  for (std::size_t i = 0; i < b.trees.size(); ++i) {
    const auto& t = b.trees[i];
    const double w = t.weight_GBps >= 0 ? t.weight_GBps : t.share * p.algbw_GBps;
    for (const auto& [from, to] : t.edges)
      os << "  \"" << from << "\" -> \"" << to << "\" [color=" << colours[i % 10]
         << (t.phase == "broadcast" ? ", style=dashed" : "") << ", tooltip=\"" << t.phase << " "
         << t.root << " " << w << " GB/s\"];\n";
  }
  for (const auto& ring : b.rings)
    for (std::size_t i = 0; i < ring.size(); ++i)
      os << "  \"" << ring[i] << "\" -> \"" << ring[(i + 1) % ring.size()] << "\" [color=red];\n";
  os << "}\n";
  return os.str();
}

inline void print_text(std::ostream& os, const Setup& s, const Built& b, const Prediction& p,
                       int max_links) {
  // Names (the topology's is its file's path) go to the stream, of any length; the buffer holds
  // numbers only.
  char buf[256];
  std::snprintf(buf, sizeof buf,
                ": %d ranks (%d active), %zu channels\n"
                "  bytes %.0f  time %.6g s  algbw %.4g GB/s  busbw %.4g GB/s  turnaround ",
                b.plan.nranks, b.plan.nactive(), b.plan.channels.size(), p.bytes, p.time_s,
                p.algbw_GBps, p.busbw_GBps);
  os << b.plan.algorithm << " on " << s.name << buf;
  // A reduce's or reduce-scatter's output is on some ranks only: no element is ever complete at
  // every active rank, which is what the turnaround times.
  if (p.sim.ready.empty()) {
    os << "n/a\n";
  } else {
    std::snprintf(buf, sizeof buf, "%.6g s\n", p.sim.turnaround_s);
    os << buf;
  }
  if (b.hosted_relays > 0) {
    std::snprintf(buf, sizeof buf,
                  "  relays: %d, each run inside the rank on its GPU (docs/topology.md)\n",
                  b.hosted_relays);
    os << buf;
  }
  if (b.forest && b.forest->active.size() <= 1) {
    std::snprintf(buf, sizeof buf,
                  "  forest: one active rank, nothing to move (no trees to weigh), planned in "
                  "%.3g s\n",
                  b.forest->seconds);
    os << buf;
  } else if (b.forest && plan::has_root(b.plan.collective)) {
    std::snprintf(buf, sizeof buf,
                  "  forest: %zu trees of the root, %.4g GB/s (%.4g before keeping the heaviest "
                  "trees, bound %.4g), planned in %.3g s\n",
                  b.forest->pairs.size(), b.forest->total_GBps, b.forest->optimum_found_GBps,
                  b.forest->upper_bound_GBps, b.forest->seconds);
    os << buf;
  } else if (b.forest && plan::has_blocks(b.plan.collective)) {
    std::snprintf(buf, sizeof buf,
                  "  forest: %zu trees, every root at %.4g GB/s (equal shares; sum %.4g GB/s, "
                  "%.4g before keeping the heaviest trees, bound %.4g), planned in %.3g s\n",
                  b.forest->pairs.size(),
                  b.forest->total_GBps /
                      static_cast<double>(std::max<std::size_t>(1, b.forest->active.size())),
                  b.forest->total_GBps, b.forest->optimum_found_GBps, b.forest->upper_bound_GBps,
                  b.forest->seconds);
    os << buf;
  } else if (b.forest) {
    std::snprintf(buf, sizeof buf,
                  "  forest: %zu tree pairs, sum chi %.4g GB/s (bound %.4g), planned in %.3g s\n",
                  b.forest->pairs.size(), b.forest->total_GBps, b.forest->upper_bound_GBps,
                  b.forest->seconds);
    os << buf;
  }
  auto links = p.sim.links;
  std::sort(links.begin(), links.end(),
            [](const auto& x, const auto& y) { return x.utilisation > y.utilisation; });
  os << "  link utilisation (busiest "
     << std::min<std::size_t>(links.size(), static_cast<std::size_t>(std::max(0, max_links)))
     << " of " << links.size() << " used links):\n";
  for (std::size_t i = 0; i < links.size() && static_cast<int>(i) < max_links; ++i) {
    const std::string& name = links[i].name;
    std::snprintf(buf, sizeof buf, " %8.3g GB/s  %6.1f%%  %10.4g MB\n", links[i].capacity_Bps / 1e9,
                  100 * links[i].utilisation, links[i].bytes / 1e6);
    os << "    " << name << std::string(name.size() < 28 ? 28 - name.size() : 0, ' ') << buf;
  }
}

inline std::string csv_header() {
  return "topology,algo,overlap,nranks,nactive,bytes,time_s,algbw_GBps,busbw_GBps,turnaround_s,"
         "max_link_util\n";
}

inline std::string csv_row(const Setup& s, const Built& b, const Prediction& p) {
  double util = 0;
  for (const auto& l : p.sim.links) util = std::max(util, l.utilisation);
  char buf[256];
  std::snprintf(buf, sizeof buf, ",%d,%d,%d,%.0f,%.9g,%.6g,%.6g,%.9g,%.4f\n", b.overlap ? 1 : 0,
                b.plan.nranks, b.plan.nactive(), p.bytes, p.time_s, p.algbw_GBps, p.busbw_GBps,
                p.sim.turnaround_s, util);
  // RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
  std::string name = s.name;
  if (name.find_first_of(",\"\r\n") != std::string::npos) {
    std::string quoted = "\"";
    for (const char c : name) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    name = quoted + "\"";
  }
  return name + "," + b.algo + buf;
}

// Shared by both sub-commands' --help: the registry's algorithms.
inline std::string algo_help() {
  std::string h = "Algorithms (--algo NAME[-overlap|-phased]; docs/topology.md):\n";
  for (const auto& a : algo::algorithms()) {
    std::string name = "  " + a.name;
    name.resize(std::max<std::size_t>(name.size() + 1, 11), ' ');
    h += name + a.description + "\n";
  }
  h += "--overlap plans the overlapped schedule (default phased); a name's -overlap or -phased\n"
       "  overrides it for that algorithm.\n"
       "--split N: forest, blink and hdbtree cut their trees into about N channels of equal\n"
       "  share, so that fair link sharing gives each tree its planned rate (0: one per tree).\n"
       "  By default the planner chooses the channels, and the chunks unless --chunks is given,\n"
       "  within 65536 steps (a warning says when that costs predicted time).\n"
       "--collective allreduce (default), reduce_scatter, all_gather, broadcast or reduce, with\n"
       "  --root R for the last two: ring plans rings and chains, direct one hop, tree and\n"
       "  dbtree broadcast and reduce trees, forest reduce-scatter and all-gather trees\n"
       "  with every root at the same rate\n"
       "  (docs/collectives.md); --bytes is the whole buffer, as nccl-tests counts it.\n"
       "Formats: docs/formats.md. Simulator: docs/simulator.md.\n";
  return h;
}

inline const char* kPlanHelp =
    "usage: ccoll plan --topology FILE|PRESET|uniform:P[:GBps[:us]] --algo NAME\n"
    "                  [--active id,id,...] [--overlap] [--bytes N] [--json|--dot]\n"
    "                  [--chunks K] [--slot-bytes N] [--nslots N] [--alpha-us A] [--split N]\n"
    "                  [--collective C] [--root R]\n"
    "Builds the plan on the physical topology, checks it with the verifier, and prints its trees\n"
    "and the simulator's prediction (JSON with --json, Graphviz with --dot).\n"
    "Presets: dgx1p dgx1v dgx2 dgx-a100 dgx-h100 mi300x pcie4 pcie8 full<N> ring:<N>\n"
    "         torus:<A>x<B>[x<C>] cluster:<M>x<G>[:pcie|:nvlink|:mesh|:nvswitch][:<Gbps>]\n"
    "         [:pairwise] (pairwise: pcie and nvlink machines) uniform:<P>[:GBps[:us]]\n"
    "On graphs of GPUs wired to each other, pairs without a route are relayed through GPUs.\n";

inline const char* kSimulateHelp =
    "usage: ccoll simulate --topology FILE|PRESET|uniform:P[:GBps[:us]] --algo A[,A...]\n"
    "                      [--active id,...] [--overlap] [--bytes N[,N...]] [--csv] [--json]\n"
    "                      [--trace FILE] [--links N] [--reduce-GBps R] [--step-overhead-us S]\n"
    "                      [--chunks K] [--slot-bytes N] [--nslots N] [--alpha-us A] [--split N]\n"
    "                      [--collective C] [--root R]\n"
    "Predicts time, algbw, busbw (nccl-tests convention), gradient turnaround and per-link\n"
    "utilisation with the discrete-event simulator; --trace writes a Chrome trace of the last "
    "run.\n";

// The options `plan` and `simulate` share (parse_options), then each one's own.
inline const char* kTopologyOptionsHelp =
    "Options:\n"
    "  --topology T       a topology file (JSON, NCCL XML, nvidia-smi topo -m), a preset, or\n"
    "                     uniform:P[:GBps[:us]] (P ranks, a link per pair, no graph)\n"
    "  --algo A           the algorithm (below), default forest\n"
    "  --active ids       the nodes that compute (the others relay); default: the file's\n"
    "                     active set, else every GPU; not with uniform:P\n"
    "  --overlap          overlap each tree's reduce and broadcast ([C-Cube] C1)\n"
    "  --chunks K         chunks per channel, 0..65536; 0 (default): the chunk model's optimum\n"
    "  --slot-bytes N     a FIFO slot; default: large enough that only the model chunks\n"
    "  --nslots N         FIFO depth, 1..4096, default 4\n"
    "  --alpha-us A       the chunk model's per-message latency in us (at least 0.001, at most\n"
    "                     1e9); < 0 (default): twice the graph's largest link latency, or\n"
    "                     uniform:P's latency\n"
    "  --split N          forest, blink, hdbtree: about N equal-rate channels, 0..4096;\n"
    "                     0: one channel per tree; default: the planner chooses channels\n"
    "                     and chunks\n"
    "  --collective C     allreduce (default), reduce_scatter, all_gather, broadcast, reduce\n"
    "  --root R           the root of a broadcast or reduce, default 0\n"
    "  --reduce-GBps R    the prediction's reduction throughput per rank, 0..1e9; 0 (default):\n"
    "                     free\n"
    "  --step-overhead-us S  the prediction's fixed cost per step, 0..1e9, default 0\n"
    "  --links N          links listed, by utilisation, 0..1000000, default 12\n";

inline const char* kPlanOptionsHelp =
    "  --bytes N          the message (K/M/G suffixes; the whole buffer), default 64M\n"
    "  --json             the plan and its prediction as JSON (docs/formats.md)\n"
    "  --dot              the trees as Graphviz\n";

inline const char* kSimulateOptionsHelp =
    "  --bytes N[,N...]   the messages, a row each (K/M/G suffixes), default 64M\n"
    "  --csv              a CSV row per algorithm and size\n"
    "  --json             the rows as JSON\n"
    "  --trace FILE       a Chrome trace of the last run\n";

// `ccoll plan`: returns the exit status; output to `out`, errors to `err`.
inline int run_plan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (wants_help(args)) {
    out << kPlanHelp << kTopologyOptionsHelp << kPlanOptionsHelp << algo_help();
    return 0;
  }
  return run_reporting("plan", err, [&] {
    const Options o = parse_options(args);
    if (o.algos.size() != 1) throw UsageError("--algo: `plan` takes one algorithm");
    if (o.bytes.size() != 1)
      throw UsageError("--bytes: `plan` takes one size (`simulate` takes a list)");
    if (o.csv) throw UsageError("--csv is an output of `simulate`, not of `plan`");
    if (!o.trace.empty()) throw UsageError("--trace is an output of `simulate`, not of `plan`");
    const Setup s = load_setup(o);
    const Built b = build(o, s, o.algos[0], o.bytes.at(0));
    for (const auto& w : b.warnings) err << "ccoll plan: warning: " << w << "\n";
    const auto rep = plan::verify(b.plan);
    if (!rep.ok) throw std::runtime_error("the plan fails verification: " + rep.error);
    const Prediction p = predict(o, s, b, o.bytes.at(0));
    if (o.json) {
      out << plan_json(b, p).dump(2) << "\n";
    } else if (o.dot) {
      out << plan_dot(s, b, p);
    } else {
      print_text(out, s, b, p, o.max_links);
      for (const auto& t : b.trees) {
        out << "  " << t.phase << " tree root " << t.root << " share " << t.share << ":";
        for (const auto& [from, to] : t.edges) out << " " << from << "->" << to;
        out << "\n";
      }
    }
    return 0;
  });
}

// `ccoll simulate`.
inline int run_simulate(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  if (wants_help(args)) {
    out << kSimulateHelp << kTopologyOptionsHelp << kSimulateOptionsHelp << algo_help();
    return 0;
  }
  return run_reporting("simulate", err, [&] {
    const Options o = parse_options(args);
    if (o.dot) throw UsageError("--dot is an output of `plan`, not of `simulate`");
    if (!o.trace.empty()) check_output_file("--trace", o.trace);  // before the work, not after
    const Setup s = load_setup(o);
    if (o.csv) out << csv_header();
    nlohmann::json all = nlohmann::json::array();
    for (const auto& algo : o.algos)
      for (std::size_t i = 0; i < o.bytes.size(); ++i) {
        const bool last = &algo == &o.algos.back() && i + 1 == o.bytes.size();
        const Built b = build(o, s, algo, o.bytes[i]);
        for (const auto& w : b.warnings) err << "ccoll simulate: warning: " << w << "\n";
        const Prediction p = predict(o, s, b, o.bytes[i], last && !o.trace.empty());
        if (o.csv) {
          out << csv_row(s, b, p);
        } else if (o.json) {
          all.push_back(plan_json(b, p));
        } else {
          print_text(out, s, b, p, o.max_links);
        }
        if (last && !o.trace.empty()) {
          std::ofstream f(o.trace);
          if (!f) throw std::runtime_error("--trace: cannot write \"" + o.trace + "\"");
          sim::write_chrome_trace(f, p.sim, static_cast<std::uint32_t>(b.plan.channels.size()));
        }
      }
    if (o.json) out << all.dump(2) << "\n";
    return 0;
  });
}

}  // namespace ccoll::cli
