// Tests of ccoll::Allreduce on the shared-memory transport: P = 2..4 processes fork()ed by the
// test, each reporting its outcome through a pipe. Results against a reference for every dtype and
// op, in place and out of place, repeated calls; rank and size from the environment; mismatches;
// a rank that never arrives; stale segments of crashed runs; cleanup of /dev/shm.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "allreduce_reference.hpp"
#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/one_shot.hpp"
#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/algo/recursive_doubling.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/algo/tree.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/runtime/area_communicator.hpp"
#include "process_ranks.hpp"

namespace allreduce_shm_test {
using namespace ccoll;
using namespace std::chrono_literals;
using ccoll::testing::check_all;
using process_ranks::error_code_of;
using process_ranks::on_processes;
using process_ranks::Outcome;
using process_ranks::require_all_ok;

namespace {

using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;

std::string unique_session(const char* tag) {
  return process_ranks::unique_session(std::string("test-") + tag);
}

Config shm_config(int p, int r, const std::string& session) {
  Config c;
  c.nranks = p;
  c.rank = r;
  c.session = session;
  c.slot_bytes = 512;
  c.nslots = 2;
  c.timeout = 10s;
  return c;
}

// Whether any segment of the session (/dev/shm/ccoll.<session>.<token>) or its token is left.
bool segment_exists(const std::string& session) {
  const std::string prefix = transport::detail::shm_name(session).substr(1) + ".";
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return std::filesystem::exists(transport::detail::token_path(session, 0));
}

// Leaves a token for `session` naming segment `token` (what rank 0 of a run publishes).
void write_token(const std::string& session, const std::string& token, mode_t mode = 0600) {
  const std::string path = transport::detail::token_path(session, 0);
  { std::ofstream(path) << token; }
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

}  // namespace

TEST_CASE("shm ring: P = 2..4, every dtype and op, in place, repeated calls; no segment left") {
  for (int p = 2; p <= 4; ++p) {
    const std::string session = unique_session("ring");
    auto out = on_processes(p, [&](int r) {
      Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(shm_config(p, r, session));
      std::string wrong = check_all(ar, {1, 2, 131, 1000}, p != 3);
      if (wrong.empty()) wrong = check_all(ar, {1000, 4099}, false);  // cached plans, new counts
      return wrong;
    });
    require_all_ok(out);
    CHECK_FALSE(segment_exists(session));
  }
}

TEST_CASE("shm packed forest on dgx1v: 8 processes, a stateful topology, relays forward") {
  // All eight GPUs active, then five (three relays): the same forest policy object type that the
  // threads transport runs, here planned independently by every process.
  for (bool partial : {false, true}) {
    const std::string session = unique_session(partial ? "forest-relays" : "forest");
    auto out = on_processes(8, [&](int r) {
      auto dgx = physical::preset("dgx1v");
      if (partial) dgx.set_active({"gpu0", "gpu1", "gpu2", "gpu5", "gpu6"});
      algo::PackedForest forest(dgx);
      Config c = shm_config(0, r, session);
      c.slot_bytes = 16 * 1024;
      c.nslots = 4;
      Allreduce<transport::SharedMemory, algo::PackedForest, schedule::Phased> ar(c, forest);
      const bool active = forest.ranks().active[static_cast<std::size_t>(r)];
      const int nactive = static_cast<int>(dgx.active_nodes().size());
      // Active ranks contribute 1 + rank + i % 5; the result is the sum over active ranks.
      std::vector<float> in(20011), res(in.size(), -1.0f);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(1 + r + i % 5);
      ar.run(in.data(), res.data(), in.size(), DataType::f32, ReduceOp::sum);
      if (!active) return std::string();
      for (std::size_t i = 0; i < in.size(); ++i) {
        float expect = 0;
        for (int q = 0; q < 8; ++q)
          if (forest.ranks().active[static_cast<std::size_t>(q)])
            expect += static_cast<float>(1 + q + i % 5);
        if (res[i] != expect)
          return "rank " + std::to_string(r) + " element " + std::to_string(i) + " of " +
                 std::to_string(nactive) + " active";
      }
      return std::string();
    });
    require_all_ok(out);
    CHECK_FALSE(segment_exists(session));
  }
}

TEST_CASE("shm direct: P = 2..4, every dtype and op, in place, counts around the chunking") {
  for (int p = 2; p <= 4; ++p) {
    const std::string session = unique_session("direct");
    auto out = on_processes(p, [&](int r) {
      Config c = shm_config(p, r, session);
      c.stream_output_bytes = p == 3 ? 1 : 0;  // both output store kinds
      c.stream_slot_bytes = p == 2 ? 0 : 1;    // and both slot store kinds
      Allreduce<transport::SharedMemory, algo::Direct, Overlapped> ar(c);
      // 128 floats fill a 512-byte slot: one piece, one chunk, many chunks, primes.
      std::string wrong = check_all(ar, {1, 2, 3, 5, 131, 1000, 4099}, p != 3);
      if (wrong.empty()) wrong = check_all(ar, {7919, 1}, false);  // cached plans, new counts
      return wrong;
    });
    require_all_ok(out);
    CHECK_FALSE(segment_exists(session));
  }
}

TEST_CASE("shm oneshot and recdoubling: P = 2..5, every dtype and op, in place, chunked") {
  for (int p = 2; p <= 5; ++p) {
    const std::string session = unique_session("small");
    auto out = on_processes(p, [&](int r) {
      Config c = shm_config(p, r, session);
      Allreduce<transport::SharedMemory, algo::OneShot, Overlapped> one(c);
      c.session += ".rd";
      Allreduce<transport::SharedMemory, algo::RecursiveDoubling, Overlapped> rd(c);
      // 128 floats fill a 512-byte slot: one message, one full slot, several chunks.
      std::string wrong = check_all(one, {1, 2, 127, 128, 129, 1000}, p != 3);
      if (wrong.empty()) wrong = check_all(rd, {1, 2, 127, 128, 129, 1000}, p != 4);
      return wrong;
    });
    require_all_ok(out);
    CHECK_FALSE(segment_exists(session));
    CHECK_FALSE(segment_exists(session + ".rd"));
  }
}

TEST_CASE("shm direct: a rank killed in the middle of a call is reported dead within seconds") {
  const std::string session = unique_session("direct-killed");
  const auto t0 = std::chrono::steady_clock::now();
  auto out = on_processes(3, [&](int r) {
    Config c = shm_config(3, r, session);
    c.slot_bytes = 4096;
    c.nslots = 2;
    c.timeout = 60s;  // far beyond the test's bound: the death must be found by itself
    Allreduce<transport::SharedMemory, algo::Direct, Overlapped> ar(c);
    // Large enough that rank 2 is still exchanging pieces when it dies.
    std::vector<float> in(1u << 22, 1.0f), res(in.size());
    ar.run(in.data(), res.data(), res.size(), DataType::f32, ReduceOp::sum);
    if (r == 2) {
      // Dies after publishing its arguments and staging some pieces, in the middle of the call.
      std::thread([] {
        std::this_thread::sleep_for(2ms);
        ::kill(::getpid(), SIGKILL);
      }).detach();
      for (;;) ar.run(in.data(), res.data(), res.size(), DataType::f32, ReduceOp::sum);
    }
    for (int i = 0; i < 100; ++i)
      ar.run(in.data(), res.data(), res.size(), DataType::f32, ReduceOp::sum);
    return std::string("100 calls returned without rank 2");
  });
  CHECK(std::chrono::steady_clock::now() - t0 < 12s);  // the timeout is 60 s
  for (int r = 0; r < 2; ++r) {
    INFO(out[static_cast<std::size_t>(r)].message);
    CHECK(error_code_of(out[static_cast<std::size_t>(r)]) == static_cast<int>(ErrorCode::Aborted));
    CHECK(out[static_cast<std::size_t>(r)].message.find("rank 2 died") != std::string::npos);
  }
  CHECK(out[2].exit_code == -1);  // killed
}

TEST_CASE("shm: trees, two channels, big slots") {
  const std::string session = unique_session("trees");
  auto out = on_processes(4, [&](int r) {
    Config c = shm_config(4, r, session);
    c.nchannels = 2;
    Allreduce<transport::SharedMemory, algo::DoubleBinaryTree, Overlapped> dbt(c);
    std::string wrong = check_all(dbt, {3, 777}, false);
    c.session += "-b";
    c.slot_bytes = 1 << 20;
    Allreduce<transport::SharedMemory, algo::Tree, schedule::Phased> tree(c);
    if (wrong.empty()) wrong = check_all(tree, {1, 300000}, false);
    return wrong;
  });
  require_all_ok(out);
}

TEST_CASE("shm: rank and size from the environment") {
  const std::string session = unique_session("env");
  auto out = on_processes(3, [&](int r) {
    if (r == 1) {
      ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
      ::setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    } else {
      ::setenv("CCOLL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("CCOLL_SIZE", "3", 1);
    }
    ::setenv("CCOLL_SESSION", session.c_str(), 1);
    Config c;
    c.timeout = 10s;
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    if (ar.rank() != r || ar.nranks() != 3) return std::string("wrong rank/size");
    return check_all(ar, {10, 5000}, false);
  });
  require_all_ok(out);
  auto bad = on_processes(1, [&](int) {
    ::unsetenv("CCOLL_RANK");
    ::unsetenv("CCOLL_SIZE");
    ::unsetenv("OMPI_COMM_WORLD_RANK");
    ::unsetenv("OMPI_COMM_WORLD_SIZE");
    ::unsetenv("PMI_RANK");
    ::unsetenv("PMI_SIZE");
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(Config{});
    return std::string("constructed without a size");
  });
  CHECK(error_code_of(bad[0]) == static_cast<int>(ErrorCode::InvalidArgument));
}

TEST_CASE(
    "shm, agreement before the steps: a count mismatch fails every rank, buffers untouched, "
    "communicator reusable") {
  const std::string session = unique_session("mismatch");
  auto out = on_processes(3, [&](int r) {
    Config c = shm_config(3, r, session);
    c.in_band_agreement_bytes = 0;
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    std::vector<float> in(64, 1.0f), res(64, -3.0f);
    try {
      ar.run(in.data(), res.data(), r == 1 ? 63 : 64, DataType::f32, ReduceOp::sum);
      return std::string("no error");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Mismatch) throw;
      const std::string w = e.what();
      if (w.find("rank 1 has 63") == std::string::npos || w.find("64") == std::string::npos)
        return "message lacks the ranks and values: " + w;
    }
    for (float x : res)
      if (x != -3.0f) return std::string("output touched");
    ar.run(in.data(), res.data(), 64, DataType::f32, ReduceOp::sum);
    for (float x : res)
      if (x != 3.0f) return std::string("wrong result after the mismatch");
    return std::string();
  });
  require_all_ok(out);
}

TEST_CASE(
    "shm, in-band agreement: a count mismatch fails every rank with Mismatch, then the "
    "communicator is aborted") {
  const std::string session = unique_session("mismatch-in-band");
  const auto t0 = std::chrono::steady_clock::now();
  auto out = on_processes(3, [&](int r) {
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(shm_config(3, r, session));
    std::vector<float> in(64, 1.0f), res(64, -3.0f);
    ar.run(in.data(), res.data(), 64, DataType::f32, ReduceOp::sum);  // warm, agreed
    try {
      ar.run(in.data(), res.data(), r == 1 ? 63 : 64, DataType::f32, ReduceOp::sum);
      return std::string("no error");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Mismatch) throw;
      if (std::string(e.what()).find("rank 1") == std::string::npos)
        return "message does not name rank 1: " + std::string(e.what());
    }
    try {
      ar.run(in.data(), res.data(), 64, DataType::f32, ReduceOp::sum);
      return std::string("the communicator was not aborted");
    } catch (const Error&) {
    }
    return std::string();
  });
  require_all_ok(out);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("shm: a rank that never calls makes the others time out within the deadline") {
  const std::string session = unique_session("late");
  const auto t0 = std::chrono::steady_clock::now();
  auto out = on_processes(3, [&](int r) {
    Config c = shm_config(3, r, session);
    c.timeout = 1000ms;  // the warm call must not time out under load
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    std::vector<float> in(10000, 1.0f), res(10000);
    ar.run(in.data(), res.data(), res.size(), DataType::f32, ReduceOp::sum);
    if (r == 2) {
      std::this_thread::sleep_for(4000ms);  // alive but never calls again
      return std::string();
    }
    ar.run(in.data(), res.data(), res.size(), DataType::f32, ReduceOp::sum);
    return std::string("second call returned");
  });
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  for (int r = 0; r < 2; ++r) {
    INFO(out[static_cast<std::size_t>(r)].message);
    CHECK(error_code_of(out[static_cast<std::size_t>(r)]) == static_cast<int>(ErrorCode::Timeout));
    CHECK(out[static_cast<std::size_t>(r)].message.find("rank 2") != std::string::npos);
  }
  CHECK(out[2].exit_code == 0);
}

TEST_CASE("shm: a rank that never starts makes the others fail at the rendezvous") {
  const std::string session = unique_session("absent");
  auto out = on_processes(2, [&](int r) {
    if (r == 1) return std::string();  // never constructs
    Config c = shm_config(3, r, session);
    c.timeout = 200ms;
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    return std::string("constructed without all ranks");
  });
  CHECK(error_code_of(out[0]) == static_cast<int>(ErrorCode::Timeout));
  CHECK(out[0].message.find("did not attach") != std::string::npos);
  CHECK_FALSE(segment_exists(session));
}

TEST_CASE("shm: a stale segment of a crashed run does not capture a new run") {
  const std::string session = unique_session("stale");
  // A dead process's pid, to stand for the crashed creator.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  {
    // A complete, ready segment whose creator is gone and whose ranks all "attached".
    Config c = shm_config(2, 0, session);
    runtime::AreaCommunicator comm(
        c, 2, [](const plan::PlanRequest& req) { return algo::Ring::build(req); }, "stale");
    const runtime::AreaLayout layout = runtime::area_layout(comm);
    const std::string token(32, 'a');  // the crashed run's token, still in its token file
    const std::string name = transport::detail::shm_name(session) + "." + token;
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(layout.total)) == 0);
    void* m = ::mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(m != MAP_FAILED);
    write_token(session, token);
    runtime::init_area(static_cast<std::byte*>(m), layout, 2, comm.fingerprint(), 12345, dead);
    auto* d =
        reinterpret_cast<runtime::RankDescriptor*>(static_cast<std::byte*>(m) + layout.descriptors);
    d[0].attached_generation = d[1].attached_generation = 12345 | 1u;
    ::munmap(m, layout.total);
    ::close(fd);
  }
  REQUIRE(segment_exists(session));
  // Rank 1 starts well before rank 0.
  auto out = on_processes(2, [&](int r) {
    if (r == 0) std::this_thread::sleep_for(300ms);
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(shm_config(2, r, session));
    return check_all(ar, {100}, false);
  });
  require_all_ok(out);
  CHECK_FALSE(segment_exists(session));
}

