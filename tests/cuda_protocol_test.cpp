// The host-device protocols of the CUDA transports that are not the step interpreter, run on host
// threads over the same memory a kernel and its host share (no GPU): a persistent session's work
// queue (transport/cuda/session_protocol.hpp: records tagged with their tickets, completion in
// order, wrap-around, sessions one after another on the same memory, abort, a relay's copies in
// device memory, how often the host's waits ask the driver about the kernel), the ranks' agreement
// on each call (transport/cuda/call_record.hpp), the choice of a failed job's root cause
// (transport/cuda/failure_record.hpp), where CudaP2P places a rank's FIFO memory
// (transport/cuda/p2p_options.hpp), and the host half of a plan's device tables
// (transport/cuda/block_tables.hpp, device_plan_cache.hpp). Threads stand for the kernel's
// blocks: each runs the leader's code of a block.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccoll/algo/registry.hpp"
#include "ccoll/core/config.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/direct.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/rooted.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/runtime/step_marks.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/cuda/block_tables.hpp"
#include "ccoll/transport/cuda/call_record.hpp"
#include "ccoll/transport/cuda/device_plan_cache.hpp"
#include "ccoll/transport/cuda/failure_record.hpp"
#include "ccoll/transport/cuda/p2p_options.hpp"
#include "ccoll/transport/cuda/session_protocol.hpp"
#include "sweep.hpp"

namespace cuda_protocol_test {
using namespace ccoll;
using namespace ccoll::transport::cuda;
using namespace std::chrono_literals;

namespace {

// One work item of the simulated sessions: its position in the sequence (so a block can tell a
// stale slot) and a value (< 0: the stop item), written as one record per rank of the kernel.
struct TestItem {
  std::uint64_t seq = 0;
  std::int64_t value = 0;
};

// Record `index` of `item`: the plan word carries seq + 1 (the stop item: none), the buffers name
// the record's index, the count carries the value.
SessionWork record_of(const TestItem& item, std::uint32_t index) {
  SessionWork w;
  if (item.value >= 0) {
    w.plan = session_address<const void*>(item.seq + 1);
    w.count = static_cast<std::uint64_t>(item.value);
  }
  w.input = session_address<const void*>(std::uint64_t{index} + 1);
  w.output = session_address<void*>((std::uint64_t{index} + 1) << 8);
  return w;
}

// Writes every record the ring's items use and counts the item.
std::uint64_t post(SessionRing& ring, const TestItem& item) {
  for (std::uint32_t i = 0; i < ring.used(); ++i) ring.write(i, record_of(item, i));
  return ring.post();
}

// The memory of one queue, as the host and the "device" share it: `depth` items of `stride`
// records.
struct QueueMemory {
  explicit QueueMemory(std::uint32_t depth, std::uint32_t records_per_item = 1)
      : records(std::size_t{depth} * records_per_item),
        arrivals(depth + 1, 0),
        control(std::make_unique<SessionQueueControl>()),
        stride(records_per_item) {}
  SessionQueueView view(std::uint32_t depth) {
    SessionQueueView v;
    v.records = records.data();
    v.depth = depth;
    v.stride = stride;
    v.control = control.get();
    v.arrivals = arrivals.data();
    v.completed = arrivals.data() + depth;
    return v;
  }
  SessionRing ring(std::uint32_t depth) {
    return SessionRing(records.data(), control.get(), depth, stride, stride);
  }
  std::vector<SessionRecord> records;
  std::vector<std::uint64_t> arrivals;  // depth arrival words, then the device's `completed`
  std::unique_ptr<SessionQueueControl> control;
  std::uint32_t stride;
};

// The threads that stand for a kernel's blocks or a relay's lanes. Each ends by itself (a stop
// item, the abort word); finished() waits for that at most 20 s, so that a thread waiting for
// something that never comes fails its test instead of hanging it. A failed REQUIRE unwinding past
// these threads raises the abort word before they are joined, for the same reason.
class SimulatedThreads {
 public:
  explicit SimulatedThreads(std::uint32_t* abort) : abort_(abort) {}
  ~SimulatedThreads() {
    if (std::uncaught_exceptions() > 0) sync::AtomicWord<std::uint32_t>(abort_).store_release(1u);
    join();
  }
  SimulatedThreads(const SimulatedThreads&) = delete;
  SimulatedThreads& operator=(const SimulatedThreads&) = delete;

