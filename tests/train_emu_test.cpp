// ccoll_train_emu's logic (tools/train_emu/): profile scaling, the fit, the schedules and their
// predictions, the Chrome trace, and a 2-rank threads run of a tiny model whose every reduced
// gradient is checked bitwise against a plain allreduce.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../tools/train_emu/emu_model.hpp"
#include "../tools/train_emu/emu_run.hpp"
#include "../tools/train_emu/emu_trace.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/gradient/engine/tensor_spec.hpp"
#include "ccoll/gradient/sync.hpp"
#include "ccoll/transport/host_threads.hpp"

namespace train_emu_test {
namespace emu = ccoll::train_emu;
namespace g = ccoll::gradient;

namespace {

g::ModelProfile tiny_model() {
  g::ModelProfile p;
  p.name = "tiny";
  p.forward_s = 2e-4;
  const std::uint64_t bytes[] = {4096, 64, 16384, 128, 65536, 256, 8192, 4};
  for (int l = 0; l < 8; ++l)
    p.layers.push_back(
        {g::detail::cat({"t", std::to_string(l)}), bytes[l], l % 2 == 0 ? 1e-4 : 2e-5});
  return p;
}

g::CommModel tiny_comm() {
  return g::CommModel::from_line(20e-6, 1e-9, 1.5);
}

}  // namespace

TEST_CASE("train_emu: profile scaling keeps tensors whole and positive") {
  const g::ModelProfile p = tiny_model();
  const g::ModelProfile s = emu::scale_profile(p, {.compute = 0.5, .bytes = 1.0 / 64});
  REQUIRE(s.num_layers() == p.num_layers());
  CHECK(s.forward_s == doctest::Approx(1e-4));
  for (int i = 0; i < p.num_layers(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    CHECK(s.layers[k].backward_s == doctest::Approx(p.layers[k].backward_s * 0.5));
    CHECK(s.layers[k].bytes % 4 == 0);
    CHECK(s.layers[k].bytes >= 4);
  }
  CHECK(s.layers[0].bytes == 64);  // 4096 / 64
  CHECK(s.layers[1].bytes == 4);   // 64 / 64 = 1 byte: rounded up to one f32
  CHECK_THROWS(emu::scale_profile(p, {.compute = 0, .bytes = 1}));

  const std::vector<double> measured(8, 1e-3);
  const g::ModelProfile m = emu::with_compute(s, 2e-3, measured);
  CHECK(m.backward_s() == doctest::Approx(8e-3));
  CHECK(m.layers[3].bytes == s.layers[3].bytes);
}

TEST_CASE("train_emu: spread, sweep sizes") {
  const auto s = emu::spread({5, 1, 4, 2, 3, 10, 6, 7, 9, 8});
  CHECK(s.median == doctest::Approx(5.5));
  CHECK(s.min == 1);
  CHECK(s.max == 10);
  CHECK(s.p10 == 1);
  CHECK(s.p90 == 9);
  CHECK(emu::spread({}).n == 0);

  const auto sizes = emu::sweep_bytes(16, 1000000, 4);
  CHECK(sizes.front() == 16);
  CHECK(sizes.back() == 1000000);
  for (std::size_t i = 1; i < sizes.size(); ++i) {
    CHECK(sizes[i] > sizes[i - 1]);
    CHECK(sizes[i] % 4 == 0);
  }
}

TEST_CASE("train_emu: the fit recovers a, b, gamma and never gives a negative startup") {
  std::vector<ccoll::model::Sample> samples;
  for (double m : {1e3, 1e4, 1e5, 1e6}) {
    samples.push_back({m, 20e-6 + 1e-9 * m, 1});
    samples.push_back({m, 20e-6 + 1.5 * 1e-9 * m, 2});
  }
  const emu::CommFit f = emu::fit_comm(samples);
  CHECK(f.line.line.alpha_s == doctest::Approx(20e-6));
  CHECK(f.line.line.beta_s_per_byte == doctest::Approx(1e-9));
  CHECK(f.gamma == doctest::Approx(1.5));
  CHECK(f.single == 4);
  CHECK(f.concurrent == 4);
  CHECK(f.model().gamma == doctest::Approx(1.5));

  // Time per byte that grows with size: the line crosses zero, the model keeps a floor.
  const std::vector<ccoll::model::Sample> bent{
      {100, 2e-6, 1}, {1e4, 5e-6, 1}, {1e6, 1e-4, 1}, {1e7, 1e-2, 1}};
  const emu::CommFit b = emu::fit_comm(bent);
  CHECK(b.line.line.alpha_s < 0);
  CHECK(b.a_s() == doctest::Approx(2e-6));
  CHECK(b.model().startup_s() == doctest::Approx(2e-6));
  CHECK(b.gamma == 1);
}

TEST_CASE("train_emu: every policy plans, survives the text hand-over and is predicted") {
  const g::ModelProfile p = tiny_model();
  const g::CommModel c = tiny_comm();
  emu::PolicyOptions o = emu::scaled_policy_options({.compute = 0.01, .bytes = 1e-3}, 2);
  CHECK(o.ddp.first_bucket_cap_bytes == (1u << 20) / 1000);
  CHECK(o.horovod.cycle_time_s == doctest::Approx(5e-5));
  o.optimal_time_limit_s = 0.5;
  const auto tensors = g::tensors_from_profile(p, ccoll::DataType::f32);
  for (const auto& name : emu::all_policies()) {
    CAPTURE(name);
    const g::Schedule s = emu::make_policy(name, p, c, o);
    for (const auto& m : s.messages) CHECK(m.not_before_s == 0);
    const g::Schedule back = emu::decode_schedule(emu::encode_schedule(s, p.num_layers()), name);
    REQUIRE(back.messages.size() == s.messages.size());
    CHECK(back.max_concurrent == s.max_concurrent);
    for (std::size_t k = 0; k < s.messages.size(); ++k) {
      CHECK(back.messages[k].lo == s.messages[k].lo);
      CHECK(back.messages[k].hi == s.messages[k].hi);
      CHECK(back.messages[k].rule == s.messages[k].rule);
    }
    const auto plan = g::engine::lower(tensors, back);
    const emu::Prediction pr = emu::predict(p, back, c, plan);
    CHECK(pr.free_lanes_s == doctest::Approx(g::iteration_time(p, back, c)));
    CHECK(pr.pinned_s >= pr.free_lanes_s - 1e-12);
    CHECK(pr.pinned_s >= p.forward_s + p.backward_s() - 1e-12);
  }
  CHECK_THROWS(emu::make_policy("nope", p, c, o));
}

TEST_CASE("train_emu: pinned channels cost what the engine pays when a later message ends first") {
  // Three simultaneous messages, K = 2, all ready at once: a long one on channel 0, a short one on
  // channel 1, then a short one that the engine puts on channel 0 (behind the long one) while
  // the model's free lanes start it as soon as the short one ends.
  g::ModelProfile p;
  p.forward_s = 0;
  p.layers = {{"a", 4000, 0}, {"b", 400, 0}, {"c", 400000, 0}};
  const g::Schedule s = g::schedule_from_typing(g::parse_typing("sss"), 2);
  const auto plan = g::engine::lower(g::tensors_from_profile(p, ccoll::DataType::f32), s);
  REQUIRE(plan.messages[0].channel == 0);
  REQUIRE(plan.messages[1].channel == 1);
  REQUIRE(plan.messages[2].channel == 0);
  const g::CommModel c = g::CommModel::from_line(1e-6, 1e-9, 1);
  const emu::Prediction pr = emu::predict(p, s, c, plan);
  CHECK(pr.pinned_s > pr.free_lanes_s);
  CHECK(pr.pinned.messages[2].start_s == doctest::Approx(pr.pinned.messages[0].end_s));
  CHECK(pr.pinned.messages[2].lane == 0);
  // One lane: the pinning changes nothing.
  const g::Schedule w = g::plan_wfbp(p);
  const auto wplan = g::engine::lower(g::tensors_from_profile(p, ccoll::DataType::f32), w);
  CHECK(emu::predict(p, w, c, wplan).pinned_s == doctest::Approx(g::iteration_time(p, w, c)));
}

TEST_CASE("train_emu: the Chrome trace is well-formed JSON") {
  std::vector<emu::Span> spans{{"forward", 0, 0, 10.0, 10.001},
                               {"bwd 2", 0, 0, 10.001, 10.002},
                               {"AR 2", 0, 1, 10.002, 10.003, {{"bytes", 64}}},
                               {"AR 2", 1, 1, 10.0025, 10.003}};
  const nlohmann::json doc = emu::chrome_trace(spans, {{"policy", "wfbp"}});
  const nlohmann::json back = nlohmann::json::parse(doc.dump());
  REQUIRE(back["traceEvents"].is_array());
  int slices = 0, names = 0;
  for (const auto& e : back["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    if (e["ph"] == "X") {
      ++slices;
      CHECK(e["ts"].get<double>() >= 0);
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e.contains("tid"));
    } else {
      CHECK(e["ph"] == "M");
      ++names;
    }
  }
  CHECK(slices == 4);
  CHECK(names == 2 + 3);  // two processes; lanes (0,0), (0,1), (1,1)
  CHECK(back["otherData"]["policy"] == "wfbp");
  CHECK(back["traceEvents"][names]["ts"].get<double>() == doctest::Approx(0));
}

TEST_CASE("train_emu: GradientSync of every policy equals a plain allreduce, bitwise") {
  using AR = ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring>;
  const g::ModelProfile p = tiny_model();
  const auto tensors = g::tensors_from_profile(p, ccoll::DataType::f32);
  emu::PolicyOptions o = emu::scaled_policy_options({.compute = 0.01, .bytes = 1e-3}, 2);
  o.optimal_time_limit_s = 0.2;
  ccoll::Config config;
  config.nranks = 2;
  AR plain(config);
  for (const auto& name : emu::all_policies()) {
    CAPTURE(name);
    const g::Schedule s = emu::make_policy(name, p, tiny_comm(), o);
    g::GradientSync<emu::Timed<AR>> sync(config, tensors, s);
    std::vector<std::vector<float>> got(2), want(2);
    std::vector<std::thread> ranks;
    ranks.reserve(2);
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        std::size_t total = 0;
        for (const auto& t : tensors) total += t.count;
        auto& mine = got[static_cast<std::size_t>(r)];
        mine.resize(total);
        // Non-integer values: a fused call must still add the same pairs as one per tensor.
        for (std::size_t i = 0; i < total; ++i)
          mine[i] = 0.1f * static_cast<float>((i * 7 + static_cast<std::size_t>(r) * 13) % 97);
        auto& ref = want[static_cast<std::size_t>(r)];
        ref = mine;
        std::vector<void*> ptrs;
        std::size_t off = 0;
        for (const auto& t : tensors) {
          ptrs.push_back(mine.data() + off);
          plain.rank(r).run(ref.data() + off, ref.data() + off, t.count, ccoll::DataType::f32,
                            ccoll::ReduceOp::sum);
          off += t.count;
        }
        auto& engine = sync.attach(r, ptrs);
        for (int l = p.num_layers() - 1; l >= 0; --l) engine.ready(l);
        engine.wait();
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < 2; ++r)
      CHECK(std::memcmp(got[static_cast<std::size_t>(r)].data(),
                        want[static_cast<std::size_t>(r)].data(),
                        got[static_cast<std::size_t>(r)].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("train_emu: a 2-rank threads run of a tiny model") {
  using AR = ccoll::Allreduce<ccoll::transport::HostThreads, ccoll::algo::Ring>;
  const g::ModelProfile p = emu::scale_profile(tiny_model(), {.compute = 0.2, .bytes = 1});
  emu::RunOptions opt;
  opt.warmup = 1;
  opt.iterations = 2;
  opt.compute_iterations = 2;
  opt.fit_reps = 2;
  opt.policies = emu::all_policies();
  opt.policy = emu::scaled_policy_options({.compute = 0.2, .bytes = 1}, 2);
  opt.policy.optimal_time_limit_s = 0.2;
  opt.trace_policy = "asc";
  emu::Control ctl(2);
  emu::ThreadsWorld world;
  world.nranks = 2;
  emu::RunResult result;
  std::vector<std::thread> ranks;
  ranks.reserve(2);
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      try {
        auto res = emu::run_rank<AR>(r, ctl, world, p, opt);
        if (r == 0) result = std::move(res);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        ctl.abort();
      }
    });
  for (auto& t : ranks) t.join();
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
  REQUIRE(result.policies.size() == emu::all_policies().size());
  for (const auto& pr : result.policies) {
    CAPTURE(pr.name);
    CHECK(pr.verified);
    CHECK(pr.iterations.size() == 2);
    CHECK(pr.measured.median > 0);
    CHECK(pr.predicted.pinned_s >= pr.compute.forward_s + pr.compute.backward_s() - 1e-9);
    CHECK(pr.compute.num_layers() == p.num_layers());
    if (pr.name == "coordinated") {  // learned once, then decided from the response cache
      const auto L = static_cast<std::uint64_t>(p.num_layers());
      CHECK(pr.iterations_run == 4);  // warm-up, two timed, the check
      CHECK(pr.coordination.new_responses == L);
      CHECK(pr.coordination.cached_responses == 3 * L);
    }
  }
  CHECK(result.measured.backward_s() > 0);
  CHECK(result.fit.single >= 2);
  CHECK(result.fit.concurrent >= 2);
  // The traced iteration: per rank, forward + 8 layers, and one call per message.
  std::size_t compute = 0, calls = 0;
  for (const auto& s : result.trace) (s.lane == 0 ? compute : calls) += 1;
  CHECK(compute == 2 * 9);
  std::size_t asc_messages = 0;
  for (const auto& pr : result.policies)
    if (pr.name == "asc") asc_messages = pr.schedule.messages.size();
  CHECK(calls == 2 * asc_messages);
  const auto doc = nlohmann::json::parse(emu::chrome_trace(result.trace).dump());
  CHECK(doc["traceEvents"].size() > compute + calls);
}
}  // namespace train_emu_test
