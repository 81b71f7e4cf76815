// Tests of gradient queuing inside one allreduce (runtime/layer_readiness.hpp, [C-Cube] Sec.
// III-D): the Layer-Chunk table of ring, tree, double binary tree and one-shot plans against a
// simulated run (a layer is reported ready exactly when every write of it is done, never while an
// element still waits for a write), the progress the interpreter publishes in both of its forms,
// and a real concurrent run on host threads in which a consumer thread per rank reads each layer
// the moment its wait returns, over consecutive calls whose stale progress must not count.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/one_shot.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/schedule/pipelined.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/host_threads.hpp"

namespace layer_readiness_test {
using namespace ccoll;
using namespace std::chrono_literals;

namespace {

enum class Algo { Ring, TreePhased, TreeOverlap, DoubleTree, OneShot };

plan::Plan build(Algo a, plan::PlanRequest req) {
  switch (a) {
    case Algo::Ring:
      return plan::build_ring(req);
    case Algo::TreePhased:
      req.overlap = false;
      return plan::build_tree(req);
    case Algo::TreeOverlap:
      req.overlap = true;
      return plan::build_tree(req);
    case Algo::DoubleTree:
      return plan::build_double_binary_tree(req);
    case Algo::OneShot:
      return plan::build_one_shot(req);
  }
  return {};
}

// Random layer boundaries over [0, count): some layers may be empty, the last ends at count.
std::vector<std::uint64_t> random_layers(std::mt19937& rng, std::uint64_t count) {
  const auto n = std::uniform_int_distribution<std::size_t>(1, 9)(rng);
  std::vector<std::uint64_t> end(n);
  for (auto& e : end) e = std::uniform_int_distribution<std::uint64_t>(0, count)(rng);
  std::sort(end.begin(), end.end());
  end.back() = count;
  return end;
}

struct SimulationTally {
  std::uint64_t checks = 0;
  std::uint64_t early = 0;  // a layer ready while the rank still had steps to run
};

// Runs `rank`'s programs of `p` in a random interleaving of its channels (a superset of the orders
// a real run allows) and checks the table after every step; progress starts where call k-1 left
// it, so a stale value would show as a layer ready too early.
void simulate(const plan::Plan& p, int rank, std::span<const std::uint64_t> layer_end,
              std::mt19937& rng, SimulationTally& tally) {
  const runtime::LayerChunkTable table(p, rank, layer_end);
  const auto nch = static_cast<std::uint32_t>(p.channels.size());
  const auto nlayers = static_cast<std::uint32_t>(layer_end.size());
  REQUIRE(table.nchannels() == nch);
  REQUIRE(table.nlayers() == nlayers);
  REQUIRE(table.flat().size() == static_cast<std::size_t>(nch) * nlayers);
  const auto program = [&](std::uint32_t c) -> const std::vector<plan::Step>& {
    return p.channels[c].programs[static_cast<std::size_t>(rank)].steps;
  };
  const auto begin_of = [&](std::uint32_t l) { return l == 0 ? 0 : layer_end[l - 1]; };

  // Per element, writes still to come; per layer, elements still waiting for one.
  std::vector<std::uint32_t> pending(p.count, 0);
  std::vector<std::uint64_t> unfinished(nlayers, 0);
  // Per layer and channel, by a plain scan: 1 + the last step writing into the layer.
  std::vector<std::uint32_t> last(static_cast<std::size_t>(nlayers) * nch, 0);
  for (std::uint32_t c = 0; c < nch; ++c)
    for (std::uint32_t i = 0; i < program(c).size(); ++i) {
      const plan::Step& s = program(c)[i];
      if (!s.write_output || s.count == 0) continue;  // an empty write writes nothing
      for (std::uint64_t e = s.offset; e < s.offset + s.count; ++e) ++pending[e];
      for (std::uint32_t l = 0; l < nlayers; ++l)
        if (begin_of(l) < layer_end[l] && s.offset < layer_end[l] &&
            begin_of(l) < s.offset + s.count)
          last[static_cast<std::size_t>(l) * nch + c] = i + 1;
    }
  for (std::uint32_t l = 0; l < nlayers; ++l)
    for (std::uint64_t e = begin_of(l); e < layer_end[l]; ++e) unfinished[l] += pending[e] > 0;
  for (std::uint32_t l = 0; l < nlayers; ++l)
    for (std::uint32_t c = 0; c < nch; ++c)
      REQUIRE(table.steps_needed(l, c) == last[static_cast<std::size_t>(l) * nch + c]);

  const std::uint64_t call = std::uniform_int_distribution<std::uint64_t>(2, 1000)(rng);
  const std::uint64_t base = runtime::progress_base_of_call(call);
  std::vector<std::uint64_t> progress(nch);
  std::vector<std::uint32_t> pcs(nch, 0);
  for (std::uint32_t c = 0; c < nch; ++c)
    progress[c] = runtime::progress_base_of_call(call - 1) + program(c).size();
  std::uint64_t left = 0;
  for (std::uint32_t c = 0; c < nch; ++c) left += program(c).size();

  const runtime::LayerTableView view = table.view();
  const auto check_all = [&] {
    std::uint32_t first_unready = nlayers;
    for (std::uint32_t l = 0; l < nlayers; ++l) {
      const bool ready = runtime::layer_ready(view, progress.data(), base, l);
      bool expected = true;
      for (std::uint32_t c = 0; c < nch; ++c)
        expected = expected && pcs[c] >= last[static_cast<std::size_t>(l) * nch + c];
      CHECK(ready == expected);
      if (ready) {
        CHECK(unfinished[l] == 0);  // never ready while an element awaits a write
        if (left > 0 && layer_end[l] > begin_of(l)) ++tally.early;
      } else if (first_unready == nlayers) {
        first_unready = l;
      }
      ++tally.checks;
    }
    CHECK(runtime::first_unready_layer(view, progress.data(), base, 0) == first_unready);
  };

  // Before the first step only empty layers are ready, whatever call k-1 left behind.
  for (std::uint32_t l = 0; l < nlayers; ++l)
    CHECK(runtime::layer_ready(view, progress.data(), base, l) == (layer_end[l] == begin_of(l)));
  check_all();
  while (left > 0) {
    std::uint32_t c = std::uniform_int_distribution<std::uint32_t>(0, nch - 1)(rng);
    while (pcs[c] >= program(c).size()) c = (c + 1) % nch;
    const plan::Step& s = program(c)[pcs[c]];
    if (s.write_output)
      for (std::uint64_t e = s.offset; e < s.offset + s.count; ++e)
        if (--pending[e] == 0)
          --unfinished[static_cast<std::size_t>(
              std::upper_bound(layer_end.begin(), layer_end.end(), e) - layer_end.begin())];
    ++pcs[c];
    --left;
    progress[c] = base + pcs[c];
    check_all();
  }
  for (std::uint32_t l = 0; l < nlayers; ++l)
    CHECK(runtime::layer_ready(view, progress.data(), base, l));
  // A later call's wait is not satisfied by this one's progress.
  for (std::uint32_t l = 0; l < nlayers; ++l)
    if (layer_end[l] > begin_of(l))
      CHECK_FALSE(
          runtime::layer_ready(view, progress.data(), runtime::progress_base_of_call(call + 1), l));
}

}  // namespace

TEST_CASE("layer readiness: the Layer-Chunk table matches a simulated run of every plan") {
  std::mt19937 rng(20240611);
  SimulationTally tally;
  SimulationTally ring_tally;
  for (Algo a : {Algo::Ring, Algo::TreePhased, Algo::TreeOverlap, Algo::DoubleTree, Algo::OneShot})
    for (int nranks = 1; nranks <= 9; ++nranks)
      for (int trial = 0; trial < 20; ++trial) {
        plan::PlanRequest req;
        req.nranks = nranks;
        req.elem_size = 4;
        req.count = std::uniform_int_distribution<std::uint64_t>(1, 3000)(rng);
        req.nchannels = std::uniform_int_distribution<std::uint32_t>(1, 3)(rng);
        req.nchunks = std::uniform_int_distribution<std::uint32_t>(0, 5)(rng);
        req.slot_bytes = 16 * std::uniform_int_distribution<std::uint64_t>(4, 64)(rng);
        const plan::Plan p = build(a, req);
        for (int rank = 0; rank < nranks; ++rank) {
          const std::vector<std::uint64_t> layers = random_layers(rng, req.count);
          CAPTURE(static_cast<int>(a));
          CAPTURE(nranks);
          CAPTURE(rank);
          CAPTURE(req.count);
          simulate(p, rank, layers, rng, a == Algo::Ring && nranks > 1 ? ring_tally : tally);
        }
      }
  CHECK(tally.checks > 10000);
  // A ring rank writes its output piece by piece during the all-gather, so some layers must be
  // ready before its last step: the point of gradient queuing.
  CHECK(ring_tally.early > 0);
}

TEST_CASE("layer readiness: bad layers and plans that leave output unwritten are refused") {
  plan::PlanRequest req;
  req.nranks = 3;
  req.count = 100;
  req.slot_bytes = 64;
  plan::Plan p = plan::build_ring(req);
  const std::vector<std::uint64_t> ok{10, 10, 100};
  CHECK(runtime::LayerChunkTable(p, 1, ok).nlayers() == 3);
  const auto throws_invalid = [&](int rank, std::vector<std::uint64_t> ends) {
    try {
      runtime::LayerChunkTable t(p, rank, ends);
    } catch (const Error& e) {
      return e.code() == ErrorCode::InvalidArgument;
    }
    return false;
  };
  CHECK(throws_invalid(1, {}));
  CHECK(throws_invalid(1, {50, 40, 100}));
  CHECK(throws_invalid(1, {10, 99}));
  CHECK(throws_invalid(1, {10, 101}));
  CHECK(throws_invalid(3, ok));
  CHECK(throws_invalid(-1, ok));
  // Drop one output write of rank 1: the table must not report its elements ready.
  bool dropped = false;
  for (auto& s : p.channels[0].programs[1].steps)
    if (s.write_output && !dropped) {
      s.write_output = false;
      dropped = true;
    }
  REQUIRE(dropped);
  CHECK(throws_invalid(1, ok));
  CHECK_NOTHROW(runtime::LayerChunkTable(p, 0, ok));
  // A relay has no output.
  p.active[2] = false;
  CHECK(throws_invalid(2, ok));
}

TEST_CASE("layer readiness: the wait returns Ok, Timeout or Aborted") {
  const std::vector<std::uint32_t> need{2, 0, 1, 3};  // 2 layers x 2 channels
  const runtime::LayerTableView view{need.data(), 2, 2};
  std::vector<std::uint64_t> progress{runtime::progress_base_of_call(4) + 9,
                                      runtime::progress_base_of_call(4) + 9};
  const std::uint64_t base = runtime::progress_base_of_call(5);
  std::uint32_t abort = 0;
  CHECK(runtime::wait_layer_ready(view, progress.data(), base, 0, &abort,
                                  sync::deadline_after(20ms)) == sync::WaitResult::Timeout);
  progress[0] = base + 2;
  CHECK(runtime::wait_layer_ready(view, progress.data(), base, 0, &abort, 0) ==
        sync::WaitResult::Ok);
  CHECK_FALSE(runtime::layer_ready(view, progress.data(), base, 1));
  CHECK(runtime::first_unready_layer(view, progress.data(), base, 0) == 1);
  abort = 1;
  CHECK(runtime::wait_layer_ready(view, progress.data(), base, 1, &abort, 0) ==
        sync::WaitResult::Aborted);
  abort = 0;
  // A writer thread completes channel 1 while the wait runs.
  std::thread writer([&] {
    std::this_thread::sleep_for(5ms);
    sync::Counter(&progress[1]).post_value(base + 3);
  });
  CHECK(runtime::wait_layer_ready(view, progress.data(), base, 1, &abort,
                                  sync::deadline_after(10s)) == sync::WaitResult::Ok);
  writer.join();
}

TEST_CASE("layer readiness: the call count wraps at 2^32 calls without a false ready") {
  const std::vector<std::uint32_t> need{2, 1};  // 1 layer x 2 channels
  const runtime::LayerTableView view{need.data(), 1, 2};
  constexpr std::uint64_t kLastBeforeWrap = (std::uint64_t{1} << 32) - 1;
  // Both channels finished the last call before the wrap with many steps.
  const std::uint64_t done_last = runtime::progress_base_of_call(kLastBeforeWrap) + 4000;
  std::vector<std::uint64_t> progress{done_last, done_last};
  CHECK(runtime::layer_ready(view, progress.data(), runtime::progress_base_of_call(kLastBeforeWrap),
                             0));
  // The next call's base is 0 again: the old words are one call behind, not far ahead.
  const std::uint64_t base = runtime::progress_base_of_call(kLastBeforeWrap + 1);
  CHECK(base == 0);
  CHECK_FALSE(runtime::layer_ready(view, progress.data(), base, 0));
  progress[0] = base + 2;
  CHECK_FALSE(runtime::layer_ready(view, progress.data(), base, 0));
  progress[1] = base + 1;
  CHECK(runtime::layer_ready(view, progress.data(), base, 0));
  // A consumer asking for the call before the wrap still finds it done.
  CHECK(runtime::layer_ready(view, progress.data(), runtime::progress_base_of_call(kLastBeforeWrap),
                             0));
  CHECK(runtime::progress_reached(5, 5));
  CHECK_FALSE(runtime::progress_reached(4, 5));
  CHECK(runtime::progress_reached(3, ~std::uint64_t{0}));
}

TEST_CASE("layer readiness: both interpreter forms publish their progress") {
  // One rank, two channels: every step is a local copy, so each program runs alone.
  plan::PlanRequest req;
  req.nranks = 1;
  req.count = 1000;
  req.nchannels = 2;
  req.slot_bytes = 256;
  const plan::Plan p = plan::build_ring(req);
  const std::vector<std::uint64_t> layers{300, 1000};
  const runtime::LayerChunkTable table(p, 0, layers);
  std::vector<float> in(req.count), out(req.count, -1.0f);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  for (int form = 0; form < 2; ++form) {
    std::vector<std::uint64_t> progress(2, 0);
    const std::uint64_t base = runtime::progress_base_of_call(7);
    for (std::uint32_t c = 0; c < 2; ++c) {
      const auto& steps = p.channels[c].programs[0].steps;
      runtime::ProgramContext<float> ctx;
      ctx.steps = steps.data();
      ctx.nsteps = static_cast<std::uint32_t>(steps.size());
      ctx.ports = p.ports.data();
      ctx.input = in.data();
      ctx.output = out.data();
      ctx.channel = c;
      ctx.progress = &progress[c];
      ctx.progress_base = base;
      const runtime::HostGroup g;
      if (form == 0) {
        std::uint32_t pc = 0;
        while (runtime::try_step<float, ReduceOp::sum>(g, ctx, pc)) CHECK(progress[c] == base + pc);
        CHECK(pc == steps.size());
      } else {
        CHECK(runtime::run_program<float, ReduceOp::sum>(g, ctx, 0, nullptr));
      }
      CHECK(progress[c] == base + steps.size());
    }
    CHECK(runtime::first_unready_layer(table.view(), progress.data(), base, 0) == 2);
    CHECK(out == in);
  }
}

namespace {

constexpr int kRanks = 4;
constexpr int kCalls = 4;

float input_value(int call, int rank, std::size_t i) {
  return static_cast<float>((call * 7 + rank * 3 + static_cast<int>(i % 13)) % 29);
}

float expected_value(int call, std::size_t i) {
  float sum = 0;
  for (int r = 0; r < kRanks; ++r) sum += input_value(call, r, i);
  return sum;
}

// kRanks rank threads run kCalls allreduces; a consumer thread per rank waits for the layers of
// each call (in a rank-specific order) and checks each layer's values the moment its wait returns.
// A rank starts call k+1 only after its consumer is done with call k, whose output it overwrites.
template <class AR>
void run_concurrent_consumers() {
  Config config;
  config.nranks = kRanks;
  config.slot_bytes = 512;
  config.timeout = 20s;
  AR ar(config);
  const std::size_t count = 20000;
  const std::vector<std::uint64_t> layer_end{1, 700, 700, 5000, 5123, 12000, 19999, 20000};
  const auto nlayers = static_cast<std::uint32_t>(layer_end.size());

  std::vector<std::vector<float>> in(kRanks, std::vector<float>(count));
  std::vector<std::vector<float>> out(kRanks, std::vector<float>(count));
  std::vector<runtime::LayerReadiness> readiness;
  readiness.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r)
    readiness.push_back(ar.rank(r).layer_readiness(count, DataType::f32, layer_end));
  std::vector<std::atomic<int>> consumed(kRanks);
  std::vector<std::string> failures(kRanks);
  std::vector<int> layers_checked(kRanks, 0);

  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (int call = 1; call <= kCalls; ++call) {
        int seen = consumed[r].load(std::memory_order_acquire);
        while (seen < call - 1) {
          consumed[r].wait(seen, std::memory_order_acquire);
          seen = consumed[r].load(std::memory_order_acquire);
        }
        for (std::size_t i = 0; i < count; ++i) in[r][i] = input_value(call, r, i);
        std::fill(out[r].begin(), out[r].end(), -1.0f);  // no partial or stale value is a sum
        ar.rank(r).run(in[r].data(), out[r].data(), count, DataType::f32, ReduceOp::sum);
      }
    });
    threads.emplace_back([&, r] {
      std::vector<std::uint32_t> order(nlayers);
      for (std::uint32_t l = 0; l < nlayers; ++l) order[l] = l;
      std::mt19937 rng(static_cast<unsigned>(r));
      for (int call = 1; call <= kCalls; ++call) {
        if (r % 2 == 1) std::shuffle(order.begin(), order.end(), rng);
        for (std::uint32_t l : order) {
          const auto res =
              readiness[r].wait(static_cast<std::uint64_t>(call), l, sync::deadline_after(20s));
          if (res != sync::WaitResult::Ok) {
            failures[r] = "call " + std::to_string(call) + " layer " + std::to_string(l) +
                          ": wait did not return Ok";
            return;
          }
          for (std::uint64_t i = l == 0 ? 0 : layer_end[l - 1]; i < layer_end[l]; ++i)
            if (out[r][i] != expected_value(call, i) && failures[r].empty())
              failures[r] = "call " + std::to_string(call) + " layer " + std::to_string(l) +
                            " element " + std::to_string(i) + ": " + std::to_string(out[r][i]) +
                            " when ready, expected " + std::to_string(expected_value(call, i));
          ++layers_checked[r];
        }
        consumed[r].store(call, std::memory_order_release);
        consumed[r].notify_all();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    CAPTURE(r);
    if (!failures[r].empty()) FAIL_CHECK(failures[r]);
    CHECK(layers_checked[r] == static_cast<int>(nlayers) * kCalls);
  }

  // No call is running now: the next one's layers are not ready, and a wait for one times out.
  const runtime::LayerReadiness& lr = readiness[0];
  CHECK(lr.first_unready(kCalls) == nlayers);
  CHECK_FALSE(lr.ready(kCalls + 1, 1));
  CHECK(lr.wait(kCalls + 1, 1, sync::deadline_after(20ms)) == sync::WaitResult::Timeout);
  CHECK(lr.wait(kCalls, 1, sync::deadline_after(20ms)) == sync::WaitResult::Ok);
  CHECK_THROWS_AS((void)lr.ready(kCalls, nlayers), Error);
  // Once the communicator is aborted, a wait ends at once.
  ar.executor().communicator().control_plane().raise(
      ErrorCode::Aborted,
      runtime::FailurePoint{0, -1, -1, -1, runtime::FailurePoint::Waiting::nothing});
  CHECK(lr.wait(kCalls + 1, 1) == sync::WaitResult::Aborted);
}

}  // namespace

TEST_CASE("layer readiness: consumer threads read each layer as soon as it is ready (ring)") {
  run_concurrent_consumers<Allreduce<transport::HostThreads, algo::Ring, schedule::Phased>>();
}

TEST_CASE("layer readiness: consumer threads read each layer as soon as it is ready (dbtree)") {
  run_concurrent_consumers<Allreduce<transport::HostThreads, algo::DoubleBinaryTree>>();
}

TEST_CASE("layer readiness: a handle for a rank or layers the plan cannot serve is refused") {
  Config config;
  config.nranks = 2;
  Allreduce<transport::HostThreads, algo::Ring> ar(config);
  const std::vector<std::uint64_t> layers{5, 10};
  CHECK_NOTHROW((void)ar.rank(1).layer_readiness(10, DataType::f64, layers));
  CHECK_THROWS_AS((void)ar.rank(1).layer_readiness(11, DataType::f64, layers), Error);
  CHECK_THROWS_AS((void)ar.executor().communicator().layer_readiness(2, 10, 8, layers), Error);
}
}  // namespace layer_readiness_test
