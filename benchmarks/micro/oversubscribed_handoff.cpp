// bench_oversubscribed_handoff: what one handoff between two processes costs with each kind of
// wait, when the two share a core (more ranks than cores) and when they have a core each.
//
// Two processes (fork, one shared anonymous mapping) play ping-pong with one counter per
// direction: A posts ping = i and waits for pong >= i, B waits for ping >= i and posts pong = i.
// One handoff is half a round trip. Waits:
//   spin      pause-instruction polling only;
//   yield     sched_yield between polls (WaitPolicy{spin 0, yield forever});
//   backoff   ccoll's Backoff with WaitPolicy::for_ranks(4, 2), what an oversubscribed
//             communicator uses (no spinning, yield for yield_ns, then sleep);
//   backoff-2 ccoll's Backoff with the default policy (spin 20 us first), what a communicator
//             with a core per rank uses;
//   sleep     sleep_for(1 us) between polls (the kernel adds its timer slack, 50 us by default);
//   futex     sync::BlockingWord: block in the kernel, the poster wakes (no spinning).
// Each (placement, wait) runs for the given time and reports the mean handoff time and the CPU
// time both processes used per handoff (getrusage): a wait that costs CPU time takes it from
// whatever else could run on that core. A second table streams data through cached slots (see
// slot_stream) on one core and on two.
//
//   bench_oversubscribed_handoff [seconds per case, default 0.3] [cpu A] [cpu B]
//   (CPUs default to 0 and 1; "same core" pins both to cpu A)
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/futex.hpp"

namespace {

enum class Wait { spin, yield, backoff, backoff_default, sleep, futex };
constexpr Wait kWaits[] = {Wait::spin,  Wait::yield, Wait::backoff, Wait::backoff_default,
                           Wait::sleep, Wait::futex};

const char* name(Wait w) {
  switch (w) {
    case Wait::spin:
      return "spin";
    case Wait::yield:
      return "yield";
    case Wait::backoff:
      return "backoff";
    case Wait::backoff_default:
      return "backoff-2";
    case Wait::sleep:
      return "sleep";
    case Wait::futex:
      return "futex";
  }
  return "?";
}

// One direction: the futex word and its waiter count on a 128-byte line of their own.
struct alignas(128) Channel {
  std::uint32_t value;
  std::uint32_t waiters;
};

struct Shared {
  Channel ping;
  Channel pong;
  alignas(128) std::uint32_t stop;  // A tells B the run is over (B's last wait is for i = stop)
  alignas(128) Channel ready;       // slot_stream: the reader's buffer is allocated
};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof set, &set);
}

// Waits until c.value >= target with `w`; gives up after a second (a spinning pair on one core
// progresses only when the scheduler preempts one of them).
void wait_for(Channel& c, std::uint32_t target, Wait w) {
  using ccoll::sync::AtomicWord;
  const std::uint64_t deadline = ccoll::sync::now_ns() + 1'000'000'000;
  if (w == Wait::futex) {
    (void)ccoll::sync::BlockingWord(&c.value, &c.waiters).wait(target, nullptr, deadline);
    return;
  }
  ccoll::sync::WaitPolicy policy = ccoll::sync::WaitPolicy::for_ranks(4, 2);
  if (w == Wait::backoff_default) policy = ccoll::sync::WaitPolicy{};
  ccoll::sync::Backoff backoff(policy);
  while (AtomicWord<std::uint32_t>(&c.value).load_acquire() < target) {
    if (ccoll::sync::now_ns() >= deadline) return;
    switch (w) {
      case Wait::spin:
        ccoll::sync::cpu_relax();
        break;
      case Wait::yield:
        std::this_thread::yield();
        break;
      case Wait::sleep:
        std::this_thread::sleep_for(std::chrono::microseconds(1));
        break;
      default:
        backoff.pause();
        break;
    }
  }
}

void post(Channel& c, std::uint32_t v, Wait w) {
  if (w == Wait::futex)
    ccoll::sync::BlockingWord(&c.value, &c.waiters).post_value(v);
  else
    ccoll::sync::AtomicWord<std::uint32_t>(&c.value).store_release(v);
}

double cpu_seconds(int who) {
  rusage u{};
  (void)getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Result {
  double handoff_us = 0;
  double cpu_us_per_handoff = 0;
  std::uint32_t round_trips = 0;
};

Result run(Wait w, int cpu_a, int cpu_b, double seconds) {
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) std::exit(1);
  auto* sh = new (mem) Shared{};
  const pid_t child = ::fork();
  if (child == 0) {
    pin(cpu_b);
    for (std::uint32_t i = 1;; ++i) {
      wait_for(sh->ping, i, w);
      post(sh->pong, i, w);
      if (ccoll::sync::AtomicWord<std::uint32_t>(&sh->stop).load_acquire() == i) ::_exit(0);
    }
  }
  pin(cpu_a);
  const double cpu0 = cpu_seconds(RUSAGE_SELF);
  const auto t0 = std::chrono::steady_clock::now();
  const auto until = t0 + std::chrono::duration<double>(seconds);
  std::uint32_t i = 0;
  while (std::chrono::steady_clock::now() < until) {
    ++i;
    post(sh->ping, i, w);
    wait_for(sh->pong, i, w);
  }
  // One last round trip carries the stop mark.
  ++i;
  ccoll::sync::AtomicWord<std::uint32_t>(&sh->stop).store_release(i);
  post(sh->ping, i, w);
  wait_for(sh->pong, i, w);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int status = 0;
  (void)::waitpid(child, &status, 0);
  const double cpu = cpu_seconds(RUSAGE_SELF) - cpu0 + cpu_seconds(RUSAGE_CHILDREN);
  ::munmap(mem, sizeof(Shared));
  Result r;
  r.round_trips = i;
  r.handoff_us = wall / (2.0 * i) * 1e6;
  r.cpu_us_per_handoff = cpu / (2.0 * i) * 1e6;
  return r;
}

