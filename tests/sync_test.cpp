// Tests of ccoll/sync: counters (post, check, wait with deadline and abort; [C-Cube] Fig. 11),
// connection FIFO arithmetic, the abort record, progress under oversubscription (16 threads
// passing a token around a ring on a 2-core machine), and the spin that waits learn.
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "ccoll/sync/abort.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/sync/counter.hpp"
#include "ccoll/sync/poll.hpp"

namespace sync_test {
using namespace ccoll::sync;
using namespace std::chrono_literals;

TEST_CASE("counter: post, check and wait") {
  std::uint64_t word = 0;
  Counter c(&word);
  CHECK(c.check(0));
  CHECK_FALSE(c.check(1));
  c.post();
  CHECK(c.value() == 1);
  c.post_value(5);
  CHECK(c.check(5));
  CHECK_FALSE(c.check(6));
  CHECK(c.wait(5, nullptr, 0) == WaitResult::Ok);  // already there: no deadline needed
  c.post(3);
  CHECK(c.value() == 8);
}

TEST_CASE("counter: a wait gives up at its deadline and on abort, and sees a late post") {
  std::uint64_t word = 0;
  std::uint32_t abort = 0;
  Counter c(&word);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(c.wait(1, &abort, now_ns() + 50'000'000) == WaitResult::Timeout);
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited >= 50ms);
  CHECK(waited < 5s);  // bounded, not a hang (generous: loaded machine)