  template <class Body>
  void start(Body body) {
    threads_.emplace_back([this, body] {
      body();
      ++finished_;
    });
  }
  bool finished() const {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (finished_ != threads_.size()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  void join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  std::uint32_t* abort_;
  std::atomic<std::size_t> finished_{0};
  std::vector<std::thread> threads_;
};

// A session kernel of `nblocks` blocks on host threads: block b reads record b % stride of each
// item (its rank's, as the virtual ranks' kernel does), checks that it is item j's and its own
// record, writes its output and arrives; a stop item or the abort word ends it.
// out[j * nblocks + b] = item j's value * (b + 1).
struct SimulatedSessionKernel {
  SimulatedSessionKernel(SessionQueueView q, unsigned nblocks, std::uint32_t* abort,
                         std::vector<std::int64_t>* out)
      : q_(q), nblocks_(nblocks), abort_(abort), out_(out), blocks_(abort) {
    for (unsigned b = 0; b < nblocks; ++b) blocks_.start([this, b] { run(b); });
  }
  bool finished() const { return blocks_.finished(); }
  void join() { blocks_.join(); }
  std::atomic<int> stale{0};  // records read that were not the expected one
  std::atomic<int> out_of_order{0};
  std::atomic<int> aborted{0};  // blocks that ended on the abort word

 private:
  void run(unsigned b) {
    std::uint64_t last_completed_seen = 0;
    const std::uint32_t index = b % q_.stride;
    for (std::uint64_t j = 0;; ++j) {
      SessionWork w;
      if (session_wait_record(q_, j, index, abort_, w) != sync::WaitResult::Ok) {
        ++aborted;
        return;
      }
      if (w.plan == nullptr) return;  // the stop item
      if (reinterpret_cast<std::uintptr_t>(w.plan) != j + 1 ||
          reinterpret_cast<std::uintptr_t>(w.input) != index + 1u ||
          reinterpret_cast<std::uintptr_t>(w.output) != (index + 1u) << 8)
        ++stale;
      // Blocks of different speeds: some items keep one block longer, so that blocks are on
      // different items and the last to arrive may wait for the previous item's completion.
      if ((j + b) % 7 == 0)
        for (int i = 0; i < 20; ++i) std::this_thread::yield();
      (*out_)[j * nblocks_ + b] = static_cast<std::int64_t>(w.count) * (b + 1);
      if (!session_item_done(q_, j, nblocks_, abort_)) {
        ++aborted;
        return;
      }
      const std::uint64_t c =
          sync::AtomicWord<std::uint64_t>(&q_.control->completed).load_acquire();
      if (c < last_completed_seen) ++out_of_order;
      last_completed_seen = c;
    }
  }
  SessionQueueView q_;
  unsigned nblocks_;
  std::uint32_t* abort_;
  std::vector<std::int64_t>* out_;
  SimulatedThreads blocks_;  // last: joined before the members their blocks use go
};

// Raises the abort word when a failed REQUIRE unwinds past it, so that the simulated kernel's
// blocks (declared before it, joined after it) stop waiting instead of hanging the test.
struct AbortOnUnwind {
  std::uint32_t* abort;
  ~AbortOnUnwind() {
    if (std::uncaught_exceptions() > 0) sync::AtomicWord<std::uint32_t>(abort).store_release(1u);
  }
};

// Waits on the host for `ticket` (bounded: a broken protocol fails the test instead of hanging).
bool wait_for(const SessionRing& ring, std::uint64_t ticket) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!ring.has_completed(ticket)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

CallArguments args(std::uint64_t count, DataType dtype = DataType::f32,
                   ReduceOp op = ReduceOp::sum) {
  CallArguments a;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  return a;
}

BlockFailure failure(std::int32_t rank, std::uint32_t channel, sync::WaitResult result,
                     std::int32_t peer, std::uint64_t when, std::uint32_t step = 0) {
  BlockFailure f;
  f.rank = rank;
  f.channel = channel;
  f.step.result = result;
  f.step.peer = peer;
  f.step.step = step;
  f.when_ns = when;
  return f;
}

}  // namespace

TEST_CASE("session records: a record is read only whole and only as its own item's") {
  SessionRecord r;
  SessionWork w;
  SessionWork in;
  in.plan = session_address<const void*>(0x7f12'3456'7880);
  in.input = session_address<const void*>(0x7fff'ffff'fff0);
  in.output = session_address<void*>(0xffff'ffff'ffff);  // the largest payload
  in.count = 12345;
  CHECK(session_encodable(in));
  CHECK_FALSE(session_read_record(r, 1, w));  // zeros: no item yet
  session_write_record(r, 7, in);
  REQUIRE(session_read_record(r, 7, w));
  CHECK(w.plan == in.plan);
  CHECK(w.input == in.input);
  CHECK(w.output == in.output);
  CHECK(w.count == in.count);
  CHECK_FALSE(session_read_record(r, 8, w));  // item 7's record, waited for as item 8's
  CHECK_FALSE(session_read_record(r, 7 + 4, w));
  // A record half rewritten for the next item in its slot (depth 4): one word of each ticket is
  // not the record of either.
  for (int word = 0; word < 4; ++word) {
    SessionRecord half = r;
    half.words[word] = session_tagged(0, 11);
    CHECK_FALSE(session_read_record(half, 7, w));
    CHECK_FALSE(session_read_record(half, 11, w));
  }
  // Tags run 1..65535: tickets closer than that have different tags, and no ticket's tag is a
  // zeroed record's, not even the multiples of 2^16 and of 65535.
  session_write_record(r, 65536 + 3, in);
  CHECK(session_read_record(r, 65536 + 3, w));
  CHECK_FALSE(session_read_record(r, 65536 + 3 - kMaxSessionDepth, w));
  const SessionRecord zeroed;
  for (const std::uint64_t ticket :
       {std::uint64_t{1}, std::uint64_t{65535}, std::uint64_t{65536}, std::uint64_t{65537},
        std::uint64_t{131070}, std::uint64_t{131072}, std::uint64_t{1} << 40}) {
    CAPTURE(ticket);
    CHECK(session_tag(ticket) >= 1);
    CHECK(session_tag(ticket) <= 0xFFFF);
    CHECK_FALSE(session_read_record(zeroed, ticket, w));
    for (const std::uint64_t back : {std::uint64_t{1}, std::uint64_t{kMaxSessionDepth}})
      if (ticket > back) CHECK(session_tag(ticket) != session_tag(ticket - back));
  }
  // What a record cannot hold.
  SessionWork high = in;
  high.count = kSessionPayloadLimit;
  CHECK_FALSE(session_encodable(high));
  high = in;
  high.input = session_address<const void*>(std::uint64_t{1} << 48);
  CHECK_FALSE(session_encodable(high));
  // Every executor refuses it in the same words, naming the rank, before writing anything.
  CHECK_NOTHROW(check_session_encodable(in, 2));
  try {
    check_session_encodable(high, 2);
    FAIL("no error");
  } catch (const ccoll::Error& e) {
    CHECK(e.code() == ccoll::ErrorCode::Unsupported);
    CHECK(e.rank() == 2);
    CHECK(std::string(e.what()).find("a session queues addresses and counts below 2^48") !=
          std::string::npos);
  }
}

TEST_CASE("session records: a reader racing the writer takes every record whole") {
  // The host writes each record's words in an order of its own, with pauses; a block polls the
  // record, as a kernel's leader does, and must take every item exactly as written.
  constexpr std::uint32_t depth = 2;
  constexpr std::uint64_t n = 3000;
  QueueMemory m(depth);
  SessionRing ring = m.ring(depth);
  const SessionQueueView q = m.view(depth);
  std::uint32_t abort = 0;
  std::atomic<std::uint64_t> taken{0};
  std::atomic<int> torn{0};
  std::thread block([&] {
    for (std::uint64_t j = 0; j < n; ++j) {
      SessionWork w;
      if (session_wait_record(q, j, 0, &abort, w) != sync::WaitResult::Ok) return;
      const auto plan = reinterpret_cast<std::uintptr_t>(w.plan);
      if (plan != j + 1 || reinterpret_cast<std::uintptr_t>(w.input) != 3 * plan ||
          reinterpret_cast<std::uintptr_t>(w.output) != 5 * plan || w.count != 7 * plan)
        ++torn;
      taken.store(j + 1, std::memory_order_release);
      // The slot is free again once the item is taken (what `completed` says in a session).
      sync::AtomicWord<std::uint64_t>(&m.control->completed).store_release(j + 1);
    }
  });
  std::mt19937 rng(29);
  bool timely = true;
  for (std::uint64_t j = 0; j < n && timely; ++j) {
    const std::uint64_t freeing = ring.ticket_freeing_next();
    if (freeing != 0) timely = wait_for(ring, freeing);
    const std::uint64_t v = j + 1;
    const std::uint64_t payloads[4] = {v, 3 * v, 5 * v, 7 * v};
    int order[4] = {0, 1, 2, 3};
    std::shuffle(order, order + 4, rng);
    SessionRecord& r = m.records[j % depth];
    for (const int word : order) {
      sync::AtomicWord<std::uint64_t>(&r.words[word])
          .store_release(session_tagged(payloads[word], j + 1));
      if (rng() % 4 == 0) std::this_thread::yield();
    }
    ring.post();
  }
  if (!timely) sync::AtomicWord<std::uint32_t>(&abort).store_release(1u);
  block.join();
  REQUIRE(timely);
  CHECK(taken == n);
  CHECK(torn == 0);
}

TEST_CASE("session records: an idle block polls one word, then takes the record only whole") {
  // Past the spin phase a block polls the record's first word alone; it must still take the
  // record only once all four words are there, whichever the host wrote first.
  for (const bool first_word_first : {false, true}) {
    CAPTURE(first_word_first);
    QueueMemory m(2);
    const SessionQueueView q = m.view(2);
    std::uint32_t abort = 0;
    std::atomic<int> taken{0};
    SessionWork w;
    std::thread block([&] {
      if (session_wait_record(q, 0, 0, &abort, w) == sync::WaitResult::Ok) taken = 1;
    });
    // Well past DevicePollSchedule::kSpinNs of waiting: the block polls one word now.
    std::this_thread::sleep_for(5ms);
    SessionRecord& r = m.records[0];
    const std::uint64_t payloads[4] = {0x1000, 0x2000, 0x3000, 77};
    const auto store = [&](int word) {
      sync::AtomicWord<std::uint64_t>(&r.words[word])
          .store_release(session_tagged(payloads[word], 1));
    };
    if (first_word_first) {
      store(0);
      std::this_thread::sleep_for(5ms);
      CHECK(taken == 0);  // the first word alone is not the record
      for (int word : {3, 1, 2}) store(word);
    } else {
      for (int word : {3, 1, 2}) store(word);
      std::this_thread::sleep_for(5ms);
      CHECK(taken == 0);  // the idle poll waits for the first word
      store(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (taken == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (taken == 0) sync::AtomicWord<std::uint32_t>(&abort).store_release(1u);
    block.join();
    REQUIRE(taken == 1);
    CHECK(w.plan == session_address<const void*>(0x1000));
    CHECK(w.input == session_address<const void*>(0x2000));
    CHECK(w.output == session_address<void*>(0x3000));
    CHECK(w.count == 77);
  }
}

TEST_CASE("session ring: slots, back-pressure tickets, the stop item") {
  QueueMemory m(3, 2);
  // A previous session's records: a new ring starts from zero, or its kernel could take a stale
  // record that happens to carry the ticket it waits for.
  for (auto& rec : m.records) session_write_record(rec, 1, record_of(TestItem{0, 4}, 0));
  m.control->completed = 99;
  SessionRing ring = m.ring(3);
  SessionWork w;
  for (const auto& rec : m.records) CHECK_FALSE(session_read_record(rec, 1, w));
  CHECK(ring.completed() == 0);
  CHECK(ring.ticket_freeing_next() == 0);
  for (std::uint64_t t = 1; t <= 3; ++t) {
    CHECK(post(ring, TestItem{t - 1, 10}) == t);
    // Each record publishes itself, in slot t - 1.
    for (std::uint32_t i = 0; i < 2; ++i) {
      REQUIRE(session_read_record(m.records[(t - 1) % 3 * 2 + i], t, w));
      CHECK(reinterpret_cast<std::uintptr_t>(w.input) == i + 1);
    }
  }
  // The fourth item reuses the first slot: ticket 1 must have completed.
  CHECK(ring.ticket_freeing_next() == 1);
  CHECK_FALSE(ring.has_completed(1));
  m.control->completed = 1;
  CHECK(ring.has_completed(1));
  CHECK_FALSE(ring.has_completed(2));
  post(ring, TestItem{3, 10});
  CHECK(ring.ticket_freeing_next() == 2);
  // The stop item is written after every item, but is no ticket.
  ring.post_stop();
  CHECK(ring.posted() == 4);
  for (std::uint32_t i = 0; i < 2; ++i) {
    REQUIRE(session_read_record(m.records[4 % 3 * 2 + i], 5, w));
    CHECK(w.plan == nullptr);
  }
}

TEST_CASE("session queue: items complete in order through many wrap-arounds") {
  for (std::uint32_t depth : {1u, 3u, 16u})
    for (unsigned nblocks : {1u, 3u, 4u})
      for (std::uint32_t stride : {1u, 2u}) {
        CAPTURE(depth);
        CAPTURE(nblocks);
        CAPTURE(stride);
        const std::uint64_t n = 40;  // 40 wrap-arounds at depth 1, 2.5 at depth 16
        QueueMemory m(depth, stride);
        std::uint32_t abort = 0;
        std::vector<std::int64_t> out(n * nblocks, 0);
        SessionRing ring = m.ring(depth);
        SimulatedSessionKernel kernel(m.view(depth), nblocks, &abort, &out);
        std::uint64_t outstanding_max = 0;
        bool timely = true;
        for (std::uint64_t j = 0; j < n && timely; ++j) {
          const std::uint64_t freeing = ring.ticket_freeing_next();
          if (freeing != 0) timely = wait_for(ring, freeing);
          outstanding_max = std::max(outstanding_max, ring.posted() - ring.completed());
          CHECK(post(ring, TestItem{j, static_cast<std::int64_t>(j) + 1}) == j + 1);
          // A completed ticket means every block's output of that item is there.
          const std::uint64_t done = ring.completed();
          for (std::uint64_t k = 0; k < done; ++k)
            for (unsigned b = 0; b < nblocks; ++b)
              if (out[k * nblocks + b] != static_cast<std::int64_t>(k + 1) * (b + 1))
                timely = false;
        }
        const AbortOnUnwind unwind{&abort};
        REQUIRE(timely);
        CHECK(outstanding_max < depth);
        REQUIRE(wait_for(ring, n));
        if (ring.ticket_freeing_next() != 0) REQUIRE(wait_for(ring, ring.ticket_freeing_next()));
        ring.post_stop();
        REQUIRE(kernel.finished());
        kernel.join();
        CHECK(ring.completed() == n);
        CHECK(kernel.stale == 0);
        CHECK(kernel.out_of_order == 0);
        CHECK(kernel.aborted == 0);
        std::size_t wrong = 0;
        for (std::uint64_t j = 0; j < n; ++j)
          for (unsigned b = 0; b < nblocks; ++b)
            if (out[j * nblocks + b] != static_cast<std::int64_t>(j + 1) * (b + 1)) ++wrong;
        CHECK(wrong == 0);
        // Every arrival word is free again for the next session.
        for (std::uint32_t i = 0; i < depth; ++i) CHECK(m.arrivals[i] == 0);
        CHECK(m.arrivals[depth] == n);
      }
}

namespace {

// A session's relay on host threads (session_relay_record): thread l of `lanes` copies records
// l, l + lanes, ... below `records` (those the blocks read) of every item into `mirror` until the
// stop item or the abort word.
struct SimulatedRelay {
  SimulatedRelay(SessionQueueView host, SessionRecord* mirror, std::uint32_t records,
                 std::uint32_t lanes, std::uint32_t* abort)
      : lanes_(abort) {
    for (std::uint32_t l = 0; l < lanes && l < records; ++l)
      lanes_.start([=, this] {
        for (std::uint64_t j = 0;; ++j) {
          bool stop = false;
          for (std::uint32_t i = l; i < records; i += lanes) {
            bool stop_record = false;
            if (session_relay_record(host, mirror, j, i, abort, stop_record) !=
                sync::WaitResult::Ok) {
              ++aborted;
              return;
            }
            stop = stop || stop_record;
          }
          if (stop) return;
        }
      });
  }
  bool finished() const { return lanes_.finished(); }
  void join() { lanes_.join(); }
  std::atomic<int> aborted{0};

 private:
  SimulatedThreads lanes_;  // last: joined before `aborted` goes
};

}  // namespace

TEST_CASE("session relay: blocks reading the relay's copies take every item, in order, whole") {
  for (std::uint32_t depth : {1u, 3u, 16u})
    for (unsigned nblocks : {1u, 4u})
      for (std::uint32_t stride : {1u, 3u})
        for (std::uint32_t lanes : {1u, 2u}) {
          CAPTURE(depth);
          CAPTURE(nblocks);
          CAPTURE(stride);
          CAPTURE(lanes);
          const std::uint64_t n = 40;
          QueueMemory m(depth, stride);
          // A previous session's copies: zeroed before the kernel, as session_floor does.
          std::vector<SessionRecord> mirror(std::size_t{depth} * stride);
          std::uint32_t abort = 0;
          std::vector<std::int64_t> out(n * nblocks, 0);
          SessionRing ring = m.ring(depth);
          SessionQueueView copies = m.view(depth);
          copies.records = mirror.data();
          SimulatedSessionKernel kernel(copies, nblocks, &abort, &out);
          // The records some block reads (block b reads b % stride): a copy nobody reads would
          // not hold its item back, and the host could overwrite the record before it is copied.
          const std::uint32_t read = std::min(stride, nblocks);
          SimulatedRelay relay(m.view(depth), mirror.data(), read, lanes, &abort);
          const AbortOnUnwind unwind{&abort};
          for (std::uint64_t j = 0; j < n; ++j) {
            const std::uint64_t freeing = ring.ticket_freeing_next();
            if (freeing != 0) REQUIRE(wait_for(ring, freeing));
            post(ring, TestItem{j, static_cast<std::int64_t>(j) + 1});
          }
          REQUIRE(wait_for(ring, n));
          if (ring.ticket_freeing_next() != 0) REQUIRE(wait_for(ring, ring.ticket_freeing_next()));
          ring.post_stop();
          REQUIRE(relay.finished());
          REQUIRE(kernel.finished());
          kernel.join();
          relay.join();
          CHECK(kernel.stale == 0);
          CHECK(kernel.out_of_order == 0);
          CHECK(kernel.aborted == 0);
          CHECK(relay.aborted == 0);
          std::size_t wrong = 0;
          for (std::uint64_t j = 0; j < n; ++j)
            for (unsigned b = 0; b < nblocks; ++b)
              if (out[j * nblocks + b] != static_cast<std::int64_t>(j + 1) * (b + 1)) ++wrong;
          CHECK(wrong == 0);
          // The copies of the stop item, with its ticket, are the last the relay wrote.
          SessionWork w;
          for (std::uint32_t i = 0; i < read; ++i) {
            REQUIRE(session_read_record(mirror[n % depth * stride + i], n + 1, w));
            CHECK(w.plan == nullptr);
          }
        }
}

TEST_CASE("session relay: the abort word ends a relay waiting for an item") {
  QueueMemory m(2, 2);
  std::vector<SessionRecord> mirror(4);
  std::uint32_t abort = 0;
  SessionRing ring = m.ring(2);
  SimulatedRelay relay(m.view(2), mirror.data(), 2, 2, &abort);
  // One record of item 0 only: the other lane waits.
  ring.write(0, record_of(TestItem{0, 5}, 0));
  std::this_thread::sleep_for(5ms);
  sync::AtomicWord<std::uint32_t>(&abort).store_release(1u);
  relay.join();
  CHECK(relay.aborted == 2);  // the lane with item 0's record waits for item 1's
  SessionWork w;
  REQUIRE(session_read_record(mirror[0], 1, w));
  CHECK(w.count == 5);
  CHECK_FALSE(session_read_record(mirror[1], 1, w));
}

TEST_CASE("session queue: sessions one after another on the same memory take no stale item") {
  // An executor's queue memory serves every session it opens (session_queue.cuh). Each session
  // leaves its records in the slots; the next, of the same depth or another, must wait for its own.
  QueueMemory m(4);
  std::uint32_t abort = 0;
  std::uint64_t value = 1;
  // A session of one item leaves tickets 1 and 2 (its stop item) in the first two slots: exactly
  // the tickets of the next session's first two items.
  struct Session {
    std::uint32_t depth;
    std::uint64_t n;
  };
  for (const Session session : {Session{4, 1}, Session{4, 7}, Session{3, 7}, Session{2, 7}}) {
    const std::uint32_t depth = session.depth;
    const std::uint64_t n = session.n;
    CAPTURE(depth);
    CAPTURE(n);
    const unsigned nblocks = 2;
    // What SessionQueue does on the device before the kernel: its arrival and completion words.
    std::fill(m.arrivals.begin(), m.arrivals.end(), 0);
    SessionRing ring = m.ring(depth);
    std::vector<std::int64_t> out(n * nblocks, 0);
    SimulatedSessionKernel kernel(m.view(depth), nblocks, &abort, &out);
    const AbortOnUnwind unwind{&abort};
    // The blocks wait before the first item is written, as a kernel launched with its session does.
    std::this_thread::sleep_for(2ms);
    std::vector<std::int64_t> expected;
    for (std::uint64_t j = 0; j < n; ++j) {
      const std::uint64_t freeing = ring.ticket_freeing_next();
      if (freeing != 0) REQUIRE(wait_for(ring, freeing));
      post(ring, TestItem{j, static_cast<std::int64_t>(value)});
      expected.push_back(static_cast<std::int64_t>(value++));
    }
    REQUIRE(wait_for(ring, n));
    if (ring.ticket_freeing_next() != 0) REQUIRE(wait_for(ring, ring.ticket_freeing_next()));
    ring.post_stop();
    REQUIRE(kernel.finished());
    kernel.join();
    CHECK(kernel.stale == 0);
    CHECK(kernel.aborted == 0);
    std::size_t wrong = 0;
    for (std::uint64_t j = 0; j < n; ++j)
      for (unsigned b = 0; b < nblocks; ++b)
        if (out[j * nblocks + b] != expected[j] * (b + 1)) ++wrong;
    CHECK(wrong == 0);
  }
}

TEST_CASE("session queue: the abort word ends blocks waiting for an item") {
  QueueMemory m(4);
  std::uint32_t abort = 0;
  std::vector<std::int64_t> out(64, 0);
  SessionRing ring = m.ring(4);
  SimulatedSessionKernel kernel(m.view(4), 3, &abort, &out);
  post(ring, TestItem{0, 5});
  REQUIRE(wait_for(ring, 1));
  // Idle blocks wait without a deadline; the word ends them.
  std::this_thread::sleep_for(5ms);
  sync::AtomicWord<std::uint32_t>(&abort).store_release(1u);
  REQUIRE(kernel.finished());
  kernel.join();
  CHECK(kernel.aborted == 3);
  CHECK(ring.completed() == 1);
  CHECK(out[0] == 5);
  CHECK(out[2] == 15);
}

TEST_CASE("session queue: an item after one cut short never completes; the abort word ends it") {
  QueueMemory m(4);
  auto q = m.view(4);
  std::uint32_t abort = 0;
  SessionRing ring = m.ring(4);
  for (std::uint64_t j = 0; j < 2; ++j) post(ring, TestItem{j, 1});
  // Two blocks. Block 0 finishes items 0 and 1; block 1 failed in item 0 (no arrival) but reaches
  // item 1's arrival (as a block of another channel may): it is item 1's last, and item 0 never
  // completes, so it waits for it until the word.
  CHECK(session_item_done(q, 0, 2, &abort));
  CHECK(session_item_done(q, 1, 2, &abort));
  std::atomic<int> result{-1};
  std::thread last([&] { result = session_item_done(q, 1, 2, &abort) ? 1 : 0; });
  std::this_thread::sleep_for(20ms);
  CHECK(result == -1);  // still waiting for item 0
  sync::AtomicWord<std::uint32_t>(&abort).store_release(1u);
  last.join();
  CHECK(result == 0);
  CHECK(ring.completed() == 0);
}

TEST_CASE("session queue: an item's last block publishes it only after the item before it") {
  QueueMemory m(4);
  auto q = m.view(4);
  std::uint32_t abort = 0;
  SessionRing ring = m.ring(4);
  for (std::uint64_t j = 0; j < 2; ++j) post(ring, TestItem{j, 1});
  // Item 1's last arrival comes before item 0's: it waits, and publishes 2 only once 1 is.
  CHECK(session_item_done(q, 0, 2, &abort));
  CHECK(session_item_done(q, 1, 2, &abort));
  std::atomic<int> result{-1};
  std::thread last_of_1([&] { result = session_item_done(q, 1, 2, &abort) ? 1 : 0; });
  std::this_thread::sleep_for(20ms);
  CHECK(result == -1);
  CHECK(ring.completed() == 0);
  CHECK(session_item_done(q, 0, 2, &abort));  // item 0's last arrival
  last_of_1.join();
  CHECK(result == 1);
  CHECK(ring.completed() == 2);
  CHECK(m.arrivals[0] == 0);
  CHECK(m.arrivals[1] == 0);
}

TEST_CASE("session queue: the host's completion word never trails the device's") {
  // The last block of item j publishes j + 1 to the device's word, which the last block of item
  // j + 1 waits for before it publishes j + 2, and to the host's word. Were the device's word
  // written first, the next item's last block could publish j + 2 to the host before this one's
  // j + 1 landed there, and the host's word would go back to j + 1 for good: a host waiting for
  // j + 2 would spin until its test's timeout. So whoever reads the device's word and then the
  // host's must find the host's at least as far: here one block's arrivals against a reader.
  QueueMemory m(4);
  const SessionQueueView q = m.view(4);
  std::uint32_t abort = 0;
  SessionRing ring = m.ring(4);
  const std::uint64_t n = 20'000;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> behind{0};
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      const std::uint64_t device =
          sync::AtomicWord<std::uint64_t, sync::Scope::device>(q.completed).load_acquire();
      if (ring.completed() < device) ++behind;
    }
  });
  std::size_t failed = 0;
  for (std::uint64_t j = 0; j < n; ++j)
    if (!session_item_done(q, j, 1, &abort)) ++failed;
  done.store(true, std::memory_order_release);
  reader.join();
  CHECK(failed == 0);
  CHECK(behind == 0);
  CHECK(ring.completed() == n);
}

TEST_CASE("session driver pace: no query while the queue progresses; one per 100 us once stuck") {
  constexpr std::uint64_t quiet = SessionDriverPace::kQuietNs;
  constexpr std::uint64_t interval = SessionDriverPace::kIntervalNs;
  SessionDriverPace pace;
  const std::uint64_t t0 = 5'000'000;
  // A call that completes within the quiet time asks the driver nothing, however often polled.
  for (std::uint64_t t = t0; t < t0 + quiet; t += 1'000) CHECK_FALSE(pace.due(7, t));
  // A queue that stays stuck: one query at the end of the quiet time, then one per interval.
  int queries = 0;
  for (std::uint64_t t = t0 + quiet; t < t0 + quiet + 10 * interval; t += 1'000)
    queries += pace.due(7, t) ? 1 : 0;
  CHECK(queries == 10);
  // Progress starts a new quiet time.
  const std::uint64_t t1 = t0 + quiet + 10 * interval;
  CHECK_FALSE(pace.due(8, t1));
  CHECK_FALSE(pace.due(8, t1 + quiet - 1));
  CHECK(pace.due(8, t1 + quiet));
  CHECK_FALSE(pace.due(8, t1 + quiet + 1));
  // Calls back to back, one completing every 25 us and each polled five times: no query at all.
  int back_to_back = 0;
  for (std::uint64_t completed = 9; completed < 1009; ++completed)
    for (std::uint64_t k = 0; k < 5; ++k)
      back_to_back += pace.due(completed, t1 + completed * 25'000 + k * 5'000) ? 1 : 0;
  CHECK(back_to_back == 0);
  // A count of zero is progress too, the first time it is seen (a new queue starts there).
  SessionDriverPace fresh;
  CHECK_FALSE(fresh.due(0, t0));
  CHECK(fresh.due(0, t0 + quiet));
}

TEST_CASE("agreement: ranks on threads agree call by call; a late peer is waited for") {
  // Three ranks on a ring, one channel: each block agrees with its two neighbours. A rank runs at
  // most 8 calls ahead of its neighbours (the FIFO between them bounds it on the GPU), so no record
  // it reads is overwritten.
  const int p = 3;
  const std::uint64_t calls = 120;  // the ring of records wraps almost four times
  std::vector<CallRecord> records(static_cast<std::size_t>(p) * kCallRecordRing);
  std::uint32_t abort = 0;
  std::vector<std::atomic<std::uint64_t>> done(p);
  std::vector<int> disagreed(p, 0);
  std::vector<std::thread> ranks;
  ranks.reserve(p);
  for (int r = 0; r < p; ++r)
    ranks.emplace_back([&, r] {
      const std::int32_t peers[] = {(r + p - 1) % p, (r + 1) % p};
      for (std::uint64_t call = 0; call < calls; ++call) {
        for (const std::int32_t q : peers)
          while (done[static_cast<std::size_t>(q)].load() + 8 < call) std::this_thread::yield();
        if (r == 2 && call % 40 == 0) std::this_thread::sleep_for(2ms);  // a late rank
        const AgreementOutcome o = agree_on_call_records(
            records.data(), 1, r, 0, peers, 2, call, args(1000 + call % 7), &abort, 10'000'000'000);
        if (o.result != Agreement::agreed) ++disagreed[static_cast<std::size_t>(r)];
        done[static_cast<std::size_t>(r)].store(call + 1);
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < p; ++r) CHECK(disagreed[static_cast<std::size_t>(r)] == 0);
}

TEST_CASE("agreement: a peer with other arguments, a peer that never calls, the abort word") {
  std::vector<CallRecord> records(static_cast<std::size_t>(3) * 2 * kCallRecordRing);
  std::uint32_t abort = 0;
  auto ring = [&](int rank, std::uint32_t channel) {
    return records.data() + (static_cast<std::size_t>(rank) * 2 + channel) * kCallRecordRing;
  };
  const std::int32_t peers01[] = {1};
  // Rank 1, channel 1, published call 0 with another count, on another thread, after a while.
  std::thread other([&] {
    std::this_thread::sleep_for(5ms);
    publish_call(ring(1, 1), 0, args(4000));
  });
  AgreementOutcome o = agree_on_call_records(records.data(), 2, 0, 1, peers01, 1, 0, args(4096),
                                             &abort, 10'000'000'000);
  other.join();
  CHECK(o.result == Agreement::differs);
  CHECK(o.peer == 1);
  CHECK(o.theirs == args(4000));
  // Rank 0's own record of the call is published for its peers.
  CallArguments mine;
  CHECK(check_peer_call(ring(0, 1), 0, args(4096), &mine) == CallCheck::same);
  // Channel 0 of rank 1 never calls: a timeout naming it, after the timeout and not long after.
  const auto t0 = std::chrono::steady_clock::now();
  o = agree_on_call_records(records.data(), 2, 0, 0, peers01, 1, 0, args(4096), &abort, 30'000'000);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(o.result == Agreement::timeout);
  CHECK(o.peer == 1);
  CHECK(ms >= 29.0);
  CHECK(ms < 2000.0);
  // The abort word ends a wait without a deadline.
  std::thread raise([&] {
    std::this_thread::sleep_for(5ms);
    sync::AtomicWord<std::uint32_t>(&abort).store_release(1u);
  });
  const std::int32_t peers2[] = {2};
  o = agree_on_call_records(records.data(), 2, 0, 0, peers2, 1, 1, args(4096), &abort, 0);
  raise.join();
  CHECK(o.result == Agreement::aborted);
  CHECK(o.peer == 2);
  // No peers: nothing to wait for.
  o = agree_on_call_records(records.data(), 2, 2, 0, nullptr, 0, 0, args(1), &abort, 1);
  CHECK(o.result == Agreement::agreed);
}

TEST_CASE("agreement: the mismatch every rank reports is the lowest call, then the lowest pair") {
  std::vector<CallMismatch> found(6);
  CHECK(first_mismatch(found.data(), found.size()) == nullptr);
  found[4].seq = 8;
  found[4].rank = 2;
  found[4].peer = 1;
  found[1].seq = 8;
  found[1].rank = 0;
  found[1].peer = 1;
  found[5].seq = 9;
  found[5].rank = 0;
  found[5].peer = 2;
  const CallMismatch* m = first_mismatch(found.data(), found.size());
  REQUIRE(m != nullptr);
  CHECK(m == &found[1]);
  found[3].seq = 3;
  found[3].rank = 1;
  found[3].peer = 2;
  CHECK(first_mismatch(found.data(), found.size()) == &found[3]);
}

TEST_CASE("failure root cause: the block that waited for a peer with no failure of its own") {
  using sync::WaitResult;
  // Ring of 3, rank 1 missing: rank 2 waits for rank 1 (no record: the cause), rank 0 waits for
  // rank 2 and timed out first. Records in any order, with unused (Ok) entries between.
  std::vector<BlockFailure> board(6);
  board[0] = failure(0, 0, WaitResult::Timeout, 2, 100, 1);
  board[4] = failure(2, 0, WaitResult::Timeout, 1, 200, 3);
  board[5] = failure(0, 1, WaitResult::Aborted, 1, 150, 1);
  RootCause root = find_root_cause(board.data(), board.size());
  REQUIRE(root.cause != nullptr);
  CHECK(root.cause == &board[4]);
  CHECK(root.conclusive);
  CHECK(root.stopped == 3);
  CHECK(describe_stop(*root.cause) ==
        "rank 2, channel 0, step 3: waiting for a message from rank 1");

  // A peer's failure on another channel does not explain this channel's wait.
  board[2] = failure(1, 1, WaitResult::Aborted, 0, 300);
  root = find_root_cause(board.data(), board.size());
  CHECK(root.cause == &board[4]);
  // Once rank 1 channel 0 has failed too, every waited-for peer failed: the earliest timeout,
  // inconclusive (a record may not have landed yet).
  board[1] = failure(1, 0, WaitResult::Aborted, 0, 250);
  root = find_root_cause(board.data(), board.size());
  CHECK(root.cause == &board[0]);
  CHECK_FALSE(root.conclusive);
  CHECK(root.stopped == 5);
}

TEST_CASE("failure root cause: the stuck block saw the word before its deadline") {
  using sync::WaitResult;
  // Ring of 4 without rank 1's program (the GPU test's broken plan): every block's deadline starts
  // with the call, so rank 0 (waiting for rank 3) may time out a microsecond before rank 2, which
  // waits for rank 1 and then sees the word instead. Rank 2 is still the one stuck on a peer that
  // never failed.
  std::vector<BlockFailure> board(4);
  board[0] = failure(0, 0, WaitResult::Timeout, 3, 100, 3);
  board[2] = failure(2, 0, WaitResult::Aborted, 1, 104, 0);
  board[3] = failure(3, 0, WaitResult::Aborted, 2, 103, 1);
  const RootCause root = find_root_cause(board.data(), board.size());
  REQUIRE(root.cause == &board[2]);
  CHECK(root.conclusive);
  CHECK(root.stopped == 3);
  CHECK(describe_stop(*root.cause) ==
        "rank 2, channel 0, step 0: waiting for a message from rank 1");
}

TEST_CASE("failure root cause among plans: the plan of the earliest timeout alone") {
  using sync::WaitResult;
  // Plan A failed as the H200's broken ring did. A call of plan B, queued behind it, stopped at
  // once on the raised word: its rank 1 waits for rank 0, which did not fail in plan B. Merged,
  // plan B's rank 1 would pass for a failed peer of plan A's rank 2.
  std::vector<std::vector<BlockFailure>> plans(2, std::vector<BlockFailure>(4));
  plans[0][0] = failure(0, 0, WaitResult::Timeout, 3, 100, 3);
  plans[0][2] = failure(2, 0, WaitResult::Aborted, 1, 104, 1);
  plans[0][3] = failure(3, 0, WaitResult::Aborted, 2, 103, 1);
  plans[1][1] = failure(1, 0, WaitResult::Aborted, 0, 900, 0);
  RootCause root = find_root_cause_among_plans(plans);
  REQUIRE(root.cause == &plans[0][2]);
  CHECK(root.conclusive);
  CHECK(root.stopped == 4);
  std::vector<BlockFailure> merged;
  for (const auto& p : plans) merged.insert(merged.end(), p.begin(), p.end());
  CHECK(find_root_cause(merged.data(), merged.size()).cause->rank != 2);
  // Only aborts in every plan: the host's abort(), no cause.
  plans[0][0].step.result = WaitResult::Aborted;
  root = find_root_cause_among_plans(plans);
  CHECK(root.cause == nullptr);
  CHECK(root.conclusive);
  CHECK(root.stopped == 4);
}

TEST_CASE("failure root cause: timeouts before aborts; only aborts: the host's abort()") {
  using sync::WaitResult;
  std::vector<BlockFailure> board;
  // Only aborts: no cause, conclusive (the host raised the word).
  board.push_back(failure(0, 0, WaitResult::Aborted, 1, 10));
  board.push_back(failure(1, 0, WaitResult::Aborted, 0, 11));
  RootCause root = find_root_cause(board.data(), board.size());
  CHECK(root.cause == nullptr);
  CHECK(root.conclusive);
  CHECK(root.stopped == 2);
  // An aborted block waiting for a healthy peer, and a later timeout waiting for a healthy peer:
  // the timeout is the cause.
  board.clear();
  board.push_back(failure(0, 0, WaitResult::Aborted, 3, 10));
  board.push_back(failure(1, 0, WaitResult::Timeout, 2, 50, kAgreementStep));
  root = find_root_cause(board.data(), board.size());
  CHECK(root.cause == &board[1]);
  CHECK(describe_stop(*root.cause) ==
        "rank 1, channel 0, before its first step: waiting for rank 2 to start the same call");
  // The timeout waits for a failed peer: the aborted block with a healthy peer is the cause.
  board.push_back(failure(2, 0, WaitResult::Aborted, 1, 60));
  root = find_root_cause(board.data(), board.size());
  CHECK(root.cause == &board[0]);
  CHECK(root.conclusive);
  // Among timeouts with healthy peers, the earliest; a slot wait says so.
  board.push_back(failure(3, 0, WaitResult::Timeout, 4, 40, 2));
  board.back().step.waiting_for_slot = true;
  root = find_root_cause(board.data(), board.size());
  CHECK(root.cause == &board[3]);
  CHECK(describe_stop(*root.cause) ==
        "rank 3, channel 0, step 2: waiting for a free slot at rank 4");
}

namespace {

// A random connection set of `nranks` ranks on 1-3 channels (each ordered pair joined or not), in
// the order a PlanCache keeps its keys.
std::vector<ccoll::runtime::ConnectionKey> random_connection_set(std::mt19937& rng, int nranks) {
  std::vector<ccoll::runtime::ConnectionKey> keys;
  const std::uint32_t nch = 1 + rng() % 3;
  for (std::uint32_t ch = 0; ch < nch; ++ch)
    for (int a = 0; a < nranks; ++a)
      for (int b = 0; b < nranks; ++b)
        if (a != b && rng() % 2 == 0)
          keys.push_back(
              {ch, static_cast<ccoll::plan::Rank>(a), static_cast<ccoll::plan::Rank>(b)});
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace

TEST_CASE(
    "p2p FIFO layout: a connection's slots and tail in its receiver, its head in its sender") {
  using ccoll::transport::cuda::P2PFifoLayout;
  std::mt19937 rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    const int nranks = 1 + static_cast<int>(rng() % 8);
    const std::uint32_t nslots = 1 + rng() % 4;
    const std::uint64_t stride = 128 * (1 + rng() % 4);
    const std::uint64_t ll_slot = rng() % 2 == 0 ? 0 : 128 * (1 + rng() % 3);
    const std::vector<ccoll::runtime::ConnectionKey> keys = random_connection_set(rng, nranks);
    for (int rank = 0; rank < nranks; ++rank) {
      CAPTURE(iter);
      CAPTURE(rank);
      CAPTURE(ll_slot);
      const P2PFifoLayout l = P2PFifoLayout::make(keys, rank, stride, nslots, ll_slot);
      REQUIRE(l.slots.size() == keys.size());
      REQUIRE(l.ll_slots.size() == keys.size());
      // [begin, end) of every region this rank's memory holds: none may overlap or leave it.
      std::vector<std::pair<std::uint64_t, std::uint64_t>> regions;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const bool in = keys[i].to == rank, out = keys[i].from == rank;
        CHECK((l.slots[i] != P2PFifoLayout::kNone) == in);
        CHECK((l.tail[i] != P2PFifoLayout::kNone) == in);
        CHECK((l.head[i] != P2PFifoLayout::kNone) == out);
        CHECK((l.ll_slots[i] != P2PFifoLayout::kNone) == (in && ll_slot > 0));
        if (in && ll_slot > 0) {
          regions.emplace_back(l.ll_slots[i], l.ll_slots[i] + ll_slot * nslots);
          CHECK(l.ll_slots[i] % 128 == 0);  // LL slots on whole device lines
        }
        if (in) {
          regions.emplace_back(l.slots[i], l.slots[i] + stride * nslots);
          regions.emplace_back(l.tail[i], l.tail[i] + ccoll::sync::kCounterStride);
          CHECK(l.tail[i] % ccoll::sync::kCounterStride == 0);  // a counter per line
        }
        if (out) {
          regions.emplace_back(l.head[i], l.head[i] + ccoll::sync::kCounterStride);
          CHECK(l.head[i] % ccoll::sync::kCounterStride == 0);
        }
      }
      std::sort(regions.begin(), regions.end());
      for (std::size_t k = 0; k < regions.size(); ++k) {
        CHECK(regions[k].second <= l.total);
        if (k > 0) CHECK(regions[k - 1].second <= regions[k].first);
      }
      CHECK(l.total >= ccoll::sync::kCounterStride);
    }
  }
}

TEST_CASE("cuda-p2p threads: each rank's device, by default round robin, checked") {
  P2POptions o;
  CHECK(rank_devices(o, 5, 2) == std::vector<int>{0, 1, 0, 1, 0});
  CHECK(rank_devices(o, 3, 8) == std::vector<int>{0, 1, 2});
  o.devices = {3, 3, 1};
  CHECK(rank_devices(o, 3, 4) == std::vector<int>{3, 3, 1});
  CHECK_THROWS_WITH_AS(
      rank_devices(o, 4, 4),
      doctest::Contains("argument 'cuda::P2POptions::devices': expected 4 devices"), ccoll::Error);
  CHECK_THROWS_WITH_AS(
      rank_devices(o, 3, 2),
      doctest::Contains("argument 'cuda::P2POptions::devices[0]': expected a device in 0..1"),
      ccoll::Error);
  // Peer access: each pair of distinct devices a connection joins, once, lower device first.
  const std::vector<int> devices{0, 0, 1, 2};
  const std::vector<ccoll::runtime::ConnectionKey> keys{{0, 0, 1}, {0, 1, 2}, {0, 2, 1}, {0, 3, 2},
                                                        {1, 2, 0}, {1, 0, 3}, {1, 3, 0}};
  const std::vector<DevicePair> want{{0, 1, 1, 2}, {0, 2, 0, 3}, {1, 2, 2, 3}};
  CHECK(connected_device_pairs(keys, devices) == want);
  CHECK(connected_device_pairs(keys, {0, 0, 0, 0}).empty());
}

TEST_CASE("cuda-p2p connections: slots and tail in the receiver's memory, head in the sender's") {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 100; ++iter) {
    const int nranks = 2 + static_cast<int>(rng() % 7);
    const std::uint32_t nslots = 1 + rng() % 4;
    const std::uint64_t stride = slot_stride(100 + rng() % 2000);
    const std::uint64_t ll_slot = rng() % 2 == 0 ? 0 : p2p_low_latency_slot_bytes(stride);
    const std::vector<ccoll::runtime::ConnectionKey> keys = random_connection_set(rng, nranks);
    std::vector<P2PFifoLayout> layouts;
    std::vector<std::vector<std::byte>> memory(static_cast<std::size_t>(nranks));
    std::vector<std::byte*> bases;
    for (int r = 0; r < nranks; ++r) {
      layouts.push_back(P2PFifoLayout::make(keys, r, stride, nslots, ll_slot));
      memory[static_cast<std::size_t>(r)].resize(layouts.back().total);
      // Ranks of another process: not mapped here (rank 0 always is).
      bases.push_back(r > 0 && rng() % 4 == 0 ? nullptr
                                              : memory[static_cast<std::size_t>(r)].data());
    }
    const auto in = [&](const void* p, std::size_t r, std::uint64_t bytes) {
      const auto* b = memory[r].data();
      const auto* q = static_cast<const std::byte*>(p);
      return q >= b && q + bytes <= b + memory[r].size();
    };
    const auto refs = p2p_connection_refs(keys, layouts, bases, stride, nslots, ll_slot);
    REQUIRE(refs.size() == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      CAPTURE(iter);
      CAPTURE(i);
      const auto to = static_cast<std::size_t>(keys[i].to);
      const auto from = static_cast<std::size_t>(keys[i].from);
      const auto& c = refs[i];
      CHECK(c.from == keys[i].from);
      CHECK(c.to == keys[i].to);
      CHECK(c.slot_bytes == stride);
      CHECK(c.nslots == nslots);
      if (bases[to] == nullptr || bases[from] == nullptr) {
        CHECK(c.slots == nullptr);
        CHECK(c.head == nullptr);
        CHECK(c.tail == nullptr);
        CHECK_FALSE(c.has_low_latency());
        continue;
      }
      CHECK(c.has_low_latency() == (ll_slot > 0));
      if (ll_slot > 0) {
        CHECK(c.ll_slot_bytes == ll_slot);
        CHECK(in(c.ll_slots, to, ll_slot * nslots));
        CHECK(c.ll_slots == bases[to] + layouts[to].ll_slots[i]);
        // Message m's lines are in LL slot m % nslots.
        CHECK(reinterpret_cast<std::byte*>(c.ll_lines(nslots + 1)) ==
              c.ll_slots + (nslots == 1 ? 0 : ll_slot));
      }
      CHECK(in(c.slots, to, stride * nslots));
      CHECK(in(c.tail, to, sizeof(std::uint64_t)));
      CHECK(in(c.head, from, sizeof(std::uint64_t)));
      CHECK(c.slots == bases[to] + layouts[to].slots[i]);
      CHECK(c.tail == reinterpret_cast<std::uint64_t*>(bases[to] + layouts[to].tail[i]));
      CHECK(c.head == reinterpret_cast<std::uint64_t*>(bases[from] + layouts[from].head[i]));
    }
  }
  CHECK(slot_stride(1024) == 1152);  // 1024 + 16 bytes of slack, on 128-byte lines
  CHECK(slot_stride(1) == 128);
  CHECK(p2p_low_latency_slot_bytes(slot_stride(1 << 20)) == 64 * 1024);
  CHECK(p2p_low_latency_slot_bytes(slot_stride(1024)) == 1152);
}

namespace {

// A communicator's connection set as the plan cache numbers it: one index per (channel, from, to)
// in order of first appearance; set_index maps the plan's connections onto it.
struct ConnectionSet {
  std::vector<std::uint32_t> index_of(const plan::Plan& p) {
    std::vector<std::uint32_t> set_index;
    for (const plan::Connection& c : p.connections) {
      const runtime::ConnectionKey key{c.channel, c.from, c.to};
      auto at = std::find_if(keys.begin(), keys.end(), [&](const runtime::ConnectionKey& k) {
        return !(k < key) && !(key < k);
      });
      if (at == keys.end()) at = keys.insert(keys.end(), key);
      set_index.push_back(static_cast<std::uint32_t>(at - keys.begin()));
    }
    return set_index;
  }
  std::vector<runtime::ConnectionKey> keys;
};

}  // namespace

TEST_CASE("cuda-p2p: every plan of a communicator uses each connection from the same blocks") {
  const std::vector<std::uint64_t> counts = {1, 33, 4099, 10000, 65537, 1u << 20, 1u << 24};
  SUBCASE("one algorithm, Simple and LowLatency plans, every count: admitted") {
    for (const char* name : {"ring", "tree", "dbtree", "direct", "oneshot", "recdoubling", "ps"})
      for (int p = 2; p <= 8; ++p)
        for (const bool overlap : {false, true}) {
          CAPTURE(name);
          CAPTURE(p);
          CAPTURE(overlap);
          algo::AlgorithmRequest areq;
          areq.nranks = p;
          const algo::Registered reg = algo::make_algorithm(name, areq);
          ConnectionSet set;
          ConnectionBlocks blocks;
          for (const std::uint64_t count : counts)
            for (const bool ll : {false, true}) {
              plan::PlanRequest r;
              r.nranks = p;
              r.count = count;
              r.nchannels = 2;
              r.overlap = overlap;
              const plan::Plan plan =
                  ll ? protocol::build_for(protocol::Id::low_latency, r,
                                           [&](const plan::PlanRequest& q) { return reg.build(q); })
                     : reg.build(r);
              CHECK(blocks.admit(plan, set.index_of(plan)) == "");
            }
        }
  }
  SUBCASE("blink, forest and hdbtree on every preset of at most 16 GPUs, every count: admitted") {
    ccoll::testing::Sweep sweep;  // a share of the cases under a sanitizer (tests/sweep.hpp)
    for (const algo::Algorithm& a : algo::algorithms()) {
      if (!a.needs_topology) continue;
      for (const std::string& name : physical::preset_names()) {
        if (!sweep.take()) continue;
        const physical::PhysicalTopology t = physical::preset(name);
        algo::AlgorithmRequest areq;
        areq.topology = &t;
        const algo::Registered reg = algo::make_algorithm(a, areq);
        if (reg.nranks() > 16) continue;
        for (const bool overlap : {false, true})
          for (const std::uint32_t nchannels : {1u, 2u}) {
            CAPTURE(a.name);
            CAPTURE(name);
            CAPTURE(overlap);
            CAPTURE(nchannels);
            ConnectionSet set;
            ConnectionBlocks blocks;
            for (const std::uint64_t count : counts) {
              plan::PlanRequest r;
              r.nranks = reg.nranks();
              r.count = count;
              r.nchannels = nchannels;
              r.overlap = overlap;
              const plan::Plan plan = reg.build(r);
              CHECK(blocks.admit(plan, set.index_of(plan)) == "");
            }
          }
      }
    }
  }
  SUBCASE("relays run inside ranks, every collective, counts and roots in call order: admitted") {
    // A placed relay program runs on a channel of its host's (plan/placement.hpp); which one may
    // not depend on which of the relay's programs a count or a root leaves empty.
    const std::vector<std::uint64_t> order = {40960, 1, 7, 300, 4099, 1u << 20, 2};
    ccoll::testing::Sweep sweep;  // a share of the cases under a sanitizer (tests/sweep.hpp)
    for (const std::string preset : {"ring:4", "ring:5", "ring:6", "torus:2x3", "dgx1v"})
      for (const std::string name : {"ring", "tree", "dbtree", "direct"}) {
        const physical::PhysicalTopology t = physical::preset(preset);
        algo::AlgorithmRequest areq;
        areq.topology = &t;
        const algo::Registered reg = algo::make_algorithm(name, areq);
        for (const plan::Collective collective :
             {plan::Collective::allreduce, plan::Collective::reduce_scatter,
              plan::Collective::all_gather, plan::Collective::broadcast, plan::Collective::reduce})
          for (const std::uint32_t nchannels : {1u, 2u}) {
            if (!sweep.take()) continue;
            CAPTURE(preset);
            CAPTURE(name);
            CAPTURE(plan::collective_name(collective));
            CAPTURE(nchannels);
            if (!algo::plans_collective(reg, collective)) continue;
            ConnectionSet set;
            ConnectionBlocks blocks;
            const int roots = plan::has_root(collective) ? reg.nranks() : 1;
            for (std::size_t i = 0; i < order.size(); ++i)
              for (int k = 0; k < roots; ++k)
                for (const bool ll : {false, true}) {
                  plan::PlanRequest r;
                  r.nranks = reg.nranks();
                  // Each count a multiple of the active ranks (reduce-scatter, all-gather).
                  r.count = order[i] * static_cast<std::uint64_t>(reg.nranks());
                  r.nchannels = nchannels;
                  r.collective = collective;
                  r.root = (k + static_cast<int>(i)) % roots;  // roots in a different order
                  const plan::Plan p = ll ? protocol::build_for(protocol::Id::low_latency, r,
                                                                [&](const plan::PlanRequest& q) {
                                                                  return reg.build(q);
                                                                })
                                          : reg.build(r);
                  CAPTURE(r.count);
                  CAPTURE(r.root);
                  CAPTURE(ll);
                  CHECK(blocks.admit(p, set.index_of(p)) == "");
                }
          }
      }
  }
  SUBCASE("ring, then direct on the same connections: refused, nothing recorded") {
    // Direct runs some connections of one channel from another channel's programs, which a ring
    // runs from their own channel's (`auto` with two channels mixes such plans).
    const auto build = [](const char* name, bool overlap, std::uint64_t count) {
      algo::AlgorithmRequest areq;
      areq.nranks = 4;
      plan::PlanRequest r;
      r.nranks = 4;
      r.count = count;
      r.nchannels = 2;
      r.overlap = overlap;
      return algo::make_algorithm(name, areq).build(r);
    };
    const plan::Plan ring = build("ring", false, 1u << 20);
    const plan::Plan direct = build("direct", false, 4096);
    ConnectionSet set;
    ConnectionBlocks blocks;
    const std::vector<std::uint32_t> ring_index = set.index_of(ring);
    const std::vector<std::uint32_t> direct_index = set.index_of(direct);
    CHECK(blocks.admit(ring, ring_index) == "");
    const std::string refused = blocks.admit(direct, direct_index);
    CHECK(refused.find("from block") != std::string::npos);
    CHECK(refused.find("one algorithm per communicator") != std::string::npos);
    // The refused plan left nothing behind: it is refused alike again, and the ring still runs.
    CHECK(blocks.admit(direct, direct_index) == refused);
    CHECK(blocks.admit(ring, ring_index) == "");
    // In the other order direct runs and the ring is refused.
    ConnectionBlocks other;
    CHECK(other.admit(direct, direct_index) == "");
    CHECK(other.admit(ring, ring_index) != "");
  }
}

TEST_CASE("an executor's channels are its plans' channels, which every plan fits") {
  // A GPU block per channel (cuda-p2p a kernel of this many blocks per rank, cuda-virtual a
  // cooperative launch of ranks x this many): what plans' programs run on, not the connections'
  // labels, which placed relays number beyond (a 4 x 4 torus' dbtree labels 125 channels for 9
  // that carry programs).
  using Cache = runtime::PlanCache<sync::ConnectionRef>;
  bool any_padded = false;
  ccoll::testing::Sweep sweep;  // a share of the cases under a sanitizer (tests/sweep.hpp)
  const auto check = [&any_padded, &sweep](const std::string& what, const algo::Registered& reg,
                                           plan::Collective collective, std::uint32_t nchannels,
                                           int nranks = 0, bool always = false) {
    if (!sweep.take() && !always) return 0u;
    if (nranks == 0) nranks = reg.nranks();
    CAPTURE(what);
    CAPTURE(plan::collective_name(collective));
    CAPTURE(nchannels);
    Config config;
    config.nranks = nranks;
    config.nchannels = nchannels;
    config.slot_bytes = 4096;
    const runtime::PlanSource source = [&](const plan::PlanRequest& r) {
      plan::PlanRequest q = r;
      q.collective = collective;
      return reg.build(q);
    };
    Cache cache(config, nranks, source, "test");
    cache.set_connections(std::vector<sync::ConnectionRef>(cache.keys().size()));
    const std::uint32_t blocks = runtime::executor_channels(cache, config);
    std::uint32_t labels = 0, most = 0;
    bool padded = false;  // a plan with trailing empty channels (auto's)
    const int roots = plan::has_root(collective) ? nranks : 1;
    // Counts across `auto`'s size classes in every element size; multiples of the ranks where the
    // collective is cut into blocks, any count elsewhere.
    const std::uint64_t step =
        plan::has_blocks(collective) ? static_cast<std::uint64_t>(nranks) : 1;
    const bool by_size = reg.name.rfind("auto", 0) == 0;
    const std::vector<std::size_t> elems =
        by_size ? std::vector<std::size_t>{1, 4, 8} : std::vector<std::size_t>{4};
    for (const std::size_t elem : elems)
      for (const std::uint64_t count :
           {1ull, 3ull, 64ull, 1000ull, 4099ull, 16385ull, 262147ull, 1ull << 20})
        for (int root = 0; root < roots; ++root) {
          CAPTURE(elem);
          CAPTURE(count);
          CAPTURE(root);
          const auto pp = cache.prepared(count * step, elem, root);
          most = std::max(most, static_cast<std::uint32_t>(pp->plan.channels.size()));
          for (const plan::Connection& c : pp->plan.connections)
            labels = std::max(labels, c.channel + 1);
          CHECK(pp->plan.channels.size() <= blocks);
          // What a GPU launches: up to the last channel with a step anywhere.
          const plan::Plan& q = pp->plan;
          const std::uint32_t in_use = q.channels_in_use();
          CHECK(in_use >= 1);
          CHECK(in_use <= std::max<std::size_t>(1, q.channels.size()));
          for (std::uint32_t c = in_use; c < q.channels.size(); ++c)
            for (const plan::Program& prog : q.channels[c].programs) CHECK(prog.steps.empty());
          if (in_use > 1) {
            const auto& last = q.channels[in_use - 1].programs;
            CHECK(std::any_of(last.begin(), last.end(),
                              [](const plan::Program& prog) { return !prog.steps.empty(); }));
          }
          padded = padded || in_use < q.channels.size();
        }
    CHECK(blocks == std::max(most, std::max(nchannels, 1u)));
    if (by_size) any_padded = any_padded || padded;
    return labels;
  };
  const physical::PhysicalTopology torus = physical::preset("torus:4x4");
  algo::AlgorithmRequest on_torus;
  on_torus.topology = &torus;
  CHECK(check("dbtree on torus:4x4", algo::make_algorithm("dbtree", on_torus),
              plan::Collective::allreduce, 1, 0, true) > 100);
  for (const std::string preset : {"ring:4", "ring:5", "torus:2x3", "dgx1v"})
    for (const std::string name : {"ring", "tree", "dbtree", "direct", "auto"}) {
      const physical::PhysicalTopology t = physical::preset(preset);
      algo::AlgorithmRequest areq;
      areq.topology = &t;
      const algo::Registered reg = algo::make_algorithm(name, areq);
      if (reg.hosted_relays == 0) continue;  // (dgx1v: dbtree's detours only)
      for (const plan::Collective c :
           {plan::Collective::allreduce, plan::Collective::reduce_scatter,
            plan::Collective::all_gather, plan::Collective::broadcast, plan::Collective::reduce})
        for (const std::uint32_t nch : {1u, 2u}) {
          if (!algo::plans_collective(reg, c)) continue;
          std::string what = name;
          what += " on ";
          what += preset;
          check(what, reg, c, nch);
        }
    }
  // A table whose first rule gets only counts below the ranks (one 4-byte element): its plans,
  // whose relays the ring's leave out, still fit.
  {
    const physical::PhysicalTopology ring5 = physical::preset("ring:5");
    algo::AlgorithmRequest areq;
    areq.topology = &ring5;
    algo::SizeRule tiny;
    tiny.algorithm = "oneshot";
    tiny.max_bytes = 4;
    algo::SizeRule rest;
    rest.algorithm = "ring";
    const algo::Registered reg =
        algo::on_graph(algo::registered_by_size(areq, algo::TuningTable{{tiny, rest}}), ring5);
    for (const std::uint32_t nch : {1u, 2u})
      check("oneshot up to 4 bytes, then ring, on ring:5", reg, plan::Collective::allreduce, nch);
  }
  // `auto` on abstract ranks chooses among algorithms of different channel counts.
  for (int p = 2; p <= 8; ++p)
    for (const std::uint32_t nch : {1u, 2u, 4u}) {
      algo::AlgorithmRequest areq;
      areq.nranks = p;
      std::string what = "auto on ";
      what += std::to_string(p);
      what += " ranks";
      check(what, algo::make_algorithm("auto", areq), plan::Collective::allreduce, nch, p);
    }
  // auto's padding, for which the GPU executors launch no blocks (every case taken)
  if (ccoll::testing::sweep_share().stride == 1) CHECK(any_padded);
}

TEST_CASE("cuda-p2p runs a plan as LowLatency from the plan and the configuration alone") {
  // The decision every rank of a job makes for itself: it must not depend on which peers' memory
  // a process maps (a process sees LL slots only on its own connections).
  ccoll::plan::PlanRequest req;
  req.nranks = 3;
  req.elem_size = 4;
  req.slot_bytes = 256 << 10;
  const auto ring = [&](std::uint64_t count, ccoll::protocol::Id id) {
    req.count = count;
    return ccoll::protocol::build_for(
        id, req, [](const ccoll::plan::PlanRequest& r) { return ccoll::plan::build_ring(r); });
  };
  const std::uint64_t ll_slot = p2p_low_latency_slot_bytes(slot_stride(req.slot_bytes));
  CHECK(ll_slot == kMaxLowLatencySlotBytes);
  CHECK(p2p_runs_low_latency(ring(1000, ccoll::protocol::Id::low_latency), 4, ll_slot));
  CHECK_FALSE(p2p_runs_low_latency(ring(1000, ccoll::protocol::Id::low_latency), 4, 0));
  CHECK_FALSE(p2p_runs_low_latency(ring(1000, ccoll::protocol::Id::simple), 4, ll_slot));
  // Messages of 128 KiB less 8 bytes: lines beyond the 64 KiB LL slot, so Simple.
  const ccoll::plan::Plan large = ring(std::uint64_t{1} << 20, ccoll::protocol::Id::low_latency);
  CHECK(ccoll::protocol::is_low_latency(large));
  CHECK_FALSE(p2p_runs_low_latency(large, 4, ll_slot));
  // The boundary: messages of 8190 floats take 8190 data lines and 2 trailer lines, 64 KiB
  // exactly; 8191 floats take a line more.
  CHECK(p2p_runs_low_latency(ring(3 * 8190, ccoll::protocol::Id::low_latency), 4, ll_slot));
  CHECK_FALSE(p2p_runs_low_latency(ring(3 * 8191, ccoll::protocol::Id::low_latency), 4, ll_slot));
}

TEST_CASE("LowLatency slots of a GPU plan hold its largest message, lines and trailer") {
  // A GPU plan's LL slots (cuda-virtual's own per plan; cuda-p2p's must be at least this large to
  // run the plan as LowLatency): the flagged lines of the largest message, on whole lines.
  using ccoll::protocol::LowLatency;
  for (const char* name : {"ring", "dbtree", "direct", "oneshot"})
    for (int p : {2, 3, 8})
      // Counts whose messages are whole multiples of 64 bytes too, whose data lines fill whole
      // 128-byte lines: the trailer then needs a line more.
      for (std::uint64_t count : {1ul, 5ul, 16ul * p, 64ul * p, 1000ul, 100000ul})
        for (std::uint64_t elem : {1u, 2u, 4u, 8u}) {
          CAPTURE(name);
          CAPTURE(p);
          CAPTURE(count);
          CAPTURE(elem);
          ccoll::plan::PlanRequest req;
          req.nranks = p;
          req.count = count;
          req.elem_size = elem;
          req.slot_bytes = 64 << 10;
          req.nslots = 4;
          ccoll::algo::AlgorithmRequest areq;
          areq.nranks = p;
          const auto topo =
              ccoll::algo::make_algorithm(ccoll::algo::find_algorithm(name).algorithm, areq);
          const ccoll::plan::Plan pl = ccoll::protocol::build_for(
              ccoll::protocol::Id::low_latency, req,
              [&](const ccoll::plan::PlanRequest& r) { return topo.build(r); });
          const std::uint64_t ll = low_latency_slot_bytes(pl, elem);
          CHECK(ll % 128 == 0);
          std::uint64_t largest = 0;
          for (const auto& ch : pl.channels)
            for (const auto& prog : ch.programs)
              for (const auto& s : prog.steps)
                if (s.recv_count + s.send_count > 0) largest = std::max(largest, s.count);
          CHECK(LowLatency::lines(largest * elem) * LowLatency::kLineBytes <= ll);
          CHECK(ll < LowLatency::lines(largest * elem) * LowLatency::kLineBytes + 128);
          CHECK(largest <= pl.slot_elems);
          // Never more than the Simple slot the plan was chunked for (less its slack).
          CHECK(ll <= slot_stride(req.slot_bytes));
        }
  // Fixed points: a ring of 2 ranks at 32 floats, one channel, moves messages of 16 floats, 64
  // bytes: 16 data lines fill a device line, and the trailer takes a second one. 28 floats move
  // 14-float messages, whose 14 lines and trailer fill one device line exactly.
  ccoll::plan::PlanRequest req;
  req.nranks = 2;
  req.count = 32;
  req.elem_size = 4;
  req.slot_bytes = 64 << 10;
  const auto ring_of = [&](std::uint64_t count) {
    req.count = count;
    return ccoll::protocol::build_for(
        ccoll::protocol::Id::low_latency, req,
        [](const ccoll::plan::PlanRequest& r) { return ccoll::plan::build_ring(r); });
  };
  CHECK(low_latency_slot_bytes(ring_of(32), 4) == 256);
  CHECK(low_latency_slot_bytes(ring_of(28), 4) == 128);
  CHECK(low_latency_slot_bytes(ring_of(2), 4) == 128);
}

namespace {

// Plans of several shapes: a ring (one connection per neighbour and channel), a double binary
// tree (two trees), direct (every pair) and a rooted chain broadcast (a rank with nothing to send).
std::vector<ccoll::plan::Plan> table_plans(int nranks, std::uint32_t nchannels) {
  ccoll::plan::PlanRequest req;
  req.nranks = nranks;
  req.count = 1000 + static_cast<std::uint64_t>(nranks) * 37;
  req.nchannels = nchannels;
  req.slot_bytes = 1024;
  req.nslots = 2;
  std::vector<ccoll::plan::Plan> plans{ccoll::plan::build_ring(req),
                                       ccoll::plan::build_direct(req)};
  if (nranks > 1) plans.push_back(ccoll::plan::build_double_binary_tree(req));
  req.collective = ccoll::plan::Collective::broadcast;
  req.root = nranks - 1;
  plans.push_back(ccoll::plan::build_chain_broadcast(req));
  return plans;
}

}  // namespace

TEST_CASE("block tables: each block's steps and base advances, as the kernels read them") {
  for (int nranks = 1; nranks <= 6; ++nranks)
    for (std::uint32_t nch = 1; nch <= 3; ++nch)
      for (const ccoll::plan::Plan& p : table_plans(nranks, nch)) {
        CAPTURE(p.algorithm);
        CAPTURE(nranks);
        CAPTURE(nch);
        const std::size_t nconn = p.connections.size();
        const auto plan_channels = static_cast<std::uint32_t>(p.channels.size());
        // cuda-virtual's tables: a block per (channel, rank) on the plan's connections.
        BlockTablesImage image;
        for (std::uint32_t c = 0; c < plan_channels; ++c)
          for (int r = 0; r < p.nranks; ++r)
            CHECK(image.add_block(p, c, r, p.ports, nconn) == c * p.nranks + r);
        REQUIRE(image.programs.size() == plan_channels * static_cast<std::size_t>(p.nranks));
        std::vector<std::uint64_t> sent(nconn, 0), received(nconn, 0);
        for (std::uint32_t b = 0; b < image.programs.size(); ++b) {
          const BlockProgram& prog = image.programs[b];
          const auto& steps = p.channels[prog.channel].programs[prog.rank].steps;
          REQUIRE(prog.nsteps == steps.size());
          for (std::uint32_t k = 0; k < prog.nsteps; ++k) {
            const ccoll::plan::Step& s = image.steps[prog.first_step + k];
            CHECK(s.offset == steps[k].offset);
            CHECK(s.count == steps[k].count);
            CHECK(s.recv_begin == steps[k].recv_begin);
            CHECK(s.send_begin == steps[k].send_begin);
          }
          for (const BaseAdvance& a : image.advances_of(b)) {
            REQUIRE(a.connection < nconn);
            CHECK(a.messages > 0);
            const auto& conn = p.connections[a.connection];
            // A block advances only the connections its rank is an end of (a connection's
            // channel is a label, which a program of another channel may use).
            CHECK((conn.from == prog.rank || conn.to == prog.rank));
            (conn.from == prog.rank ? sent : received)[a.connection] += a.messages;
          }
        }
        // Both ends of every connection advance by its messages per call: they stay in step.
        for (std::size_t i = 0; i < nconn; ++i) {
          CAPTURE(i);
          CHECK(sent[i] == p.connections[i].messages_per_call);
          CHECK(received[i] == p.connections[i].messages_per_call);
        }
        // cuda-p2p's tables: one rank's blocks, ports renumbered onto a larger connection set,
        // whose other entries join ranks no block talks to.
        const std::size_t nkeys = 2 * nconn + 3;
        std::vector<ccoll::plan::Port> ports = p.ports;
        for (auto& port : ports) port.connection = 2 * port.connection + 1;
        std::vector<ccoll::runtime::ConnectionKey> keys(nkeys, {0, 99, 98});
        for (std::size_t i = 0; i < nconn; ++i)
          keys[2 * i + 1] = {0, p.connections[i].from, p.connections[i].to};
        for (int r = 0; r < p.nranks; ++r) {
          BlockTablesImage mine;
          for (std::uint32_t c = 0; c < plan_channels; ++c) {
            const std::uint32_t b = mine.add_block(p, c, r, ports, nkeys);
            const auto got = mine.advances_of(b);
            const auto want = image.advances_of(c * p.nranks + r);
            REQUIRE(got.size() == want.size());
            for (std::size_t k = 0; k < got.size(); ++k) {
              CHECK(got[k].connection == 2 * want[k].connection + 1);
              CHECK(got[k].messages == want[k].messages);
            }
            // The peers whose calls the block compares: the other ends, each once, in order.
            std::set<std::int32_t> ends;
            for (const BaseAdvance& a : want) {
              const auto& conn = p.connections[a.connection];
              ends.insert(static_cast<std::int32_t>(conn.from == r ? conn.to : conn.from));
            }
            ends.erase(r);
            CHECK(mine.peers_of(b, keys) == std::vector<std::int32_t>(ends.begin(), ends.end()));
          }
        }
      }
}

namespace {

// Checks every block of `image` (built on `ports`, connections numbered as `refs`): its
// block-local program, copied by fill_block_cache as three members of a group would, resolves
// every port of every step to the connection ref and message number the global tables give.
void check_block_local_form(const BlockTablesImage& image, std::span<const ccoll::plan::Port> ports,
                            const std::vector<ccoll::sync::ConnectionRef>& refs,
                            const std::vector<std::uint64_t>& base_rows, std::size_t nconn,
                            std::size_t* cached_blocks) {
  using ccoll::sync::ConnectionRef;
  alignas(16) std::byte cache[kBlockTableCacheBytes];
  std::size_t local_steps = 0, local_ports = 0;  // of the cached blocks: all the local form holds
  for (std::uint32_t b = 0; b < image.programs.size(); ++b) {
    CAPTURE(b);
    const BlockProgram& prog = image.programs[b];
    std::uint32_t nports = 0;
    for (std::uint32_t k = 0; k < prog.nsteps; ++k)
      nports +=
          image.steps[prog.first_step + k].recv_count + image.steps[prog.first_step + k].send_count;
    BlockProgram whole = prog;  // with all its ports, cached or not
    whole.nlocal_ports = nports;
    const BlockCacheLayout l = block_cache_layout<sizeof(ConnectionRef)>(whole);
    CHECK(l.ports >= prog.nsteps * sizeof(ccoll::plan::Step));
    CHECK(l.connections >= l.ports + nports * sizeof(ccoll::plan::Port));
    CHECK(l.bases >= l.connections + prog.nadvance * sizeof(ConnectionRef));
    CHECK(l.bytes >= l.bases + prog.nadvance * sizeof(std::uint64_t));
    CHECK(l.bytes % 16 == 0);
    // A block whose tables do not fit has no local form and runs from the global tables.
    CHECK((prog.cached != 0) == (l.bytes <= kBlockTableCacheBytes));
    if (prog.cached == 0) {
      CHECK(prog.nlocal_ports == 0);
      continue;
    }
    CHECK(prog.nlocal_ports == nports);
    CHECK(prog.first_local_step == local_steps);
    CHECK(prog.first_local_port == local_ports);
    local_steps += prog.nsteps;
    local_ports += nports;
    ++*cached_blocks;
    std::memset(cache, 0xab, sizeof cache);
    const std::uint64_t* row = base_rows.data() + std::size_t{b} * nconn;
    ProgramTables<ConnectionRef> t;
    for (std::uint64_t member = 0; member < 3; ++member)
      t = fill_block_cache(cache, prog, image.local_steps.data(), image.local_ports.data(),
                           refs.data(), row, image.advances.data(), member, 3);
    REQUIRE(reinterpret_cast<const std::byte*>(t.steps) == cache + l.steps);
    for (std::uint32_t k = 0; k < prog.nsteps; ++k) {
      CAPTURE(k);
      const ccoll::plan::Step& g = image.steps[prog.first_step + k];
      const ccoll::plan::Step& s = t.steps[k];
      CHECK(s.offset == g.offset);
      CHECK(s.count == g.count);
      CHECK(s.recv_count == g.recv_count);
      CHECK(s.send_count == g.send_count);
      CHECK(s.src == g.src);
      CHECK(s.src_position == g.src_position);
      CHECK(s.write_output == g.write_output);
      CHECK(s.final == g.final);
      const auto same_port = [&](std::uint32_t global_at, std::uint32_t local_at) {
        const ccoll::plan::Port& gp = ports[global_at];
        REQUIRE(local_at < prog.nlocal_ports);
        const ccoll::plan::Port& lp = t.ports[local_at];
        REQUIRE(lp.connection < prog.nadvance);
        const ConnectionRef& want = refs[gp.connection];
        const ConnectionRef& got = t.connections[lp.connection];
        CHECK(got.slots == want.slots);
        CHECK(got.tail == want.tail);
        CHECK(got.head == want.head);
        CHECK(got.from == want.from);
        CHECK(got.to == want.to);
        CHECK(t.base[lp.connection] + lp.seq == row[gp.connection] + gp.seq);
      };
      for (std::uint32_t j = 0; j < g.recv_count; ++j)
        same_port(g.recv_begin + j, s.recv_begin + j);
      for (std::uint32_t j = 0; j < g.send_count; ++j)
        same_port(g.send_begin + j, s.send_begin + j);
    }
  }
  CHECK(image.local_steps.size() == local_steps);
  CHECK(image.local_ports.size() == local_ports);
}

// Connection refs whose fields name their connection: slot and counter pointers into memory of
// their own (never dereferenced, only compared).
struct NumberedRefs {
  std::vector<std::byte> slots;
  std::vector<std::uint64_t> counters;
  std::vector<ccoll::sync::ConnectionRef> refs;
};
NumberedRefs numbered_refs(std::size_t n) {
  NumberedRefs r;
  r.slots.resize(n + 1);
  r.counters.resize(2 * n + 2);
  r.refs.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.refs[i].slots = r.slots.data() + i;
    r.refs[i].tail = r.counters.data() + 2 * i;
    r.refs[i].head = r.counters.data() + 2 * i + 1;
    r.refs[i].from = static_cast<std::int32_t>(i);
    r.refs[i].to = static_cast<std::int32_t>(1000 + i);
  }
  return r;
}

}  // namespace

TEST_CASE("block tables: the block-local form resolves every port as the global tables do") {
  std::mt19937_64 rng(11);
  std::size_t cached = 0, blocks = 0;
  for (int nranks = 1; nranks <= 6; ++nranks)
    for (std::uint32_t nch = 1; nch <= 3; ++nch) {
      std::vector<ccoll::plan::Plan> plans = table_plans(nranks, nch);
      // A program of thousands of pipelined steps: too large to cache, run from global memory.
      ccoll::plan::PlanRequest big;
      big.nranks = nranks;
      big.count = 1u << 20;
      big.nchannels = nch;
      big.slot_bytes = 1024;
      plans.push_back(ccoll::plan::build_ring(big));
      for (const ccoll::plan::Plan& p : plans) {
        CAPTURE(p.algorithm);
        CAPTURE(nranks);
        CAPTURE(nch);
        const auto plan_channels = static_cast<std::uint32_t>(p.channels.size());
        // cuda-virtual: a block per (channel, rank) on the plan's connections.
        const std::size_t nconn = p.connections.size();
        BlockTablesImage image;
        for (std::uint32_t c = 0; c < plan_channels; ++c)
          for (int r = 0; r < p.nranks; ++r) image.add_block(p, c, r, p.ports, nconn);
        REQUIRE(image.local_steps.size() <= image.steps.size());
        std::vector<std::uint64_t> bases(image.programs.size() * nconn);
        for (auto& v : bases) v = rng() >> 8;
        const NumberedRefs refs = numbered_refs(nconn);
        check_block_local_form(image, p.ports, refs.refs, bases, nconn, &cached);
        blocks += image.programs.size();
        // cuda-p2p: one rank's blocks, ports renumbered onto a larger connection set.
        const std::size_t nkeys = 2 * nconn + 3;
        std::vector<ccoll::plan::Port> ports = p.ports;
        for (auto& port : ports)
          port.connection = static_cast<std::uint32_t>(2 * port.connection + 1);
        for (int r = 0; r < p.nranks; ++r) {
          BlockTablesImage mine;
          for (std::uint32_t c = 0; c < plan_channels; ++c) mine.add_block(p, c, r, ports, nkeys);
          std::vector<std::uint64_t> rows(mine.programs.size() * nkeys);
          for (auto& v : rows) v = rng() >> 8;
          const NumberedRefs key_refs = numbered_refs(nkeys);
          check_block_local_form(mine, ports, key_refs.refs, rows, nkeys, &cached);
          blocks += mine.programs.size();
        }
      }
    }
  // Both kinds occur: the short programs are cached, the long ring's are not.
  CHECK(cached > 0);
  CHECK(cached < blocks);
}

TEST_CASE("table sections: each on its own 128-byte lines, in order, none overlapping") {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 50; ++iter) {
    TableSections sections;
    std::vector<std::pair<std::size_t, std::size_t>> placed;
    for (int k = 0; k < 12; ++k) {
      const std::size_t bytes = rng() % 5 == 0 ? 0 : rng() % 1000;
      placed.emplace_back(sections.add(bytes), bytes);
    }
    for (std::size_t k = 0; k < placed.size(); ++k) {
      CHECK(placed[k].first % TableSections::kLine == 0);
      CHECK(placed[k].first + placed[k].second <= sections.total());
      if (k > 0) CHECK(placed[k - 1].first + placed[k - 1].second <= placed[k].first);
    }
    CHECK(sections.total() % TableSections::kLine == 0);
  }
  std::vector<std::byte> image(256, std::byte{0});
  put_section(image, 128, std::vector<std::uint32_t>{1, 2});
  std::uint32_t back[2] = {};
  std::memcpy(back, image.data() + 128, sizeof back);
  CHECK(back[0] == 1);
  CHECK(back[1] == 2);
  CHECK(image[127] == std::byte{0});
}

TEST_CASE("device plan cache: least recently used out, the evicted plan handed over first") {
  DevicePlanCache<std::string> cache;
  const ccoll::runtime::PlanKey a{100, 4, 0}, b{200, 4, 0}, c{100, 4, 1}, d{100, 2, 0};
  std::vector<std::string> evicted;
  auto evict = [&](std::string& s) { evicted.push_back(s); };
  CHECK(cache.find(a) == nullptr);
  cache.make_room(2, false, "a session", -1, evict);
  CHECK(cache.insert(a, "A") == "A");
  cache.make_room(2, false, "a session", -1, evict);
  cache.insert(b, "B");
  CHECK(evicted.empty());
  REQUIRE(cache.find(a) != nullptr);  // a is now the most recently used
  CHECK(*cache.find(a) == "A");
  cache.make_room(2, false, "a session", -1, evict);
  CHECK(evicted == std::vector<std::string>{"B"});
  CHECK(cache.find(b) == nullptr);
  cache.insert(c, "C");  // the root tells plans apart
  CHECK(cache.size() == 2);
  // A session may name any cached plan in an item it has not run: nothing is evicted.
  try {
    cache.make_room(2, true, "an open cuda::P2PSession of rank 3", 3, evict);
    FAIL("no error");
  } catch (const ccoll::Error& e) {
    CHECK(e.code() == ccoll::ErrorCode::Unsupported);
    CHECK(e.rank() == 3);
    CHECK(std::string(e.what()).find("an open cuda::P2PSession of rank 3 uses more distinct "
                                     "counts than Config::max_cached_plans (2)") !=
          std::string::npos);
  }
  CHECK(cache.size() == 2);
  // Below capacity an open session is no obstacle.
  cache.make_room(3, true, "a session", -1, evict);
  cache.insert(d, "D");
  int visited = 0;
  cache.for_each([&](const ccoll::runtime::PlanKey&, const std::string&) { ++visited; });
  CHECK(visited == 3);
  // A smaller capacity evicts down to it, least recently used first; 0 means 1.
  cache.make_room(0, false, "a session", -1, evict);
  CHECK(evicted == std::vector<std::string>{"B", "A", "C", "D"});
  CHECK(cache.size() == 0);
  cache.insert(d, "D");
  cache.clear();
  CHECK(cache.size() == 0);
  CHECK(cache.find(c) == nullptr);
}

TEST_CASE("the kernels' timeout: Config::timeout in nanoseconds, saturated") {
  CHECK(timeout_ns(std::chrono::milliseconds(0)) == 0);
  CHECK(timeout_ns(std::chrono::milliseconds(30000)) == 30'000'000'000ull);
  const std::uint64_t most = timeout_ns(std::chrono::milliseconds::max());
  CHECK(most > 1'000'000'000'000'000'000ull);  // decades
  CHECK(most == timeout_ns(std::chrono::milliseconds(
                    static_cast<std::int64_t>(~std::uint64_t{0} / 2'000'000ull))));
}
TEST_CASE("step marks: each phase, the setup and the total, per step and block, in nanoseconds") {
  using runtime::KernelMark;
  using runtime::StepMarkTable;
  auto t = std::make_unique<StepMarkTable>();  // zeroed, as the benchmark zeroes it per call
  const auto kernel = [&](std::uint32_t b, KernelMark m, std::uint64_t cycles, std::uint64_t ns) {
    t->kernel_cycles[b][static_cast<std::uint32_t>(m)] = cycles;
    t->kernel_ns[b][static_cast<std::uint32_t>(m)] = ns;
  };
  // Block 0: 2000 cycles in 1000 ns (0.5 ns a cycle), two steps.
  kernel(0, KernelMark::entry, 1000, 10'000);
  kernel(0, KernelMark::context, 1100, 0);
  kernel(0, KernelMark::program, 2200, 0);
  kernel(0, KernelMark::exit, 3000, 11'000);
  t->nsteps[0] = 2;
  const std::uint64_t step0[] = {1200, 1300, 1350, 1500, 1520, 1530};
  const std::uint64_t step1[] = {1600, 1700, 1710, 2000, 2100, 2110};
  std::copy(std::begin(step0), std::end(step0), t->step[0][0]);
  std::copy(std::begin(step1), std::end(step1), t->step[0][1]);
  // Block 1 enters 300 ns later and runs no step; block 3 lost its exit mark; block 2 never ran.
  kernel(1, KernelMark::entry, 5000, 10'300);
  kernel(1, KernelMark::context, 5100, 0);
  kernel(1, KernelMark::exit, 9000, 12'300);
  kernel(3, KernelMark::entry, 100, 10'100);
  t->nsteps[3] = 1;
  t->step[3][0][0] = 200;

  CHECK(t->blocks() == 4);
  CHECK(t->ns_per_cycle(0) == doctest::Approx(0.5));
  CHECK(t->ns_per_cycle(3) == 0);
  const auto s0 = runtime::step_times(*t, 0, 0);
  const double expected0[] = {50, 50, 25, 75, 10, 5};  // gap from the context, wait, ..., post
  const auto s1 = runtime::step_times(*t, 0, 1);
  const double expected1[] = {35, 50, 5, 145, 50, 5};  // gap from step 0's posts
  for (std::uint32_t p = 0; p < runtime::kStepPhases; ++p) {
    CAPTURE(p);
    CHECK(s0.phase[p] == doctest::Approx(expected0[p]));
    CHECK(s1.phase[p] == doctest::Approx(expected1[p]));
    CHECK(runtime::step_times(*t, 0, 2).phase[p] == 0);  // past the block's steps
    CHECK(runtime::step_times(*t, 3, 0).phase[p] == 0);  // no clock rate without an exit
  }
  const auto call = runtime::call_times(*t);
  REQUIRE(call.blocks.size() == 4);
  CHECK(call.span_ns == doctest::Approx(2300));  // block 0's entry to block 1's exit
  const auto& b0 = call.blocks[0];
  const double sums[] = {85, 100, 30, 220, 60, 10};
  for (std::uint32_t p = 0; p < runtime::kStepPhases; ++p)
    CHECK(b0.phase[p] == doctest::Approx(sums[p]));
  CHECK(b0.setup == doctest::Approx(50));
  CHECK(b0.after == doctest::Approx(445));  // the last posts to exit
  CHECK(b0.total == doctest::Approx(1000));
  CHECK(b0.entry_ns == 0);
  const auto& b1 = call.blocks[1];
  CHECK(b1.after == doctest::Approx(1950));  // no step: from the context
  CHECK(b1.total == doctest::Approx(2000));
  CHECK(b1.entry_ns == doctest::Approx(300));
  CHECK(call.blocks[2].total == 0);
  CHECK(call.blocks[3].total == 0);
  // Steps past the table's are not marked: a block's count is capped.
  t->nsteps[0] = StepMarkTable::kMaxSteps + 5;
  CHECK(t->marked_steps(0) == StepMarkTable::kMaxSteps);
}

}  // namespace cuda_protocol_test
