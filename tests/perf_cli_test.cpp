// Tests of ccoll_perf's command line, transports, algorithm choice (the library's registry), size
// sweep, output formats and input/check data (benchmarks/ccoll_perf/perf_options.hpp,
// perf_prepare.hpp, perf_report.hpp, transport_registry.hpp, perf_data.hpp), and of runs through
// the benchmark's threads path (the forest on dgx1v among them) with their results checked. The
// build links ccoll_perf's own code, the transport table among it (benchmarks/CMakeLists.txt
// defines CCOLL_PERF_CORE); without it (no benchmarks) there is nothing to test.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#if CCOLL_PERF_CORE

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../benchmarks/ccoll_perf/controls.hpp"
#include "../benchmarks/ccoll_perf/device_sweep.hpp"
#include "../benchmarks/ccoll_perf/perf_data.hpp"
#include "../benchmarks/ccoll_perf/perf_options.hpp"
#include "../benchmarks/ccoll_perf/perf_prepare.hpp"
#include "../benchmarks/ccoll_perf/perf_report.hpp"
#include "../benchmarks/ccoll_perf/perf_tune.hpp"
#include "../benchmarks/ccoll_perf/runner.hpp"
#include "../benchmarks/ccoll_perf/transport_registry.hpp"

namespace perf_cli_test {
using namespace ccoll_perf;

namespace {
Options parse(const std::vector<std::string>& args) {
  return parse_args(args);
}
}  // namespace

TEST_CASE("parse_size accepts bytes and K/M/G suffixes") {
  CHECK(parse_size("8") == 8u);
  CHECK(parse_size("0") == 0u);
  CHECK(parse_size("8K") == 8192u);
  CHECK(parse_size("8k") == 8192u);
  CHECK(parse_size("16M") == 16u << 20);
  CHECK(parse_size("1G") == 1u << 30);
  CHECK(parse_size("2KB") == 2048u);
  CHECK(parse_size("4MiB") == 4u << 20);
  CHECK(parse_size("64B") == 64u);
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("M"));
  CHECK_FALSE(parse_size("1X"));
  CHECK_FALSE(parse_size("1MM"));
  CHECK_FALSE(parse_size("-1"));
  CHECK_FALSE(parse_size("99999999999999999999"));
  CHECK_FALSE(parse_size("99999999999999G"));
  // 2^64 - 1 is the largest; one more does not wrap around.
  CHECK(parse_size("18446744073709551615") == ~std::uint64_t{0});
  CHECK_FALSE(parse_size("18446744073709551616"));
  CHECK_FALSE(parse_size("18446744073709551619"));
}

TEST_CASE("defaults follow all_reduce_perf: 8 B..64 MiB by 2, 20 iterations, check on") {
  const Options o = parse({});
  CHECK(o.min_bytes == 8);
  CHECK(o.max_bytes == 64u << 20);
  CHECK(o.step_factor == 2.0);
  CHECK(o.iters == 20);
  CHECK(o.warmup == 5);
  CHECK(o.check);
  CHECK(o.nranks == 4);
  CHECK(o.transport == "threads");
  CHECK(o.dtype == ccoll::DataType::f32);
  CHECK(o.op == ccoll::ReduceOp::sum);
  CHECK(o.algos == std::vector<std::string>{"ring", "dbtree", "tree", "tree-overlap", "direct"});
  CHECK(o.topology.empty());
  CHECK(o.split == 0);
  CHECK_FALSE(o.list_algos);
  CHECK(o.peer == Peer::none);
  CHECK(o.gloo_iface == "lo");
  CHECK_FALSE(o.help);
}

TEST_CASE("every flag, short and long") {
  const Options o = parse({"-b",
                           "1K",
                           "--maxbytes",
                           "4M",
                           "-f",
                           "4",
                           "-n",
                           "7",
                           "--warmup_iters",
                           "0",
                           "-c",
                           "0",
                           "-t",
                           "3",
                           "-a",
                           "tree,ring",
                           "-d",
                           "bf16",
                           "-o",
                           "max",
                           "--transport",
                           "shm",
                           "--json",
                           "out.json",
                           "--csv=out.csv",
                           "-m",
                           "0"});
  CHECK(o.min_bytes == 1024);
  CHECK(o.max_bytes == 4u << 20);
  CHECK(o.step_factor == 4.0);
  CHECK(o.iters == 7);
  CHECK(o.warmup == 0);
  CHECK_FALSE(o.check);
  CHECK(o.nranks == 3);
  CHECK(o.nranks_given);
  REQUIRE(o.algos.size() == 2);
  CHECK(o.algos[0] == "tree");
  CHECK(o.algos[1] == "ring");
  CHECK(o.dtype == ccoll::DataType::bf16);
  CHECK(o.op == ccoll::ReduceOp::max);
  CHECK(o.transport == "shm");
  CHECK(o.json_path == "out.json");
  CHECK(o.csv_path == "out.csv");
  CHECK_FALSE(o.membw);

  const Options p = parse({"--peer", "mpi", "-a", "none", "--datatype=double", "--op", "avg"});
  CHECK(p.peer == Peer::mpi);
  CHECK(p.algos.empty());
  CHECK(p.dtype == ccoll::DataType::f64);
  CHECK(p.op == ccoll::ReduceOp::avg);
  const Options k =
      parse({"--slot_bytes", "256K", "--nslots", "8", "--nchannels", "2", "--nchunks=16"});
  CHECK(k.slot_bytes == 256u << 10);
  CHECK(k.nslots == 8);
  CHECK(k.nchannels == 2);
  CHECK(k.nchunks == 16);
  CHECK(parse({}).slot_bytes == 0);  // 0 keeps the library's default
  CHECK_FALSE(parse({}).stream_slot_bytes.has_value());
  CHECK(parse({"--stream_slot_bytes", "0"}).stream_slot_bytes == 0u);  // never
  CHECK(parse({"--stream_slot_bytes=4M"}).stream_slot_bytes == 4u << 20);
  CHECK_THROWS_AS(parse({"--stream_slot_bytes", "x"}), UsageError);
  CHECK(parse({}).slot_stores == Options::SlotStores::automatic);
  CHECK(parse({"--slot_stores", "cached"}).slot_stores == Options::SlotStores::cached);
  CHECK(parse({"--slot_stores=streamed"}).slot_stores == Options::SlotStores::streamed);
  CHECK_THROWS_AS(parse({"--slot_stores", "nt"}), UsageError);
  CHECK(parse({}).rounds == 1);
  CHECK(parse({"-r", "3"}).rounds == 3);
  CHECK(parse({"--rounds=2"}).rounds == 2);
  CHECK_THROWS_AS(parse({"-r", "0"}), UsageError);
  CHECK_THROWS_AS(parse({"--slot_bytes", "0"}), UsageError);
  CHECK_THROWS_AS(parse({"--nslots", "0"}), UsageError);
  const Options t = parse({"--topology", "dgx1v", "--split=3", "-a", "forest"});
  CHECK(t.topology == "dgx1v");
  CHECK(t.split == 3);
  CHECK(t.algos == std::vector<std::string>{"forest"});
  CHECK(parse({"-a", "forest", "--topology=pcie8"}).topology == "pcie8");  // either order
  CHECK_THROWS_AS(parse({"--split", "-1"}), UsageError);
  CHECK_THROWS_AS(parse({"--topology"}), UsageError);
  CHECK_FALSE(parse({}).window);
  CHECK(parse({"--transport", "shm", "--window", "1"}).window);
  CHECK_THROWS_AS(parse({"--window", "1"}), UsageError);  // threads have no windows
  CHECK_THROWS_AS(parse({"--transport", "shm", "--window", "2"}), UsageError);
  CHECK_FALSE(parse({}).eager_rooted_bytes.has_value());
  CHECK(parse({"--eager_rooted", "4K"}).eager_rooted_bytes == 4096u);
  CHECK(parse({"--eager_rooted", "0"}).eager_rooted_bytes == 0u);
  CHECK_THROWS_AS(parse({"--eager_rooted", "lots"}), UsageError);
  CHECK(parse({"--in_band_agreement", "1K"}).in_band_agreement_bytes == 1024u);
  CHECK(parse({"-h"}).help);
  CHECK(parse({"--help"}).help);
}

