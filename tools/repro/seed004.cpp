// repro_seed004: [C-Cube] Sec. II-C, III-C and V-B with ccoll's simulator and the closed
// forms of model/alpha_beta.hpp: overlapped (C1) against phased (B) trees, rings and double binary
// trees for P = 8..1024 and 16 KiB..64 MiB, gradient turnaround, when every chunk is back at every
// rank, and the double tree with detours on a DGX-1V ([C-Cube] Fig. 12). docs/repro-seed004.md
// presents the results; docs/repro/seed004.py runs this program and draws the plots.
//
// Writes into --out DIR:
//   seed004_sweep.csv  P, bytes, algo, chunks, sim_time_s, sim_turnaround_s, model_time_s,
//                      model_turnaround_s, paper_time_s
//   seed004_ready.csv  P, bytes, algo, time_s, ready_fraction (fraction of the buffer complete at
//                      every rank by time_s)
//   seed004_dgx1.csv   bytes, algo, channels, time_s, turnaround_s, algbw_GBps
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/algo/embedding.hpp"
#include "ccoll/model/alpha_beta.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/chunking.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/sim/from_physical.hpp"
#include "ccoll/sim/simulator.hpp"

using namespace ccoll;

namespace {

struct Args {
  std::string out = ".";
  double alpha_us = 5.0;  // per message and hop
  double GBps = 12.5;     // per link and direction (100 Gbit/s)
  std::vector<int> P{8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<double> bytes{16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
  std::vector<int> ready_P{16, 256};
  bool dgx1 = true;
  bool verify = false;
  std::uint32_t chunks = 0;  // trees: fixed K (0: the cost model's optimum)
};

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stod(x));
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + ": missing value");
      return argv[++i];
    };
    if (k == "--out") {
      a.out = val();
    } else if (k == "--alpha-us") {
      a.alpha_us = std::stod(val());
    } else if (k == "--GBps") {
      a.GBps = std::stod(val());
    } else if (k == "--P") {
      a.P.clear();
      for (double p : parse_list(val())) a.P.push_back(static_cast<int>(p));
    } else if (k == "--bytes") {
      a.bytes = parse_list(val());
    } else if (k == "--ready-P") {
      a.ready_P.clear();
      for (double p : parse_list(val())) a.ready_P.push_back(static_cast<int>(p));
    } else if (k == "--chunks") {
      a.chunks = static_cast<std::uint32_t>(std::stoul(val()));
    } else if (k == "--no-dgx1") {
      a.dgx1 = false;
    } else if (k == "--verify") {
      a.verify = true;
    } else {
      throw std::invalid_argument("unknown option " + k +
                                  " (--out DIR --alpha-us A --GBps B --P list --bytes list "
                                  "--ready-P list --chunks K --no-dgx1 --verify)");
    }
  }
  return a;
}

int floor_log2(int P) {
  int d = 0;
  while ((2 << d) <= P) ++d;
  return d;
}

plan::PlanRequest request(const Args& a, int P, double bytes, bool overlap, std::uint32_t ch) {
  plan::PlanRequest req;
  req.nranks = P;
  req.elem_size = 4;
  req.count = static_cast<std::uint64_t>(bytes / 4);
  req.overlap = overlap;
  req.nchannels = ch;
  req.nchunks = a.chunks;
  req.slot_bytes = std::uint64_t{1} << 40;  // chunking follows the cost model only
  req.alpha_s = a.alpha_us * 1e-6;
  req.beta_s_per_byte = 1.0 / (a.GBps * 1e9);
  return req;
}

