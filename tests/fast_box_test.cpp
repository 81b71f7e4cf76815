// The fast boxes' protocol (runtime/fast_box.hpp) on its own, between host threads: messages of
// every payload size arrive whole and in order with the arguments they were sent with, across
// many wraps of the ring; a writer that is kFastBoxDepth messages ahead waits for its reader; a
// box is never rewritten before its reader released it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/runtime/fast_box.hpp"
#include "ccoll/sync/atomic.hpp"

namespace fast_box_test {
using namespace ccoll::runtime;

namespace {

// Spins until *word >= target (the communicator's waits add deadlines and abort checks).
void spin(const std::uint64_t* word, std::uint64_t target) {
  while (ccoll::sync::AtomicWord<std::uint64_t>(const_cast<std::uint64_t*>(word)).load_acquire() <
         target)
    std::this_thread::yield();
}

struct Rings {
  explicit Rings(int n) : bytes(fast_box_bytes(n) + 128) {
    void* p = bytes.data();
    std::size_t space = bytes.size();
    boxes = FastBoxes(static_cast<std::byte*>(std::align(128, fast_box_bytes(n), p, space)), n);
  }
  std::vector<std::byte> bytes;
  FastBoxes boxes;
};

}  // namespace

TEST_CASE("fast boxes: sizes of the area") {
  CHECK(fast_box_bytes(1) == 0);
  CHECK(fast_box_bytes(kFastBoxMaxRanks + 1) == 0);
  CHECK(fast_box_bytes(2) == 4 * sizeof(FastBoxRing));
  CHECK(sizeof(FastBox) == kFastBoxBytes);
  CHECK(kFastBoxPayload >= 64);  // a 64-byte broadcast fits one box
}

TEST_CASE("fast boxes: every size arrives whole, in order, with its arguments, many wraps") {
  Rings rings(3);
  constexpr std::uint64_t kMessages = 20 * kFastBoxDepth + 7;
  std::string failure;
  std::thread reader([&] {
    FastBoxCursor cur;
    cur.reset(3, 1);
    for (std::uint64_t i = 0; i < kMessages && failure.empty(); ++i) {
      const FastBox& b = fast_box_receive(rings.boxes, cur, 2, 0, spin);
      const std::size_t bytes = 1 + i % kFastBoxPayload;
      const FastBoxArgs want{i + 5, bytes, 3u | 1u << 8, static_cast<std::uint32_t>(i % 7)};
      if (!(fast_box_args(b) == want)) failure = "arguments of message " + std::to_string(i);
      for (std::size_t k = 0; k < bytes && failure.empty(); ++k)
        if (b.payload[k] != static_cast<std::byte>((i * 31 + k) & 0xff))
          failure = "byte " + std::to_string(k) + " of message " + std::to_string(i);
      fast_box_release(rings.boxes, cur, 2, 0);
    }
  });
  FastBoxCursor cur;
  cur.reset(3, 1);
  std::byte data[kFastBoxPayload];
  for (std::uint64_t i = 0; i < kMessages; ++i) {
    const std::size_t bytes = 1 + i % kFastBoxPayload;
    for (std::size_t k = 0; k < bytes; ++k) data[k] = static_cast<std::byte>((i * 31 + k) & 0xff);
    fast_box_send(rings.boxes, cur, 0, 2,
                  FastBoxArgs{i + 5, bytes, 3u | 1u << 8, static_cast<std::uint32_t>(i % 7)}, data,
                  bytes, spin);
  }
  reader.join();
  CHECK(failure == "");
  CHECK(cur.sent[2] == kMessages);
  // The other pairs' rings were never touched.
  CHECK(rings.boxes.ring(2, 0).box[0].stamp == 0);
  CHECK(rings.boxes.ring(0, 1).taken == 0);
}

TEST_CASE("fast boxes: a writer kFastBoxDepth messages ahead waits for its reader") {
  Rings rings(2);
  FastBoxCursor writer;
  writer.reset(2, 1);
  const std::byte one{1};
  std::uint64_t waits = 0;
  const auto counting_wait = [&](const std::uint64_t* word, std::uint64_t target) {
    ++waits;
    spin(word, target);
  };
  for (std::uint64_t i = 0; i < kFastBoxDepth; ++i)
    fast_box_send(rings.boxes, writer, 0, 1, FastBoxArgs{i + 1, 1, 0, 0}, &one, 1, counting_wait);
  CHECK(waits == 0);
  // The next message needs box 0 back: the writer blocks until the reader releases it.
  std::atomic<bool> sent{false};
  std::thread late([&] {
    fast_box_send(rings.boxes, writer, 0, 1, FastBoxArgs{kFastBoxDepth + 1, 1, 0, 0}, &one, 1,
                  counting_wait);
    sent = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(sent.load());
  // Box 0 still holds message 0 while it is not released.
  CHECK(rings.boxes.ring(0, 1).box[0].seq == 1);
  FastBoxCursor reader;
  reader.reset(2, 1);
  const FastBox& first = fast_box_receive(rings.boxes, reader, 1, 0, spin);
  CHECK(first.seq == 1);
  fast_box_release(rings.boxes, reader, 1, 0);
  late.join();
  CHECK(sent.load());
  CHECK(waits == 1);
  CHECK(rings.boxes.ring(0, 1).box[0].seq == kFastBoxDepth + 1);
  CHECK(rings.boxes.ring(0, 1).box[0].stamp == kFastBoxDepth + 1);
}
}  // namespace fast_box_test
