// Tests of gradient::GradientSync on the shared-memory transport: P = 2 and 3 processes fork()ed
// by the test, each with one communicator per channel (a rendezvous of its own), ranks marking
// their tensors ready in different orders and keeping them in different layouts, checked bitwise
// against the exact reduction (gradient_sync_harness.hpp says why bitwise is right).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "gradient_sync_harness.hpp"
#include "process_ranks.hpp"

namespace gradient_sync_shm_test {
using namespace ccoll;
using namespace ccoll::gradient;
using namespace gradient_sync_harness;
using process_ranks::on_processes;
using namespace std::chrono_literals;

namespace {

using AR = Allreduce<transport::SharedMemory, algo::Ring,
                     schedule::Pipelined<schedule::Overlap::ReduceBroadcast>>;

}  // namespace

TEST_CASE("processes: fused, staged and simultaneous messages over shared memory, P = 2, 3") {
  for (int p : {2, 3}) {
    const std::string session = process_ranks::unique_session("gsync-" + std::to_string(p));
    const auto out = on_processes(
        p,
        [&](int r) -> std::string {
          int index = 0;
          for (const Model& model : models()) {
            const std::vector<Schedule> all = policies(model.profile);
            // asc-wfbp (K = 2), single-layer (one fused message), mixed (s, m, n with K = 2).
            for (const Schedule* s : {&all[4], &all[1], &all.back()}) {
              Config cfg;
              cfg.nranks = p;
              cfg.rank = r;
              cfg.timeout = 20s;
              cfg.session = session;
              cfg.session += "-";
              cfg.session += std::to_string(index++);
              const ReduceOp op = index % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
              GradientSync<AR> sync(cfg, model.tensors, *s, {.op = op});
              RankBuffers grads = make_buffers(model.tensors, static_cast<Layout>((r + index) % 3));
              auto& g = sync.attach(grads.ptrs);
              std::vector<int> order(model.tensors.size());
              for (int it = 0; it < 3; ++it) {
                ready_order(order, r, it);
                for (int t : order) {
                  fill(model.tensors[static_cast<std::size_t>(t)],
                       grads.ptrs[static_cast<std::size_t>(t)], r, p, t, it);
                  g.ready(t);
                }
                g.wait();
                for (std::size_t t = 0; t < model.tensors.size(); ++t) {
                  std::string wrong =
                      check(model.tensors[t], grads.ptrs[t], p, static_cast<int>(t), it, op);
                  if (!wrong.empty()) {
                    wrong += " (";
                    wrong += model.profile.name;
                    wrong += ", ";
                    wrong += s->policy;
                    wrong += ")";
                    return wrong;
                  }
                }
              }
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
}  // namespace gradient_sync_shm_test
