// transport::Mpi: the verified plans over MPI point-to-point messages. ctest runs this file on
// 1 to 4 processes (mpiexec -n P; tests/CMakeLists.txt); every test is collective, so all ranks
// run the same cases in the same order. Results against the reference for every dtype and op,
// bitwise equal on every rank; sub-communicators; argument errors and mismatches on every rank;
// a late rank makes the others time out within the deadline; abort records reach every rank; a
// setup one rank refuses fails every rank; a call completes its sends before it returns; the
// control plane never lets an abandoned gather write freed memory; measuring and finding hosts
// keep clear of the application's messages and environment differences.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "allreduce_reference.hpp"
#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/mpi.hpp"
#include "ccoll/transport/mpi/control_plane.hpp"
#include "ccoll/transport/mpi/eager_limit.hpp"
#include "ccoll/transport/mpi/measure.hpp"
#include "ccoll/transport/mpi_hybrid.hpp"

namespace transport_mpi_test {
using namespace ccoll;
using namespace std::chrono_literals;

namespace {

using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;

struct MpiSession {
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0) MPI_Init(nullptr, nullptr);
  }
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Finalize();
  }
};

void ensure_mpi() {
  static MpiSession session;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int p = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

// Whether every rank of `comm` passed true.
bool all_ranks(bool ok, MPI_Comm comm = MPI_COMM_WORLD) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, comm);
  return v != 0;
}

Config small_slots() {
  Config c;
  c.slot_bytes = 4096;  // several messages per call even at small counts
  c.nslots = 2;
  c.timeout = 20s;
  return c;
}

template <class S, class T = transport::Mpi>
using MpiAllreduce = Allreduce<T, algo::Registered, S>;

template <class T, class S>
std::string check_algorithm(const algo::AlgorithmSpec& spec, MPI_Comm comm, bool every_dtype) {
  int p = 0;
  MPI_Comm_size(comm, &p);
  MpiAllreduce<S, T> ar(small_slots(), algo::make_algorithm(spec.algorithm, {nullptr, p, 0}), comm);
  return testing::check_all(ar, {1, 2, 131, 1000, 5003}, every_dtype);
}

template <class T = transport::Mpi>
std::string check_named(const std::string& name, MPI_Comm comm, bool every_dtype) {
  const algo::AlgorithmSpec spec = algo::find_algorithm(name);
  return spec.overlap ? check_algorithm<T, Overlapped>(spec, comm, every_dtype)
                      : check_algorithm<T, schedule::Phased>(spec, comm, every_dtype);
}

// Sets CCOLL_MPI_HOST for the scope of one test (emulated hosts for transport::MpiHybrid).
struct HostName {
  explicit HostName(const std::string& name) { ::setenv("CCOLL_MPI_HOST", name.c_str(), 1); }
  ~HostName() { ::unsetenv("CCOLL_MPI_HOST"); }
  HostName(const HostName&) = delete;
  HostName& operator=(const HostName&) = delete;
};

}  // namespace

TEST_CASE_TEMPLATE("mpi: every rank-count algorithm, every dtype and op, in place, exact", T,
                   transport::Mpi, transport::MpiHybrid) {
  ensure_mpi();
  for (const algo::Algorithm& a : algo::algorithms()) {
    if (a.needs_topology) continue;
    for (const std::string& name : {a.name + "-overlap", a.name + "-phased"}) {
      INFO("algorithm " << name << " on " << world_size() << " ranks over " << T::name);
      const std::string wrong = check_named<T>(name, MPI_COMM_WORLD, name == "ring-overlap");
      CHECK_MESSAGE(wrong.empty(), wrong);
      CHECK(all_ranks(wrong.empty()));
    }
  }
}

