// Tests of plan::memory_traffic (ccoll/plan/traffic.hpp): the bytes a plan's steps read and
// write, counted on plans small enough to count by hand.
#include <doctest/doctest.h>

#include <cstdint>

#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/traffic.hpp"

namespace plan_traffic_test {
using namespace ccoll::plan;

namespace {
Plan ring(int nranks, std::uint64_t count, std::uint32_t nchannels, std::uint32_t nchunks) {
  PlanRequest req;
  req.nranks = nranks;
  req.count = count;
  req.elem_size = 4;
  req.nchannels = nchannels;
  req.nchunks = nchunks;
  return build_ring(req);
}
}  // namespace

TEST_CASE(
    "every kind of step: reads = received messages + the local operand, writes = output + "
    "sent messages") {
  Plan p;
  p.reset(2, 1);
  p.count = 10;
  p.slot_elems = 10;
  // rank 0: send its input (read 10, write 10 into the slot)
  p.add_step(0, 0, 0, 10, Source::Input, {}, {1}, false, false);
  // rank 1: recv, reduce with its input, write the output (read 20, write 10)
  p.add_step(0, 1, 0, 10, Source::Input, {0}, {}, true, true);
  p.finalize();
  const MemoryTraffic t = memory_traffic(p, 4);
  CHECK(t.read_bytes == (10 + 20) * 4);
  CHECK(t.write_bytes == (10 + 10) * 4);
  CHECK(t.total() == 200);

  // A relay's recv-copy-send to two peers, no local operand: read 1, write 2 per element.
  Step s;
  s.count = 8;
  s.recv_count = 1;
  s.send_count = 2;
  s.src = Source::None;
  CHECK(step_traffic(s, 2).read_bytes == 16);
  CHECK(step_traffic(s, 2).write_bytes == 32);
  s.write_output = true;
  s.src = Source::Output;
  CHECK(step_traffic(s, 2).read_bytes == 32);
  CHECK(step_traffic(s, 2).write_bytes == 48);
}

// The ring (plan/ring.hpp) moves, per rank and per N/P elements: send 1r+1w; P-2 recv-reduce-send
// 2r+1w each; recv-reduce-copy-send 2r+2w; P-2 recv-copy-send 1r+2w each; recv 1r+1w. That is
// (3P-2) N/P reads and as many writes per rank, 2(3P-2) N elements over the P ranks: 8N for P = 2
// and 20N for P = 4, whatever the channels and chunks.
TEST_CASE("ring, P = 2 and P = 4: 2(3P-2)N elements, half read, half written") {
  for (std::uint32_t nchannels : {1u, 2u})
    for (std::uint32_t nchunks : {1u, 3u}) {
      CAPTURE(nchannels);
      CAPTURE(nchunks);
      const std::uint64_t n = 1200;
      const MemoryTraffic t2 = memory_traffic(ring(2, n, nchannels, nchunks), 4);
      CHECK(t2.read_bytes == 4 * n * 4);
      CHECK(t2.write_bytes == 4 * n * 4);
      CHECK(t2.total() == 8 * n * 4);
      const MemoryTraffic t4 = memory_traffic(ring(4, n, nchannels, nchunks), 4);
      CHECK(t4.read_bytes == 10 * n * 4);
      CHECK(t4.write_bytes == 10 * n * 4);
      CHECK(t4.total() == 20 * n * 4);
    }
  // The element size scales it.
  CHECK(memory_traffic(ring(4, 1200, 1, 1), 2).total() == 20 * 1200 * 2);
}
}  // namespace plan_traffic_test