TEST_CASE("shm: a segment another user could open is refused, and nothing is exchanged") {
  const std::string session = unique_session("foreign");
  {
    // A ready segment of the right shape whose creator is alive (this process) but whose mode
    // lets other users in: what a squatter of the name would offer.
    Config c = shm_config(2, 0, session);
    runtime::AreaCommunicator comm(
        c, 2, [](const plan::PlanRequest& req) { return algo::Ring::build(req); },
        "threads/ring/pipelined-overlap");
    const runtime::AreaLayout layout = runtime::area_layout(comm);
    const std::string token(32, 'b');
    write_token(session, token);
    const std::string name = transport::detail::shm_name(session) + "." + token;
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::fchmod(fd, 0644) == 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(layout.total)) == 0);
    void* m = ::mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(m != MAP_FAILED);
    runtime::init_area(static_cast<std::byte*>(m), layout, 2, comm.fingerprint(), 777,
                       static_cast<std::int64_t>(::getpid()));
    ::munmap(m, layout.total);
    ::close(fd);
  }
  // Rank 1 alone: it must not join the open segment.
  auto out = on_processes(1, [&](int) {
    Config c = shm_config(2, 1, session);
    c.timeout = 300ms;
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    return std::string("joined a segment other users can open");
  });
  CHECK(error_code_of(out[0]) == static_cast<int>(ErrorCode::System));
  CHECK(out[0].message.find("mode 0644") != std::string::npos);
  ::shm_unlink((transport::detail::shm_name(session) + "." + std::string(32, 'b')).c_str());
  // A token file that others could have written is not read at all.
  write_token(session, std::string(32, 'c'), 0644);
  out = on_processes(1, [&](int) {
    Config c = shm_config(2, 1, session);
    c.timeout = 300ms;
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    return std::string("read a token file other users can write");
  });
  CHECK(error_code_of(out[0]) == static_cast<int>(ErrorCode::System));
  CHECK(out[0].message.find("not a private file") != std::string::npos);
  std::filesystem::remove(transport::detail::token_path(session, 0));
}