TEST_CASE("mpi: results are bitwise identical on every rank (float sums, large count)") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  for (const char* name : {"ring", "dbtree", "tree-overlap"}) {
    const algo::AlgorithmSpec spec = algo::find_algorithm(name);
    MpiAllreduce<Overlapped> ar(Config{}, algo::make_algorithm(spec.algorithm, {nullptr, p, 0}),
                                MPI_COMM_WORLD);
    const std::size_t n = 3'000'017;  // several 1 MiB slots per rank, an odd tail
    std::vector<float> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i)
      in[i] = 1.0f / static_cast<float>(1 + (i * 31 + static_cast<std::size_t>(rank) * 7) % 1013);
    ar.run(in.data(), out.data(), n, DataType::f32, ReduceOp::sum);
    std::uint64_t h = 1469598103934665603ull;
    for (float v : out) h = (h ^ std::bit_cast<std::uint32_t>(v)) * 1099511628211ull;
    std::uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    INFO(name);
    CHECK(lo == hi);
    // Within rounding of the exact sum (the order of additions is the plan's, not rank order).
    double worst = 0;
    for (std::size_t i = 0; i < n; i += 997) {
      double ref = 0;
      for (int r = 0; r < p; ++r)
        ref += 1.0f / static_cast<float>(1 + (i * 31 + static_cast<std::size_t>(r) * 7) % 1013);
      worst = std::max(worst, std::abs(ref - static_cast<double>(out[i])) / ref);
    }
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("mpi-hybrid: two emulated hosts: shared memory inside each, messages between them") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  const HostName host("host" + std::to_string(rank / 2));  // ranks {0,1}, {2,3}: two hosts
  for (const char* name : {"ring", "dbtree-phased", "direct"}) {
    const algo::AlgorithmSpec spec = algo::find_algorithm(name);
    using S = Overlapped;
    MpiAllreduce<S, transport::MpiHybrid> ar(
        small_slots(), algo::make_algorithm(spec.algorithm, {nullptr, p, 0}), MPI_COMM_WORLD);
    // Every rank's host is named by its first rank.
    const auto& hosts = ar.executor().links().host_of();
    for (int q = 0; q < p; ++q) CHECK(hosts[static_cast<std::size_t>(q)] == q / 2 * 2);
    // Connections inside an emulated host share memory; those between hosts are messages.
    const std::size_t shared = ar.executor().links().connections_on_host();
    const std::size_t total = ar.executor().communicator().connection_keys().size();
    const bool host_mate = (rank ^ 1) < p;  // this rank's emulated host holds two ranks
    if (host_mate) CHECK(shared > 0);
    if (!host_mate) CHECK(shared == 0);  // alone on its host: nothing to share
    if (p >= 3) CHECK(shared < total);
    const std::string wrong = testing::check_all(ar, {1, 131, 5003}, false);
    INFO(name);
    CHECK_MESSAGE(wrong.empty(), wrong);
    CHECK(all_ranks(wrong.empty()));
  }
}

TEST_CASE("mpi: sub-communicators (split and duplicated) run side by side") {
  ensure_mpi();
  const int rank = world_rank();
  MPI_Comm halves = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &halves);  // reversed rank order inside each half
  const std::string wrong_half = check_named("ring", halves, false);
  CHECK_MESSAGE(wrong_half.empty(), wrong_half);
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const std::string wrong_dup = check_named("dbtree", dup, false);
  CHECK_MESSAGE(wrong_dup.empty(), wrong_dup);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&halves);
  CHECK(all_ranks(wrong_half.empty() && wrong_dup.empty()));
}

TEST_CASE("mpi: bad arguments on one rank and mismatches fail every rank; the communicator lives") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  Allreduce<transport::Mpi, algo::Ring> ar(small_slots(), algo::Ring{}, MPI_COMM_WORLD);
  CHECK(ar.nranks() == p);
  CHECK(ar.rank() == rank);
  std::vector<float> in(100, 1.0f), out(100, -1.0f);

  // A null buffer on the last rank: every rank throws before any buffer is touched.
  const bool bad_here = rank == p - 1;
  try {
    ar.run(bad_here ? nullptr : in.data(), out.data(), 100, DataType::f32, ReduceOp::sum);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    if (!bad_here && p > 1)
      CHECK(std::string(e.what()).find("rank " + std::to_string(p - 1)) != std::string::npos);
  }
  CHECK(out[0] == -1.0f);

  if (p > 1) {  // a count mismatch
    try {
      ar.run(in.data(), out.data(), rank == 0 ? 100 : 99, DataType::f32, ReduceOp::sum);
      FAIL("expected a mismatch");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Mismatch);
      CHECK(std::string(e.what()).find("count differs") != std::string::npos);
    }
    CHECK(out[0] == -1.0f);
  }
  // Still usable.
  ar.run(in.data(), out.data(), 100, DataType::f32, ReduceOp::sum);
  CHECK(out[99] == static_cast<float>(p));
  CHECK_THROWS_AS(ar.rank(rank + 1), Error);
}

