// Tests of GradientSync<C, Coordinated> on the shared-memory transport: P = 2 and 3 processes
// fork()ed by the test, each with its gradient channels and its control channel (a rendezvous
// each), ranks marking their tensors ready in a random permutation of their own every iteration
// and keeping them in different layouts; every gradient checked bitwise against the exact
// reduction (gradient_sync_harness.hpp says why bitwise is right), and the steady state decided
// from the response cache alone.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "ccoll/gradient/coordinated_sync.hpp"
#include "gradient_sync_harness.hpp"
#include "process_ranks.hpp"

namespace gradient_coordinated_shm_test {
using namespace ccoll;
using namespace ccoll::gradient;
using namespace gradient_sync_harness;
using process_ranks::on_processes;
using namespace std::chrono_literals;

namespace {

using AR = Allreduce<transport::SharedMemory, algo::Ring,
                     schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>;

}  // namespace

TEST_CASE("processes: coordinated, random orders, fused and staged, P = 2, 3") {
  for (int p : {2, 3}) {
    const std::string session = process_ranks::unique_session("gcoord-" + std::to_string(p));
    const auto out = on_processes(
        p,
        [&](int r) -> std::string {
          int index = 0;
          for (const Model& model : models()) {
            for (int k : {1, 2}) {
              Config cfg;
              cfg.nranks = p;
              cfg.rank = r;
              cfg.timeout = 20s;
              cfg.session = session + "-" + std::to_string(index++);
              const ReduceOp op = index % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
              Coordinated policy;
              policy.max_concurrent = k;
              policy.fusion_threshold_bytes = k == 1 ? std::uint64_t{64} << 20 : 2048;
              policy.cycle_time = 200us;
              GradientSync<AR, Coordinated> sync(cfg, model.tensors, policy, {.op = op});
              RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>((r + index) % 3));
              auto& g = sync.attach(grads.ptrs);
              const auto n = model.tensors.size();
              std::vector<int> order(n);
              const int iterations = 3;
              for (int it = 0; it < iterations; ++it) {
                for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
                std::mt19937 rng(static_cast<unsigned>(1 + r * 7919 + it * 104729 + index));
                std::shuffle(order.begin(), order.end(), rng);
                for (int t : order) {
                  fill(model.tensors[static_cast<std::size_t>(t)],
                       grads.ptrs[static_cast<std::size_t>(t)], r, p, t, it);
                  g.ready(t);
                }
                g.wait();
                for (std::size_t t = 0; t < n; ++t) {
                  std::string wrong =
                      check(model.tensors[t], grads.ptrs[t], p, static_cast<int>(t), it, op);
                  if (!wrong.empty()) return wrong + " (" + model.profile.name + ")";
                }
              }
              const auto s = g.stats();
              if (s.new_responses != n || s.cached_responses != n * (iterations - 1))
                return "cache: " + std::to_string(s.new_responses) + " new, " +
                       std::to_string(s.cached_responses) + " cached (" + model.profile.name + ")";
            }
          }
          return "";
        },
        60000ms);
    for (const auto& o : out) {
      CHECK(o.exit_code == 0);
      CHECK(o.message == "OK");
    }
  }
}
}  // namespace gradient_coordinated_shm_test