TEST_CASE("shm: segment names are unpredictable: a token of 128 random bits per run") {
  const std::string session = unique_session("token");
  std::string names[2];
  for (auto& n : names) {
    auto out = on_processes(2, [&](int r) {
      Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(shm_config(2, r, session));
      return std::string();
    });
    require_all_ok(out);
    CHECK_FALSE(segment_exists(session));  // neither segment nor token left
    n = transport::detail::random_token();
  }
  CHECK(names[0].size() == 32);
  CHECK(names[0] != names[1]);
}

TEST_CASE("shm: two processes claiming one rank are refused (two jobs sharing a session)") {
  const std::string session = unique_session("claim");
  // Ranks 0, 1 of one job and a second rank 1 of another job with the same session, both rank 1s
  // waiting for the segment when rank 0 creates it.
  auto out = on_processes(3, [&](int r) {
    Config c = shm_config(2, r == 2 ? 1 : r, session);
    c.timeout = 2s;
    if (r == 0) std::this_thread::sleep_for(200ms);
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    std::this_thread::sleep_for(300ms);  // everyone has claimed before anyone leaves
    return std::string();
  });
  // Never both: the second claimant is refused (or, when it reaches the name only after the job
  // met and rank 0 unlinked it, finds no segment and times out).
  CHECK(out[0].exit_code == 0);
  const bool first_ok = out[1].exit_code == 0, second_ok = out[2].exit_code == 0;
  CHECK(first_ok != second_ok);
  const Outcome& loser = first_ok ? out[2] : out[1];
  INFO(loser.message);
  CHECK((loser.message.find("already held by process") != std::string::npos ||
         error_code_of(loser) == static_cast<int>(ErrorCode::Timeout)));
}

