// bench_slot_handoff: how fast one core hands data to another through a FIFO of slots in shared
// memory, with the slots written by ordinary (cached) or non-temporal (streamed) stores.
//
// This is the transfer every step of a host plan makes: the writer copies a message into a slot
// and posts `tail`; the reader copies it out and posts `head`; four slots rotate, so the writer
// rewrites a slot whose lines its reader read nslots messages earlier. With cached stores the
// writer must first take those lines back from the reader's cache; with streamed stores the message
// goes through memory. Which is faster depends on where the two cores sit (docs/results/
// shm-vs-mpi.md: on a virtual machine it changes when the hypervisor moves the virtual CPUs), and
// SlotStoreTuner (runtime/slot_store_tuner.hpp) decides at run time; this program shows the two
// costs side by side.
//
//   bench_slot_handoff [piece KiB ...]      (default 64 256 1024; threads pinned to CPUs 0 and 1)
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"

namespace {

constexpr int kSlots = 4;
constexpr std::size_t kBytesPerRun = std::size_t{512} << 20;

void pin(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(thread, sizeof set, &set);
}

// Polls `word` until it reaches `target`; yields now and then, so that a mis-pinned pair of
// threads under a real-time policy cannot starve each other for good.
void wait_for(std::uint64_t* word, std::uint64_t target) {
  for (std::uint32_t polls = 1;
       ccoll::sync::AtomicWord<std::uint64_t>(word).load_acquire() < target; ++polls) {
    if (polls % 4096 == 0)
      std::this_thread::yield();
    else
      ccoll::sync::cpu_relax();
  }
}

struct Result {
  double writer_GBps = 0, reader_GBps = 0, end_to_end_GBps = 0;
};

Result handoff(std::size_t piece, bool streamed) {
  const std::size_t n = kBytesPerRun / piece;
  void* mem =
      ::mmap(nullptr, piece * kSlots, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) std::exit(1);
  auto* slots = static_cast<unsigned char*>(mem);
  std::vector<unsigned char> src(piece, 1), dst(piece, 0);
  std::memset(slots, 0, piece * kSlots);
  alignas(64) std::uint64_t tail = 0;
  alignas(64) std::uint64_t head = 0;
  alignas(64) std::uint64_t started = 0;
  double reader_s = 0;
  pin(pthread_self(), 0);  // before the reader exists, so that it cannot be stuck behind us
  std::thread reader([&] {
    pin(pthread_self(), 1);
    ccoll::sync::AtomicWord<std::uint64_t>(&started).store_release(1);
    double t = 0;
    for (std::size_t m = 0; m < n; ++m) {
      wait_for(&tail, m + 1);
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), slots + (m % kSlots) * piece, piece);
      t += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ccoll::sync::AtomicWord<std::uint64_t>(&head).store_release(m + 1);
    }
    reader_s = t;
  });
  wait_for(&started, 1);
  double writer_s = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t m = 0; m < n; ++m) {
    if (m >= kSlots) wait_for(&head, m + 1 - kSlots);
    const auto t0 = std::chrono::steady_clock::now();
    unsigned char* slot = slots + (m % kSlots) * piece;
    if (streamed) {
      ccoll::runtime::detail::stream_copy(slot, src.data(), piece);
      ccoll::runtime::detail::stream_fence();
    } else {
      std::memcpy(slot, src.data(), piece);
    }
    writer_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ccoll::sync::AtomicWord<std::uint64_t>(&tail).store_release(m + 1);
  }
  reader.join();
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::munmap(mem, piece * kSlots);
  const double bytes = static_cast<double>(n * piece);
  return {bytes / writer_s / 1e9, bytes / reader_s / 1e9, bytes / total / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> pieces;
  for (int i = 1; i < argc; ++i) pieces.push_back(std::strtoull(argv[i], nullptr, 10) << 10);
  if (pieces.empty()) pieces = {64u << 10, 256u << 10, 1024u << 10};
  std::printf(
      "# slot handoff between CPU 0 (writer) and CPU 1 (reader), %d slots, %zu MiB per run\n",
      kSlots, kBytesPerRun >> 20);
  std::printf("# %8s %9s %12s %12s %12s   (GB/s; writer/reader: time inside their copies)\n",
              "piece", "stores", "writer", "reader", "end-to-end");
  for (std::size_t piece : pieces)
    for (bool streamed : {false, true}) {
      const Result r = handoff(piece, streamed);
      std::printf("  %6zuKiB %9s %12.1f %12.1f %12.1f\n", piece >> 10,
                  streamed ? "streamed" : "cached", r.writer_GBps, r.reader_GBps,
                  r.end_to_end_GBps);
    }
  return 0;
}
