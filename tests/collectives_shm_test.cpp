// Tests of ccoll::ReduceScatter, AllGather, Broadcast and Reduce on the shared-memory transport:
// P = 2..4 processes fork()ed by the test; every collective with ring and direct plans, every
// dtype and op, in place and out of place, every root, guard elements around every buffer; buffers
// in a registered window (staged, like any others); a bad root on one process; eager broadcasts
// and reduces (Config::eager_rooted_bytes); random sequences of every collective through `auto`,
// in windows and staged; ranks that wait for a rank that left, in their steps and in the control
// plane's waits outside them.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "auto_collectives.hpp"
#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/runtime/area_control_plane.hpp"
#include "collective_reference.hpp"
#include "process_ranks.hpp"

namespace collectives_shm_test {
using namespace ccoll;
using namespace std::chrono_literals;
using process_ranks::error_code_of;
using process_ranks::on_processes;
using process_ranks::require_all_ok;

namespace {

Config shm_config(int p, int r, const std::string& session) {
  Config c;
  c.nranks = p;
  c.rank = r;
  c.session = session;
  c.slot_bytes = 512;
  c.nslots = 2;
  c.nchannels = 2;
  c.timeout = 10s;
  return c;
}

template <template <class, class, class> class Coll, class L>
void check_processes(const char* tag, const std::vector<std::uint64_t>& counts) {
  using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;
  for (int p = 2; p <= 4; ++p) {
    const std::string session = process_ranks::unique_session(std::string("coll-") + tag);
    auto out = on_processes(p, [&](int r) {
      Coll<transport::SharedMemory, L, Overlapped> coll(shm_config(p, r, session));
      return ccoll::testing::check_collective_cases(coll, coll.rank(r), p, counts, p != 3);
    });
    INFO(tag << " P=" << p);
    require_all_ok(out);
  }
}

}  // namespace

TEST_CASE("shm reduce_scatter: ring and direct, P = 2..4, every dtype and op, in place") {
  check_processes<ReduceScatter, algo::Ring>("rs-ring", {1, 3, 131, 1000});
  check_processes<ReduceScatter, algo::Direct>("rs-direct", {1, 131});
}

TEST_CASE("shm all_gather: ring and direct, P = 2..4, every dtype, in place") {
  check_processes<AllGather, algo::Ring>("ag-ring", {1, 3, 131, 1000});
  check_processes<AllGather, algo::Direct>("ag-direct", {1, 131});
}

TEST_CASE("shm broadcast: chain and direct, P = 2..4, every root, in place") {
  check_processes<Broadcast, algo::Ring>("bc-chain", {1, 3, 131, 1000});
  check_processes<Broadcast, algo::Direct>("bc-direct", {1, 131});
}

TEST_CASE("shm reduce: chain and direct, P = 2..4, every dtype and op, every root, in place") {
  check_processes<Reduce, algo::Ring>("rd-chain", {1, 3, 131, 1000});
  check_processes<Reduce, algo::Direct>("rd-direct", {1, 131});
}

TEST_CASE(
    "shm collectives: random sequences of every collective through `auto`, in registered windows "
    "and staged, eager and not, on one set of objects") {
  // The threads' test of the same name (collectives_test.cpp), in processes, where windows read
  // the peers' buffers in place; CCOLL_TEST_SOAK=N runs N times as many sequences.
  const int soak = ccoll::testing::soak_factor();
  std::uint32_t seed = 1000;
  for (int round = 0; round < soak; ++round)
    for (int p = 2; p <= 4; ++p)
      for (int variant = 0; variant < 2; ++variant) {
        const std::string session = process_ranks::unique_session("coll-random");
        const auto calls = ccoll::testing::random_calls(seed++, p, 40, true);
        auto out = on_processes(p, [&](int r) -> std::string {
          auto config = [&](int which) {
            // Small FIFOs and agreement first; the defaults with eager calls up to 4 KiB.
            Config c = variant == 0 ? shm_config(p, r, session) : Config{};
            c.nranks = p;
            c.rank = r;
            c.timeout = 10s;
            c.session = session + std::to_string(which);
            if (variant == 1) c.eager_rooted_bytes = 4096;
            return c;
          };
          ccoll::testing::AutoCollectives<transport::SharedMemory> colls(config, true);
          const std::string wrong = colls.run_sequence(calls, p, r);
          return wrong.empty() ? "" : "seed " + std::to_string(seed - 1) + " " + wrong;
        });
        INFO("P=" << p << " variant " << variant);
        require_all_ok(out);
      }
}

TEST_CASE("shm collectives: a bad root on one process is refused on every process") {
  // Agreeing first (in_band_agreement_bytes 0), the communicator goes on after the refusal; in
  // band (the default for a call this small), the others' steps ran into their staged outputs,
  // so it is aborted. Either way every process names the root and no output is written.
  const int p = 3;
  for (const std::uint64_t in_band : {std::uint64_t{0}, Config{}.in_band_agreement_bytes}) {
    CAPTURE(in_band);
    const std::string session = process_ranks::unique_session("coll-badroot");
    auto out = on_processes(p, [&](int r) -> std::string {
      Config c = shm_config(p, r, session);
      c.in_band_agreement_bytes = in_band;
      Reduce<transport::SharedMemory, algo::Ring> rd(c);
      std::vector<float> in(16, 1.0f), res(16, -1.0f);
      try {
        rd.run(in.data(), res.data(), 16, DataType::f32, ReduceOp::sum, r == 1 ? 5 : 0);
      } catch (const Error& e) {
        if (std::string(e.what()).find("root") == std::string::npos) return e.what();
        if (res != std::vector<float>(16, -1.0f)) return "the output was written";
        if (in_band == 0)  // a good call after the refused one
          return ccoll::testing::check_collective_call<float, ReduceOp::sum>(
              plan::Collective::reduce, p, r, 16, false, 2,
              [&](const void* s, void* o) { rd.run(s, o, 16, DataType::f32, ReduceOp::sum, 2); });
        try {
          rd.run(in.data(), res.data(), 16, DataType::f32, ReduceOp::sum, 0);
        } catch (const Error&) {
          return "";
        }
        return "the communicator was not aborted";
      }
      return "no error";
    });
    require_all_ok(out);
  }
}

TEST_CASE("shm eager broadcast and reduce: many calls in processes; a disagreement is reported") {
  for (int p = 2; p <= 4; ++p) {
    const std::string session = process_ranks::unique_session("coll-eager");
    auto out = on_processes(p, [&](int r) -> std::string {
      Config c = shm_config(p, r, session + "b");
      c.eager_rooted_bytes = 4096;
      Broadcast<transport::SharedMemory, algo::Direct> bc(c);
      c.session = session + "r";
      Reduce<transport::SharedMemory, algo::Ring> rd(c);
      // Both lists run whatever the first finds, so that a wrong broadcast leaves no peer waiting
      // for this process's reduces.
      std::string wrong =
          ccoll::testing::check_collective_cases(bc, bc.rank(r), p, {1, 131}, false);
      const std::string wrong_reduce =
          ccoll::testing::check_collective_cases(rd, rd.rank(r), p, {1, 131, 2000}, false);
      if (wrong.empty()) wrong = wrong_reduce;
      // A disagreement (process 1 passes another count) is reported on every process by the time
      // its pending comparisons would fill the control plane's descriptors.
      std::vector<float> in(64, 1.0f), res(64, -1.0f);
      const auto calls = runtime::AreaControlPlane::kMaxUnverifiedCalls + 1;
      for (std::uint64_t i = 0; i < calls; ++i) {
        try {
          rd.run(in.data(), res.data(), r == 1 ? 48 : 64, DataType::f32, ReduceOp::sum, 0);
        } catch (const Error& e) {
          if (!wrong.empty()) return wrong;
          return e.code() == ErrorCode::Mismatch ? "" : std::string("not a mismatch: ") + e.what();
        }
      }
      return wrong.empty() ? "no error" : wrong;
    });
    INFO("P=" << p);
    require_all_ok(out);
  }
}

TEST_CASE("shm eager broadcast: a root that returned from its calls and exited is not dead") {
  // Rank 0 broadcasts along the chain 0 -> 1 -> 2 and its process exits once its calls have
  // returned, its messages still in rank 1's FIFO. Rank 2 waits for rank 1, which starts late,
  // for longer than the peer checks' interval: rank 0's process is gone by then, but it left (it
  // destroyed its communicator) and nobody waits for it, so it must not be reported dead.
  const int p = 3;
  const int calls = static_cast<int>(runtime::AreaControlPlane::kMaxUnverifiedCalls);
  const std::string session = process_ranks::unique_session("coll-eager-exit");
  auto out = on_processes(p, [&](int r) -> std::string {
    Config c = shm_config(p, r, session);
    c.eager_rooted_bytes = 4096;
    c.slot_bytes = 4096;  // one message per call and channel: rank 0's calls fit the FIFO
    c.nslots = static_cast<std::uint32_t>(calls);
    Broadcast<transport::SharedMemory, algo::Ring> bc(c);
    if (r == 1) std::this_thread::sleep_for(400ms);
    for (int i = 0; i < calls; ++i) {
      std::vector<float> buf(64, r == 0 ? static_cast<float>(i) : -1.0f);
      bc.run(buf.data(), buf.data(), buf.size(), DataType::f32, 0);
      if (buf != std::vector<float>(64, static_cast<float>(i)))
        return "call " + std::to_string(i) + ": wrong data";
    }
    return "";
  });
  require_all_ok(out);
}

TEST_CASE("shm: a rank waiting for a rank that left is told so, long before its timeout") {
  // Rank 0 makes fewer calls and destroys its communicator; rank 1 waits for it in its last call:
  // for its arguments (an allreduce that agrees first), for its message (an eager broadcast,
  // which waits in its steps) or for a free slot in its FIFO (an eager reduce whose leaf, with one
  // slot, runs a call ahead: its third message needs the slot of a second that rank 0, gone after
  // one call, never took). Rank 1 reports that rank 0 left, within a fraction of a second of a
  // 10 s timeout; rank 0 reports nothing.
  enum class Wait { arguments, message, free_slot };
  for (const Wait wait : {Wait::arguments, Wait::message, Wait::free_slot}) {
    const std::string session = process_ranks::unique_session("coll-left");
    const auto start = std::chrono::steady_clock::now();
    auto out = on_processes(2, [&](int r) -> std::string {
      Config c = shm_config(2, r, session);
      c.eager_rooted_bytes = wait == Wait::arguments ? 0 : 4096;
      std::vector<float> buf(wait == Wait::arguments ? 1u << 16 : 64, 1.0f);
      if (wait == Wait::arguments) {
        Allreduce<transport::SharedMemory, algo::Ring> ar(c);
        for (int i = 0; i < (r == 0 ? 1 : 2); ++i)
          ar.run(buf.data(), buf.data(), buf.size(), DataType::f32, ReduceOp::sum);
      } else if (wait == Wait::message) {
        Broadcast<transport::SharedMemory, algo::Ring> bc(c);
        for (int i = 0; i < (r == 0 ? 1 : 2); ++i)
          bc.run(buf.data(), buf.data(), buf.size(), DataType::f32, 0);
      } else {
        c.nslots = 1;
        c.nchannels = 1;
        Reduce<transport::SharedMemory, algo::Ring> rd(c);
        std::vector<float> res(buf.size());
        for (int i = 0; i < (r == 0 ? 1 : 3); ++i)
          rd.run(buf.data(), res.data(), buf.size(), DataType::f32, ReduceOp::sum, 0);
      }
      return "";
    });
    const auto took = std::chrono::steady_clock::now() - start;
    INFO("wait " << static_cast<int>(wait) << ": " << out[0].message << " | " << out[1].message);
    CHECK(out[0].exit_code == 0);
    CHECK(error_code_of(out[1]) == static_cast<int>(ErrorCode::Aborted));
    CHECK(out[1].message.find("rank 0 left") != std::string::npos);
    if (wait == Wait::free_slot) CHECK(out[1].message.find("free slot") != std::string::npos);
    CHECK(took < 5s);
  }
}

namespace {

// One shared area of `p` ranks in this process's memory, for tests of the control plane's waits
// on their own: rank 0 waits, the others' descriptors are set by hand.
struct PlaneArea {
  struct alignas(128) Line {
    std::byte b[128];
  };
  explicit PlaneArea(int p, std::chrono::milliseconds timeout = 10s)
      : layout(runtime::AreaLayout::make(p, 0, 1024, 1, false)),
        lines(layout.total / sizeof(Line) + 1) {
    auto* base = reinterpret_cast<std::byte*>(lines.data());
    runtime::init_area(base, layout, p, 0, 1);
    descriptors = reinterpret_cast<runtime::RankDescriptor*>(base + layout.descriptors);
    plane = runtime::AreaControlPlane(base, layout, p, static_cast<long>(timeout.count()),
                                      sync::WaitPolicy{});
    for (int q = 0; q < p; ++q) descriptors[q].pid = ::getpid();
  }
  // Rank q destroyed its communicator (~Executor negates its pid).
  void leave(int q) {
    sync::AtomicWord<std::int64_t>(&descriptors[q].pid)
        .store_release(-static_cast<std::int64_t>(::getpid()));
  }