TEST_CASE("shm: a second job's rank 0 does not remove a live job's segment (same session)") {
  // The first job's rank 0 waits for its rank 1; a second job that derived the same session name
  // starts meanwhile. Its rank 0 must not unlink the first job's segment (whose late ranks would
  // then meet the second job's): it is refused, naming the session.
  const std::string session = unique_session("live");
  auto out = on_processes(2, [&](int r) {
    Config c = shm_config(2, 0, session);
    c.timeout = r == 0 ? 1500ms : 500ms;
    if (r == 1) std::this_thread::sleep_for(300ms);
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    return std::string("met a rank 1 that never came");
  });
  CHECK(error_code_of(out[0]) == static_cast<int>(ErrorCode::Timeout));
  INFO(out[1].message);
  CHECK(error_code_of(out[1]) == static_cast<int>(ErrorCode::Mismatch));
  CHECK(out[1].message.find("is in use") != std::string::npos);
  CHECK_FALSE(segment_exists(session));
}

TEST_CASE("shm: a rank whose rendezvous timed out takes its slot again when its process retries") {
  // Rank 1 gives up waiting for rank 2 (a short timeout) while still holding its slot, then
  // constructs again with the default timeout, after rank 2 has arrived (a file tells rank 2 that
  // rank 1 timed out): its own process may claim the slot again, and the job runs correctly.
  const std::string session = unique_session("reclaim");
  const std::string timed_out = "/tmp/" + session + ".rank1-timed-out";
  auto out = on_processes(3, [&](int r) -> std::string {
    Config c = shm_config(3, r, session);
    if (r == 1) {
      Config hasty = c;
      hasty.timeout = 200ms;
      try {
        Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(hasty);
        return "the first rendezvous did not time out";
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Timeout) return std::string("not a timeout: ") + e.what();
      }
      std::ofstream(timed_out) << "1\n";
      // Retry only once rank 2 has attached: the timed-out attempt must not count as attached,
      // or rank 0 would take the rendezvous for complete and unlink the segment's name.
      std::this_thread::sleep_for(300ms);
    }
    if (r == 2) {
      const auto give_up = std::chrono::steady_clock::now() + 10s;
      while (!std::ifstream(timed_out).good()) {
        if (std::chrono::steady_clock::now() > give_up) return "rank 1 never timed out";
        std::this_thread::sleep_for(10ms);
      }
      std::remove(timed_out.c_str());
    }
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    std::vector<float> buf(1000, static_cast<float>(r + 1));
    ar.run(buf.data(), buf.data(), buf.size(), DataType::f32, ReduceOp::sum);
    return buf == std::vector<float>(1000, 6.0f) ? "" : "wrong sum";
  });
  require_all_ok(out);
  CHECK_FALSE(segment_exists(session));
}