namespace {
// The message of the UsageError that parse_args (and, with `prepare`, prepare_algorithms) throws.
std::string usage_message(const std::vector<std::string>& args, bool prepare = false) {
  try {
    const Options o = parse_args(args);
    if (prepare) prepare_algorithms(o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("algorithm lists: registry names, all, duplicates, schedules, the underscore spelling") {
  const auto registered = ccoll::algo::algorithms();
  REQUIRE(registered.size() >= 5);
  // all without --topology: the default list, then every other algorithm on abstract ranks.
  const auto all = parse_algos("all");
  REQUIRE(all.size() >= 5);
  CHECK(std::vector<std::string>(all.begin(), all.begin() + 5) == default_algorithms());
  for (const auto& a : registered) {
    CAPTURE(a.name);
    const bool listed = std::find(all.begin(), all.end(), a.name) != all.end();
    CHECK(listed == !a.needs_topology);
  }
  // With a topology: every registered algorithm.
  const auto all_topo = parse_algos("all", true);
  for (const auto& a : registered)
    CHECK(std::find(all_topo.begin(), all_topo.end(), a.name) != all_topo.end());
  CHECK(std::find(all_topo.begin(), all_topo.end(), "forest") != all_topo.end());
  CHECK(parse_algos("ring,ring,dbtree").size() == 2);
  CHECK(parse_algos("direct") == std::vector<std::string>{"direct"});
  // Names are canonical: a schedule suffix that is the default goes away.
  CHECK(parse_algos("ring-overlap,ring") == std::vector<std::string>{"ring"});
  CHECK(parse_algos("ring-phased") == std::vector<std::string>{"ring-phased"});
  CHECK(parse_algos("tree-phased,tree") == std::vector<std::string>{"tree"});
  const auto v = parse_algos("tree_overlap,all");
  REQUIRE(v.size() == all.size());
  CHECK(v[0] == "tree-overlap");
  CHECK(v[1] == "ring");
  CHECK(find_algorithm("tree-overlap").overlap);
  CHECK_FALSE(find_algorithm("tree").overlap);
  CHECK(parse_algos("none").empty());
  CHECK_THROWS_AS(parse_algos("rings"), UsageError);
  CHECK_THROWS_AS(parse_algos("ring,"), UsageError);
  CHECK_THROWS_AS(parse_algos("forest"), UsageError);  // needs a topology
  CHECK(parse_algos("forest", true) == std::vector<std::string>{"forest"});
  // An unknown name is answered with the registry's names.
  const std::string m = usage_message({"-a", "rings"});
  CHECK(m.find("-a/--algo") != std::string::npos);
  CHECK(m.find("'rings'") != std::string::npos);
  for (const auto& a : registered) CHECK(m.find(a.name) != std::string::npos);
}

TEST_CASE("-a list names every registered algorithm") {
  const Options o = parse({"-a", "list"});
  CHECK(o.list_algos);
  const std::string text = format_algorithm_list();
  for (const auto& a : ccoll::algo::algorithms()) {
    CAPTURE(a.name);
    CHECK(text.find("\n" + a.name + " ") != std::string::npos);  // at the start of a line
    CHECK(text.find(a.description) != std::string::npos);
  }
  CHECK(text.find("needed") != std::string::npos);  // the forest needs --topology
}

TEST_CASE("algorithms on a physical topology: --topology, the rank count, usage errors") {
  // A forest without a graph is a usage error that says what to add.
  const std::string no_topo = usage_message({"-a", "forest"});
  CHECK(no_topo.find("forest") != std::string::npos);
  CHECK(no_topo.find("--topology") != std::string::npos);
  // The forest on dgx1v has 8 ranks: -t 4 disagrees, and the message names both numbers.
  CHECK(usage_message({"-t", "4", "--topology", "dgx1v", "-a", "forest"}) == "no error");
  const std::string wrong_t =
      usage_message({"-t", "4", "--topology", "dgx1v", "-a", "forest"}, true);
  CHECK(wrong_t.find("-t/--nranks 4") != std::string::npos);
  CHECK(wrong_t.find("8 ranks") != std::string::npos);
  CHECK(wrong_t.find("dgx1v") != std::string::npos);
  // Without -t the count is the algorithm's; with a matching -t it is accepted.
  const Prepared p = prepare_algorithms(parse({"--topology", "dgx1v", "-a", "forest,ring"}));
  CHECK(p.nranks == 8);
  REQUIRE(p.topology != nullptr);
  REQUIRE(p.algos.size() == 2);
  CHECK(p.algos[0].name == "forest");
  CHECK(p.algos[0].logical.nranks() == 8);
  CHECK_FALSE(p.algos[0].spec.overlap);
  CHECK(p.algos[1].spec.overlap);
  CHECK(prepare_algorithms(parse({"-t", "8", "--topology", "dgx1v", "-a", "forest"})).nranks == 8);
  // Without a topology every algorithm plans for -t ranks (default 4).
  const Prepared q = prepare_algorithms(parse({"-t", "3"}));
  CHECK(q.nranks == 3);
  CHECK(q.topology == nullptr);
  CHECK(q.algos.size() == 5);
  CHECK(prepare_algorithms(parse({})).nranks == 4);
  // A topology that does not load is a usage error naming the flag.
  CHECK(usage_message({"--topology", "no-such-topology", "-a", "ring"}, true).find("--topology") !=
        std::string::npos);
}

TEST_CASE("bad input names the flag") {
  auto message = [](const std::vector<std::string>& args) { return usage_message(args); };
  CHECK(message({"-b", "1X"}).find("-b") != std::string::npos);
  CHECK(message({"-n", "0"}).find("-n") != std::string::npos);
  CHECK(message({"-n", "abc"}).find("-n") != std::string::npos);
  CHECK(message({"-t"}).find("-t: expected a value") != std::string::npos);
  CHECK(message({"-t", "0"}).find("-t") != std::string::npos);
  CHECK(message({"-c", "2"}).find("-c") != std::string::npos);
  CHECK(message({"-f", "0.5"}).find("-f") != std::string::npos);
  CHECK(message({"-f", "x"}).find("-f") != std::string::npos);
  CHECK(message({"-d", "complex"}).find("-d") != std::string::npos);
  CHECK(message({"-o", "xor"}).find("-o") != std::string::npos);
  CHECK(message({"--transport", "tcp"}).find("--transport") != std::string::npos);
  CHECK(message({"--peer", "nccl"}).find("--peer") != std::string::npos);
  CHECK(message({"--peer", "mpi", "--peer", "gloo"}).find("--peer") != std::string::npos);
  CHECK(message({"--gloo_iface", ""}).find("--gloo_iface") != std::string::npos);
  CHECK(message({"--bogus"}).find("--bogus") != std::string::npos);
  CHECK(message({"-b", "2M", "-e", "1M"}).find("-b/--minbytes") != std::string::npos);
  CHECK(message({"-f", "1", "-b", "1K", "-e", "2K"}).find("-f") != std::string::npos);
  CHECK(message({"-a", "none"}).find("none") != std::string::npos);
  CHECK(message({"-b", "1M", "-e", "1M", "-f", "1"}) == "no error");
}

TEST_CASE("a ccoll_perf built without MPI names what needs MPI and how to build it with MPI") {
  // Whatever this build has: main.cpp prints this refusal only in a build without MPI.
  CHECK(refusal_without_mpi(parse({}), false).empty());
  CHECK(refusal_without_mpi(parse({"--transport", "shm", "-t", "4"}), false).empty());
  CHECK(refusal_without_mpi(parse({"--topology", "dgx1v", "-a", "forest"}), false).empty());
  struct Case {
    std::vector<std::string> args;
    bool under_mpirun;
    const char* what;
  };
  const Case cases[] = {
      {{}, true, "a run under mpirun"},
      {{"--transport", "shm"}, true, "a run under mpirun"},
      {{"--peer", "mpi"}, false, "--peer mpi"},
      {{"--peer", "mpi"}, true, "a run under mpirun"},
      {{"--topology", "measure"}, false, "--topology measure"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string refusal = refusal_without_mpi(parse(c.args), c.under_mpirun);
    CHECK(refusal.find(std::string("built without MPI, which ") + c.what + " needs") !=
          std::string::npos);
    CHECK(refusal.find("`scripts/setup -DCCOLL_ENABLE_MPI=AUTO ccoll_perf`") != std::string::npos);
  }
}

TEST_CASE("--peer gloo: parsed where built with Gloo, a clear error elsewhere") {
  auto message = [](const std::vector<std::string>& args) { return usage_message(args); };
  if (kHaveGloo) {
    const Options g = parse({"--peer", "gloo", "-a", "none", "--gloo-iface", "eth0"});
    CHECK(g.peer == Peer::gloo);
    CHECK(g.algos.empty());
    CHECK(g.gloo_iface == "eth0");
    CHECK(parse({"--peer=gloo", "--gloo_iface=lo"}).gloo_iface == "lo");
    CHECK(parse({"--peer", "gloo", "--peer", "gloo"}).peer == Peer::gloo);
    CHECK(message({"--peer", "gloo", "--peer", "mpi"}).find("one peer a run") != std::string::npos);
  } else {
    CHECK(message({"--peer", "gloo"}).find("built without Gloo") != std::string::npos);
  }
  // The table names the peer in its column, and its rows stay under the header.
  Row r = make_row("mpi-hybrid", "ring", 4, 1u << 20, 1u << 18, ccoll::DataType::f32,
                   ccoll::ReduceOp::sum, 0.001, 0);
  r.peer_busbw_GBps = 0.01;
  const std::string header = format_table_header(false, true, "gloo");
  CHECK(header.find("gloo busbw") != std::string::npos);
  const std::string row = format_row(r, false, true);
  CHECK(row.size() - 1 == header.find('\n'));
  CHECK(row.find("157x") != std::string::npos);  // 1.573 / 0.01: no decimals from 100 up
}

TEST_CASE(
    "--transport cuda-virtual / cuda-p2p: parsed where built with CUDA, clear errors "
    "elsewhere") {
  auto message = [](const std::vector<std::string>& args) { return usage_message(args); };
  if (kHaveCuda) {
    const Options o = parse({"--transport", "cuda-virtual", "-t", "8"});
    CHECK(o.transport == "cuda-virtual");
    CHECK(is_device(o.transport));
    CHECK(o.nranks == 8);
    CHECK(parse({"--transport=cuda-virtual"}).transport == "cuda-virtual");
    // The registry decides at run time: no backend registered is a usage error, not a crash.
    const std::string missing = [] {
      try {
        require_device_transport("cuda-virtual", nullptr);
      } catch (const UsageError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    }();
    CHECK(missing.find("--transport cuda-virtual: not available in this build") !=
          std::string::npos);
    const DeviceTransportEntry entry{"cuda-virtual", nullptr};
    CHECK(&require_device_transport("cuda-virtual", &entry) == &entry);
  } else {
    CHECK(message({"--transport", "cuda-virtual"}).find("built without CUDA") != std::string::npos);
  }
  // cuda-p2p: only where the library has its transport; never silently another one.
  const std::string p2p = message({"--transport", "cuda-p2p"});
  if (!kHaveCuda) {
    CHECK(p2p.find("--transport cuda-p2p: this ccoll_perf was built without CUDA") !=
          std::string::npos);
  } else if (!kLibraryHasCudaP2P) {
    CHECK(p2p.find("--transport cuda-p2p: not available in this build") != std::string::npos);
  } else {
    CHECK(p2p == "no error");
    CHECK_THROWS_AS(require_device_transport("cuda-p2p", nullptr), UsageError);
  }
  CHECK(is_device("cuda-virtual"));
  CHECK(is_device("cuda-p2p"));
  CHECK_FALSE(is_device("shm"));
  CHECK(message({"--transport", "gpu"}).find("cuda-virtual") != std::string::npos);
}

TEST_CASE("the transport table: --transport's names, --help and the errors come from it") {
  std::vector<std::string_view> names;
  for (const TransportEntry& t : transports()) {
    const std::string name(t.name);
    CAPTURE(name);
    CHECK(std::find(names.begin(), names.end(), t.name) == names.end());  // each name once
    names.push_back(t.name);
    CHECK(find_transport(name) == &t);
    CHECK(&transport_entry(name) == &t);
    CHECK_FALSE(t.help.empty());
    CHECK(transport_help().find(name + " (" + std::string(t.help) + ")") != std::string::npos);
    CHECK(usage_message({"--transport", "tcp"}).find(name) != std::string::npos);
    // A host transport makes ccoll's Allreduce itself (where this build can run it: MPI's not
    // without MPI); a GPU one runs through a device backend.
    const bool makes = t.make != nullptr;
    if (t.ranks == RankPlacement::device) {
      CHECK_FALSE(makes);
    } else {
      CHECK(makes == t.unavailable.empty());
    }
    CHECK((t.describe == nullptr) == (t.ranks == RankPlacement::device));
    CHECK(is_device(name) == (t.ranks == RankPlacement::device));
    if (t.unavailable.empty()) {
      CHECK(parse({"--transport", name}).transport == name);
    } else {
      CHECK(usage_message({"--transport", name}) ==
            "--transport " + name + ": " + std::string(t.unavailable));
    }
  }
  CHECK(usage_message({"--transport", "tcp"}) ==
        "--transport: expected threads, shm, mpi, mpi-hybrid, cuda-virtual or cuda-p2p, got 'tcp'");
  CHECK(find_transport("tcp") == nullptr);
  CHECK_FALSE(is_device("tcp"));
  CHECK_THROWS_AS(transport_entry("tcp"), std::invalid_argument);
  CHECK(find_transport("shm")->windows);
  CHECK_FALSE(find_transport("threads")->windows);
  CHECK(find_transport("threads")->describe() == "HostThreads");
  CHECK(find_transport("shm")->describe() == "SharedMemory");
  // --help's paragraph is the table's accounts, host transports first, wrapped like the others.
  CHECK(transport_help().rfind("threads (P threads in this process), shm (", 0) == 0);
  const std::string help = usage_text();
  const std::string lead = "      --transport T       ";
  const auto begin = help.find(lead);
  const auto end = help.find("      --peer P ");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::string flat;
  std::istringstream lines(help.substr(begin, end - begin));
  for (std::string line; std::getline(lines, line);) {
    CHECK(line.size() <= 94);
    REQUIRE(line.size() > lead.size());
    flat += (flat.empty() ? "" : " ") + line.substr(lead.size());
  }
  CHECK(flat == transport_help() + ", default threads");
  // A GPU transport's ranks have no rank view on the host.
  const Prepared p = prepare_algorithms(parse({"-a", "ring", "-t", "2"}));
  CHECK_THROWS_WITH_AS(make_collective("cuda-virtual", p.algos[0], ccoll::Config{}),
                       "--transport cuda-virtual: runs through a device transport "
                       "(device_backend.hpp)",
                       std::invalid_argument);
}

TEST_CASE("--peer nccl: only beside a GPU transport, only where built with NCCL") {
  auto message = [](const std::vector<std::string>& args) { return usage_message(args); };
  if (kHaveNccl) {
    const Options o = parse({"--transport", "cuda-virtual", "--peer", "nccl", "-r", "3"});
    CHECK(o.peer == Peer::nccl);
    CHECK(o.rounds == 3);
    CHECK(parse({"--transport", "cuda-virtual", "--peer", "nccl", "-a", "none"}).algos.empty());
    CHECK(message({"--peer", "nccl"}).find("only with --transport cuda-virtual") !=
          std::string::npos);
    CHECK(message({"--transport", "shm", "--peer", "nccl"}).find("only with --transport") !=
          std::string::npos);
  } else {
    CHECK(message({"--peer", "nccl", "--transport", "cuda-virtual"})
              .find("--peer nccl: this ccoll_perf was built without NCCL") != std::string::npos);
    CHECK(message({"--peer", "nccl"}).find("built without NCCL") != std::string::npos);
  }
  if (kHaveCuda) {
    CHECK(message({"--transport", "cuda-virtual", "--peer", "mpi"})
              .find("--peer mpi: not with --transport cuda-virtual") != std::string::npos);
  }
  CHECK(to_string(Peer::nccl) == "nccl");
}

TEST_CASE("a GPU table: the plan's HBM bound and its %, the peer's algbw and the ratio of times") {
  // ccoll: 4 virtual ranks, 16 MiB in 100 us; NCCL: one rank on one GPU, the same size in 50 us.
  Row r = make_row("cuda-virtual", "ring", 4, 16u << 20, 4u << 20, ccoll::DataType::f32,
                   ccoll::ReduceOp::sum, 100e-6, 0);
  const Row peer = make_row("nccl", "ncclAllReduce", 1, 16u << 20, 4u << 20, ccoll::DataType::f32,
                            ccoll::ReduceOp::sum, 50e-6, 0);
  CHECK(peer.busbw_GBps == 0.0);  // one rank moves nothing between ranks: busbw cannot compare
  r.peer_busbw_GBps = peer.busbw_GBps;
  r.peer_algbw_GBps = peer.algbw_GBps;
  CHECK(ratio_to_peer(r) == doctest::Approx(0.5));  // NCCL's time over ours
  set_device_bound(r, 40e-6);
  CHECK(r.bound_time_us == doctest::Approx(40.0));
  r.min_bound_time_us = 20.0;
  // pct_of_bound (busbw over the busbw at the bound) is the bound time over the measured time.
  CHECK(100.0 * r.busbw_GBps / r.bound_busbw_GBps == doctest::Approx(40.0));
  const std::string header = format_table_header(true, true, "nccl", true);
  CHECK(header.find("bound  %bound      min    %min") != std::string::npos);
  CHECK(header.find("nccl algbw") != std::string::npos);
  CHECK(header.find("%mbound") == std::string::npos);
  const std::string row = format_row(r, true, true, true);
  CHECK(row.size() - 1 == header.find('\n'));
  CHECK(row.find("40.00   40.0%    20.00   20.0%") != std::string::npos);
  CHECK(row.find("335.54   0.50x") != std::string::npos);  // NCCL's algbw, 16 MiB / 50 us
  Row unbounded = r;
  unbounded.bound_time_us = 0;
  unbounded.min_bound_time_us = 0;
  CHECK(format_row(unbounded, true, true, true).size() == row.size());
  // CSV and JSON: the ratio of algbw, said so, and the bound time.
  CHECK(csv_row(r).find(",0.5,") != std::string::npos);
  Report rep;
  rep.options.transport = "cuda-virtual";
  rep.gpu = GpuCalibration{"test GPU", 256u << 20, 20, 2000, 2500, 2600, 2.5, 3.5};
  rep.rows.push_back(r);
  const auto j = nlohmann::json::parse(to_json(rep));
  CHECK(j["options"]["transport"] == "cuda-virtual");
  CHECK(j["gpu_calibration"]["copy_kernel_GBps"] == doctest::Approx(2500));
  CHECK(j["gpu_calibration"]["cooperative_launch_us"] == doctest::Approx(3.5));
  CHECK(j["results"][0]["bound_time_us"] == doctest::Approx(40.0));
  CHECK(j["results"][0]["pct_of_bound"] == doctest::Approx(40.0));
  CHECK(j["results"][0]["min_bound_time_us"] == doctest::Approx(20.0));
  CHECK(j["results"][0]["pct_of_min_bound"] == doctest::Approx(20.0));
  CHECK(j["results"][0]["ratio_to_peer"] == doctest::Approx(0.5));
  CHECK(j["results"][0]["ratio_of"] == "algbw");
  // Host runs keep their JSON: no GPU fields.
  Report host;
  host.rows.push_back(
      make_row("shm", "ring", 2, 64, 16, ccoll::DataType::f32, ccoll::ReduceOp::sum, 1e-5, 0));
  host.rows[0].peer_busbw_GBps = 1.0;
  const auto h = nlohmann::json::parse(to_json(host));
  CHECK_FALSE(h.contains("gpu_calibration"));
  CHECK_FALSE(h["results"][0].contains("ratio_of"));
  CHECK_FALSE(h["results"][0].contains("bound_time_us"));
}

TEST_CASE("the HBM bound of a plan: its steps' bytes over the copy-kernel bandwidth") {
  ccoll::plan::PlanRequest req;
  req.nranks = 2;
  req.count = 1u << 20;
  req.elem_size = 4;
  const ccoll::plan::Plan p2 = ccoll::plan::build_ring(req);
  // The ring moves 8N for P = 2 (tests/plan_traffic_test.cpp): 32 MiB at 2e12 B/s.
  CHECK(device_bound_time_s(p2, 4, 2e12) == doctest::Approx(8.0 * (4u << 20) / 2e12));
  req.nranks = 4;
  const ccoll::plan::Plan p4 = ccoll::plan::build_ring(req);
  CHECK(device_bound_time_s(p4, 4, 2e12) == doctest::Approx(20.0 * (4u << 20) / 2e12));
  CHECK(device_bound_time_s(p4, 4, 0) == 0.0);
  // The minimum traffic: each rank's input read once and output written once, 2PN, whatever the
  // plan; the ring's 8N at P = 2 is twice it, its 20N at P = 4 two and a half times.
  CHECK(device_min_bound_time_s(2, 4u << 20, 2e12) == doctest::Approx(4.0 * (4u << 20) / 2e12));
  CHECK(device_bound_time_s(p4, 4, 2e12) / device_min_bound_time_s(4, 4u << 20, 2e12) ==
        doctest::Approx(2.5));
  CHECK(device_min_bound_time_s(4, 4u << 20, 0) == 0.0);
}

TEST_CASE("size sweep: geometric, inclusive, rounded like nccl-tests") {
  CHECK(size_sweep(8, 64, 2) == std::vector<std::uint64_t>{8, 16, 32, 64});
  CHECK(size_sweep(16u << 20, 64u << 20, 4) == std::vector<std::uint64_t>{16u << 20, 64u << 20});
  CHECK(size_sweep(1024, 1024, 1) == std::vector<std::uint64_t>{1024});
  CHECK(size_sweep(1, 10, 3) == std::vector<std::uint64_t>{1, 3, 9});
  CHECK(size_sweep(10, 20, 1.5) == std::vector<std::uint64_t>{10, 15});
  CHECK(size_sweep(0, 2, 2) == std::vector<std::uint64_t>{1, 2});
  // The default sweep: 8 B .. 64 MiB is 24 sizes.
  const auto def = size_sweep(8, 64u << 20, 2);
  CHECK(def.size() == 24);
  CHECK(def.front() == 8);
  CHECK(def.back() == 64u << 20);
  for (std::size_t i = 1; i < def.size(); ++i) CHECK(def[i] == 2 * def[i - 1]);
  CHECK(elements_for(8, ccoll::DataType::f64) == 1);
  CHECK(elements_for(7, ccoll::DataType::f64) == 0);
  CHECK(elements_for(10, ccoll::DataType::f16) == 5);
}

TEST_CASE("busbw and the memory bound") {
  CHECK(bus_factor(1) == 0.0);
  CHECK(bus_factor(2) == doctest::Approx(1.0));
  CHECK(bus_factor(4) == doctest::Approx(1.5));
  CHECK(bus_factor(8) == doctest::Approx(1.75));
  const Row r = make_row("shm", "ring", 4, 1000000, 250000, ccoll::DataType::f32,
                         ccoll::ReduceOp::sum, 0.001, 0);
  CHECK(r.time_us == doctest::Approx(1000.0));
  CHECK(r.algbw_GBps == doctest::Approx(1.0));
  CHECK(r.busbw_GBps == doctest::Approx(1.5));
  // busbw <= B(P-1)/P^2: P = 2 moves 2PN = 4N bytes for N of algbw, so B/4.
  CHECK(memory_bound_busbw(10e9, 2) == doctest::Approx(2.5e9));
  CHECK(memory_bound_busbw(16e9, 4) == doctest::Approx(3e9));
  CHECK(memory_bound_busbw(10e9, 1) == 0.0);
  // Consistency: at the bound, time = 2PN / B.
  for (int p = 2; p <= 64; p *= 2) {
    const double B = 12e9, N = 64e6;
    const double t = 2.0 * p * N / B;
    CHECK(N / t * bus_factor(p) == doctest::Approx(memory_bound_busbw(B, p)));
  }
  // B is the best kernel with a 1:1 read:write mix, whichever kind of store it uses; triad (2:1)
  // never counts.
  MemoryBandwidth m{2, 10.0, 11.0, 30.0, 0.0};
  CHECK(m.best_1to1_GBps() == 11.0);
  m.copy_nt_GBps = 14.0;
  CHECK(m.best_1to1_GBps() == 14.0);
  m.copy_GBps = 15.0;
  CHECK(m.best_1to1_GBps() == 15.0);
}

TEST_CASE("table rows line up under the header") {
  Row r = make_row("shm", "ring", 2, 16u << 20, 4u << 20, ccoll::DataType::f32,
                   ccoll::ReduceOp::sum, 0.01, 0);
  r.bound_busbw_GBps = 3.0;
  r.peer_busbw_GBps = 0.5;
  const std::string header = format_table_header(true, true);
  const std::string row = format_row(r, true, true);
  const auto first_line = header.substr(0, header.find('\n'));
  CHECK(row.size() - 1 == first_line.size());
  CHECK(row.find("16777216") != std::string::npos);
  CHECK(row.find("4194304") != std::string::npos);
  CHECK(row.find("float") != std::string::npos);
  CHECK(row.find("sum") != std::string::npos);
  CHECK(row.find("1.68") != std::string::npos);   // algbw = busbw for P = 2
  CHECK(row.find("55.9%") != std::string::npos);  // 1.678 / 3.0
  CHECK(row.find("3.36x") != std::string::npos);  // 1.678 / 0.5
  Row unchecked = r;
  unchecked.wrong = -1;
  CHECK(format_row(unchecked, false, false).find("N/A") != std::string::npos);
  CHECK(format_table_header(false, false).find("#wrong") != std::string::npos);
  CHECK(format_table_header(false, false).find("%mbound") == std::string::npos);
}

TEST_CASE("CSV and JSON carry every row") {
  Report rep;
  rep.command = "ccoll_perf -b \"8\"";
  rep.machine.cpu_model = "Test CPU";
  rep.machine.cores = 2;
  rep.membw.push_back({2, 10.0, 11.0, 12.0});
  rep.bound_membw_GBps = 11.0;
  rep.rows.push_back(
      make_row("shm", "ring", 2, 64, 16, ccoll::DataType::f32, ccoll::ReduceOp::sum, 1e-5, 0));
  rep.rows.push_back(make_row("mpi", "MPI_Allreduce", 2, 64, 16, ccoll::DataType::f32,
                              ccoll::ReduceOp::sum, 2e-5, 0));
  rep.rows[0].peer_busbw_GBps = rep.rows[1].busbw_GBps;
  rep.rows[0].bound_busbw_GBps = 2.75;
  rep.rows[1].paired_with = "ring";

  const std::string csv = csv_header() + csv_row(rep.rows[0]) + csv_row(rep.rows[1]);
  int lines = 0;
  for (char c : csv) lines += c == '\n';
  CHECK(lines == 3);
  CHECK(csv.find(",ring,allreduce\n") != std::string::npos);  // the peer row names its pairing
  rep.rows[0].collective = ccoll::plan::Collective::broadcast;
  CHECK(csv_row(rep.rows[0]).ends_with(",,broadcast\n"));  // each row names its collective
  CHECK(csv.find("shm,ring,2,64,16,float,sum,10,") != std::string::npos);
  CHECK(csv_row(rep.rows[0]).find(",2,") != std::string::npos);  // ratio 2x

  rep.options.topology = "dgx1v";
  const std::string json = to_json(rep);
  CHECK(json.find("\\\"8\\\"") != std::string::npos);  // the quotes of the command are escaped
  const auto j = nlohmann::json::parse(json);
  CHECK(j["command"] == rep.command);
  CHECK(j["options"]["transport"] == "threads");
  CHECK(j["options"]["stream_slot_bytes"].is_null());
  CHECK(j["options"]["slot_stores"] == "auto");
  CHECK(j["options"]["topology"] == "dgx1v");
  CHECK(j["options"]["split"] == 0);
  CHECK(j["results"][0]["pct_of_bound"].get<double>() > 0);
  CHECK(j["machine"]["cpu"] == "Test CPU");
  CHECK(j["memory_bandwidth"][0]["scale_GBps"] == doctest::Approx(11.0));
  REQUIRE(j["results"].size() == 2);
  CHECK(j["results"][0]["algo"] == "ring");
  CHECK(j["results"][0]["size"] == 64);
  CHECK(j["results"][0]["ratio_to_peer"].get<double>() == doctest::Approx(2.0));
  CHECK(j["results"][1]["transport"] == "mpi");
  CHECK(j["results"][1]["paired_with"] == "ring");
  CHECK_FALSE(j["results"][1].contains("ratio_to_peer"));
  // Numbers that are not finite are null (JSON has no NaN).
  rep.rows[1].time_us = std::nan("");
  CHECK(nlohmann::json::parse(to_json(rep))["results"][1]["time_us"].is_null());
  CHECK(command_line({"a", "b c", "it's"}) == "a 'b c' 'it'\\''s'");
}

TEST_CASE("inputs reduce exactly, and the check counts wrong elements") {
  for (ccoll::DataType d : ccoll::kAllDataTypes) {
    for (ccoll::ReduceOp op : ccoll::kAllReduceOps) {
      for (int p : {1, 2, 3, 4, 7}) {
        CAPTURE(ccoll::to_string(d));
        CAPTURE(ccoll::to_string(op));
        CAPTURE(p);
        const std::uint64_t n = 257;
        const std::size_t bytes = n * ccoll::size_of(d);
        std::vector<unsigned char> expected(bytes), reversed(bytes), in(bytes);
        fill_expected(expected.data(), n, d, op, p);
        // The same reduction in the reverse rank order must give the same bits (the inputs make
        // every order exact), so any correct algorithm passes the check.
        ccoll::dispatch_data_type(d, [&](auto t) {
          using T = decltype(t);
          ccoll::dispatch_reduce_op(op, [&](auto o) {
            constexpr ccoll::ReduceOp Op = decltype(o)::value;
            T* out = reinterpret_cast<T*>(reversed.data());
            for (std::uint64_t i = 0; i < n; ++i) {
              T v = from_integer<T>(input_integer(Op, p - 1, i));
              for (int r = p - 2; r >= 0; --r)
                v = ccoll::combine<Op>(v, from_integer<T>(input_integer(Op, r, i)));
              out[i] = ccoll::finalize<Op>(v, p);
            }
          });
        });
        CHECK(count_wrong(reversed.data(), expected.data(), n, d, op) == 0);
        // A rank's raw input is not the result once p > 1 (for most elements).
        fill_input(in.data(), n, d, op, 0);
        if (p > 1 && op == ccoll::ReduceOp::sum) {
          CHECK(count_wrong(in.data(), expected.data(), n, d, op) > 0);
        }
        // Corrupting elements is counted.
        ccoll::dispatch_data_type(d, [&](auto t) {
          using T = decltype(t);
          T* out = reinterpret_cast<T*>(reversed.data());
          out[3] = from_integer<T>(100);
          out[200] = from_integer<T>(101);
        });
        CHECK(count_wrong(reversed.data(), expected.data(), n, d, op) == 2);
      }
    }
  }
}

// Input checks (docs/reliability-tools.md): sizes of less than one element, the option the user
// spelled, --timeout's range, and output paths checked before the run.
TEST_CASE("sizes below one element are usage errors, not an empty table") {
  auto message = [](const std::vector<std::string>& args) { return usage_message(args); };
  // -b 0 -e 0 printed no rows and exited 0.
  const std::string zero = message({"-b", "0", "-e", "0"});
  CHECK(zero.find("-b/--minbytes") != std::string::npos);
  CHECK(zero.find("one element") != std::string::npos);
  CHECK(message({"-b", "2", "-e", "2", "-f", "1"}).find("-b/--minbytes") != std::string::npos);
  CHECK(message({"-b", "4", "-e", "64", "-d", "double"}).find("8 B") != std::string::npos);
  CHECK(message({"-b", "8", "-e", "64", "-d", "double"}) == "no error");
  CHECK(message({"-b", "1", "-e", "64", "-d", "uint8"}) == "no error");
  CHECK(message({"-b", "2M", "-e", "1M"}).find("must not exceed") != std::string::npos);
  // A size no machine's memory holds is refused before anything is allocated.
  const std::string huge = message({"-e", "1000000000G"});
  CHECK(huge.find("-e/--maxbytes") != std::string::npos);
  CHECK(huge.find("memory") != std::string::npos);
  // Every size of an accepted sweep holds at least one element.
  const Options o = parse({"-b", "4", "-e", "1K", "-f", "3"});
  for (std::uint64_t s : size_sweep(o.min_bytes, o.max_bytes, o.step_factor))
    CHECK(elements_for(s, o.dtype) >= 1);
}

TEST_CASE("the error names the option given: --slot-bytes vs --slot_bytes") {
  auto message = [](const std::vector<std::string>& args) { return usage_message(args); };
  const std::string under = message({"--slot_bytes", "0"});
  CHECK(under.rfind("--slot_bytes:", 0) == 0);
  // The ccoll CLI's spelling is not ccoll_perf's: named as given, with the right one suggested.
  const std::string dash = message({"--slot-bytes", "0"});
  CHECK(dash.find("'--slot-bytes'") != std::string::npos);
  CHECK(dash.find("did you mean --slot_bytes?") != std::string::npos);
  CHECK(dash.find("--bytes") == std::string::npos);
  CHECK(message({"--stream-slot-bytes", "0"}).find("--stream_slot_bytes") != std::string::npos);
  CHECK(message({"--bogus-flag"}).find("did you mean") == std::string::npos);
  CHECK(message({"--slot_bytes=0"}).rfind("--slot_bytes:", 0) == 0);
}

TEST_CASE("--timeout MS sets ccoll::Config::timeout; huge values are refused, not overflowed") {
  CHECK_FALSE(parse({}).timeout_ms.has_value());
  CHECK(parse({"--timeout", "5000"}).timeout_ms == 5000L);
  CHECK(parse({"--timeout=2147483647"}).timeout_ms == kMaxTimeoutMs);
  auto message = [](const std::vector<std::string>& args) { return usage_message(args); };
  for (const char* v : {"0", "-5", "2147483648", "99999999999999999999999", "1e3", "x", ""}) {
    CAPTURE(v);
    const std::string m = message({"--timeout", v});
    CHECK(m.rfind("--timeout:", 0) == 0);
  }
  CHECK(message({"--timeout", "99999999999999999999999"}).find("1..2147483647") !=
        std::string::npos);
  Report rep;
  rep.options = parse({"--timeout", "1234"});
  CHECK(nlohmann::json::parse(to_json(rep))["options"]["timeout_ms"] == 1234);
  rep.options = parse({});
  CHECK(nlohmann::json::parse(to_json(rep))["options"]["timeout_ms"].is_null());
}

TEST_CASE("--json / --csv paths are checked before the run") {
  CHECK_THROWS_WITH_AS(check_output_path("--json", "/nonexistent-ccoll-dir/out.json"),
                       doctest::Contains("--json: cannot write '/nonexistent-ccoll-dir/out.json'"),
                       std::runtime_error);
  const auto dir = std::filesystem::temp_directory_path();
  CHECK_THROWS_WITH_AS(check_output_path("--csv", dir.string()), doctest::Contains("directory"),
                       std::runtime_error);
  // A new path: writable, and not left behind.
  const auto fresh = dir / ("ccoll_perf_test_" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(fresh);
  CHECK_NOTHROW(check_output_path("--json", fresh.string()));
  CHECK_FALSE(std::filesystem::exists(fresh));
  // An existing file: left as it is.
  std::ofstream(fresh) << "keep";
  CHECK_NOTHROW(check_output_path("--json", fresh.string()));
  std::ifstream in(fresh);
  std::string text;
  std::getline(in, text);
  CHECK(text == "keep");
  std::filesystem::remove(fresh);
  CHECK(usage_message({"--json", ""}).rfind("--json:", 0) == 0);
}

TEST_CASE("-a auto --tuning FILE: the table's algorithms by size; bad files are usage errors") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto good = dir / ("ccoll_perf_tuning." + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(good);
    f << R"({"rules": [{"algorithm": "ring", "max_bytes": 1024}, {"algorithm": "dbtree"}]})";
  }
  const Prepared p =
      prepare_algorithms(parse({"-a", "auto", "-t", "3", "--tuning", good.string()}));
  REQUIRE(p.algos.size() == 1);
  CHECK(p.algos[0].logical.name.rfind("auto:", 0) == 0);  // not the default table
  ccoll::plan::PlanRequest req;
  req.nranks = 3;
  req.count = 256;
  CHECK(p.algos[0].logical.build(req).algorithm == "ring");
  req.count = 257;
  CHECK(p.algos[0].logical.build(req).algorithm.rfind("dbtree", 0) == 0);
  CHECK(prepare_algorithms(parse({"-a", "auto", "-t", "3"})).algos[0].logical.name == "auto");
  // On a GPU ring the table's double binary tree joins GPUs two apart: relays, run inside the
  // ranks on their GPUs as the registry's entries' are.
  const Prepared tuned_ring =
      prepare_algorithms(parse({"-a", "auto", "--topology", "ring:4", "--tuning", good.string()}));
  CHECK(tuned_ring.nranks == 4);
  CHECK(tuned_ring.algos[0].logical.hosted_relays > 0);
  const auto bad = dir / ("ccoll_perf_tuning_bad." + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(bad);
    f << R"({"rules": [{"algorithm": "forest"}]})";
  }
  CHECK_THROWS_WITH_AS(prepare_algorithms(parse({"-a", "auto", "--tuning", bad.string()})),
                       doctest::Contains("abstract ranks"), UsageError);
  CHECK_THROWS_WITH_AS(prepare_algorithms(parse({"-a", "auto", "--tuning", "/nonexistent/t.json"})),
                       doctest::Contains("--tuning: cannot read"), UsageError);
  CHECK(usage_message({"--tuning", ""}).rfind("--tuning:", 0) == 0);
  // A table serves auto alone: without it in -a the file would be ignored.
  CHECK(
      usage_message({"-a", "ring", "--tuning", "/nonexistent/t.json"}).rfind("--tuning: only", 0) ==
      0);
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

TEST_CASE("--timeout reaches ccoll::Config; the largest value runs a sweep without overflow") {
  CHECK(make_config(parse({}), -1, 2, "").timeout == ccoll::Config{}.timeout);
  const Options o = parse({"-a", "ring", "-t", "2", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1",
                           "-m", "0", "--timeout", "2147483647"});
  const ccoll::Config cfg = make_config(o, -1, 2, "");
  CHECK(cfg.timeout == std::chrono::milliseconds(2147483647));
  // An overflowed deadline would lie in the past and fail every wait at once.
  const Prepared p = prepare_algorithms(o);
  auto coll = make_collective("threads", p.algos[0], cfg);
  SweepSpec spec;
  spec.transport = "threads";
  spec.algo = "ring";
  spec.sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor);
  spec.dtype = o.dtype;
  spec.op = o.op;
  spec.iters = o.iters;
  spec.warmup = o.warmup;
  spec.check = true;
  std::mutex m;
  std::vector<Row> rows;
  run_threads_sweep(
      spec, *coll, 2,
      [&](const Row& r) {
        std::lock_guard<std::mutex> lock(m);
        rows.push_back(r);
      },
      [](int rank, const std::string& what) {
        std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
        std::abort();
      });
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].wrong == 0);
}

namespace {

// One algorithm's sweep through the code that `ccoll_perf` runs on threads: make_collective
// (Allreduce<HostThreads, algo::Registered, S>, one rank view per thread), the plan's active ranks
// and run_threads_sweep, with ccoll_perf's own inputs and check. Returns the rows.
// The sweep of `algo` on threads as ccoll_perf makes it from `o`, results checked.
SweepSpec threads_spec(const Options& o, const Prepared& p, const PreparedAlgorithm& algo) {
  SweepSpec spec;
  spec.call = CollectiveCall{o.collective, o.root};
  spec.transport = "threads";
  spec.algo = algo.name;
  spec.sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_factor);
  spec.dtype = o.dtype;
  spec.op = o.op;
  spec.iters = o.iters;
  spec.warmup = o.warmup;
  spec.rounds = o.rounds;
  spec.check = true;
  spec.active = active_ranks(algo.logical, p.nranks, algo.spec.overlap);
  return spec;
}

std::vector<Row> threads_rows(const Options& o, const Prepared& p, const PreparedAlgorithm& algo) {
  auto coll = make_collective("threads", algo, make_config(o, -1, p.nranks, ""),
                              CollectiveCall{o.collective, o.root});
  CHECK(coll->name().find("threads/" + algo.logical.name + "/") == 0);
  const SweepSpec spec = threads_spec(o, p, algo);
  std::mutex m;
  std::vector<Row> rows;
  run_threads_sweep(
      spec, *coll, p.nranks,
      [&](const Row& r) {
        std::lock_guard<std::mutex> lock(m);
        rows.push_back(r);
      },
      [](int rank, const std::string& what) {
        std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
        std::abort();  // the other threads would wait for this one forever
      });
  // A row per size, but one for sizes of the same whole elements (-f below 2).
  std::set<std::uint64_t> elements;
  for (const std::uint64_t size : spec.sizes) elements.insert(size / ccoll::size_of(spec.dtype));
  REQUIRE(rows.size() == elements.size());
  return rows;
}

}  // namespace

// The forest on dgx1v (8 ranks), phased and overlapped, as `ccoll_perf -a forest,forest-overlap
// --topology dgx1v` runs it.
TEST_CASE("ccoll_perf's threads path runs the forest on dgx1v with no wrong elements") {
  const Options o = parse({"-a", "forest,forest-overlap", "--topology", "dgx1v", "-b", "8", "-e",
                           "256K", "-f", "16", "-n", "2", "-w", "1", "-m", "0", "-d", "int32"});
  const Prepared p = prepare_algorithms(o);
  REQUIRE(p.nranks == 8);
  REQUIRE(p.algos.size() == 2);
  for (const PreparedAlgorithm& algo : p.algos) {
    CAPTURE(algo.name);
    for (const Row& r : threads_rows(o, p, algo)) {
      CAPTURE(r.bytes);
      CHECK(r.nranks == 8);
      CHECK(r.algo == algo.name);
      CHECK(r.wrong == 0);
    }
  }
  // A rank that is not one of this process's is refused by the library's rank(r).
  auto coll = make_collective("threads", p.algos[0], make_config(o, -1, p.nranks, ""));
  CHECK_THROWS(coll->rank(8));
}

// GPU-only graphs: the ranks are the GPUs (-t = their count), the relays that dbtree's detours
// and the rings' gaps need run inside the ranks on their GPUs (algo::host_relays), and every
// rank's result is checked.
TEST_CASE("ccoll_perf on GPU-only graphs: -t is the GPU count, relays run inside ranks") {
  for (const auto& [graph, graph_gpus] :
       std::vector<std::pair<std::string, int>>{{"ring:4", 4}, {"torus:4x4", 16}}) {
    // Named copies: doctest's CAPTURE takes them into a lambda, which a binding cannot enter.
    const std::string topology = graph;
    const int gpus = graph_gpus;
    CAPTURE(topology);
    const Options o = parse({"-t",         std::to_string(gpus),
                             "-a",         "ring,dbtree,forest",
                             "--topology", topology,
                             "-b",         "8",
                             "-e",         gpus > 4 ? "4K" : "64K",
                             "-f",         "32",
                             "-n",         "2",
                             "-w",         "1",
                             "-m",         "0",
                             "-c",         "1"});
    const Prepared p = prepare_algorithms(o);
    REQUIRE(p.nranks == gpus);
    for (const PreparedAlgorithm& algo : p.algos) {
      CAPTURE(algo.name);
      CHECK(active_ranks(algo.logical, p.nranks, algo.spec.overlap) ==
            std::vector<bool>(static_cast<std::size_t>(gpus), true));
      for (const Row& r : threads_rows(o, p, algo)) {
        CAPTURE(r.bytes);
        CHECK(r.nranks == gpus);
        CHECK(r.wrong == 0);
      }
    }
    // dbtree's detours are there, inside ranks.
    CHECK(p.algos[1].logical.hosted_relays > 0);
  }
}

// `ccoll_perf --transport shm`: a forked rank that dies outside a ccoll call (here before its
// first barrier; in a run, between two sections) is named within a fraction of a second, not
// after the barrier's five-minute timeout.
TEST_CASE("forked ranks: a rank that dies outside a call is named at the next barrier") {
  ForkControl control(2, std::chrono::minutes(5));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    control.set_rank(1);
    std::_Exit(0);  // dies without ever arriving at the barrier
  }
  control.set_rank(0);
  // The child has recorded its pid before it exits: wait until it is a zombie.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  const auto start = std::chrono::steady_clock::now();
  std::string what;
  try {
    control.barrier();
  } catch (const std::exception& e) {
    what = e.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ::waitpid(child, nullptr, 0);
  CHECK(what.find("rank 1 died") != std::string::npos);
  CHECK(elapsed < std::chrono::seconds(2));
}
namespace {
// A DeviceCollective that runs nothing: fixed times per round, a log of its blocks.
class FakeDevice final : public DeviceCollective {
 public:
  FakeDevice(std::string name, int nranks, std::vector<double> times, std::vector<char>* log,
             char tag, std::optional<ccoll::plan::Plan> plan = std::nullopt)
      : name_(std::move(name)),
        nranks_(nranks),
        times_(std::move(times)),
        log_(log),
        tag_(tag),
        plan_(std::move(plan)) {}
  DeviceTimed time_block(std::uint64_t, int, int, bool check) override {
    log_->push_back(tag_);
    DeviceTimed t;
    t.time_s = times_[calls_++ % times_.size()];
    t.wrong = check ? 0 : -1;
    return t;
  }
  int nranks() const override { return nranks_; }
  std::optional<ccoll::plan::Plan> plan(std::uint64_t) override { return plan_; }
  std::string name() const override { return name_; }
  std::string description() const override { return name_; }
  // Its bounds as cuda-virtual's: ccoll's rows (a plan) lie in one memory.
  bool one_memory() const override { return plan_.has_value(); }

 private:
  std::string name_;
  int nranks_;
  std::vector<double> times_;
  std::vector<char>* log_;
  char tag_;
  std::optional<ccoll::plan::Plan> plan_;
  std::size_t calls_ = 0;
};
}  // namespace

TEST_CASE("a GPU sweep alternates peer and ccoll blocks, keeps the best of each, adds the bound") {
  const Options o = parse({"-a", "ring", "-t", "2", "-b", "1M", "-e", "1M", "-r", "3"});
  const Prepared prepared = prepare_algorithms(o);
  ccoll::plan::PlanRequest req;
  req.nranks = 2;
  req.count = (1u << 20) / 4;
  req.elem_size = 4;
  const ccoll::plan::Plan plan = plan_source(prepared.algos[0])(req);
  CHECK(plan.nranks == 2);
  CHECK(policy_id("cuda-virtual", prepared.algos[0]) ==
        std::string("cuda-virtual/ring/") +
            (prepared.algos[0].spec.overlap ? "pipelined-overlap" : "phased"));
  std::vector<char> log;
  FakeDevice ours("ring", 2, {30e-6, 20e-6, 25e-6}, &log, 'c', plan);
  FakeDevice peer("ncclAllReduce", 1, {12e-6, 10e-6, 11e-6}, &log, 'n');
  SweepSpec spec;
  spec.transport = "cuda-virtual";
  spec.algo = "ring";
  spec.sizes = {1u << 20};
  spec.rounds = 3;
  std::vector<Row> rows, peer_rows;
  run_device_sweep(
      spec, &ours, &peer, 2000.0, [&](const Row& r) { rows.push_back(r); },
      [&](const Row& r) { peer_rows.push_back(r); });
  CHECK(log == std::vector<char>{'n', 'c', 'n', 'c', 'n', 'c'});
  REQUIRE(rows.size() == 1);
  REQUIRE(peer_rows.size() == 1);
  CHECK(rows[0].time_us == doctest::Approx(20.0));
  CHECK(rows[0].wrong == 0);
  CHECK(peer_rows[0].time_us == doctest::Approx(10.0));
  CHECK(peer_rows[0].paired_with == "ring");
  CHECK(peer_rows[0].transport == "nccl");
  CHECK(ratio_to_peer(rows[0]) == doctest::Approx(0.5));
  // The ring's 8N bytes for P = 2 at 2000 GB/s.
  CHECK(rows[0].bound_time_us == doctest::Approx(8.0 * (1u << 20) / 2000e9 * 1e6));
  CHECK(rows[0].min_bound_time_us == doctest::Approx(4.0 * (1u << 20) / 2000e9 * 1e6));
  // The peer alone (-a none): its rows are the table's, with no bound.
  rows.clear();
  run_device_sweep(
      spec, nullptr, &peer, 2000.0, [&](const Row& r) { rows.push_back(r); },
      [](const Row&) { FAIL("no paired rows without ccoll"); });
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].algo == "ncclAllReduce");
  CHECK(rows[0].bound_time_us == 0.0);
}

TEST_CASE("-C: the collectives beside allreduce, their default algorithms and usage errors") {
  using C = ccoll::plan::Collective;
  CHECK(parse({}).collective == C::allreduce);
  CHECK(parse({"-C", "reduce_scatter"}).collective == C::reduce_scatter);
  CHECK(parse({"--collective", "all-gather"}).collective == C::all_gather);
  CHECK(parse({"-C", "allgather"}).collective == C::all_gather);
  const Options b = parse({"-C", "broadcast", "--root", "3"});
  CHECK(b.collective == C::broadcast);
  CHECK(b.root == 3);
  CHECK(b.algos == std::vector<std::string>{"ring", "direct", "tree", "dbtree"});
  CHECK(parse({"-C", "all_gather"}).algos == std::vector<std::string>{"ring", "direct"});
  CHECK(parse({"-C", "reduce", "-a", "direct"}).algos == std::vector<std::string>{"direct"});
  auto fails = [](const std::vector<std::string>& args, const std::string& says) {
    try {
      parse(args);
      return std::string("accepted");
    } catch (const UsageError& e) {
      return std::string(e.what()).find(says) != std::string::npos ? std::string("")
                                                                   : std::string(e.what());
    }
  };
  CHECK(fails({"-C", "gather"}, "-C: expected allreduce") == "");
  CHECK(fails({"-C", "reduce_scatter", "-a", "dbtree"},
              "these have: auto, direct, forest (with --topology), ring") == "");
  CHECK(fails({"-C", "all_gather", "-a", "forest"}, "needs --topology") == "");
  CHECK(parse({"-C", "broadcast", "-a", "forest", "--topology", "dgx1v"}).algos ==
        std::vector<std::string>{"forest"});
  CHECK(parse({"-C", "all_gather", "-a", "forest", "--topology", "dgx1v"}).algos ==
        std::vector<std::string>{"forest"});
  CHECK(fails({"-C", "broadcast", "-a", "recdoubling"}, "has no broadcast plans") == "");
  // -a all: every algorithm that plans the collective.
  for (const char* c : {"reduce_scatter", "all_gather", "broadcast", "reduce"}) {
    CAPTURE(c);
    const Options all = parse({"-C", c, "-a", "all"});
    const auto has = [&](const char* a) {
      return std::find(all.algos.begin(), all.algos.end(), a) != all.algos.end();
    };
    CHECK(has("ring"));
    CHECK(has("direct"));
    CHECK(has("auto"));
    CHECK(has("dbtree") == ccoll::plan::has_root(*parse_collective(c)));
    CHECK_FALSE(has("recdoubling"));
    CHECK_FALSE(has("oneshot"));
  }
  // ... and an algorithm named beside it is still refused when it has no plans of it.
  CHECK(fails({"-C", "broadcast", "-a", "all,recdoubling"}, "has no broadcast plans") == "");
  CHECK(fails({"--root", "1"}, "--root: only with -C broadcast or reduce") == "");
  CHECK(fails({"-C", "reduce", "--root", "4", "-t", "4"}, "expected a rank below -t 4") == "");
  // Every collective reads the peers' windows.
  CHECK(parse({"-C", "all_gather", "--transport", "shm", "--window", "1"}).window);
  CHECK(parse({"-C", "broadcast", "--transport", "shm", "--window", "1"}).window);
  CHECK(parse({"-C", "reduce_scatter", "--topology", "dgx1v", "-a", "ring"}).topology == "dgx1v");
  CHECK(usage_text().find("-C, --collective") != std::string::npos);
  // The GPU transports run every collective, beside NCCL's.
  if (kHaveCuda) {
    const Options g =
        parse({"-C", "broadcast", "--root", "2", "-t", "4", "--transport", "cuda-p2p"});
    CHECK(g.collective == C::broadcast);
    CHECK(g.root == 2);
  }
  if (kHaveNccl) {
    const Options n =
        parse({"-C", "reduce_scatter", "--transport", "cuda-virtual", "--peer", "nccl"});
    CHECK(n.peer == Peer::nccl);
    CHECK(n.algos == std::vector<std::string>{"ring", "direct"});
  }
}

TEST_CASE("busbw factors of the collectives are nccl-tests'") {
  using C = ccoll::plan::Collective;
  CHECK(bus_factor(C::allreduce, 4) == doctest::Approx(1.5));
  CHECK(bus_factor(C::reduce_scatter, 4) == doctest::Approx(0.75));
  CHECK(bus_factor(C::all_gather, 8) == doctest::Approx(0.875));
  CHECK(bus_factor(C::broadcast, 4) == doctest::Approx(1.0));
  CHECK(bus_factor(C::reduce, 3) == doctest::Approx(1.0));
  CHECK(bus_factor(C::reduce, 1) == 0.0);
  const Row r = make_row("t", "a", 4, 4000, 1000, ccoll::DataType::f32, ccoll::ReduceOp::sum, 1e-6,
                         0, C::reduce_scatter);
  CHECK(r.algbw_GBps == doctest::Approx(4.0));
  CHECK(r.busbw_GBps == doctest::Approx(3.0));
}

TEST_CASE("sizes of the same whole elements make one row (-f below 2, 8-byte elements)") {
  const Options o = parse({"-t", "2", "-b", "10", "-e", "40", "-f", "1.1", "-d", "f64", "-a",
                           "ring", "-n", "1", "-w", "0", "-m", "0"});
  const Prepared p = prepare_algorithms(o);
  std::vector<std::uint64_t> counts;
  for (const Row& r : threads_rows(o, p, p.algos.front())) counts.push_back(r.count);
  CHECK(counts == std::vector<std::uint64_t>{1, 2, 3, 4});  // 10, 11, ..., 37 bytes
}

TEST_CASE("-C on the threads path: every collective, ring and direct, roots, no wrong element") {
  for (const char* c : {"reduce_scatter", "all_gather", "broadcast", "reduce"})
    for (const char* root : {"0", "2"}) {
      if (std::string(root) != "0" && std::string(c).find('_') != std::string::npos) continue;
      std::vector<std::string> args{"-C", c,    "-t", "3",  "-b", "12", "-e", "1M", "-f",
                                    "9",  "-n", "2",  "-w", "1",  "-m", "0",  "-o", "max"};
      if (std::string(root) != "0") args.insert(args.end(), {"--root", root});
      const Options o = parse(args);
      const Prepared p = prepare_algorithms(o);
      for (const PreparedAlgorithm& algo : p.algos) {
        CAPTURE(c);
        CAPTURE(root);
        CAPTURE(algo.name);
        for (const Row& r : threads_rows(o, p, algo)) {
          CAPTURE(r.bytes);
          CHECK(r.collective == *parse_collective(c));
          CHECK(r.count % 3 == 0);  // whole blocks for the blocked collectives, by chance others
          CHECK(r.wrong == 0);
        }
      }
    }
}

namespace {
// An all-gather that puts every block one rank late: the check must count it.
class LateAllGather final : public Collective {
  class View final : public RankCollective {
   public:
    View(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
    void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
             ccoll::ReduceOp) override {
      const std::size_t block = count / static_cast<std::size_t>(nranks_) * ccoll::size_of(d);
      for (int k = 0; k < nranks_; ++k)
        std::memcpy(static_cast<std::byte*>(recv) + block * static_cast<std::size_t>(k), send,
                    block);  // its own block everywhere
      (void)rank_;
    }