TEST_CASE("mpi: a late rank makes the others time out within the deadline, naming the call") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  Config c = small_slots();
  c.timeout = 400ms;
  Allreduce<transport::Mpi, algo::Ring> ar(c, algo::Ring{}, MPI_COMM_WORLD);
  std::vector<float> in(64, 1.0f), out(64);
  ar.run(in.data(), out.data(), 64, DataType::f32, ReduceOp::sum);  // everyone is here
  const auto t0 = std::chrono::steady_clock::now();
  if (rank == p - 1) std::this_thread::sleep_for(1500ms);
  ErrorCode code = ErrorCode::InvalidArgument;
  std::string what;
  try {
    ar.run(in.data(), out.data(), 64, DataType::f32, ReduceOp::sum);
  } catch (const Error& e) {
    code = e.code();
    what = e.what();
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  INFO(what);
  CHECK(code == ErrorCode::Timeout);
  if (rank != p - 1) {
    CHECK(waited < 1400ms);  // the deadline, not the late rank, ended the wait
    CHECK(what.find("call 2") != std::string::npos);
  }
  // The communicator stays aborted: the next call fails at once on every rank.
  CHECK_THROWS_AS(ar.run(in.data(), out.data(), 64, DataType::f32, ReduceOp::sum), Error);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: ranks configured differently refuse to run together") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  Config c = small_slots();
  if (rank == 1) c.nslots = 3;
  try {
    Allreduce<transport::Mpi, algo::Ring> ar(c, algo::Ring{}, MPI_COMM_WORLD);
    FAIL("expected a mismatch");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Mismatch);
  }
}

TEST_CASE_TEMPLATE("mpi: a Config one rank refuses fails every rank's constructor, naming it", T,
                   transport::Mpi, transport::MpiHybrid) {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  // Rank 1 throws before the first setup collective; the others must not wait for it there.
  Config c = small_slots();
  if (rank == 1) c.nslots = 0;
  ErrorCode code = ErrorCode::System;
  std::string what;
  try {
    Allreduce<T, algo::Ring> ar(c, algo::Ring{}, MPI_COMM_WORLD);
    FAIL("expected an error");
  } catch (const Error& e) {
    code = e.code();
    what = e.what();
  }
  INFO(what);
  CHECK(code == ErrorCode::InvalidArgument);
  CHECK(what.find("Config::nslots") != std::string::npos);
  if (rank != 1) CHECK(what.find("rank 1 could not set up") != std::string::npos);
  // Every rank left setup at the same point: a communicator built next works.
  Allreduce<T, algo::Ring> ar(small_slots(), algo::Ring{}, MPI_COMM_WORLD);
  std::vector<float> in(100, 1.0f), out(100);
  ar.run(in.data(), out.data(), 100, DataType::f32, ReduceOp::sum);
  CHECK(out[99] == static_cast<float>(p));
}

// The ctest run transport_mpi_tcp_np3 runs this case over Open MPI's TCP transport
// (tests/CMakeLists.txt), where a message above the eager limit moves only while its sender
// calls MPI: a rank that returned with its last sends in flight and then computed would hold up
// their receivers past their deadline.
TEST_CASE("mpi: a call completes its sends before it returns (a rank that computes after it)") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  for (const char* name : {"tree", "dbtree"}) {
    const algo::AlgorithmSpec spec = algo::find_algorithm(name);
    Config c;  // 1 MiB slots: every message above Open MPI's default eager limits
    c.timeout = 2s;
    MpiAllreduce<schedule::Phased> ar(c, algo::make_algorithm(spec.algorithm, {nullptr, p, 0}),
                                      MPI_COMM_WORLD);
    const std::size_t n = std::size_t{1} << 20;  // 4 MiB of floats
    std::vector<float> in(n, 1.0f), out(n);
    MPI_Barrier(MPI_COMM_WORLD);
    std::string what;
    try {
      ar.run(in.data(), out.data(), n, DataType::f32, ReduceOp::sum);
    } catch (const Error& e) {
      what = e.what();
    }
    // Deterministic on any MPI: nothing of this rank's is left in flight.
    for (const transport::mpi::Endpoint* e : ar.executor().links().senders())
      CHECK_FALSE(e->sends_in_flight());
    if (rank == 0) std::this_thread::sleep_for(2500ms);  // computes, no MPI call
    INFO(std::string(name) << ": " << what);
    CHECK(what.empty());
    CHECK(out[n - 1] == static_cast<float>(p));
    CHECK(all_ranks(what.empty()));
  }
}

