// GradientSync over the MPI transports (transport::Mpi and MpiHybrid), scheduled and coordinated,
// on however many processes mpirun starts (the suite runs 1 to 4). Each channel is an Allreduce of
// its own (which duplicates MPI_COMM_WORLD), and the channels' workers and the coordinator's cycle
// thread call MPI at the same time, so MPI is initialised with MPI_THREAD_MULTIPLE. Every rank
// marks its tensors ready in a random permutation of its own every iteration; every gradient is
// checked bitwise against the exact reduction and against a plain allreduce of the same tensor
// (gradient_sync_harness.hpp says why bitwise is right).
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "ccoll/gradient/coordinated_sync.hpp"
#include "ccoll/transport/mpi.hpp"
#include "ccoll/transport/mpi_hybrid.hpp"
#include "gradient_sync_harness.hpp"

namespace gradient_sync_mpi_test {
using namespace ccoll;
using namespace ccoll::gradient;
using namespace gradient_sync_harness;
using namespace std::chrono_literals;

namespace {

int ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
    return provided;
  }
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  return provided;
}

// True on every rank iff it is true on every rank.
bool everywhere(bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v == 1;
}

// `iterations` iterations of `sync` on this process's rank, each in a random order of its own;
// "" or the first wrong gradient. `reference` all-reduces each tensor on its own.
template <class Sync, class AR>
std::string run_iterations(Sync& sync, AR& reference, const Model& model, ReduceOp op,
                           int iterations, int salt) {
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>((rank + salt) % 3));
  RankBuffers in = make_buffers(model.tensors, Layout::scattered);
  RankBuffers ref = make_buffers(model.tensors, Layout::scattered);
  auto& g = sync.attach(grads.ptrs);
  const auto n = model.tensors.size();
  std::vector<int> order(n);
  std::string wrong;
  for (int it = 0; it < iterations; ++it) {
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
    std::mt19937 rng(static_cast<unsigned>(1 + rank * 7919 + it * 104729 + salt));
    std::shuffle(order.begin(), order.end(), rng);
    for (int t : order) {
      fill(model.tensors[static_cast<std::size_t>(t)], grads.ptrs[static_cast<std::size_t>(t)],
           rank, p, t, it);
      g.ready(t);
    }
    g.wait();
    for (std::size_t t = 0; t < n; ++t) {
      const TensorSpec& spec = model.tensors[t];
      fill(spec, in.ptrs[t], rank, p, static_cast<int>(t), it);
      reference.run(in.ptrs[t], ref.ptrs[t], spec.count, spec.dtype, op);
      if (wrong.empty() && std::memcmp(grads.ptrs[t], ref.ptrs[t], spec.bytes()) != 0)
        wrong = "tensor '" + spec.name + "' differs from its own allreduce";
      if (wrong.empty()) wrong = check(spec, grads.ptrs[t], p, static_cast<int>(t), it, op);
    }
  }
  return wrong;
}

template <class Transport>
void run_transport() {
  using AR =
      Allreduce<Transport, algo::Ring, schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>;
  Config cfg;
  cfg.timeout = 30s;
  AR reference(cfg);
  int salt = 0;
  for (const Model& model : models()) {
    const std::vector<Schedule> all = policies(model.profile);
    // asc-wfbp (K = 2), single-layer, mixed (s, m, n with K = 2).
    for (const Schedule* s : {&all[4], &all[1], &all.back()}) {
      const ReduceOp op = salt % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
      INFO(model.profile.name, " scheduled ", s->policy, " op ", to_string(op));
      GradientSync<AR> sync(cfg, model.tensors, *s, {.op = op});
      const std::string wrong = run_iterations(sync, reference, model, op, 3, salt++);
      CHECK(wrong == "");
      CHECK(everywhere(wrong.empty()));
    }
    for (int k : {1, 2}) {
      const ReduceOp op = salt % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
      INFO(model.profile.name, " coordinated K=", k, " op ", to_string(op));
      Coordinated policy;
      policy.max_concurrent = k;
      policy.fusion_threshold_bytes = k == 1 ? std::uint64_t{64} << 20 : 2048;
      policy.cycle_time = 200us;
      GradientSync<AR, Coordinated> sync(cfg, model.tensors, policy, {.op = op});
      const std::string wrong = run_iterations(sync, reference, model, op, 4, salt++);
      CHECK(wrong == "");
      CHECK(everywhere(wrong.empty()));
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      const auto st = sync.rank(rank).stats();
      const auto n = model.tensors.size();
      CHECK(st.new_responses == n);  // learned once, then decided from the response cache
      CHECK(st.cached_responses == 3 * n);
    }
  }
}

}  // namespace

TEST_CASE("MPI is initialised with MPI_THREAD_MULTIPLE") {
  CHECK(ensure_mpi() == MPI_THREAD_MULTIPLE);
}

TEST_CASE("GradientSync over transport::Mpi: scheduled and coordinated, random orders, bitwise") {
  REQUIRE(ensure_mpi() == MPI_THREAD_MULTIPLE);
  run_transport<transport::Mpi>();
}

TEST_CASE("GradientSync over transport::MpiHybrid: scheduled and coordinated, bitwise") {
  REQUIRE(ensure_mpi() == MPI_THREAD_MULTIPLE);
  run_transport<transport::MpiHybrid>();
}
}  // namespace gradient_sync_mpi_test