   private:
    int rank_, nranks_;
  };

 public:
  std::unique_ptr<RankCollective> rank(int r) override { return std::make_unique<View>(r, 3); }
  std::string name() const override { return "late"; }
  std::span<std::byte> allocate_window(std::size_t) override { return {}; }
};
}  // namespace

TEST_CASE("-C all_gather: a result with wrong blocks is counted as wrong") {
  SweepSpec spec;
  spec.transport = "threads";
  spec.algo = "late";
  spec.sizes = {1200};
  spec.iters = 1;
  spec.warmup = 0;
  spec.call.collective = ccoll::plan::Collective::all_gather;
  LateAllGather coll;
  std::vector<Row> rows;
  std::mutex m;
  run_threads_sweep(
      spec, coll, 3,
      [&](const Row& r) {
        std::lock_guard<std::mutex> lock(m);
        rows.push_back(r);
      },
      [](int, const std::string&) { std::abort(); });
  REQUIRE(rows.size() == 1);
  // Every rank holds 2 foreign blocks of 100 elements wrong (where the inputs differ).
  CHECK(rows[0].wrong > 0);
}

namespace {
// A broadcast (root 0) that writes the right result in its first call on each rank and nothing
// in later calls: a check of what the timed calls left behind would pass it.
class FirstCallOnly final : public Collective {
  class View final : public RankCollective {
   public:
    void run(const void*, void* recv, std::size_t count, ccoll::DataType d,
             ccoll::ReduceOp op) override {
      if (calls_++ == 0) fill_input(recv, count, d, op, 0);
    }