TEST_CASE(
    "mpi: building a plan is not a wait: sends finished after a build longer than the "
    "timeout") {
  // The call's sends are completed before it returns (finish_sends), bounded by the call's
  // deadline, which counts from when the plan is ready: a build of 3 timeouts must not have
  // spent it. The tree's root ends its call with sends of 1 MiB messages (above Open MPI's eager
  // limits), which its children take only after they finish building their own plans.
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  Config c;
  c.timeout = 300ms;
  const algo::Registered tree =
      algo::make_algorithm(algo::find_algorithm("tree").algorithm, {nullptr, p, 0});
  int builds = 0;
  const algo::Registered slow("tree-slow-to-plan", [&](const plan::PlanRequest& r) {
    ++builds;
    // The root is ready first; every rank's build outlasts the timeout.
    std::this_thread::sleep_for(3 * c.timeout + (rank == 0 ? 0ms : 100ms));
    return tree.build(r);
  });
  MpiAllreduce<schedule::Phased> ar(c, slow, MPI_COMM_WORLD);
  const std::size_t n = std::size_t{1} << 20;  // 4 MiB of floats
  std::vector<float> in(n, 1.0f), out(n);
  MPI_Barrier(MPI_COMM_WORLD);
  std::string what;
  try {
    ar.run(in.data(), out.data(), n, DataType::f32, ReduceOp::sum);
  } catch (const Error& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(builds >= 1);
  CHECK(what.empty());
  CHECK(out[n - 1] == static_cast<float>(p));
  CHECK(all_ranks(what.empty()));
}

TEST_CASE("mpi: a gather abandoned at a timeout never writes memory freed after it") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  runtime::CallArgs args;
  args.count = 0x1111;
  const runtime::FailurePoint where{rank, -1, -1, -1, runtime::FailurePoint::Waiting::nothing};
  const std::size_t gathered =
      static_cast<std::size_t>(p + 1) * sizeof(transport::mpi::CallDescriptor);
  std::vector<char>* after = nullptr;  // allocated where the plane's buffers were
  const bool late = rank == p - 1;
  if (!late) {
    {
      transport::mpi::ControlPlane plane(comm, rank, p, 50);
      CHECK_THROWS_AS(plane.agree(args, 1, sync::now_ns() + 50'000'000, where), Error);
    }  // leaves its gather to MPI
    after = new std::vector<char>(gathered, 'A');
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (late) {
    // It arrives after the others gave up, as a rank the abort record has not reached yet does.
    transport::mpi::ControlPlane plane(comm, rank, p, 5000);
    try {
      (void)plane.agree(args, 1, sync::now_ns() + 5'000'000'000ull, where);
    } catch (const Error&) {
      // Stopped by the others' abort records: as good as arrived.
    }
  } else {
    for (int k = 0; k < 100; ++k) {  // any MPI call lets the abandoned gather complete
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      std::this_thread::sleep_for(1ms);
    }
    CHECK(std::count(after->begin(), after->end(), 'A') == static_cast<long>(gathered));
    delete after;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&comm);
}

TEST_CASE("mpi: measuring the host links takes none of the application's pending receives") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  const HostName host("host" + std::to_string(rank));  // a host per rank: every pair measured
  MPI_Comm app = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &app);
  int got = 0;
  MPI_Request pending = MPI_REQUEST_NULL;
  if (rank == 1) MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, app, &pending);
  const transport::mpi::HostLinks links = transport::mpi::measure_host_links(app);
  CHECK(links.nhosts == p);
  if (rank == 0) {
    int v = 42;
    MPI_Send(&v, 1, MPI_INT, 1, 99, app);
  }
  if (rank == 1) {
    MPI_Status status;
    MPI_Wait(&pending, &status);
    CHECK(status.MPI_TAG == 99);
    CHECK(got == 42);
  }
  MPI_Comm_free(&app);
}

