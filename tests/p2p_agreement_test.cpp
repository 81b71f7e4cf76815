// The host-side logic of CudaP2P's agreement and presence, without CUDA: the call records the
// blocks publish and compare (transport/cuda/call_record.hpp), and the liveness check and leave
// barrier of process ranks (transport/cuda/peer_presence.hpp).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/transport/cuda/call_record.hpp"
#include "ccoll/transport/cuda/peer_presence.hpp"

namespace p2p_agreement_test {
using namespace ccoll;
using namespace ccoll::transport::cuda;
using namespace std::chrono_literals;

namespace {

CallArguments args(std::uint64_t count, DataType dtype = DataType::f32,
                   ReduceOp op = ReduceOp::sum) {
  CallArguments a;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  return a;
}

// A forked child that exits at once; not reaped (a zombie) until reap().
struct ExitedChild {
  pid_t pid = ::fork();
  ExitedChild() {
    if (pid == 0) ::_exit(0);
    // Until the child has exited: a zombie's /proc state says so.
    for (int i = 0; i < 2000 && process_alive(pid); ++i) std::this_thread::sleep_for(1ms);
  }
  void reap() {
    int status = 0;
    if (pid > 0) ::waitpid(pid, &status, 0);
  }
};

}  // namespace

TEST_CASE("call records: pending, same, differs, overwritten") {
  std::vector<CallRecord> ring(kCallRecordRing);
  CallArguments theirs;
  CHECK(check_peer_call(ring.data(), 0, args(100), &theirs) == CallCheck::pending);
  publish_call(ring.data(), 0, args(100));
  CHECK(check_peer_call(ring.data(), 0, args(100), &theirs) == CallCheck::same);
  CHECK(check_peer_call(ring.data(), 1, args(100), &theirs) == CallCheck::pending);
  publish_call(ring.data(), 1, args(7, DataType::bf16, ReduceOp::avg));
  CHECK(check_peer_call(ring.data(), 1, args(8, DataType::bf16, ReduceOp::avg), &theirs) ==
        CallCheck::differs);
  CHECK(theirs == args(7, DataType::bf16, ReduceOp::avg));
  CHECK(check_peer_call(ring.data(), 1, args(7, DataType::f16, ReduceOp::avg), &theirs) ==
        CallCheck::differs);
  CHECK(check_peer_call(ring.data(), 1, args(7, DataType::bf16, ReduceOp::sum), &theirs) ==
        CallCheck::differs);
  CHECK(check_peer_call(ring.data(), 1, args(7, DataType::bf16, ReduceOp::avg), &theirs) ==
        CallCheck::same);
  // Call 0's record is replaced by call kCallRecordRing's: the peer is past call 0.
  publish_call(ring.data(), kCallRecordRing, args(100));
  CHECK(check_peer_call(ring.data(), 0, args(100), &theirs) == CallCheck::overwritten);
  CHECK(check_peer_call(ring.data(), kCallRecordRing, args(100), &theirs) == CallCheck::same);
  // Large counts and call numbers keep their identity.
  const std::uint64_t big = (std::uint64_t{1} << 40) + 3;
  publish_call(ring.data(), 1'000'000'007, args(big));
  CHECK(check_peer_call(ring.data(), 1'000'000'007, args(big), &theirs) == CallCheck::same);
  CHECK(check_peer_call(ring.data(), 1'000'000'007, args(big + 1), &theirs) == CallCheck::differs);
  CHECK(theirs.count == big);
}

TEST_CASE("call records: a broadcast's or reduce's root is part of the call") {
  std::vector<CallRecord> ring(kCallRecordRing);
  auto rooted = [](std::uint64_t count, std::int32_t root) {
    CallArguments a = args(count);
    a.root = root;
    return a;
  };
  CallArguments theirs;
  publish_call(ring.data(), 0, rooted(64, 3));
  CHECK(check_peer_call(ring.data(), 0, rooted(64, 3), &theirs) == CallCheck::same);
  CHECK(check_peer_call(ring.data(), 0, rooted(64, 2), &theirs) == CallCheck::differs);
  CHECK(theirs.root == 3);
  // A collective without a root (-1) differs from root 0, and large roots keep their identity.
  CHECK(check_peer_call(ring.data(), 0, rooted(64, -1), &theirs) == CallCheck::differs);
  publish_call(ring.data(), 1, rooted(64, -1));
  CHECK(check_peer_call(ring.data(), 1, rooted(64, 0), &theirs) == CallCheck::differs);
  CHECK(theirs.root == -1);
  publish_call(ring.data(), 2, rooted(64, 70000));
  CHECK(check_peer_call(ring.data(), 2, rooted(64, 70000), &theirs) == CallCheck::same);
  // A root word left by another call (its tag) is not this call's: overwritten, never a mismatch.
  publish_call(ring.data(), 3, rooted(64, 1));
  ring[3].root_tag = (std::uint64_t{1} + 1) | (std::uint64_t{4 + kCallRecordRing} << 32);
  CHECK(check_peer_call(ring.data(), 3, rooted(64, 1), &theirs) == CallCheck::overwritten);
  CallMismatch m;
  m.seq = 1;
  m.rank = 0;
  m.peer = 1;
  m.mine = rooted(64, 3);
  m.theirs = rooted(64, 2);
  CHECK(describe_mismatch(m).find("count 64, float, sum, root 3") != std::string::npos);
  CHECK(describe_mismatch(m).find("count 64, float, sum, root 2") != std::string::npos);
}

TEST_CASE(
    "call records: a reader racing the writer sees each call once, and the one that differs") {
  // The writer publishes calls 0..N-1 as fast as it can; the reader checks each call in turn,
  // polling while pending, with the ring far smaller than N. Call 777 has another count.
  std::vector<CallRecord> ring(kCallRecordRing);
  constexpr std::uint64_t kCalls = 5000;
  std::atomic<std::uint64_t> read_up_to{0};
  std::thread writer([&] {
    for (std::uint64_t c = 0; c < kCalls; ++c) {
      // Like a FIFO: at most a ring's worth ahead of the reader.
      while (c >= read_up_to.load() + kCallRecordRing - 1) std::this_thread::yield();
      publish_call(ring.data(), c, args(c == 777 ? 1 : 1000 + c % 3));
    }
  });
  std::uint64_t same = 0, differs = 0, other = 0, differing_call = 0;
  for (std::uint64_t c = 0; c < kCalls; ++c) {
    CallArguments theirs;
    CallCheck r;
    while ((r = check_peer_call(ring.data(), c, args(1000 + c % 3), &theirs)) == CallCheck::pending)
      std::this_thread::yield();
    if (r == CallCheck::same) ++same;
    if (r == CallCheck::differs) {
      ++differs;
      differing_call = c;
      CHECK(theirs.count == 1);
    }
    if (r == CallCheck::overwritten) ++other;
    read_up_to.store(c + 1);
  }
  writer.join();
  CHECK(differs == 1);
  CHECK(differing_call == 777);
  CHECK(other == 0);
  CHECK(same == kCalls - 1);
}

TEST_CASE("call records: both ranks describe a mismatch with the same text") {
  CallMismatch a;
  a.seq = 4;
  a.rank = 0;
  a.peer = 1;
  a.mine = args(200);
  a.theirs = args(100, DataType::bf16, ReduceOp::avg);
  CallMismatch b = a;
  b.rank = 1;
  b.peer = 0;
  b.mine = a.theirs;
  b.theirs = a.mine;
  const std::string text = describe_mismatch(a);
  MESSAGE(text);
  CHECK(text == describe_mismatch(b));
  CHECK(
      text.find("call 3 of rank 0 has count 200, float, sum, of rank 1 count 100, bfloat16, avg") !=
      std::string::npos);
}

TEST_CASE("peer presence: a process that exited is named, reaped or not") {
  CHECK(process_alive(::getpid()));
  CHECK(process_alive(0));  // unpublished: a rank of this process
  ExitedChild child;
  REQUIRE(child.pid > 0);
  CHECK_FALSE(process_alive(child.pid));  // a zombie
  const std::int64_t pids[] = {::getpid(), child.pid, 0};
  const int peers[] = {0, 1, 2};
  const auto gone = exited_peers(pids, peers);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0] == 1);
  CHECK(describe_exited(pids, gone) == "rank 1 (pid " + std::to_string(child.pid) + ") has exited");
  child.reap();
  CHECK_FALSE(process_alive(child.pid));
}

TEST_CASE("peer presence: the leave barrier waits for the peers, bounded, and not for the dead") {
  std::vector<std::uint64_t> left(3, 0);
  std::vector<std::int64_t> pids(3, 0);
  {
    // Rank 0 leaves first; rank 1 leaves 50 ms later: rank 0 waits for it.
    const int peers0[] = {1};
    std::thread late([&] {
      std::this_thread::sleep_for(50ms);
      const int peers1[] = {0};
      CHECK(leave(left.data(), pids.data(), 1, peers1, 5000ms).empty());
    });
    CHECK(leave(left.data(), pids.data(), 0, peers0, 5000ms).empty());
    // It returned because rank 1 left, not because it gave up.
    CHECK(sync::AtomicWord<std::uint64_t>(&left[1]).load_acquire() == 1);
    late.join();
  }
  {
    // Rank 2 never leaves and is alive: the barrier gives up at its timeout and names it.
    std::fill(left.begin(), left.end(), 0);
    const int peers[] = {2};
    const auto present = leave(left.data(), pids.data(), 0, peers, 100ms);
    REQUIRE(present.size() == 1);
    CHECK(present[0] == 2);
  }
  {
    // Rank 2's process exited without leaving: nothing of it can still write.
    std::fill(left.begin(), left.end(), 0);
    ExitedChild child;
    pids[2] = child.pid;
    const int peers[] = {2};
    CHECK(leave(left.data(), pids.data(), 0, peers, 60000ms).empty());
    child.reap();
  }
}
}  // namespace p2p_agreement_test