   private:
    int calls_ = 0;
  };

 public:
  std::unique_ptr<RankCollective> rank(int) override { return std::make_unique<View>(); }
  std::string name() const override { return "first-call-only"; }
  std::span<std::byte> allocate_window(std::size_t) override { return {}; }
};

std::vector<Row> run_on_threads(const SweepSpec& spec, Collective& coll, int nranks) {
  std::vector<Row> rows;
  std::mutex m;
  run_threads_sweep(
      spec, coll, nranks,
      [&](const Row& r) {
        std::lock_guard<std::mutex> lock(m);
        rows.push_back(r);
      },
      [](int, const std::string&) { std::abort(); });
  return rows;
}
}  // namespace

TEST_CASE("-c checks a call made into freshly poisoned output, after the timed calls") {
  SweepSpec spec;
  spec.transport = "threads";
  spec.algo = "first-call-only";
  spec.sizes = {1200};
  spec.iters = 1;
  spec.warmup = 0;
  spec.call.collective = ccoll::plan::Collective::broadcast;
  FirstCallOnly coll;
  const std::vector<Row> rows = run_on_threads(spec, coll, 3);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].wrong == 3 * 300);  // every element of every rank is still poison
}

TEST_CASE("-C: what needs the rank count is checked once it is known (a topology's, mpirun's)") {
  // dgx1v sets 8 ranks: --root 8 is beyond them, though -t was not given.
  CHECK(usage_message({"-C", "broadcast", "--root", "8", "--topology", "dgx1v", "-a", "ring"}, true)
            .find("--root 8: expected a rank below the 8 ranks") != std::string::npos);
  CHECK(usage_message({"-C", "broadcast", "--root", "7", "--topology", "dgx1v", "-a", "ring"},
                      true) == "no error");
  // Fewer elements than ranks: every size would be skipped (an empty table that passed).
  const std::string few =
      usage_message({"-C", "reduce_scatter", "-t", "4", "-b", "4", "-e", "12"}, true);
  CHECK(few.find("-e/--maxbytes: 12 B holds fewer than one float per rank") != std::string::npos);
  CHECK(usage_message({"-C", "all_gather", "-t", "4", "-b", "4", "-e", "16"}, true) == "no error");
  CHECK(usage_message({"-C", "broadcast", "-t", "4", "-b", "4", "-e", "4"}, true) == "no error");
}

