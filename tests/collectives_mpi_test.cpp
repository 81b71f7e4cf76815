// ccoll::ReduceScatter, AllGather, Broadcast and Reduce over MPI (transport::Mpi) and MPI + shared
// memory (transport::MpiHybrid, two emulated hosts): ctest runs this file on 1 to 4 processes
// (mpiexec -n P). Every collective with ring and direct plans, every dtype and op, in place and
// out of place, every root, guard elements around every buffer; random sequences of every
// collective through `auto`; a bad root on one rank.
#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "auto_collectives.hpp"
#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/transport/mpi.hpp"
#include "ccoll/transport/mpi_hybrid.hpp"
#include "collective_reference.hpp"

namespace collectives_mpi_test {
using namespace ccoll;
using namespace std::chrono_literals;

namespace {

void ensure_mpi() {
  struct Session {
    Session() {
      int initialized = 0;
      MPI_Initialized(&initialized);
      if (initialized == 0) MPI_Init(nullptr, nullptr);
    }
    ~Session() {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized == 0) MPI_Finalize();
    }
  };
  static Session session;
}

int world(int (*query)(MPI_Comm, int*)) {
  int v = 0;
  query(MPI_COMM_WORLD, &v);
  return v;
}

bool all_ranks(bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return v != 0;
}

Config small_slots() {
  Config c;
  c.slot_bytes = 1024;  // several messages per call even at small counts
  c.nslots = 2;
  c.nchannels = 2;
  c.timeout = 20s;
  return c;
}

template <template <class, class, class> class Coll, class T>
void check_collective(const std::vector<std::uint64_t>& counts) {
  using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;
  const int p = world(MPI_Comm_size);
  auto run = [&]<class L>(L) {
    Coll<T, L, Overlapped> coll(small_slots(), L{}, MPI_COMM_WORLD);
    const std::string wrong =
        testing::check_collective_cases(coll, coll.rank(coll.rank()), p, counts, false);
    INFO(coll.name() << " on " << p << " ranks");
    CHECK_MESSAGE(wrong.empty(), wrong);
    CHECK(all_ranks(wrong.empty()));
  };
  run(algo::Ring{});
  run(algo::Direct{});
}

// Ranks {0, 1} and {2, 3} on two emulated hosts (transport::MpiHybrid's CCOLL_MPI_HOST).
struct TwoHosts {
  TwoHosts() {
    ::setenv("CCOLL_MPI_HOST", ("host" + std::to_string(world(MPI_Comm_rank) / 2)).c_str(), 1);
  }
  ~TwoHosts() { ::unsetenv("CCOLL_MPI_HOST"); }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;
};

}  // namespace

TEST_CASE_TEMPLATE("mpi collectives: ring and direct, f32 and bf16, every op, root, in place", T,
                   transport::Mpi, transport::MpiHybrid) {
  ensure_mpi();
  const TwoHosts hosts;
  check_collective<ReduceScatter, T>({1, 3, 131, 1000});
  check_collective<AllGather, T>({1, 3, 131, 1000});
  check_collective<Broadcast, T>({1, 3, 131, 1000});
  check_collective<Reduce, T>({1, 3, 131, 1000});
}

TEST_CASE_TEMPLATE(
    "mpi collectives: random sequences of every collective through `auto` on one set of objects", T,
    transport::Mpi, transport::MpiHybrid) {
  // The threads' test of the same name (collectives_test.cpp) on MPI ranks; on two emulated hosts
  // the hybrid's calls cross both its shared memory and MPI.
  ensure_mpi();
  const TwoHosts hosts;
  const int p = world(MPI_Comm_size);
  // CCOLL_TEST_SOAK=N runs N times as many sequences, each with another seed.
  const int sequences = 2 * testing::soak_factor();
  for (std::uint32_t seed = 7; seed < 7 + static_cast<std::uint32_t>(sequences); ++seed) {
    testing::AutoCollectives<T> colls([](int) { return small_slots(); }, false, MPI_COMM_WORLD);
    const auto calls = testing::random_calls(seed, p, 40, false);
    const std::string wrong = colls.run_sequence(calls, p, world(MPI_Comm_rank));
    CHECK_MESSAGE(wrong.empty(), "seed " << seed << " " << wrong);
    CHECK(all_ranks(wrong.empty()));
  }
}

TEST_CASE("mpi collectives: a bad root on one rank is refused on every rank") {
  ensure_mpi();
  const int p = world(MPI_Comm_size), rank = world(MPI_Comm_rank);
  Broadcast<transport::Mpi, algo::Ring> bc(small_slots(), algo::Ring{}, MPI_COMM_WORLD);
  std::vector<float> in(16, 1.0f), out(16, -1.0f);
  std::string what = "no error";
  try {
    bc.run(in.data(), out.data(), 16, DataType::f32, rank == p - 1 ? p : 0);
  } catch (const Error& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.find("root") != std::string::npos);
  CHECK(out == std::vector<float>(16, -1.0f));
  CHECK(all_ranks(what.find("root") != std::string::npos));
}
}  // namespace collectives_mpi_test