void write_ready(std::ofstream& f, int P, double bytes, const std::string& algo,
                 const sim::SimResult& r, std::uint64_t count) {
  double done = 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%d,%.0f,%s,0,0\n", P, bytes, algo.c_str());
  f << buf;
  for (const auto& rr : r.ready) {
    done += static_cast<double>(rr.end - rr.begin);
    std::snprintf(buf, sizeof buf, "%d,%.0f,%s,%.9g,%.6f\n", P, bytes, algo.c_str(), rr.time_s,
                  done / static_cast<double>(count));
    f << buf;
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  const model::AlphaBeta link{a.alpha_us * 1e-6, 1.0 / (a.GBps * 1e9)};
  std::ofstream sweep(a.out + "/seed004_sweep.csv"), ready(a.out + "/seed004_ready.csv");
  if (!sweep || !ready) throw std::runtime_error("cannot write into " + a.out);
  sweep << "P,bytes,algo,chunks,sim_time_s,sim_turnaround_s,model_time_s,model_turnaround_s,"
           "paper_time_s\n";
  ready << "P,bytes,algo,time_s,ready_fraction\n";
  for (int P : a.P) {
    const auto net = sim::uniform_network(P, a.GBps * 1e9, link.alpha_s);
    const double lg = std::log2(static_cast<double>(P));
    const int depth = floor_log2(P);  // both the heap tree and NCCL's in-order tree
    for (double N : a.bytes) {
      struct Case {
        const char* algo;
        plan::Plan plan;
      };
      std::vector<Case> cases;
      auto ring_req = [&](std::uint32_t ch) {
        auto r = request(a, P, N, false, ch);
        r.nchunks = 0;  // --chunks is for the trees: a ring only adds latency with more chunks
        return r;
      };
      cases.push_back({"ring", plan::build_ring(ring_req(1))});
      cases.push_back({"ring-bidir", plan::build_ring(ring_req(2))});
      cases.push_back({"tree", plan::build_tree(request(a, P, N, false, 1))});
      cases.push_back({"tree-overlap", plan::build_tree(request(a, P, N, true, 1))});
      cases.push_back({"dbtree", plan::build_double_binary_tree(request(a, P, N, false, 1))});
      cases.push_back(
          {"dbtree-overlap", plan::build_double_binary_tree(request(a, P, N, true, 1))});
      for (auto& c : cases) {
        if (a.verify) {
          const auto rep = plan::verify(c.plan);
          if (!rep.ok) throw std::runtime_error(std::string(c.algo) + ": " + rep.error);
        }
        const std::string algo = c.algo;
        const double bytes = static_cast<double>(c.plan.count) * 4;
        const auto res = sim::simulate(c.plan, net);
        // The chunk count the builder chose (the same call plan/tree.hpp and ring.hpp make).
        const bool overlap = algo.find("overlap") != std::string::npos;
        const bool dbt = algo.rfind("dbtree", 0) == 0;
        auto req = request(a, P, N, overlap, 1);
        if (algo.rfind("ring", 0) == 0) req.nchunks = 0;
        std::uint64_t K = 1;
        double model_t = 0, model_ta = 0, paper = -1;
        if (algo == "ring") {
          K = plan::resolve_chunks(req, req.count, static_cast<std::uint64_t>(P), 0.0,
                                   2.0 * (P - 1));
          model_t = model::ring_allreduce_time(link, P, bytes);
          paper = model_t;  // [C-Cube] Eq. 2
          model_ta = -1;
        } else if (algo == "ring-bidir") {
          // Two rings in opposite directions, half of the data each.
          K = plan::resolve_chunks(req, req.count / 2, static_cast<std::uint64_t>(P), 0.0,
                                   2.0 * (P - 1));
          model_t = model::ring_allreduce_time(link, P, bytes / 2);
          model_ta = -1;
        } else {
          const std::uint64_t elems = dbt ? req.count / 2 : req.count;
          K = plan::resolve_chunks(req, elems, 1, 2.0 * depth, overlap ? 1.0 : 2.0);
          const double b = static_cast<double>(elems) * 4;
          const auto Kd = static_cast<double>(K);
          // The exact lock-step pipeline: depth + K - 1 steps per phase ([C-Cube] counts log P +
          // K).
          const double step = link.time(b / Kd);
          model_t = overlap ? (2.0 * depth + Kd - 1) * step : 2.0 * (depth + Kd - 1) * step;
          model_ta = overlap ? 2.0 * depth * step : (2.0 * depth + Kd - 1) * step;
          if (!dbt)
            paper = overlap ? model::overlapped_tree_time_seed004_eq7(link, lg, bytes)  // Eq. 7
                            : model::phased_tree_optimal_time(link, lg, bytes);         // Eq. 6
        }
        char buf[512];
        std::snprintf(buf, sizeof buf, "%d,%.0f,%s,%llu,%.9g,%.9g,%.9g,%.9g,%.9g\n", P, bytes,
                      c.algo, static_cast<unsigned long long>(K), res.time_s, res.turnaround_s,
                      model_t, model_ta, paper);
        sweep << buf;
        for (int rp : a.ready_P)
          if (rp == P && N == a.bytes.back()) write_ready(ready, P, bytes, algo, res, c.plan.count);
      }
      std::fprintf(stderr, "P=%d bytes=%.0f done\n", P, N);
    }
  }
  if (a.dgx1) {
    // [C-Cube] Fig. 12: B (phased) and C1 (overlapped) double binary trees with detours on a
    // DGX-1V, and R, NCCL-style rings embedded on the NVLinks (algo/embedding.hpp).
    std::ofstream dgx(a.out + "/seed004_dgx1.csv");
    dgx << "bytes,algo,channels,time_s,turnaround_s,algbw_GBps\n";
    const auto topo = physical::dgx1v();
    const auto net = sim::to_network(topo);
    const auto d = algo::double_binary_tree_with_detours(topo);
    const auto rings = algo::embed_rings(topo);
    for (double N : {1048576.0, 4194304.0, 16777216.0, 67108864.0, 268435456.0}) {
      plan::PlanRequest req = request(a, 8, N, false, 1);
      req.alpha_s = 1.4e-6;  // two NVLink hops of the preset (0.7 us each): the detour path
      req.beta_s_per_byte = 1.0 / 25e9;
      struct Case {
        const char* algo;
        plan::Plan plan;
        std::vector<int> nodes;
      };
      std::vector<Case> cases;
      req.overlap = false;
      cases.push_back({"B", algo::detour_tree_plan(d, req), d.rank_node});
      req.overlap = true;
      cases.push_back({"C1", algo::detour_tree_plan(d, req), d.rank_node});
      cases.push_back({"R", algo::ring_plan(rings, req), rings.nodes});
      for (const auto& c : cases) {
        const auto res = sim::simulate(c.plan, net, c.nodes);
        char buf[256];
        std::snprintf(buf, sizeof buf, "%.0f,%s,%zu,%.9g,%.9g,%.6g\n", N, c.algo,
                      c.plan.channels.size(), res.time_s, res.turnaround_s, N / res.time_s / 1e9);
        dgx << buf;
      }
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "repro_seed004: %s\n", e.what());
  return 1;
}