TEST_CASE("ccoll_perf inputs: no two of the first 110 ranks feed the same values") {
  for (const ccoll::ReduceOp op : {ccoll::ReduceOp::sum, ccoll::ReduceOp::max}) {
    std::vector<std::vector<std::int64_t>> seen;
    for (int r = 0; r < 110; ++r) {
      std::vector<std::int64_t> values(64);
      for (std::uint64_t i = 0; i < values.size(); ++i) values[i] = input_integer(op, r, i);
      for (int q = 0; q < r; ++q) {
        // Most elements differ, so a block delivered to the wrong place is counted many times.
        int same = 0;
        for (std::size_t i = 0; i < values.size(); ++i)
          same += values[i] == seen[static_cast<std::size_t>(q)][i] ? 1 : 0;
        CAPTURE(q);
        CAPTURE(r);
        CHECK(same <= 8);
      }
      seen.push_back(std::move(values));
    }
  }
}

// two_machines.json: the forest relays through the NICs and the switch, ranks that have no
// output. Broadcast and the ring (no relays) interleaved with it each check their own ranks.
TEST_CASE("-c with relays: a relay checks nothing, interleaved algorithms their own ranks") {
  const std::string topology = std::string(CCOLL_SOURCE_DIR) + "/data/topologies/two_machines.json";
  for (const char* collective : {"allreduce", "broadcast", "reduce"}) {
    CAPTURE(collective);
    const Options o = parse({"-C", collective, "-a", "ring,forest", "--topology", topology, "-b",
                             "8", "-e", "64K", "-f", "16", "-n", "2", "-w", "1", "-m", "0"});
    const Prepared p = prepare_algorithms(o);
    REQUIRE(p.algos.size() == 2);
    std::vector<SweepSpec> specs;
    std::vector<std::unique_ptr<Collective>> colls;
    std::vector<Collective*> raw;
    for (const PreparedAlgorithm& algo : p.algos) {
      specs.push_back(threads_spec(o, p, algo));
      colls.push_back(
          make_collective("threads", algo, make_config(o, -1, p.nranks, ""), specs.back().call));
      raw.push_back(colls.back().get());
    }
    // The forest has relays; the ring does not: two active sets in one interleaved run.
    REQUIRE(std::count(specs[1].active.begin(), specs[1].active.end(), false) > 0);
    REQUIRE(specs[0].active != specs[1].active);
    std::mutex m;
    std::vector<Row> rows;
    run_threads_interleaved(
        specs, raw, p.nranks,
        [&](std::size_t, const Row& r) {
          std::lock_guard<std::mutex> lock(m);
          rows.push_back(r);
        },
        [](int rank, const std::string& what) {
          std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
          std::abort();
        });
    REQUIRE(rows.size() == 2 * specs[0].sizes.size());
    for (const Row& r : rows) {
      CAPTURE(r.algo);
      CAPTURE(r.bytes);
      CHECK(r.wrong == 0);
    }
  }
}

