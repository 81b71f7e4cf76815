// The coordinator over MPI processes (MpiControlPlane). Run with several processes, e.g.
//   mpirun -np 4 ./build/tests/test_coordination_mpi
// (a plain run is one process: the protocol still runs, with trivial agreement).
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ccoll/coord/coordinator.hpp"
#include "ccoll/coord/mpi_control_plane.hpp"

namespace coordination_mpi_test {
using namespace ccoll;
using namespace ccoll::coord;

namespace {

void ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  MPI_Init(nullptr, nullptr);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

std::string name_of(int i) {
  std::ostringstream os;
  os << "layer" << i << ".weight";
  return os.str();
}

// FNV-1a over the executed sequence; equal on every rank iff the sequences are equal (w.h.p.).
struct Hash {
  std::uint64_t h = 1469598103934665603ull;
  void add(const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  }
};

bool same_on_all_ranks(std::uint64_t v) {
  std::uint64_t lo = v, hi = v;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

}  // namespace

TEST_CASE("MPI ranks with random ready orders execute the same fused responses") {
  ensure_mpi();
  MpiControlPlane control;
  CoordinatorOptions opt;
  opt.fusion_threshold_bytes = 32 * 1024;
  Coordinator coord(control, opt);
  coord.define_group("head", {name_of(0), name_of(1), name_of(2)});
  constexpr int kTensors = 50;
  std::mt19937 rng(99u + static_cast<unsigned>(control.rank()));
  Hash seq;
  int coordinator_cycles_after_warmup = 0;
  std::uint64_t steady_bytes = 0;
  for (int it = 0; it < 5; ++it) {
    std::vector<int> order(kTensors);
    for (int i = 0; i < kTensors; ++i) order[static_cast<std::size_t>(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::size_t next = 0, done = 0;
    std::vector<int> seen(kTensors, 0);
    while (done < order.size()) {
      for (std::size_t k = rng() % 6; k > 0 && next < order.size(); --k) {
        const int i = order[next++];
        coord.submit(name_of(i), i % 7 == 0 ? DataType::f16 : DataType::f32,
                     100 + static_cast<std::uint64_t>(i) * 37);
      }
      for (const auto& f : coord.run_cycle()) {
        seq.add("|");
        for (const auto& t : f.tensors) {
          seq.add(t.name);
          ++done;
          ++seen[static_cast<std::size_t>(std::stoi(t.name.substr(5)))];
        }
      }
      if (it > 0) {
        coordinator_cycles_after_warmup += coord.last_cycle().coordinator_path;
        steady_bytes = coord.last_cycle().control_bytes();
      }
    }
    for (int s : seen) CHECK(s == 1);
  }
  CHECK(same_on_all_ranks(seq.h));
  CHECK(same_on_all_ranks(coord.cache().fingerprint()));
  CHECK(coordinator_cycles_after_warmup == 0);
  CHECK(steady_bytes == (Coordinator::kStatusBits + kTensors + 63) / 64 * 8);
}

TEST_CASE("MPI ranks that disagree on a tensor's count all get the error") {
  ensure_mpi();
  MpiControlPlane control;
  if (control.nranks() < 2) return;  // needs two ranks to disagree
  Coordinator coord(control);
  coord.submit("fc.weight", DataType::f32, control.rank() == 1 ? 20 : 10);
  std::string text;
  try {
    for (int cycle = 0; cycle < 3; ++cycle) coord.run_cycle();
  } catch (const Error& e) {
    text = e.what();
  }
  CHECK(text.find("'fc.weight'") != std::string::npos);
  CHECK(text.find("rank 1 submitted count 20") != std::string::npos);
  CHECK(text.find("rank 0 submitted count 10") != std::string::npos);
}

TEST_CASE("MPI control plane: payloads longer than one message arrive whole") {
  ensure_mpi();
  // Messages of at most 7 bytes stand for MPI's int counts: every payload below takes several
  // rounds, one is empty, and the ranks' payloads end in different rounds.
  for (const std::uint64_t max_message : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{64}}) {
    MpiControlPlane control(MPI_COMM_WORLD, max_message);
    const auto payload_of = [](int r) {
      std::string s;
      for (int i = 0; i < (r == 1 ? 0 : 13 * r + 5); ++i)
        s.push_back(static_cast<char>('a' + (r * 7 + i) % 26));
      return s;
    };
    const auto gathered = control.gather_to_root(payload_of(control.rank()));
    if (control.rank() == 0) {
      REQUIRE(gathered.size() == static_cast<std::size_t>(control.nranks()));
      for (int r = 0; r < control.nranks(); ++r)
        CHECK(gathered[static_cast<std::size_t>(r)] == payload_of(r));
    } else {
      CHECK(gathered.empty());
    }
    const std::string sent(100, 'x');
    std::string root_payload = sent;
    root_payload[37] = 'y';
    const std::string got =
        control.broadcast_from_root(control.rank() == 0 ? root_payload : std::string("ignored"));
    CHECK(got == root_payload);
    CHECK(control.broadcast_from_root(std::string()).empty());
  }
}
}  // namespace coordination_mpi_test
