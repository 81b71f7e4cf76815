// Tests of `ccoll plan` and `ccoll simulate` (tools/ccoll/topology_args.hpp, the code behind both
// sub-commands): options, topology files and their errors, JSON / DOT / CSV output, traces.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <any>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../tools/ccoll/fit_args.hpp"
#include "../tools/ccoll/topology_args.hpp"
#include "ccoll/model/alpha_beta.hpp"

namespace cli_test {
namespace {

struct Run {
  int rc;
  std::string out, err;
};

Run plan(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int rc = ccoll::cli::run_plan(args, out, err);
  return Run{rc, out.str(), err.str()};
}

Run simulate(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int rc = ccoll::cli::run_simulate(args, out, err);
  return Run{rc, out.str(), err.str()};
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("ccoll_cli_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

// Four GPUs in an NVLink square (one pair doubled) plus a PCIe switch that joins them all.
const char* kSquare = R"({"name": "square",
  "nodes": [{"id": "g0", "kind": "gpu"}, {"id": "g1", "kind": "gpu"}, {"id": "g2", "kind": "gpu"},
            {"id": "g3", "kind": "gpu"}, {"id": "sw", "kind": "switch"}],
  "links": [{"a": "g0", "b": "g1", "bandwidth_GBps": 20, "latency_us": 1},
            {"a": "g1", "b": "g2", "bandwidth_GBps": 20, "latency_us": 1},
            {"a": "g2", "b": "g3", "bandwidth_GBps": 20, "latency_us": 1},
            {"a": "g3", "b": "g0", "bandwidth_GBps": 20, "count": 2, "latency_us": 1},
            {"a": "g0", "b": "sw", "bandwidth_GBps": 10, "latency_us": 2},
            {"a": "g1", "b": "sw", "bandwidth_GBps": 10, "latency_us": 2},
            {"a": "g2", "b": "sw", "bandwidth_GBps": 10, "latency_us": 2},
            {"a": "g3", "b": "sw", "bandwidth_GBps": 10, "latency_us": 2}]})";

}  // namespace

TEST_CASE("usage errors name the option") {
  auto r = plan({"--algo", "ring"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("--topology") != std::string::npos);
  r = plan({"--topology", "full4", "--algo", "rign"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("rign") != std::string::npos);
  r = simulate({"--topology", "full4", "--bytes", "12Q"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("12Q") != std::string::npos);
  r = plan({"--topology", "nosuchpreset", "--algo", "ring"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("nosuchpreset") != std::string::npos);
  CHECK(plan({"--help"}).rc == 0);
  // Every option has a line of its own in the help (its name at the start of the line).
  const std::string plan_help = plan({"--help"}).out, simulate_help = simulate({"--help"}).out;
  for (const std::string o :
       {"--topology", "--algo", "--active", "--overlap", "--bytes", "--chunks", "--slot-bytes",
        "--nslots", "--alpha-us", "--split", "--collective", "--root", "--reduce-GBps",
        "--step-overhead-us", "--links", "--json"}) {
    CAPTURE(o);
    CHECK(plan_help.find("\n  " + o + " ") != std::string::npos);
    CHECK(simulate_help.find("\n  " + o + " ") != std::string::npos);
  }
  CHECK(plan_help.find("\n  --dot ") != std::string::npos);
  for (const std::string o : {"--csv", "--trace"}) {
    CAPTURE(o);
    CHECK(simulate_help.find("\n  " + o + " ") != std::string::npos);
  }
  // plan predicts one size; a list is for simulate.
  r = plan({"--topology", "full4", "--algo", "ring", "--bytes", "1M,2M"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("`plan` takes one size") != std::string::npos);
  CHECK(ccoll::cli::parse_bytes("16K") == 16384);
  CHECK(ccoll::cli::parse_bytes("1.33e9") == 1.33e9);
}

TEST_CASE("--algo takes the registry's names") {
  // An unknown name is a usage error that lists every registered algorithm.
  const auto r = plan({"--topology", "dgx1v", "--algo", "nosuchalgo"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("nosuchalgo") != std::string::npos);
  CHECK(r.err.find(ccoll::algo::algorithm_names()) != std::string::npos);
  for (const auto& a : ccoll::algo::algorithms()) CHECK(r.err.find(a.name) != std::string::npos);
  const auto help = plan({"--help"});
  REQUIRE(help.rc == 0);
  for (const auto& a : ccoll::algo::algorithms())
    CHECK(help.out.find("  " + a.name) != std::string::npos);
  // A name's -overlap / -phased suffix overrides --overlap for that algorithm.
  const auto ov = plan({"--topology", "full4", "--algo", "tree-overlap", "--json"});
  REQUIRE(ov.rc == 0);
  CHECK(nlohmann::json::parse(ov.out)["overlap"] == true);
  const auto ph = plan({"--topology", "full4", "--algo", "tree-phased", "--overlap", "--json"});
  REQUIRE(ph.rc == 0);
  CHECK(nlohmann::json::parse(ph.out)["overlap"] == false);
  // Every registered algorithm plans through the CLI on a graph.
  for (const auto& a : ccoll::algo::algorithms()) {
    CAPTURE(a.name);
    CHECK(plan({"--topology", "full4", "--algo", a.name, "--bytes", "1M"}).rc == 0);
  }
}

TEST_CASE("plan --algo forest is the registry's forest plan") {
  namespace algo = ccoll::algo;
  const std::vector<std::string> args{"--topology", "dgx1v", "--algo", "forest", "--json"};
  const auto o = ccoll::cli::parse_options(args);
  const auto s = ccoll::cli::load_setup(o);
  const auto b = ccoll::cli::build(o, s, "forest", o.bytes.at(0));
  // The same plan from the registry directly, for the same request.
  const auto topo = ccoll::physical::preset("dgx1v");
  const auto reg = algo::make_algorithm(algo::find_algorithm("forest").algorithm,
                                        algo::AlgorithmRequest{&topo, 0, o.split});
  const auto req = ccoll::cli::make_request(o, s, reg.nranks(), o.bytes.at(0));
  const auto p = reg.build(req);
  CHECK(b.plan.nranks == p.nranks);
  CHECK(b.plan.channels.size() == p.channels.size());
  CHECK(b.plan.connections.size() == p.connections.size());
  CHECK(b.plan.algorithm == p.algorithm);
  CHECK(b.rank_node == reg.rank_node());
  CHECK(b.plan.active == p.active);
  // The report shows the forest that was planned.
  const auto* pf = std::any_cast<algo::PackedForest>(&reg.details());
  REQUIRE(pf != nullptr);
  REQUIRE(b.forest.has_value());
  CHECK(b.forest->pairs.size() == pf->forest(false).pairs.size());
  CHECK(b.forest->total_GBps == doctest::Approx(pf->forest(false).total_GBps));
  // And `ccoll plan` prints that plan.
  const auto r = plan(args);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["plan"]["channels"].get<std::size_t>() == p.channels.size());
  CHECK(j["plan"]["nranks"].get<int>() == p.nranks);
  CHECK(j["ranks"].size() == static_cast<std::size_t>(p.nranks));
  CHECK(j["forest"]["pairs"].get<std::size_t>() == pf->forest(false).pairs.size());
}

TEST_CASE("plan --json: the documented format (docs/formats.md) for every algorithm") {
  const auto file = write_temp("square.json", kSquare);
  for (const std::string algo : {"ring", "dbtree", "tree", "forest", "ps", "blink", "hdbtree"})
    for (const bool overlap : {false, true}) {
      std::vector<std::string> args{"--topology", file, "--algo", algo, "--bytes", "4M", "--json"};
      if (overlap) args.push_back("--overlap");
      const auto r = plan(args);
      CAPTURE(algo);
      CAPTURE(r.err);
      REQUIRE(r.rc == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["algorithm"] == algo);
      CHECK(j["overlap"] == overlap);
      CHECK(j["predicted"]["bytes"].get<double>() == 4.0 * 1024 * 1024);
      CHECK(j["predicted"]["time_s"].get<double>() > 0);
      const double algbw = j["predicted"]["algbw_GBps"].get<double>();
      CHECK(j["predicted"]["busbw_GBps"].get<double>() == doctest::Approx(algbw * 2 * 3 / 4.0));
      if (algo == "ring") continue;
      double reduce_share = 0;
      for (const auto& t : j["trees"]) {
        CHECK((t["phase"] == "reduce" || t["phase"] == "broadcast"));
        CHECK(t["weight_GBps"].get<double>() > 0);
        for (const auto& e : t["edges"]) {
          CHECK(e.size() == 2);
          CHECK(e[0].get<std::string>().front() == 'g');
        }
        if (t["phase"] == "reduce") reduce_share += t["share"].get<double>();
      }
      CHECK(reduce_share == doctest::Approx(1.0));
    }
  std::filesystem::remove(file);
}

TEST_CASE("forest on one GPU: nothing to move, said so, and no inf or -1 in the JSON") {
  const auto file = write_temp("one.json", R"({"name": "one", "nodes": ["g0"], "links": []})");
  const auto text = plan({"--topology", file, "--algo", "forest"});
  CAPTURE(text.err);
  REQUIRE(text.rc == 0);
  CHECK(text.out.find("one active rank, nothing to move") != std::string::npos);
  CHECK(text.out.find("inf") == std::string::npos);
  CHECK(text.out.find("bound -1") == std::string::npos);
  const auto json = plan({"--topology", file, "--algo", "forest", "--json"});
  REQUIRE(json.rc == 0);
  const auto j = nlohmann::json::parse(json.out);
  for (const char* key : {"total_GBps", "optimum_found_GBps", "upper_bound_GBps"}) {
    CAPTURE(key);
    CHECK(j["forest"][key].is_null());
  }
  CHECK(j["forest"]["prune_loss"].get<double>() == 0.0);
  // Two GPUs move data: real rates.
  const auto two = write_temp("two.json", R"({"name": "two", "nodes": ["g0", "g1"],
    "links": [{"a": "g0", "b": "g1", "bandwidth_GBps": 10}]})");
  const auto j2 =
      nlohmann::json::parse(plan({"--topology", two, "--algo", "forest", "--json"}).out);
  CHECK(j2["forest"]["total_GBps"].get<double>() > 0);
  CHECK(j2["forest"]["upper_bound_GBps"].get<double>() >= j2["forest"]["total_GBps"].get<double>());
  std::filesystem::remove(file);
  std::filesystem::remove(two);
}

TEST_CASE("forest on the square: the solver's weights and a correct prediction") {
  const auto file = write_temp("square2.json", kSquare);
  // --split 0: one channel per tree pair (the default cuts pairs into equal-share channels).
  const auto r =
      plan({"--topology", file, "--algo", "forest", "--bytes", "64M", "--json", "--split", "0"});
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  const double total = j["forest"]["total_GBps"].get<double>();
  CHECK(total > 0);
  // Never above the certified bound; every pair is a channel.
  CHECK(j["forest"]["exact_oracle"].get<bool>());
  CHECK(total <= j["forest"]["upper_bound_GBps"].get<double>() * (1 + 1e-9));
  CHECK(total <= j["forest"]["optimum_found_GBps"].get<double>() * (1 + 1e-9));
  CHECK(j["forest"]["prune_loss"].get<double>() <= 0.005 + 1e-9);
  CHECK(j["forest"]["pairs"].get<std::size_t>() == j["plan"]["channels"].get<std::size_t>());
  CHECK(j["forest"]["planning_s"].get<double>() >= 0);
  // The simulated time is at least the forest's bandwidth-only bound (Property 2). It is not equal
  // to it: trees sharing a link get max-min fair (equal) rates in the simulator, not rates
  // proportional to their LP weights, so heavier trees finish last (docs/simulator.md).
  const double bound = j["forest"]["bandwidth_only_time_s"].get<double>();
  const double t = j["predicted"]["time_s"].get<double>();
  CHECK(t >= bound * (1 - 1e-9));
  CHECK(t < bound * 1.5);
  std::filesystem::remove(file);
}

TEST_CASE("bad topology files get errors that name the culprit") {
  const auto unknown =
      write_temp("unknown.json",
                 R"({"nodes": ["a", "b"], "links": [{"a": "a", "b": "c", "bandwidth_GBps": 1}]})");
  auto r = plan({"--topology", unknown, "--algo", "ring"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("\"c\"") != std::string::npos);
  const auto negative =
      write_temp("negative.json",
                 R"({"nodes": ["a", "b"], "links": [{"a": "a", "b": "b", "bandwidth_GBps": -5}]})");
  r = plan({"--topology", negative, "--algo", "ring"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("bandwidth") != std::string::npos);
  const auto split = write_temp(
      "split.json",
      R"({"nodes": ["a", "b", "c", "d"], "links": [{"a": "a", "b": "b", "bandwidth_GBps": 1},
          {"a": "c", "b": "d", "bandwidth_GBps": 1}], "active": ["a", "b", "c"]})");
  r = plan({"--topology", split, "--algo", "forest"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("disconnected") != std::string::npos);
  const auto garbage = write_temp("garbage.json", "{not json");
  r = plan({"--topology", garbage, "--algo", "ring"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("JSON") != std::string::npos);
  r = plan({"--topology", "full4", "--algo", "ring", "--active", "gpu0,gpu9"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("gpu9") != std::string::npos);
  for (const auto& f : {unknown, negative, split, garbage}) std::filesystem::remove(f);
  // A directory is named as one, not read as an empty nvidia-smi table.
  r = plan({"--topology", std::filesystem::temp_directory_path().string(), "--algo", "ring"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("is a directory") != std::string::npos);
}

TEST_CASE("simulate: CSV sweep, closed form on a uniform network, trace, DOT") {
  const auto r = simulate({"--topology", "uniform:8:10:5", "--algo", "ring,tree", "--bytes",
                           "64K,16M", "--csv", "--alpha-us", "5"});
  REQUIRE(r.rc == 0);
  std::istringstream lines(r.out);
  std::vector<std::string> rows;
  for (std::string l; std::getline(lines, l);) rows.push_back(l);
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].rfind("topology,algo", 0) == 0);
  // ring row for 16M: 2 (P-1) alpha + 2 (P-1)/P beta N.
  const std::string row = rows[2];
  std::vector<std::string> cols;
  std::stringstream ss(row);
  for (std::string c; std::getline(ss, c, ',');) cols.push_back(c);
  CHECK(cols[1] == "ring");
  const double closed = ccoll::model::ring_allreduce_time({5e-6, 1 / 10e9}, 8, 16.0 * (1 << 20));
  CHECK(std::stod(cols[6]) == doctest::Approx(closed).epsilon(0.05));

  const auto trace = std::filesystem::temp_directory_path() /
                     ("ccoll_cli_test_" + std::to_string(::getpid()) + "_trace.json");
  const auto t = simulate(
      {"--topology", "dgx1v", "--algo", "dbtree", "--bytes", "1M", "--trace", trace.string()});
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("link utilisation") != std::string::npos);
  std::ifstream in(trace);
  const auto j = nlohmann::json::parse(in);
  CHECK(j["traceEvents"].size() > 10);
  std::filesystem::remove(trace);

  const auto d = plan({"--topology", "full4", "--algo", "dbtree", "--dot"});
  REQUIRE(d.rc == 0);
  CHECK(d.out.rfind("digraph", 0) == 0);
  CHECK(d.out.find("\"gpu0\"") != std::string::npos);
}

TEST_CASE("[TopoSync] baselines on a cluster: the NIC bound, and --split") {
  // Two PCIe machines joined by 10 Gbps NICs: any allreduce moves at least N / 2 out of each
  // machine per stage, 2 (N / 2) / 1.25 GB/s in all. Blink (trees inside, a ring of two roots)
  // and NCCL 2.4's trees across machines both reach it; so does the forest.
  const double N = 256.0 * (1 << 20);
  const double bound = N / 1.25e9;
  for (const std::string algo : {"blink", "hdbtree", "forest"}) {
    const auto r = simulate(
        {"--topology", "cluster:2x4:pcie:10", "--algo", algo, "--bytes", "256M", "--json"});
    CAPTURE(algo);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    const double t = j[0]["predicted"]["time_s"].get<double>();
    CHECK(t >= bound * (1 - 1e-9));
    CHECK(t == doctest::Approx(bound).epsilon(0.03));
  }
  // The flat ring crosses the NICs with 2 (P-1)/P N each way: 7/4 of the bound.
  const auto ring = simulate(
      {"--topology", "cluster:2x4:pcie:10", "--algo", "ring", "--bytes", "256M", "--json"});
  REQUIRE(ring.rc == 0);
  CHECK(nlohmann::json::parse(ring.out)[0]["predicted"]["time_s"].get<double>() ==
        doctest::Approx(1.75 * bound).epsilon(0.03));
  CHECK(simulate({"--topology", "uniform:8", "--algo", "blink"}).rc == 2);
  // Trees of unequal weight: equal-share channels (the default) never lose to one channel per
  // tree, whose heavier trees fall behind under fair sharing.
  const auto time_of = [](const std::string& split) {
    const auto r = simulate({"--topology", "cluster:2x4:pcie:100", "--algo", "forest", "--bytes",
                             "64M", "--json", "--split", split});
    REQUIRE(r.rc == 0);
    return nlohmann::json::parse(r.out)[0]["predicted"]["time_s"].get<double>();
  };
  const double one = time_of("0"), split = time_of("64");
  CHECK(split <= one * 1.001);
  CHECK(simulate({"--topology", "full4", "--split", "-1"}).rc == 2);
}

TEST_CASE("topology files: NCCL's XML dump and nvidia-smi topo -m are read by their content") {
  const std::string dir = std::string(CCOLL_SOURCE_DIR) + "/data/topologies/";
  for (const std::string f : {"dgx1v_nccl_topo.xml", "dgx1v_nvidia_smi_topo.txt", "small4.json"}) {
    CAPTURE(f);
    const auto r = plan({"--topology", dir + f, "--algo", "ring", "--bytes", "1M", "--json"});
    CAPTURE(r.err);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["ranks"].size() == (f == "small4.json" ? 4u : 8u));
    CHECK(j["predicted"]["time_s"].get<double>() > 0);
  }
  const auto bad = write_temp("bad.txt", "GPU1\tX\n");
  const auto r = plan({"--topology", bad, "--algo", "ring"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("GPU0") != std::string::npos);
  std::filesystem::remove(bad);
}

TEST_CASE("fit: a, b and gamma from nccl-tests output and ccoll_perf JSON") {
  // Rows of all_reduce_perf made from t = a + b m (and a + gamma b m with two at once).
  const double a = 30e-6, b = 1.0 / 12e9, gamma = 1.6;
  const auto nccl_text = [&](double g) {
    std::string text = "#       size         count      type   redop    root     time ...\n";
    for (double m = 8192; m <= 256.0 * (1 << 20); m *= 4) {
      char row[256];
      const double us = (a + g * b * m) * 1e6;
      std::snprintf(row, sizeof row, "%12.0f %12.0f float sum -1 %10.2f 0 0 0 %10.2f 0 0 0\n", m,
                    m / 4, us, us);
      text += row;
    }
    return text;
  };
  const auto one = write_temp("nccl1.txt", nccl_text(1.0));
  const auto two = write_temp("nccl2.txt", nccl_text(gamma));
  std::ostringstream out, err;
  REQUIRE(ccoll::cli::run_fit({"--nccl-tests", one, "--with", "2", two, "--json"}, out, err) == 0);
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["a_s"].get<double>() == doctest::Approx(a).epsilon(0.01));
  CHECK(j["bandwidth_GBps"].get<double>() == doctest::Approx(12.0).epsilon(0.001));
  CHECK(j["r2"].get<double>() > 0.9999);
  CHECK(j["gamma"].get<double>() == doctest::Approx(gamma).epsilon(0.001));
  // The size range: only the first two rows, still on the line.
  std::ostringstream o2, e2;
  REQUIRE(ccoll::cli::run_fit({"--nccl-tests", one, "--max-bytes", "40000"}, o2, e2) == 0);
  CHECK(o2.str().find("samples 2") != std::string::npos);
  const auto perf = write_temp("perf.json", R"({"results": [
      {"algo": "ring", "nranks": 4, "size": 1000000, "time_us": 110},
      {"algo": "ring", "nranks": 4, "size": 3000000, "time_us": 310},
      {"algo": "tree", "nranks": 4, "size": 1000000, "time_us": 999}]})");
  std::ostringstream o3, e3;
  REQUIRE(ccoll::cli::run_fit({"--ccoll-perf", perf, "--algo", "ring", "--json"}, o3, e3) == 0);
  const auto p = nlohmann::json::parse(o3.str());
  CHECK(p["a_s"].get<double>() == doctest::Approx(10e-6));
  CHECK(p["bandwidth_GBps"].get<double>() == doctest::Approx(10.0));
  std::ostringstream o4, e4;
  CHECK(ccoll::cli::run_fit({"--nccl-tests", one, "--ccoll-perf", perf}, o4, e4) == 2);
  CHECK(ccoll::cli::run_fit({"--nccl-tests", "/nonexistent"}, o4, e4) == 1);
  // Usage errors exit 2 and name the flag; data that cannot be fitted is a run-time error, 1.
  std::ostringstream o5, e5;
  CHECK(ccoll::cli::run_fit({"--ccoll-perf", perf, "--nranks", "four"}, o5, e5) == 2);
  CHECK(e5.str().find("--nranks") != std::string::npos);
  // A count that is not a whole number in range is refused, not truncated or wrapped into "every
  // rank count".
  for (const char* bad : {"4.7", "1e10", "-4", "0"}) {
    std::ostringstream o6, e6;
    CAPTURE(bad);
    CHECK(ccoll::cli::run_fit({"--ccoll-perf", perf, "--nranks", bad}, o6, e6) == 2);
    CHECK(e6.str().find("--nranks") != std::string::npos);
  }
  std::ostringstream o7, e7;
  CHECK(ccoll::cli::run_fit({"--nccl-tests", one, "--with", "3e9", two}, o7, e7) == 2);
  CHECK(e7.str().find("--with K") != std::string::npos);
  CHECK(ccoll::cli::run_fit({"--ccoll-perf", perf, "--algo", "tree"}, o5, e5) == 1);
  CHECK(e5.str().find("ccoll fit: ") != std::string::npos);
  for (const auto& f : {one, two, perf}) std::filesystem::remove(f);
}

// Input limits (docs/reliability-tools.md): every numeric option of `plan` / `simulate` is
// checked against a documented bound, and a bad value is a usage error (exit status 2) that names
// the option, before anything large is allocated.
TEST_CASE("simulate: any topology name keeps its numbers; outputs are exclusive per command") {
  // A path longer than the old line buffers (text 256 bytes, CSV 512), with a comma for CSV.
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ccoll_cli_test_" + std::to_string(::getpid()) + "_" + std::string(150, 'd')) /
                   (std::string(150, 'e') + ",x");
  std::filesystem::create_directories(dir);
  const std::string topo = (dir / "square.json").string();
  std::ofstream(topo) << kSquare;
  const auto text = simulate({"--topology", topo, "--algo", "ring", "--links", "0"});
  REQUIRE(text.rc == 0);
  CHECK(text.out.find(topo) != std::string::npos);
  CHECK(text.out.find("busbw") != std::string::npos);
  CHECK(text.out.find("turnaround") != std::string::npos);
  const auto csv = simulate({"--topology", topo, "--algo", "ring,tree", "--bytes", "1M", "--csv"});
  REQUIRE(csv.rc == 0);
  std::istringstream lines(csv.out);
  std::vector<std::string> rows;
  for (std::string l; std::getline(lines, l);) rows.push_back(l);
  REQUIRE(rows.size() == 3);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    CHECK(rows[i].rfind("\"" + topo + "\",", 0) == 0);  // quoted: the name has a comma
    CHECK(std::count(rows[i].begin(), rows[i].end(), ',') == 10 + 1);
  }
  std::filesystem::remove_all(dir.parent_path());
  // A reduce has no element complete at every rank: its turnaround is not a time.
  const auto red = simulate({"--topology", "full4", "--algo", "tree", "--collective", "reduce"});
  REQUIRE(red.rc == 0);
  CHECK(red.out.find("turnaround n/a") != std::string::npos);
  // Outputs that would be mixed or ignored are usage errors.
  for (const auto& r : {simulate({"--topology", "full4", "--algo", "ring", "--csv", "--json"}),
                        simulate({"--topology", "full4", "--algo", "ring", "--dot"}),
                        plan({"--topology", "full4", "--algo", "ring", "--csv"}),
                        plan({"--topology", "full4", "--algo", "ring", "--trace", "t.json"})}) {
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
  }
  // A root beyond the plan's ranks is a usage error too, named.
  const auto root = simulate(
      {"--topology", "full4", "--algo", "tree", "--collective", "broadcast", "--root", "9"});
  CHECK(root.rc == 2);
  CHECK(root.err.find("--root") != std::string::npos);
  // Numbers are decimal, without blanks.
  CHECK(simulate({"--topology", "full4", "--algo", "ring", "--alpha-us", "0x10"}).rc == 2);
  CHECK(simulate({"--topology", "full4", "--algo", "ring", "--alpha-us", " 5"}).rc == 2);
}

TEST_CASE("input limits: numeric options out of range are usage errors naming the option") {
  struct Bad {
    std::vector<std::string> args;
    const char* names;
  };
  const std::vector<Bad> bad{
      {{"--bytes", "1e30"}, "--bytes"},         // memory exhaustion before
      {{"--bytes", "1"}, "--bytes"},            // less than one element: "bytes 0, time 0"
      {{"--bytes", "inf"}, "--bytes"},          //
      {{"--chunks", "1e9"}, "--chunks"},        // memory exhaustion before
      {{"--chunks", "-1"}, "--chunks"},         //
      {{"--split", "1e6"}, "--split"},          //
      {{"--split", "2.5"}, "--split"},          //
      {{"--slot-bytes", "0"}, "--slot-bytes"},  // was reported as --bytes
      {{"--slot-bytes", "2"}, "--slot-bytes"},  // less than one element: a library error before
      {{"--slot-bytes", "1e300"}, "--slot-bytes"},
      {{"--nslots", "1e9"}, "--nslots"},
      {{"--links", "1e30"}, "--links"},  // an out-of-range float-to-int conversion before
      {{"--reduce-GBps", "-1"}, "--reduce-GBps"},
      {{"--step-overhead-us", "-1"}, "--step-overhead-us"},
      {{"--alpha-us", "1e300"}, "--alpha-us"},
  };
  for (const auto& b : bad) {
    std::vector<std::string> args{"--topology", "full8", "--algo", "ring"};
    args.insert(args.end(), b.args.begin(), b.args.end());
    CAPTURE(b.args[0]);
    CAPTURE(b.args[1]);
    const auto r = simulate(args);
    CHECK(r.rc == 2);
    CHECK(r.err.rfind(std::string("ccoll simulate: ") + b.names + ":", 0) == 0);
  }
  // The option given is the one named (--slot-bytes used to be reported as --bytes).
  const auto slot = simulate({"--topology", "full8", "--algo", "ring", "--slot-bytes", "0"});
  CHECK(slot.err.find("--bytes") == std::string::npos);
  // The limits themselves are accepted.
  CHECK(ccoll::cli::parse_bytes("1125899906842624") == ccoll::cli::kMaxBytes);
  CHECK_THROWS_AS(ccoll::cli::parse_bytes("1125899906842625"), ccoll::cli::UsageError);
  const auto o = ccoll::cli::parse_options(
      {"--topology", "full8", "--chunks", "65536", "--split", "4096", "--nslots", "4096"});
  CHECK(o.chunks == 65536u);
  CHECK(o.split == 4096);
  CHECK(o.nslots == 4096u);
}

TEST_CASE("input limits: uniform:P and preset parameters, one exit status and message style") {
  // uniform:0 and cluster:0x8 are both bad user input: exit status 2 (it was 2 and 1), and the
  // same shape of message: the option, the rule, what was given.
  for (const std::string t :
       {"uniform:0", "uniform:1", "uniform:100000", "uniform:2.5", "uniform:8:0", "uniform:8:10:-5",
        "cluster:0x8", "cluster:8x0", "cluster:2x1000", "cluster:99999999999x8", "cluster:2x4:0",
        "cluster:2x4:fast", "cluster:2", "cluster:2x6:nvlink", "full0", "full2000",
        "full99999999999"}) {
    CAPTURE(t);
    const auto r = simulate({"--topology", t, "--algo", "ring"});
    CHECK(r.rc == 2);
    CHECK(r.err.rfind("ccoll simulate: --topology ", 0) == 0);
    CHECK(r.err.find(t) != std::string::npos);
    CHECK(r.out.empty());
  }
  CHECK(simulate({"--topology", "uniform:0", "--algo", "ring"}).rc ==
        simulate({"--topology", "cluster:0x8", "--algo", "ring"}).rc);
  // At the limits: accepted.
  CHECK(simulate({"--topology", "cluster:1x1", "--algo", "ring"}).rc == 0);
  CHECK(simulate({"--topology", "full1", "--algo", "ring"}).rc == 0);
  CHECK(ccoll::cli::load_setup(ccoll::cli::parse_options({"--topology", "uniform:4096"}))
            .uniform_ranks == 4096);
  // A name that is neither a file nor a preset family may be a missing file: exit status 1.
  CHECK(simulate({"--topology", "nosuchpreset", "--algo", "ring"}).rc == 1);
}

TEST_CASE("input limits: plans above the step limit are refused before they are built") {
  struct Big {
    std::vector<std::string> args;
    const char* advice;  // the option the message tells the user to change
  };
  const std::vector<Big> big{
      {{"--topology", "full8", "--algo", "ring", "--chunks", "65536"}, "lower --chunks"},
      {{"--topology", "full8", "--algo", "ring", "--slot-bytes", "4", "--bytes", "1G"},
       "raise --slot-bytes"},
      {{"--topology", "uniform:4096", "--algo", "ring"}, "fewer ranks"},
      {{"--topology", "uniform:4096", "--algo", "tree", "--alpha-us", "0"}, "--alpha-us"},
      {{"--topology", "dgx1v", "--algo", "forest", "--split", "4096", "--chunks", "4096"},
       "lower --split"},
  };
  for (const auto& b : big) {
    CAPTURE(b.args);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = simulate(b.args);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(r.rc == 2);
    CHECK(r.err.find("4194304") != std::string::npos);  // the limit, in the message
    CHECK(r.err.find(b.advice) != std::string::npos);
    CHECK(s < 2.0);  // refused from the estimate, not after building
  }
  // The forest on a complete graph: bounded ranks (uniform:64 never finished before).
  const auto f = simulate({"--topology", "uniform:64", "--algo", "forest"});
  CHECK(f.rc == 2);
  CHECK(f.err.find("32") != std::string::npos);
  CHECK(simulate({"--topology", "full64", "--algo", "forest"}).rc == 2);
}

TEST_CASE("input limits: the plan-size estimate is close to the plan built") {
  for (const std::string t : {"full8", "dgx1v", "cluster:2x4:pcie:10"})
    for (const auto& a : ccoll::algo::algorithms())
      for (const auto& extra :
           {std::vector<std::string>{}, {"--chunks", "16"}, {"--bytes", "1G"}}) {
        if (a.name == "hdbtree" && !extra.empty() && extra[0] == "--chunks") continue;
        std::vector<std::string> args{"--topology", t, "--algo", a.name, "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        CAPTURE(args);
        const auto r = plan(args);
        REQUIRE(r.rc == 0);
        const auto j = nlohmann::json::parse(r.out)["plan"];
        const double ratio = j["estimated_steps"].get<double>() / j["steps"].get<std::uint64_t>();
        CHECK(ratio > 0.25);
        CHECK(ratio < 8);
      }
}

TEST_CASE("--trace to a path that cannot be written fails before the simulation") {
  const auto r = simulate({"--topology", "full8", "--algo", "ring", "--csv", "--trace",
                           "/nonexistent-ccoll-dir/trace.json"});
  CHECK(r.rc == 1);
  CHECK(r.out.empty());  // nothing simulated or printed
  CHECK(r.err.find("--trace") != std::string::npos);
  CHECK(r.err.find("/nonexistent-ccoll-dir/trace.json") != std::string::npos);
}

namespace {

// M machines of G GPUs, every GPU pair of a machine linked (25 GB/s), each GPU on its machine's
// NIC (12.5 GB/s), the NICs on one switch; no latencies, so the chunk model's optimum is its cap.
std::string meshed_cluster(int machines, int gpus) {
  nlohmann::json j;
  j["name"] = std::to_string(machines) + "x" + std::to_string(gpus);
  j["nodes"] = nlohmann::json::array({{{"id", "sw"}, {"kind", "switch"}}});
  j["links"] = nlohmann::json::array();
  for (int m = 0; m < machines; ++m) {
    const std::string host = "m" + std::to_string(m), nic = host + ".nic";
    j["nodes"].push_back({{"id", nic}, {"kind", "nic"}, {"host", host}});
    j["links"].push_back({{"a", nic}, {"b", "sw"}, {"bandwidth_GBps", 12.5}});
    for (int g = 0; g < gpus; ++g) {
      const std::string id = host + ".gpu" + std::to_string(g);
      j["nodes"].push_back({{"id", id}, {"kind", "gpu"}, {"host", host}});
      j["links"].push_back({{"a", id}, {"b", nic}, {"bandwidth_GBps", 12.5}});
      for (int h = 0; h < g; ++h)
        j["links"].push_back(
            {{"a", host + ".gpu" + std::to_string(h)}, {"b", id}, {"bandwidth_GBps", 25}});
    }
  }
  return j.dump();
}

}  // namespace

TEST_CASE("default tree-set plans fit the step budget; explicit --split keeps the limit") {
  const auto small = write_temp("mesh2x4.json", meshed_cluster(2, 4));
  const auto big = write_temp("mesh8x8.json", meshed_cluster(8, 8));
  std::string big_err;
  for (const auto& file : {small, big}) {
    CAPTURE(file);
    for (const std::string algo : {"forest", "forest-overlap"}) {
      if (file == big && algo != "forest") continue;  // 8 x 8 takes the most time in this suite
      CAPTURE(algo);
      const auto r = plan({"--topology", file, "--algo", algo, "--json"});
      REQUIRE(r.rc == 0);
      if (file == big) big_err = r.err;
      const auto j = nlohmann::json::parse(r.out);
      const auto steps = j["plan"]["steps"].get<std::uint64_t>();
      CHECK(steps <= 65536);
      CHECK(steps >= 1024);  // chunks enough to fill the pipeline
      const double ratio = j["plan"]["estimated_steps"].get<double>() / static_cast<double>(steps);
      CHECK(ratio > 0.5);
      CHECK(ratio < 2);
      // Channels in proportion to the trees: at most one more per tree pair than a copy each.
      const auto pairs = j["forest"]["pairs"].get<std::size_t>();
      const auto channels = j["plan"]["channels"].get<std::size_t>() / (algo == "forest" ? 1 : 2);
      CHECK(channels >= pairs);
      CHECK(channels <= 2 * pairs + 1);
      // Never faster than the forest's bandwidth-only bound (Property 2).
      CHECK(j["predicted"]["time_s"].get<double>() >=
            j["forest"]["bandwidth_only_time_s"].get<double>() * (1 - 1e-9));
    }
  }
  // 2 x 4: trees of equal weight, one channel each, and no warning (nothing is lost).
  const auto r = plan({"--topology", small, "--algo", "forest", "--json"});
  const auto j = nlohmann::json::parse(r.out);
  CHECK(r.err.empty());
  CHECK(j["predicted"]["time_s"].get<double>() <
        j["forest"]["bandwidth_only_time_s"].get<double>() * 1.15);
  // 8 x 8: the budget sets the chunks, and stderr says so.
  CHECK(big_err.find("warning") != std::string::npos);
  CHECK(big_err.find("65536 steps") != std::string::npos);
  // What the user asks for explicitly is checked against the CLI's limit, as before.
  const auto e = plan({"--topology", big, "--algo", "forest", "--split", "64"});
  CHECK(e.rc == 2);
  CHECK(e.err.find("4194304") != std::string::npos);
  CHECK(e.err.find("lower --split") != std::string::npos);
  const auto c = plan({"--topology", big, "--algo", "forest", "--chunks", "4096"});
  CHECK(c.rc == 2);
  CHECK(c.err.find("lower --chunks") != std::string::npos);
  for (const auto& f : {small, big}) std::filesystem::remove(f);
}

TEST_CASE("plan and simulate --collective: every collective's plans verified and predicted") {
  // On a uniform network of P = 8 links of 10 GB/s, a ring moves (P-1)/P of the buffer per link
  // in either half of an allreduce: reduce-scatter and all-gather each take half of its time, and
  // their busbw (factor (P-1)/P) equals the allreduce's (2(P-1)/P).
  auto busbw = [](const std::string& csv, const std::string& algo) {
    std::istringstream in(csv);
    std::string line;
    while (std::getline(in, line))
      if (line.find("," + algo + ",") != std::string::npos) {
        std::vector<std::string> f;
        std::string cell;
        std::istringstream row(line);
        while (std::getline(row, cell, ',')) f.push_back(cell);
        return std::stod(f.at(8));
      }
    return -1.0;
  };
  const std::vector<std::string> base{"--topology", "uniform:8:10:5", "--algo", "ring", "--bytes",
                                      "64M",        "--csv"};
  auto run = [&](const std::string& c) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--collective", c});
    const Run r = simulate(args);
    INFO(c << ": " << r.err);
    REQUIRE(r.rc == 0);
    return busbw(r.out, "ring");
  };
  const double ar = run("allreduce");
  CHECK(run("reduce_scatter") == doctest::Approx(ar).epsilon(0.02));
  CHECK(run("all_gather") == doctest::Approx(ar).epsilon(0.02));
  // A chain moves the whole buffer over each link once: close to the link's 10 GB/s.
  const double bc = run("broadcast");
  CHECK(bc > 8.0);
  CHECK(bc < 10.0);
  CHECK(run("reduce") == doctest::Approx(bc).epsilon(0.02));
  // plan: the verifier's proof, for every root.
  for (const char* root : {"0", "5"}) {
    const Run p = plan({"--topology", "uniform:6", "--algo", "direct", "--collective", "reduce",
                        "--root", root, "--bytes", "1M"});
    INFO(p.err);
    CHECK(p.rc == 0);
  }
  // Errors: an algorithm without the collective's plans, a bad name, a root out of range.
  const Run tree =
      plan({"--topology", "uniform:4", "--algo", "tree", "--collective", "all_gather"});
  CHECK(tree.rc == 2);
  CHECK(tree.err.find("plans no all_gather") != std::string::npos);
  // Broadcast and reduce also have tree and double-binary-tree plans.
  for (const char* algo : {"tree", "dbtree"}) {
    const Run t = plan(
        {"--topology", "uniform:7", "--algo", algo, "--collective", "broadcast", "--root", "4"});
    INFO(t.err);
    CHECK(t.rc == 0);
  }
  const Run bad = plan({"--topology", "uniform:4", "--algo", "ring", "--collective", "gather"});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--collective: expected") != std::string::npos);
  const Run far =
      plan({"--topology", "uniform:4", "--algo", "ring", "--collective", "reduce", "--root", "4"});
  CHECK(far.rc != 0);
  CHECK(far.err.find("root") != std::string::npos);
  const Run gap = simulate({"--topology", "uniform:4", "--algo", "ring", "--bytes", "1M,,2M"});
  CHECK(gap.rc == 2);
  CHECK(gap.err.find("--bytes: an empty entry") != std::string::npos);
  const Run rootless = plan(
      {"--topology", "uniform:4", "--algo", "ring", "--collective", "allreduce", "--root", "2"});
  CHECK(rootless.rc == 2);
  CHECK(rootless.err.find("--root: only with") != std::string::npos);
  // The forest through inactive GPUs: blocks per active rank, for the default size and others.
  for (const char* collective : {"reduce_scatter", "all_gather"})
    for (const char* bytes : {"16M", "1M", "1000"}) {
      const Run f = plan({"--topology", "dgx1v", "--algo", "forest", "--active", "gpu0,gpu2,gpu5",
                          "--collective", collective, "--bytes", bytes});
      INFO(collective << " " << bytes << ": " << f.err);
      CHECK(f.rc == 0);
      CHECK(f.out.find("(3 active)") != std::string::npos);
    }
}
}  // namespace cli_test