TEST_CASE("--tune FILE: its candidates, its usage errors, and the table a run writes") {
  using C = ccoll::plan::Collective;
  const auto dir = std::filesystem::temp_directory_path();
  const auto path = dir / ("ccoll_perf_tune." + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(path);
  const Options all = parse({"--tune", path.string(), "-t", "3"});
  CHECK(all.algos == tune_candidates(C::allreduce, 3));
  CHECK(std::find(all.algos.begin(), all.algos.end(), "oneshot+ll") != all.algos.end());
  CHECK(std::find(all.algos.begin(), all.algos.end(), "direct") != all.algos.end());
  CHECK(tune_candidates(C::allreduce, 17).front() == "recdoubling");  // oneshot: P <= 16
  // direct's steps take P - 1 messages, more than the runtime's 15 above 16 ranks.
  for (const C c : {C::allreduce, C::reduce_scatter, C::broadcast}) {
    const auto at17 = tune_candidates(c, 17);
    CHECK(std::find(at17.begin(), at17.end(), "direct") == at17.end());
    const auto at16 = tune_candidates(c, 16);
    CHECK(std::find(at16.begin(), at16.end(), "direct") != at16.end());
  }
  // Under mpirun the world's size comes after parsing: the default candidates follow it (they
  // kept oneshot for the default -t, and 17 ranks ended the run), -a's stay as given.
  Options world = parse({"--tune", path.string()});
  set_world_size(world, 17);
  CHECK(world.nranks == 17);
  CHECK(world.algos == tune_candidates(C::allreduce, 17));
  Options named = parse({"--tune", path.string(), "-a", "oneshot,ring"});
  set_world_size(named, 17);
  CHECK(named.algos == std::vector<std::string>{"oneshot", "ring"});
  const Options bc = parse({"-C", "broadcast", "--tune", path.string()});
  CHECK(std::find(bc.algos.begin(), bc.algos.end(), "dbtree+ll") != bc.algos.end());
  CHECK(parse({"-a", "ring+ll,ring"}).algos == std::vector<std::string>{"ring+ll", "ring"});
  auto fails = [](const std::vector<std::string>& args, const std::string& says) {
    try {
      parse(args);
      return std::string("accepted");
    } catch (const UsageError& e) {
      return std::string(e.what()).find(says) != std::string::npos ? std::string("")
                                                                   : std::string(e.what());
    }
  };
  const std::string f = path.string();
  CHECK(fails({"-a", "forest+ll", "--topology", "dgx1v"}, "+ll follows an algorithm") == "");
  CHECK(fails({"-a", "tree-phased+ll"}, "+ll follows an algorithm") == "");
  CHECK(fails({"--tune", f, "-a", "auto"}, "--tune: -a auto") == "");
  CHECK(fails({"--tune", f, "--topology", "dgx1v", "-a", "ring"}, "--topology") == "");
  CHECK(fails({"--tune", f, "--transport", "shm", "--window", "1"}, "--window") == "");
  CHECK(fails({"--tune", f, "--protocol", "ll"}, "NAME+ll") == "");
  CHECK(fails({"--tune", ""}, "--tune") == "");
  CHECK(parse({"--tune", f}).interleave);
  // A GPU transport's candidates are timed one after another (--interleave is host-only).
  if (kHaveCuda) {
    const Options gpu = parse(
        {"--tune", f, "--transport", "cuda-virtual", "-t", "8", "-a", "ring,ring+ll,oneshot+ll"});
    CHECK(!gpu.interleave);
    CHECK(gpu.algos == std::vector<std::string>{"ring", "ring+ll", "oneshot+ll"});
    CHECK(fails({"--tune", f, "--transport", "cuda-virtual", "--peer", "nccl"}, "--peer") == "");
  }
  CHECK(!parse({}).interleave);
  CHECK(parse({"--interleave", "1"}).interleave);
  CHECK(fails({"--interleave", "1", "--peer", "mpi", "--transport", "shm"}, "--interleave") == "");
  CHECK(usage_text().find("--tune FILE") != std::string::npos);
  CHECK(!parse({"--tune", f}).tune_passes);  // resolved at the run: 3, under mpirun 1
  CHECK(parse({"--tune", f, "--tune_passes", "5"}).tune_passes == 5);
  CHECK(fails({"--tune_passes", "3"}, "--tune_passes: only with --tune") == "");
  CHECK(fails({"--tune", f, "--tune_passes", "0"}, "--tune_passes") == "");
  CHECK(fails({"--tune", f, "--tune_passes", "100"}, "--tune_passes") == "");
  CHECK(usage_text().find("--tune_passes N") != std::string::npos);

  // +ll: the algorithm's plans in the LowLatency protocol, for the collective asked.
  const Prepared ll =
      prepare_algorithms(parse({"-C", "reduce_scatter", "-a", "ring+ll", "-t", "3"}));
  ccoll::plan::PlanRequest req;
  req.nranks = 3;
  req.count = 300;
  req.collective = C::reduce_scatter;
  CHECK(ll.algos.at(0).logical.build(req).algorithm == "ring+ll");

  // Interleaved on threads: every candidate's row at every size, in the candidates' order, none
  // wrong.
  {
    const Options io =
        parse({"-t",           "3", "-b", "8",         "-e",     "64K",
               "-f",           "8", "-n", "2",         "-w",     "1",
               "-m",           "0", "-r", "2",         "-a",     "direct+ll,ring,dbtree",
               "--interleave", "1", "-C", "broadcast", "--root", "1"});
    const Prepared ip = prepare_algorithms(io);
    std::vector<std::unique_ptr<Collective>> colls;
    std::vector<Collective*> pointers;
    std::vector<SweepSpec> specs;
    for (const PreparedAlgorithm& algo : ip.algos) {
      colls.push_back(make_collective("threads", algo, make_config(io, -1, 3, ""),
                                      CollectiveCall{io.collective, io.root}));
      pointers.push_back(colls.back().get());
      specs.push_back(threads_spec(io, ip, algo));
    }
    std::mutex m;
    std::vector<std::pair<std::size_t, Row>> got;
    run_threads_interleaved(
        specs, pointers, 3,
        [&](std::size_t i, const Row& r) {
          std::lock_guard<std::mutex> lock(m);
          got.emplace_back(i, r);
        },
        [](int, const std::string&) { std::abort(); });
    REQUIRE(got.size() == 3 * specs.front().sizes.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      CHECK(got[k].first == k % 3);
      CHECK(got[k].second.algo == specs[k % 3].algo);
      CHECK(got[k].second.bytes == specs[0].sizes[k / 3]);
      CHECK(got[k].second.wrong == 0);
    }
  }

  // A run's rows become the rules for its collective and rank count, the rest of the table kept.
  const Options o = parse({"-t", "3", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1", "-m",
                           "0", "-a", "oneshot+ll,ring", "--tune", f});
  const Prepared p = prepare_algorithms(o);
  std::vector<Row> rows;
  for (const PreparedAlgorithm& algo : p.algos)
    for (const Row& r : threads_rows(o, p, algo)) {
      CHECK(r.wrong == 0);
      rows.push_back(r);
    }
  const std::string report = write_tuning(o, 3, rows);
  CAPTURE(report);
  CHECK(report.find("allreduce on 3 ranks") != std::string::npos);
  CHECK(report.find("and up") != std::string::npos);
  const ccoll::algo::TuningTable t = read_tune_base(f, false);
  REQUIRE(!t.rules.empty());
  CHECK(t.rules.front().min_ranks == 3);
  CHECK(t.rules.front().max_ranks == 3);
  const ccoll::algo::BySize tuned(t);
  const std::string chosen = tuned.choose(3, 8).algorithm;
  CHECK((chosen == "oneshot" || chosen == "ring"));
  // The other rank counts keep the default table's choice.
  const ccoll::algo::BySize defaults;
  CHECK(tuned.choose(2, 1 << 20).algorithm == defaults.choose(2, 1 << 20).algorithm);
  // A second run for another collective adds its rules and keeps the first run's.
  Options rs = o;
  rs.collective = C::reduce_scatter;
  std::vector<Row> rs_rows = rows;
  for (Row& r : rs_rows) r.algo = r.algo == "oneshot+ll" ? "direct+ll" : r.algo;
  (void)write_tuning(rs, 3, rs_rows);
  const ccoll::algo::TuningTable both = read_tune_base(f, false);
  CHECK(both.rules.front().collective == C::reduce_scatter);
  CHECK(ccoll::algo::BySize(both).choose(3, 8).algorithm == chosen);
  // A file that is not a table is refused before a run, naming --tune.
  {
    std::ofstream bad(path);
    bad << "{\"rules\": 5}";
  }
  CHECK_THROWS_WITH_AS(read_tune_base(f, false), doctest::Contains("--tune: '"), UsageError);
  // An empty FILE is a missing one that another rank's check_output_path has just created (under
  // mpirun every rank checks FILE before the run): it starts from the default, as a missing one.
  { std::ofstream empty(path); }
  CHECK(ccoll::algo::BySize(read_tune_base(f, false)).name == ccoll::algo::BySize().name);
  std::filesystem::remove(path);
  // A new file starts from the table -a auto uses on the run's transport: the GPU's on a GPU.
  CHECK(ccoll::algo::BySize(read_tune_base(f, true)).name ==
        ccoll::algo::BySize(ccoll::algo::gpu_tuning_table()).name);
  CHECK(ccoll::algo::BySize(read_tune_base(f, false)).name == ccoll::algo::BySize().name);
}
namespace {
Row tune_row(const std::string& algo, std::uint64_t bytes, double time_us, long wrong = 0) {
  Row r;
  r.transport = "threads";
  r.algo = algo;
  r.nranks = 3;
  r.bytes = bytes;
  r.count = bytes / 4;
  r.time_us = time_us;
  r.algbw_GBps = time_us > 0 ? static_cast<double>(bytes) / time_us / 1e3 : 0;
  r.busbw_GBps = r.algbw_GBps * 4 / 3;
  r.wrong = wrong;
  return r;
}
}  // namespace

TEST_CASE("--tune in passes: each candidate's median, wrong results kept, the rows through JSON") {
  // Three passes in which ring and oneshot+ll swap at 64 KiB from pass to pass: the median
  // decides, a result wrong in one pass marks the median's row, and a pass that did not measure
  // a candidate counts as slower than any time. direct, fastest in the one pass that measured
  // it, has no median.
  const std::vector<std::vector<Row>> passes = {
      {tune_row("ring", 8, 9.0), tune_row("ring", 65536, 30.0), tune_row("oneshot+ll", 8, 2.0),
       tune_row("oneshot+ll", 65536, 25.0), tune_row("direct", 8, 1.0)},
      {tune_row("ring", 8, 8.0), tune_row("ring", 65536, 20.0), tune_row("oneshot+ll", 8, 2.5),
       tune_row("oneshot+ll", 65536, 40.0, 3), tune_row("direct", 8, 0.0)},
      {tune_row("ring", 8, 10.0), tune_row("ring", 65536, 22.0), tune_row("oneshot+ll", 8, 3.0)},
  };
  const PassMedians m = median_rows(passes);
  REQUIRE(m.rows.size() == 5);
  CHECK(m.rows[0].algo == "ring");
  CHECK(m.rows[0].time_us == 9.0);
  CHECK(m.spread[0] == doctest::Approx(10.0 / 8.0));
  CHECK(m.rows[1].time_us == 22.0);
  CHECK(m.measured[1] == 3);
  CHECK(m.rows[2].time_us == 2.5);
  CHECK(m.rows[2].wrong == 0);
  // Two passes measured it: the slower of the middle two, and the wrong one marks it.
  CHECK(m.measured[3] == 2);
  CHECK(m.rows[3].time_us == 40.0);
  CHECK(m.rows[3].wrong == 3);
  CHECK(m.rows[4].algo == "direct");
  CHECK(m.measured[4] == 1);
  CHECK(m.rows[4].time_us == 0.0);
  CHECK(m.rows[4].busbw_GBps == 0.0);
  // The table: oneshot+ll at 8 B, ring at 64 KiB (the wrong median never wins).
  const auto rules =
      ccoll::algo::derive_rules(ccoll::plan::Collective::allreduce, 3, tuned_times(m.rows));
  REQUIRE(rules.size() == 2);
  CHECK(ccoll::algo::candidate_name(rules[0].algorithm, rules[0].protocol) == "oneshot+ll");
  CHECK(rules[1].algorithm == "ring");
  const std::string text = format_pass_medians(m, 3, rules);
  CAPTURE(text);
  CHECK(text.find("over 3 passes") != std::string::npos);
  CHECK(text.find("2.5*") != std::string::npos);
  CHECK(text.find("22.0*") != std::string::npos);
  CHECK(text.find("40.0!") != std::string::npos);
  CHECK(text.find("recdoubling+ll") == std::string::npos);
  // Columns as wide as the longest name: every line of the table as long as its header.
  const PassMedians wide = median_rows(
      {{tune_row("recdoubling+ll", 8, 1.0), tune_row("ring", 8, 2.0), tune_row("ring", 64, 3.0)}});
  const std::string wide_text = format_pass_medians(wide, 1, {});
  CAPTURE(wide_text);
  std::istringstream in(wide_text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() >= 3);
  const std::string& header = lines[lines.size() - 3];  // then 8 B, then 64 B (recdoubling+ll: -)
  REQUIRE(header.ends_with("   spread"));
  CHECK(lines[lines.size() - 2].size() == header.size() - std::string("   spread").size());
  CHECK(lines[lines.size() - 1].size() == header.size() - std::string("   spread").size());
  CHECK(wide_text.find("recdoubling+ll") != std::string::npos);

  // report_from_json reads back what to_json writes.
  Report rep;
  rep.machine.cpu_model = "a cpu";
  rep.machine.cores = 2;
  rep.machine.hostname = "host";
  rep.machine.date_utc = "2026-11-30 21:00:00 UTC";
  rep.machine.load_average = "1.00 2.00 3.00";
  MemoryBandwidth bw;
  bw.threads = 2;
  bw.copy_GBps = 11.5;
  bw.copy_nt_GBps = 9.25;
  rep.membw.push_back(bw);
  rep.bound_membw_GBps = 11.5;
  rep.rows = passes[0];
  rep.rows[1].bound_busbw_GBps = 7.5;
  rep.rows[1].bound_time_us = 3.5;
  rep.rows[1].min_bound_time_us = 1.25;
  rep.rows[2].paired_with = "ring";
  rep.rows[3].collective = ccoll::plan::Collective::reduce_scatter;
  rep.rows[3].dtype = ccoll::DataType::bf16;
  rep.rows[3].op = ccoll::ReduceOp::max;
  rep.rows[3].nranks = 4;
  rep.rows[3].transport = "shm";
  rep.rows[3].launch_channels = 2;
  rep.rows[3].launch_blocks = 16;
  rep.rows[3].launch_threads = 512;
  rep.rows[3].launch_sms = 132;
  rep.rows[3].launch_blocks_per_sm = 2;
  const ReportData data = report_from_json(to_json(rep));
  CHECK(data.machine.cpu_model == "a cpu");
  CHECK(data.machine.cores == 2);
  CHECK(data.machine.load_average == "1.00 2.00 3.00");
  REQUIRE(data.membw.size() == 1);
  CHECK(data.membw[0].threads == 2);
  CHECK(data.membw[0].copy_GBps == 11.5);
  CHECK(data.membw[0].copy_nt_GBps == 9.25);
  CHECK(data.bound_membw_GBps == 11.5);
  const std::vector<Row>& back = data.rows;
  REQUIRE(back.size() == rep.rows.size());
  CHECK(back[1].bound_time_us == doctest::Approx(3.5));
  CHECK(back[1].min_bound_time_us == doctest::Approx(1.25));
  CHECK(back[3].launch_channels == 2);
  CHECK(back[3].launch_blocks == 16);
  CHECK(back[3].launch_threads == 512);
  CHECK(back[3].launch_sms == 132);
  CHECK(back[3].launch_blocks_per_sm == 2);
  for (std::size_t i = 0; i < back.size(); ++i) {
    CAPTURE(i);
    CHECK(back[i].algo == rep.rows[i].algo);
    CHECK(back[i].nranks == rep.rows[i].nranks);
    CHECK(back[i].transport == rep.rows[i].transport);
    CHECK(back[i].bytes == rep.rows[i].bytes);
    CHECK(back[i].count == rep.rows[i].count);
    CHECK(back[i].time_us == doctest::Approx(rep.rows[i].time_us));
    CHECK(back[i].busbw_GBps == doctest::Approx(rep.rows[i].busbw_GBps));
    CHECK(back[i].wrong == rep.rows[i].wrong);
    CHECK(back[i].paired_with == rep.rows[i].paired_with);
    CHECK(back[i].collective == rep.rows[i].collective);
    CHECK(back[i].dtype == rep.rows[i].dtype);
    CHECK(back[i].op == rep.rows[i].op);
    CHECK(back[i].bound_busbw_GBps == doctest::Approx(rep.rows[i].bound_busbw_GBps));
  }
  CHECK_THROWS(report_from_json("{\"results\": 5}"));
}

TEST_CASE("--tune in passes: every pass runs in a process of its own") {
  // Each pass reports its pass number and process id; the parent reads them back in order.
  const auto pass = [](int k, const std::string& json) {
    Report rep;
    rep.rows.push_back(tune_row("ring", 8, 10.0 + k));
    rep.rows.back().transport = std::to_string(::getpid());
    std::ofstream(json) << to_json(rep);
    return k == 1 ? 1 : 0;  // pass 2: a candidate failed, its rows still count
  };
  const TunePasses run = run_in_fresh_processes(3, pass);
  REQUIRE(run.reports.size() == 3);
  CHECK(run.status == 1);
  std::vector<std::string> pids;
  for (int k = 0; k < 3; ++k) {
    REQUIRE(run.reports[k].rows.size() == 1);
    CHECK(run.reports[k].rows[0].time_us == 10.0 + k);
    pids.push_back(run.reports[k].rows[0].transport);
  }
  CHECK(pids[0] != std::to_string(::getpid()));
  CHECK(pids[0] != pids[1]);
  CHECK(pids[1] != pids[2]);
  // A usage error ends the run at the first pass; a pass that writes nothing or dies is an error.
  int calls = 0;
  const TunePasses usage = run_in_fresh_processes(3, [&](int, const std::string&) {
    ++calls;  // in the child: the parent's count stays 0
    return 2;
  });
  CHECK(usage.status == 2);
  CHECK(usage.reports.empty());
  CHECK(calls == 0);
  CHECK_THROWS_WITH(run_in_fresh_processes(1, [](int, const std::string&) { return 0; }),
                    doctest::Contains("wrote no results"));
  // SIGKILL: doctest's crash handler, which the child inherits, reports other signals.
  const auto killed = [](int, const std::string&) {
    ::kill(::getpid(), SIGKILL);
    return 0;
  };
  CHECK_THROWS_WITH(run_in_fresh_processes(1, killed), doctest::Contains("died"));
}
}  // namespace perf_cli_test
#endif  // CCOLL_PERF_CORE