// The data a ring step hands over: the writer copies `piece` bytes of its private source (64 MiB,
// larger than the caches, like an input buffer) into slot m % kSlots, with ordinary (cached) or
// non-temporal (streamed: runtime::detail::stream_copy) stores, and posts m + 1; the reader copies
// the slot into its private destination and posts that the slot is free. Both wait with the policy
// of an oversubscribed communicator. With both on one core, the reader finds the slot in that
// core's caches; on two cores, every line moves between the cores (and back, when the writer
// rewrites a slot that the reader's cache still holds). GB/s of payload.
constexpr int kSlots = 4;
constexpr std::size_t kStreamBytes = std::size_t{64} << 20;

double slot_stream(std::size_t piece, bool streamed, int cpu_a, int cpu_b, double seconds) {
  const std::size_t shared_bytes = sizeof(Shared) + kSlots * piece;
  void* mem =
      ::mmap(nullptr, shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) std::exit(1);
  auto* sh = new (mem) Shared{};
  auto* slots = static_cast<unsigned char*>(mem) + sizeof(Shared);
  std::memset(slots, 0, kSlots * piece);
  const std::size_t per_pass = kStreamBytes / piece;
  const pid_t child = ::fork();
  if (child == 0) {  // reader
    pin(cpu_b);
    std::vector<unsigned char> dst(kStreamBytes, 0);
    post(sh->ready, 1, Wait::backoff);
    for (std::uint32_t m = 0;; ++m) {
      wait_for(sh->ping, m + 1, Wait::backoff);
      if (ccoll::sync::AtomicWord<std::uint32_t>(&sh->stop).load_acquire() == m + 1) ::_exit(0);
      std::memcpy(dst.data() + (m % per_pass) * piece, slots + (m % kSlots) * piece, piece);
      post(sh->pong, m + 1, Wait::backoff);
    }
  }
  pin(cpu_a);
  std::vector<unsigned char> src(kStreamBytes, 1);
  wait_for(sh->ready, 1, Wait::backoff);
  const auto t0 = std::chrono::steady_clock::now();
  const auto until = t0 + std::chrono::duration<double>(seconds);
  std::uint32_t m = 0;
  for (; std::chrono::steady_clock::now() < until; ++m) {
    if (m >= kSlots) wait_for(sh->pong, m + 1 - kSlots, Wait::backoff);
    unsigned char* slot = slots + (m % kSlots) * piece;
    if (streamed) {
      ccoll::runtime::detail::stream_copy(slot, src.data() + (m % per_pass) * piece, piece);
      ccoll::runtime::detail::stream_fence();
    } else {
      std::memcpy(slot, src.data() + (m % per_pass) * piece, piece);
    }
    post(sh->ping, m + 1, Wait::backoff);
  }
  wait_for(sh->pong, m, Wait::backoff);  // the reader has copied everything
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ccoll::sync::AtomicWord<std::uint32_t>(&sh->stop).store_release(m + 1);
  post(sh->ping, m + 1, Wait::backoff);
  int status = 0;
  (void)::waitpid(child, &status, 0);
  ::munmap(mem, shared_bytes);
  return static_cast<double>(m) * static_cast<double>(piece) / wall / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::strtod(argv[1], nullptr) : 0.3;
  const int cpu_a = argc > 2 ? std::atoi(argv[2]) : 0;
  const int cpu_b = argc > 3 ? std::atoi(argv[3]) : 1;
  std::printf(
      "# handoff between two processes (ping-pong; one handoff = half a round trip), "
      "%.2f s per case; waits: see the source\n",
      seconds);
  std::printf("# %-10s %-10s %12s %16s %12s\n", "placement", "wait", "handoff_us", "cpu_us/handoff",
              "round_trips");
  for (const bool same : {true, false}) {
    for (const Wait w : kWaits) {
      // Children accumulate into RUSAGE_CHILDREN; each case is run in a fresh process so that the
      // figure is that case's alone.
      int fds[2];
      if (::pipe(fds) != 0) return 1;
      const pid_t p = ::fork();
      if (p == 0) {
        ::close(fds[0]);
        const Result r = run(w, cpu_a, same ? cpu_a : cpu_b, seconds);
        if (::write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) ::_exit(1);
        ::_exit(0);
      }
      ::close(fds[1]);
      Result r;
      const bool ok = ::read(fds[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r);
      ::close(fds[0]);
      int status = 0;
      (void)::waitpid(p, &status, 0);
      if (!ok) return 1;
      const std::string where = same ? "same-core" : "two-cores";
      std::printf("  %-10s %-10s %12.2f %16.2f %12u\n", where.c_str(), name(w), r.handoff_us,
                  r.cpu_us_per_handoff, r.round_trips);
      std::fflush(stdout);
    }
  }
  std::printf(
      "# slot stream: %d slots, writer copies from 64 MiB, reader copies out; waits of an "
      "oversubscribed communicator\n",
      kSlots);
  std::printf("# %-10s %10s %9s %10s\n", "placement", "piece", "stores", "GB/s");
  for (const bool same : {true, false})
    for (const std::size_t piece : {std::size_t{256} << 10, std::size_t{1} << 20})
      for (const bool streamed : {false, true}) {
        const double gbps = slot_stream(piece, streamed, cpu_a, same ? cpu_a : cpu_b, seconds);
        std::printf("  %-10s %7zuKiB %9s %10.2f\n", same ? "same-core" : "two-cores", piece >> 10,
                    streamed ? "streamed" : "cached", gbps);
        std::fflush(stdout);
      }
  return 0;
}