  runtime::AreaLayout layout;
  std::vector<Line> lines;
  runtime::RankDescriptor* descriptors = nullptr;
  runtime::AreaControlPlane plane;
};

}  // namespace

TEST_CASE(
    "shm control plane: a wait for a word of a rank that left stops long before its timeout") {
  // The waits on a peer's word outside the steps (a window's barrier, a peer's acknowledgement
  // of a call descriptor about to be reused) judge the word again after reading that the peer
  // left: short, the rank is named within the peer checks' interval; reached (the peer stored it
  // before it left), the wait succeeds.
  const auto deadline = [] { return sync::deadline_after(10s); };
  const auto aborted_naming_left_rank = [](const Error& e) {
    INFO(e.what());
    CHECK(e.code() == ErrorCode::Aborted);
    CHECK(std::string(e.what()).find("rank 1 left") != std::string::npos);
  };
  SUBCASE("a window's barrier word") {
    PlaneArea a(2);
    std::uint64_t word = 0;
    a.leave(1);
    const auto start = std::chrono::steady_clock::now();
    try {
      a.plane.wait_peer_word(&word, 1, 0, 1, deadline(), 7);
      FAIL("the wait returned");
    } catch (const Error& e) {
      aborted_naming_left_rank(e);
    }
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    CHECK(a.plane.aborted());
  }
  SUBCASE("a word the peer stored before it left") {
    PlaneArea a(2);
    std::uint64_t word = 1;
    a.leave(1);
    CHECK_NOTHROW(a.plane.wait_peer_word(&word, 1, 0, 1, deadline(), 7));
    CHECK_FALSE(a.plane.aborted());
  }
  SUBCASE("a word stored while the waiter checks its peers") {
    PlaneArea a(2);
    std::uint64_t word = 0;
    std::thread peer([&] {
      std::this_thread::sleep_for(150ms);  // past one peer check
      sync::AtomicWord<std::uint64_t>(&word).store_release(1);
      a.leave(1);
    });
    CHECK_NOTHROW(a.plane.wait_peer_word(&word, 1, 0, 1, deadline(), 7));
    peer.join();
    CHECK_FALSE(a.plane.aborted());
  }
  SUBCASE("a peer's acknowledgement of the descriptor a call is about to reuse") {
    // Rank 0 publishes call kCallDescriptors + 1 in its slot of call 1, which rank 1 never
    // acknowledged before it left.
    PlaneArea a(2);
    a.descriptors[0].ack = runtime::kCallDescriptors;  // rank 0 read every call so far
    a.leave(1);
    runtime::CallArgs args;
    args.count = 4;
    const std::uint64_t seq = runtime::kCallDescriptors + 1;
    const auto start = std::chrono::steady_clock::now();
    try {
      a.plane.publish(args, seq, deadline(), runtime::FailurePoint{0, -1, -1, -1});
      FAIL("publish returned");
    } catch (const Error& e) {
      aborted_naming_left_rank(e);
    }
    CHECK(std::chrono::steady_clock::now() - start < 2s);
  }
  SUBCASE("an acknowledgement the peer stored before it left") {
    PlaneArea a(2);
    a.descriptors[0].ack = runtime::kCallDescriptors;
    a.descriptors[1].ack = 1;
    a.leave(1);
    runtime::CallArgs args;
    args.count = 4;
    CHECK_NOTHROW(a.plane.publish(args, runtime::kCallDescriptors + 1, deadline(),
                                  runtime::FailurePoint{0, -1, -1, -1}));
    CHECK_FALSE(a.plane.aborted());
  }
  SUBCASE("a rank that never leaves: the wait ends at its deadline, naming it") {
    PlaneArea a(2, 200ms);
    std::uint64_t word = 0;
    try {
      a.plane.wait_peer_word(&word, 1, 0, 1, sync::deadline_after(200ms), 7);
      FAIL("the wait returned");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == ErrorCode::Timeout);
      CHECK(std::string(e.what()).find("rank 1 did not arrive") != std::string::npos);
    }
  }
}

TEST_CASE("process_gone: a zombie its parent has not reaped is gone, a live process is not") {
  // What a claim of a left rank's slot and the peer checks judge a holder by.
  const pid_t exited = ::fork();
  REQUIRE(exited >= 0);
  if (exited == 0) ::_exit(0);
  const pid_t alive = ::fork();
  REQUIRE(alive >= 0);
  if (alive == 0) {
    ::pause();
    ::_exit(0);
  }
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!runtime::process_gone(exited) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(1ms);
  CHECK(runtime::process_gone(exited));  // a zombie: not reaped yet
  CHECK_FALSE(runtime::process_gone(alive));
  CHECK_FALSE(runtime::process_gone(::getpid()));
  ::kill(alive, SIGKILL);
  int status = 0;
  ::waitpid(alive, &status, 0);
  ::waitpid(exited, &status, 0);
  CHECK(runtime::process_gone(exited));  // reaped: no such process
}
}  // namespace collectives_shm_test