TEST_CASE("shm: rank 0 dying during the rendezvous is reported at once, and no segment is left") {
  const std::string session = unique_session("rendezvous-death");
  const auto t0 = std::chrono::steady_clock::now();
  // Three ranks, rank 2 never comes; rank 0 is killed while it waits for it.
  auto out = on_processes(2, [&](int r) {
    Config c = shm_config(3, r, session);
    c.timeout = 30s;
    if (r == 0)
      std::thread([] {
        std::this_thread::sleep_for(300ms);
        ::kill(::getpid(), SIGKILL);
      }).detach();
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    return std::string("the rendezvous completed without rank 2");
  });
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  CHECK(out[0].exit_code == -1);
  INFO(out[1].message);
  CHECK(error_code_of(out[1]) == static_cast<int>(ErrorCode::Aborted));
  CHECK(out[1].message.find("died during the rendezvous") != std::string::npos);
  CHECK_FALSE(segment_exists(session));
}

TEST_CASE("shm: ranks configured differently refuse to run together") {
  const std::string session = unique_session("config");
  auto out = on_processes(2, [&](int r) {
    Config c = shm_config(2, r, session);
    c.timeout = 300ms;
    if (r == 1) c.slot_bytes *= 2;
    Allreduce<transport::SharedMemory, algo::Ring, Overlapped> ar(c);
    return std::string("constructed");
  });
  CHECK(error_code_of(out[1]) == static_cast<int>(ErrorCode::Mismatch));
  CHECK(error_code_of(out[0]) == static_cast<int>(ErrorCode::Timeout));
}
}  // namespace allreduce_shm_test