TEST_CASE("mpi-hybrid: CCOLL_MPI_HOST set on some ranks of a node only") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  if (p < 2) return;
  // Rank 0 names a host; the others of its node leave the variable unset, a host of their own.
  std::optional<HostName> host;
  if (rank == 0) host.emplace("named");
  Allreduce<transport::MpiHybrid, algo::Ring> ar(small_slots(), algo::Ring{}, MPI_COMM_WORLD);
  const auto& hosts = ar.executor().links().host_of();
  CHECK(hosts[0] == 0);
  for (int q = 1; q < p; ++q) CHECK(hosts[static_cast<std::size_t>(q)] == 1);
  const std::string wrong = testing::check_all(ar, {1, 131, 5003}, false);
  CHECK_MESSAGE(wrong.empty(), wrong);
  CHECK(all_ranks(wrong.empty()));
}

TEST_CASE("mpi: misuse is named") {
  ensure_mpi();
  CHECK_THROWS_AS((Allreduce<transport::Mpi, algo::Ring>(Config{}, algo::Ring{}, MPI_COMM_NULL)),
                  Error);
}

TEST_CASE("mpi-hybrid: a forest planned on the measured host links (two emulated hosts)") {
  ensure_mpi();
  const int p = world_size(), rank = world_rank();
  const HostName host("host" + std::to_string(rank / 2));
  const transport::mpi::HostLinks links = transport::mpi::measure_host_links(MPI_COMM_WORLD);
  CHECK(links.nhosts == (p + 1) / 2);
  for (int a = 0; a < links.nhosts; ++a)
    for (int b = 0; b < links.nhosts; ++b)
      CHECK((a == b) == (links.at(links.bandwidth_GBps, a, b) == 0.0));
  const physical::PhysicalTopology topo = transport::mpi::measured_topology(links);
  CHECK(static_cast<int>(topo.active_nodes().size()) == p);
  Allreduce<transport::MpiHybrid, algo::PackedForest, Overlapped> ar(
      small_slots(), algo::PackedForest(topo), MPI_COMM_WORLD);
  const std::string wrong = testing::check_all(ar, {1, 131, 5003}, false);
  CHECK_MESSAGE(wrong.empty(), wrong);
  CHECK(all_ranks(wrong.empty()));
}

TEST_CASE("mpi: Open MPI's TCP eager limit is read through the tool interface") {
  ensure_mpi();
  int level_before = 0, level_after = 0;
  MPI_Query_thread(&level_before);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  const std::optional<std::uint64_t> limit = transport::mpi::tcp_eager_limit();
  INFO(version);
  MPI_Query_thread(&level_after);
  CHECK(level_after == level_before);  // reading it leaves the thread level alone
  if (std::string(version).find("Open MPI") == std::string::npos) {
    CHECK_FALSE(limit.has_value());  // another MPI has no btl_tcp_eager_limit
    return;
  }
  const char* set_limit = std::getenv("OMPI_MCA_btl_tcp_eager_limit");
  const char* pml = std::getenv("OMPI_MCA_pml");
  const char* btl = std::getenv("OMPI_MCA_btl");
  if (pml != nullptr || btl != nullptr) {
    MESSAGE("OMPI_MCA_pml or OMPI_MCA_btl is set: whether TCP is selected is not checked");
    return;
  }
  REQUIRE(limit.has_value());
  if (set_limit != nullptr)
    CHECK(*limit == std::strtoull(set_limit, nullptr, 10));
  else
    CHECK(*limit >= 1024);  // Open MPI's default is 64 KiB
  // Read twice: the tool interface is initialised and finalised each time.
  CHECK(transport::mpi::tcp_eager_limit() == limit);
}

TEST_CASE("mpi: Open MPI's component selections: lists, exclusions and the default") {
  using transport::mpi::detail::selects;
  CHECK(selects("", "tcp"));  // unset: every component may run
  CHECK(selects("self,vader,tcp", "tcp"));
  CHECK_FALSE(selects("self,vader", "tcp"));
  CHECK(selects("^uct,openib,ofi", "tcp"));  // Debian's default btl exclusions
  CHECK_FALSE(selects("^tcp", "tcp"));
  CHECK_FALSE(selects("^openib,tcp", "tcp"));
  CHECK_FALSE(selects("tcpx", "tcp"));  // names, not prefixes
  CHECK(selects("^tcpx", "tcp"));
  CHECK(selects("ob1", "ob1"));
  CHECK_FALSE(selects("^ucx,ob1", "ob1"));
}
}  // namespace transport_mpi_test
