// Tests of the low-latency protocol on the shared-memory transport: P = 2..4 processes fork()ed by
// the test. Every algorithm that plans on abstract ranks with Config::protocol "ll" against the
// reference (every dtype and op, in place and out of place) and bitwise against "simple" on values
// whose sums round; the default `auto` table; ranks that disagree on the protocol refuse to run
// together.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "allreduce_reference.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "process_ranks.hpp"

namespace protocol_shm_test {
using namespace ccoll;
using namespace std::chrono_literals;
using ccoll::testing::check_all;
using process_ranks::error_code_of;
using process_ranks::on_processes;
using process_ranks::Outcome;
using process_ranks::require_all_ok;

namespace {

using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;

std::string unique_session(const std::string& tag) {
  return process_ranks::unique_session("test-protocol-" + tag);
}

Config shm_config(int p, int r, const std::string& session, const char* protocol) {
  Config c;
  c.nranks = p;
  c.rank = r;
  c.session = session;
  c.slot_bytes = 256;  // LL: 128 payload bytes per slot, so 1000 floats take several slots
  c.nslots = 2;
  c.timeout = 10s;
  c.protocol = protocol;
  return c;
}

// Values whose sums round in f32: the two protocols must still give the same bits.
std::vector<float> rounding_input(int rank, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((rank * 7919 + static_cast<int>(i) * 104729) % 20011 - 10005) / 37.0f;
  return v;
}

template <class S>
std::string run_both(const algo::AlgorithmSpec& spec, int p, int r, const std::string& session) {
  algo::AlgorithmRequest req;
  req.nranks = p;
  std::vector<float> results[2];
  const char* protocols[2] = {"simple", "ll"};
  for (int k = 0; k < 2; ++k) {
    // Simple with half the slot bytes runs the same plans (the same payload per slot), except
    // where `auto` chose a LowLatency plan itself: that one is chunked for half slots already, and
    // forced to Simple it keeps its chunks.
    Config c = shm_config(p, r, session + protocols[k], protocols[k]);
    const bool chunked_for_ll =
        spec.algorithm.name == "auto" &&
        algo::BySize{}.choose(p, 777 * sizeof(float)).protocol == protocol::Id::low_latency;
    if (k == 0 && !chunked_for_ll) c.slot_bytes /= 2;
    Allreduce<transport::SharedMemory, algo::Registered, S> ar(
        c, algo::make_algorithm(spec.algorithm, req));
    if (k == 1) {
      if (!protocol::is_low_latency(ar.plan(100, DataType::f32))) return "plan not LL";
      const std::string wrong = check_all(ar, {1, 3, 64, 1001}, p != 3);
      if (!wrong.empty()) return "ll: " + wrong;
    }
    const std::vector<float> in = rounding_input(r, 777);
    results[k].assign(in.size(), 0.0f);
    ar.run(in.data(), results[k].data(), in.size(), DataType::f32, ReduceOp::sum);
  }
  if (std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)) != 0)
    return "ll differs from simple on rank " + std::to_string(r);
  return "";
}

}  // namespace

TEST_CASE("shm: every algorithm in LL, P = 2..4, against the reference and bitwise vs Simple") {
  for (const algo::Algorithm& a : algo::algorithms()) {
    if (a.needs_topology) continue;
    const algo::AlgorithmSpec spec = algo::find_algorithm(a.name);
    for (int p = 2; p <= 4; ++p) {
      if (p == 3 && a.name != "oneshot" && a.name != "recdoubling" && a.name != "ring") continue;
      INFO("algorithm " << a.name << " P=" << p);
      const std::string session = unique_session(a.name);
      auto out = on_processes(p, [&](int r) {
        return spec.overlap ? run_both<Overlapped>(spec, p, r, session)
                            : run_both<schedule::Phased>(spec, p, r, session);
      });
      require_all_ok(out);
    }
  }
}

TEST_CASE("shm: ranks that disagree on the protocol refuse to run together") {
  const std::string session = unique_session("mismatch");
  auto out = on_processes(2, [&](int r) {
    Config c = shm_config(2, r, session, r == 1 ? "ll" : "");
    c.timeout = 300ms;
    Allreduce<transport::SharedMemory, algo::OneShot, Overlapped> ar(c);
    return std::string("constructed");
  });
  CHECK(error_code_of(out[1]) == static_cast<int>(ErrorCode::Mismatch));
  CHECK(error_code_of(out[0]) == static_cast<int>(ErrorCode::Timeout));
}
}  // namespace protocol_shm_test