  std::thread aborter([&] {
    std::this_thread::sleep_for(20ms);
    AtomicWord<std::uint32_t>(&abort).store_release(1);
  });
  CHECK(c.wait(1, &abort, now_ns() + 10'000'000'000ull) == WaitResult::Aborted);
  aborter.join();

  abort = 0;
  std::thread poster([&] {
    std::this_thread::sleep_for(20ms);
    c.post_value(7);
  });
  CHECK(c.wait(7, &abort, now_ns() + 10'000'000'000ull) == WaitResult::Ok);
  poster.join();
}

TEST_CASE("counter: data written before a post is visible after the wait (message passing)") {
  constexpr int kRounds = 20000;
  std::vector<std::uint64_t> data(64);
  std::uint64_t tail = 0, head = 0;
  std::thread producer([&] {
    for (int i = 1; i <= kRounds; ++i) {
      REQUIRE(Counter(&head).wait(static_cast<std::uint64_t>(i - 1), nullptr, 0) == WaitResult::Ok);
      for (auto& d : data) d = static_cast<std::uint64_t>(i);
      Counter(&tail).post_value(static_cast<std::uint64_t>(i));
    }
  });
  bool consistent = true;
  for (int i = 1; i <= kRounds; ++i) {
    REQUIRE(Counter(&tail).wait(static_cast<std::uint64_t>(i), nullptr, 0) == WaitResult::Ok);
    for (auto d : data) consistent = consistent && d == static_cast<std::uint64_t>(i);
    Counter(&head).post_value(static_cast<std::uint64_t>(i));
  }
  producer.join();
  CHECK(consistent);
}

TEST_CASE("connection: slot arithmetic and FIFO depth across calls") {
  ConnectionCounters counters{};
  counters.tail = counters.head = 0;
  std::vector<std::byte> slots(3 * 64);
  ConnectionRef c;
  c.slots = slots.data();
  c.tail = &counters.tail;
  c.head = &counters.head;
  c.slot_bytes = 64;
  c.nslots = 3;
  // Three messages fit before the receiver consumes anything.
  for (std::uint64_t m = 0; m < 3; ++m) {
    CHECK(c.can_send(m));
    CHECK(c.slot(m) == slots.data() + m * 64);
    c.post_sent(m);
  }
  CHECK_FALSE(c.can_send(3));
  CHECK(c.can_recv(2));
  CHECK_FALSE(c.can_recv(3));
  c.post_received(0);
  CHECK(c.can_send(3));
  CHECK(c.slot(3) == slots.data());  // message 3 reuses slot 0
  // A later call's message numbers continue where this call's ended (base + seq).
  c.post_received(1);
  c.post_received(2);
  c.post_sent(3);
  c.post_received(3);
  CHECK(c.can_send(6));
  CHECK_FALSE(c.can_send(7));
  CHECK_FALSE(c.can_recv(4));
}

TEST_CASE("connection: the slot index is m % nslots for every depth, by mask or by division") {
  ConnectionRef c;
  for (std::uint32_t n = 1; n <= 17; ++n) {
    c.nslots = n;
    for (const std::uint64_t m : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{n - 1},
                                  std::uint64_t{n}, std::uint64_t{1000003}, ~std::uint64_t{0}})
      CHECK(c.slot_index(m) == m % n);
  }
}

TEST_CASE("abort record: the first failure wins and is published whole") {
  AbortRecord a;
  CHECK_FALSE(a.raised());
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(8));
  std::atomic<int> winners{0};
  for (int r = 0; r < 8; ++r)
    threads.emplace_back([&, r] {
      if (a.raise(3, r, r, 10 * r, r + 1, 1)) winners.fetch_add(1);
    });
  for (auto& t : threads) t.join();
  CHECK(winners.load() == 1);
  REQUIRE(a.raised());
  REQUIRE(a.settle());
  CHECK(a.channel == a.rank);
  CHECK(a.step == 10 * a.rank);
  CHECK(a.peer == a.rank + 1);
}

TEST_CASE("backoff: 16 threads pass a token around a ring on few cores and all progress") {
  constexpr int kThreads = 16, kLaps = 200;
  std::vector<std::uint64_t> words(kThreads * 16, 0);  // one cache line apart
  auto word = [&](int t) { return &words[static_cast<std::size_t>(t) * 16]; };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(kThreads));
  std::atomic<int> failures{0};
  const std::uint64_t deadline = now_ns() + 60'000'000'000ull;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (std::uint64_t lap = 1; lap <= kLaps; ++lap) {
        // Thread t waits for its predecessor's post of this lap (thread 0: for the last thread's
        // post of the previous lap), then posts.
        const int prev = (t + kThreads - 1) % kThreads;
        const std::uint64_t target = t == 0 ? lap - 1 : lap;
        if (Counter(word(prev)).wait(target, nullptr, deadline) != WaitResult::Ok) {
          failures.fetch_add(1);
          return;
        }
        Counter(word(t)).post_value(lap);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  for (int t = 0; t < kThreads; ++t) CHECK(*word(t) == kLaps);
}

TEST_CASE("backoff: spin, then yield, then sleep, each for the policy's time") {
  const std::uint64_t a = now_ns();
  WaitPolicy policy;
  policy.spin_ns = 200'000;
  policy.yield_ns = 2'000'000;
  Backoff b(policy);
  b.pause();
  CHECK_FALSE(b.past_spinning());  // the first pauses spin (the clock starts within a few)
  while (!b.past_spinning()) b.pause();
  CHECK(now_ns() - a >= policy.spin_ns);
  CHECK_FALSE(b.sleeping());
  while (!b.sleeping()) b.pause();
  CHECK(now_ns() - a >= policy.spin_ns + policy.yield_ns);
  for (int i = 0; i < 20; ++i) b.pause();  // at most kMaxSleepUs (plus timer slack) each
  CHECK(now_ns() - a < 2'000'000'000ull);
  b.reset();
  CHECK_FALSE(b.past_spinning());
  CHECK_FALSE(b.sleeping());
  // No spinning when ranks outnumber cores: the first pause already yields the core.
  Backoff over(WaitPolicy::for_ranks(4, 2));
  over.pause();
  CHECK(over.past_spinning());
  CHECK(WaitPolicy::for_ranks(2, 2).spin_ns == WaitPolicy{}.spin_ns);
  CHECK(WaitPolicy::for_ranks(3, 0).spin_ns == WaitPolicy{}.spin_ns);  // unknown core count
}

TEST_CASE("backoff: the learned spin halves after a hand-over, doubles after a spin or yields") {
  WaitPolicy policy;
  const std::uint64_t least = kMinLearnedSpinNs;
  CHECK(learned_spin(policy, policy.spin_ns, WaitEnd::handed_over) == policy.spin_ns / 2);
  CHECK(learned_spin(policy, 2 * least, WaitEnd::handed_over) == least);
  CHECK(learned_spin(policy, least, WaitEnd::handed_over) == least);
  // Two ranks that share a core reach the least within five waits.
  std::uint64_t down = policy.spin_ns;
  int handed = 0;
  while (down > least) {
    down = learned_spin(policy, down, WaitEnd::handed_over);
    ++handed;
  }
  CHECK(handed <= 5);
  CHECK(learned_spin(policy, least, WaitEnd::spinning) == 2 * least);
  CHECK(learned_spin(policy, least, WaitEnd::yielding) == 2 * least);
  CHECK(learned_spin(policy, 0, WaitEnd::spinning) == 2 * least);
  CHECK(learned_spin(policy, policy.spin_ns / 2 + 1, WaitEnd::spinning) == policy.spin_ns);
  CHECK(learned_spin(policy, policy.spin_ns, WaitEnd::yielding) == policy.spin_ns);
  // A wait that never paused, or that slept, says nothing.
  CHECK(learned_spin(policy, 3 * least, WaitEnd::unpaused) == 3 * least);
  CHECK(learned_spin(policy, 3 * least, WaitEnd::sleeping) == 3 * least);
  // From the least back to spin_ns in a few waits that end while spinning.
  std::uint64_t spin = least;
  int waits = 0;
  while (spin < policy.spin_ns) {
    spin = learned_spin(policy, spin, WaitEnd::spinning);
    ++waits;
  }
  CHECK(waits <= 5);
}

TEST_CASE("backoff: waits read the learned spin, and write what each wait learned") {
  WaitPolicy policy;
  std::uint64_t learned = kMinLearnedSpinNs;
  policy.learned_spin_ns = &learned;
  // Waits that end within a few pauses, while spinning: the spin doubles up to spin_ns.
  std::uint64_t expected = kMinLearnedSpinNs;
  for (int wait = 0; wait < 8; ++wait) {
    Backoff b(policy);
    CHECK(b.spin_ns() == expected);
    CHECK(b.ended() == WaitEnd::unpaused);
    for (int i = 0; i < 3; ++i) b.pause();
    CHECK(b.ended() == WaitEnd::spinning);
    expected = learned_spin(policy, expected, WaitEnd::spinning);
  }
  CHECK(learned == policy.spin_ns);
  // reset() ends one wait and starts the next; a wait that never paused says nothing.
  learned = 4 * kMinLearnedSpinNs;
  {
    Backoff b(policy);
    b.reset();
    CHECK(learned == 4 * kMinLearnedSpinNs);
    b.pause();
    b.reset();
    CHECK(learned == 8 * kMinLearnedSpinNs);
    CHECK(b.spin_ns() == 8 * kMinLearnedSpinNs);
  }
  // A wait that went on to sleep waited for a late peer: nothing learned.
  WaitPolicy sleepy = policy;
  sleepy.spin_ns = 2'000;
  sleepy.yield_ns = 0;
  learned = kMinLearnedSpinNs;
  {
    Backoff b(sleepy);
    while (!b.sleeping()) b.pause();
    CHECK(b.ended() == WaitEnd::sleeping);
  }
  CHECK(learned == kMinLearnedSpinNs);
  // More ranks than cores: no spin to learn.
  WaitPolicy over = WaitPolicy::for_ranks(4, 2);
  over.learned_spin_ns = &learned;
  {
    Backoff b(over);
    CHECK(b.spin_ns() == 0);
    b.pause();
  }
  CHECK(learned == kMinLearnedSpinNs);
}

TEST_CASE("backoff: a wait whose yield runs its peer on its core halves the learned spin") {
  // Waiter and peer on one core (the first this process may use): the waiter spins its whole
  // spin, then a yield runs the peer, which holds the core for 200 us before it posts. The other
  // jobs of a loaded machine may run first, or the peer may post while the waiter is preempted
  // mid-spin; an attempt counts only when the wait ended after a hand-over, and one in 20 must.
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(::sched_getaffinity(0, sizeof(mine), &mine) == 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  int counted = 0;
  for (int attempt = 0; attempt < 20 && counted == 0; ++attempt) {
    WaitPolicy policy;
    std::uint64_t learned = policy.spin_ns;
    policy.learned_spin_ns = &learned;
    std::atomic<bool> started{false}, posted{false};
    bool timed_out = false;
    bool pinned_peer = false, pinned_waiter = false;
    WaitEnd end = WaitEnd::unpaused;
    std::thread peer([&] {
      pinned_peer = ::sched_setaffinity(0, sizeof(one), &one) == 0;
      while (!started.load()) std::this_thread::yield();
      const std::uint64_t until = now_ns() + 200'000;
      while (now_ns() < until) cpu_relax();
      posted.store(true);
    });
    std::thread waiter([&] {
      pinned_waiter = ::sched_setaffinity(0, sizeof(one), &one) == 0;
      started.store(true);
      const std::uint64_t deadline = now_ns() + 10'000'000'000ull;
      Backoff b(policy);
      while (!posted.load() && !timed_out) {
        timed_out = now_ns() > deadline;
        b.pause();
      }
      end = b.ended();
    });
    waiter.join();
    peer.join();
    CHECK_FALSE(timed_out);
    CHECK(pinned_peer);
    CHECK(pinned_waiter);
    if (end != WaitEnd::handed_over) continue;
    ++counted;
    CHECK(learned == policy.spin_ns / 2);
  }
  CHECK(counted == 1);
}

// The GPU waiter's schedule (sync/backoff.hpp), on made-up %globaltimer values.
TEST_CASE(
    "device poll schedule: no sleep for kSpinNs, growing sleeps, abort and deadline checked on a "
    "time budget") {
  using D = DevicePollSchedule;
  for (const std::uint64_t t0 : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{123'456'789},
                                 ~std::uint64_t{0} - 10 * D::kSpinNs}) {
    D s;
    CHECK(s.sleep_ns(t0) == 0);    // not started
    CHECK_FALSE(s.check_due(t0));  // the first poll starts the schedule
    const std::uint64_t start = s.start_ns;
    CHECK(start == (t0 == 0 ? 1 : t0));
    // Spinning: no sleep anywhere in the first kSpinNs.
    for (std::uint64_t dt = 0; dt < D::kSpinNs; dt += 997) CHECK(s.sleep_ns(start + dt) == 0);
    // Then sleeps that double every kSpinNs from kFirstSleepNs, capped at kMaxSleepNs.
    CHECK(s.sleep_ns(start + D::kSpinNs) == D::kFirstSleepNs);
    CHECK(s.sleep_ns(start + 2 * D::kSpinNs) == 2 * D::kFirstSleepNs);
    std::uint32_t last = 0;
    for (std::uint64_t dt = D::kSpinNs; dt < 40 * D::kSpinNs; dt += D::kSpinNs / 3) {
      const std::uint32_t ns = s.sleep_ns(start + dt);
      CHECK(ns >= last);
      CHECK(ns <= D::kMaxSleepNs);
      last = ns;
    }
    CHECK(last == D::kMaxSleepNs);
    // Checks: none before kCheckNs, then one per kCheckNs however often the waiter polls.
    D c;
    CHECK_FALSE(c.check_due(t0));
    const std::uint64_t c0 = c.start_ns;
    int checks = 0;
    // Polls every 100 ns: the k-th check comes within 100 ns after k x kCheckNs from the last.
    for (std::uint64_t dt = 1; dt <= 10 * (D::kCheckNs + 100); dt += 100)
      checks += c.check_due(c0 + dt);
    CHECK(checks == 10);
  }
}

TEST_CASE("poll_until: ready, abort, deadline, and a ready value at the deadline counts") {
  int polls = 0;
  CHECK(poll_until([&] { return ++polls >= 3; }, nullptr, 0) == WaitResult::Ok);
  CHECK(polls == 3);
  std::uint32_t abort = 1;
  CHECK(poll_until([] { return false; }, &abort, 0) == WaitResult::Aborted);
  CHECK(poll_until([] { return true; }, &abort, 0) == WaitResult::Ok);  // ready wins over abort
  const std::uint64_t t0 = now_ns();
  CHECK(poll_until([] { return false; }, nullptr, t0 + 2'000'000) == WaitResult::Timeout);
  CHECK(now_ns() - t0 >= 2'000'000);
  // The value turns ready exactly when the clock passes the deadline: the last poll sees it.
  const std::uint64_t deadline = now_ns() + 1'000'000;
  CHECK(poll_until([&] { return now_ns() >= deadline; }, nullptr, deadline) == WaitResult::Ok);
}

TEST_CASE("relayed abort word: one read of the host word per interval, raised for every waiter") {
  using R = RelayedAbortWord;
  std::uint32_t host = 0;
  R relay;
  relay.host = &host;
  const std::uint32_t* watch = &relay.word;
  // Idle: not raised, and the host word is read once per interval on the waiters' clock.
  CHECK(!abort_raised(watch, 1'000));
  CHECK(relay.host_reads == 1);
  CHECK(!abort_raised(watch, 1'000 + R::kRelayNs - 1));
  CHECK(relay.host_reads == 1);
  CHECK(!abort_raised(watch, 1'000 + R::kRelayNs));
  CHECK(relay.host_reads == 2);
  CHECK(relay.word == R::kRelayIdle);
  // Raised on the host: the next due read raises the device word, which every later check sees
  // without another read of the host word.
  host = 1;
  CHECK(!abort_raised(watch, 1'000 + R::kRelayNs + 1));
  CHECK(abort_raised(watch, 1'000 + 2 * R::kRelayNs));
  CHECK(relay.host_reads == 3);
  CHECK(relay.word == 1u);
  CHECK(abort_raised(watch, 0));
  CHECK(relay.host_reads == 3);
  // A failing block raises the device word itself: seen at once, whatever the clock.
  R own;
  std::uint32_t quiet = 0;
  own.host = &quiet;
  CHECK(!abort_raised(&own.word, 5));
  own.word = 1;
  CHECK(abort_raised(&own.word, 6));
  CHECK(own.host_reads == 1);
  // A plain word is unchanged: zero or not.
  std::uint32_t plain = 0;
  CHECK(!abort_raised(&plain, 0));
  plain = 1;
  CHECK(abort_raised(&plain, 0));
  CHECK(!abort_raised(nullptr, 0));
}

TEST_CASE("relayed abort word: waiting threads share the host reads and all stop on a raise") {
  // Eight waits that never become ready watch one relayed word; the host raises its word after a
  // while. Every wait ends Aborted, and the host word was read at most once per interval in all,
  // not once per interval per waiter: each claim moves the next read an interval past the clock
  // that claimed it.
  constexpr int kWaiters = 8;
  std::uint32_t host = 0;
  RelayedAbortWord relay;
  relay.host = &host;
  std::atomic<int> aborted{0};
  const std::uint64_t t0 = now_ns();
  std::vector<std::thread> waiters;
  waiters.reserve(kWaiters);
  for (int i = 0; i < kWaiters; ++i)
    waiters.emplace_back([&] {
      if (poll_until([] { return false; }, &relay.word, now_ns() + 10'000'000'000ull) ==
          WaitResult::Aborted)
        aborted.fetch_add(1);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  AtomicWord<std::uint32_t>(&host).store_release(1);
  for (auto& t : waiters) t.join();
  const std::uint64_t elapsed = now_ns() - t0;
  CHECK(aborted.load() == kWaiters);
  const std::uint64_t reads = AtomicWord<std::uint64_t>(&relay.host_reads).load_acquire();
  CAPTURE(reads);
  CAPTURE(elapsed);
  CHECK(reads >= 1);
  CHECK(reads <= elapsed / RelayedAbortWord::kRelayNs + 1);
  // Never raised: a relayed wait ends at its deadline like any other.
  std::uint32_t quiet = 0;
  RelayedAbortWord idle;
  idle.host = &quiet;
  CHECK(poll_until([] { return false; }, &idle.word, now_ns() + 2'000'000) == WaitResult::Timeout);
  CHECK(idle.word == RelayedAbortWord::kRelayIdle);
}
}  // namespace sync_test
