// Tests of ccoll/sync/futex.hpp: BlockingWord, the blocking wait for ranks that outnumber cores.
// No wake-up may be lost (the waits below block for up to 30 s per slice, so a lost wake-up turns
// into a Timeout at the deadline instead of a 1 ms delay), every wait is bounded by its deadline
// and by the abort word, and it works across processes on a shared mapping.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <new>
#include <thread>

#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/futex.hpp"

namespace futex_wait_test {
using namespace ccoll::sync;

namespace {

constexpr std::uint64_t kLongSliceNs = 30'000'000'000;  // longer than any deadline below

struct alignas(128) Word {
  std::uint32_t value = 0;
  std::uint32_t waiters = 0;
};

std::uint64_t seconds_from_now(std::uint64_t s) {
  return now_ns() + s * 1'000'000'000;
}

// `rounds` round trips between the caller and `peer` (a thread or a process), blocking waits only.
// Returns the number of waits that did not end with Ok.
int ping(Word& ping_word, Word& pong_word, std::uint32_t first, std::uint32_t rounds) {
  const BlockingWord out(&ping_word.value, &ping_word.waiters);
  const BlockingWord in(&pong_word.value, &pong_word.waiters);
  int failures = 0;
  for (std::uint32_t i = first; i != first + rounds; ++i) {
    out.post_value(i);
    if (in.wait(i, nullptr, seconds_from_now(10), 0, kLongSliceNs) != WaitResult::Ok) ++failures;
  }
  return failures;
}

int pong(Word& ping_word, Word& pong_word, std::uint32_t first, std::uint32_t rounds) {
  const BlockingWord in(&ping_word.value, &ping_word.waiters);
  const BlockingWord out(&pong_word.value, &pong_word.waiters);
  int failures = 0;
  for (std::uint32_t i = first; i != first + rounds; ++i) {
    if (in.wait(i, nullptr, seconds_from_now(10), 0, kLongSliceNs) != WaitResult::Ok) ++failures;
    out.post_value(i);
  }
  return failures;
}

}  // namespace

TEST_CASE("futex: a post wakes a blocked waiter, and a posted value needs no wait") {
  Word w;
  const BlockingWord b(&w.value, &w.waiters);
  b.post_value(3);
  CHECK(b.wait(3, nullptr, 0) == WaitResult::Ok);
  CHECK(b.wait(2, nullptr, 0) == WaitResult::Ok);
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b.post_value(4);
  });
  CHECK(b.wait(4, nullptr, seconds_from_now(10), 0, kLongSliceNs) == WaitResult::Ok);
  poster.join();
  CHECK(b.value() == 4);
  CHECK(w.waiters == 0);  // every registration was withdrawn
}

TEST_CASE("futex: no wake-up is lost in 5000 round trips between two threads") {
  Word a, b;
  int pong_failures = -1;
  std::thread peer([&] { pong_failures = pong(a, b, 1, 5000); });
  const int ping_failures = ping(a, b, 1, 5000);
  peer.join();
  CHECK(ping_failures == 0);
  CHECK(pong_failures == 0);
  CHECK(a.value == 5000);
  CHECK(b.value == 5000);
}

TEST_CASE("futex: the count may wrap around 2^32") {
  Word a, b;
  const std::uint32_t first = 0xffffff00u;
  a.value = b.value = first - 1;
  int pong_failures = -1;
  std::thread peer([&] { pong_failures = pong(a, b, first, 512); });
  const int ping_failures = ping(a, b, first, 512);
  peer.join();
  CHECK(ping_failures == 0);
  CHECK(pong_failures == 0);
  CHECK(b.value == first + 511);  // wrapped past 0
}

TEST_CASE("futex: a wait gives up at its deadline and when the abort word is raised") {
  Word w;
  std::uint32_t abort = 0;
  const BlockingWord b(&w.value, &w.waiters);
  // A deadline 30 ms away ends the wait even though the slice is long and no wake ever comes.
  CHECK(b.wait(1, &abort, now_ns() + 30'000'000, 0, kLongSliceNs) == WaitResult::Timeout);
  // An abort raised without a wake (a crashed poster wakes nobody) is seen at the next slice.
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    AtomicWord<std::uint32_t>(&abort).store_release(1);
  });
  CHECK(b.wait(1, &abort, seconds_from_now(10), 0, 5'000'000) == WaitResult::Aborted);
  raiser.join();
  // A spinning phase that ends at the deadline reports Timeout too.
  CHECK(b.wait(1, nullptr, now_ns() + 5'000'000, 50'000'000) == WaitResult::Timeout);
  CHECK(w.waiters == 0);
}

TEST_CASE("futex: two processes on a shared mapping hand off 2000 times") {
  void* mem =
      ::mmap(nullptr, 2 * sizeof(Word), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* words = new (mem) Word[2];
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(pong(words[0], words[1], 1, 2000) == 0 ? 0 : 1);
  const int failures = ping(words[0], words[1], 1, 2000);
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(failures == 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(words[1].value == 2000);
  ::munmap(mem, 2 * sizeof(Word));
}
}  // namespace futex_wait_test
