// Random sequences of calls of every collective, which every rank makes in the same order (the
// objects that run them: auto_collectives.hpp; on a GPU, tests/cuda/virtual_ranks.cu): the paths
// a small call can take (fast boxes, eager calls, in-band agreement with staged outputs,
// registered windows) and the plans of every size meet in one order on one set of objects, where
// each of the other tests takes one of them alone. Plain C++ over plan/collective.hpp, so nvcc's
// test files include it too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <random>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/collective.hpp"

namespace ccoll::testing {

struct RandomCall {
  plan::Collective collective = plan::Collective::allreduce;
  std::uint64_t count = 1;  // as the collective counts it (per rank for the blocked ones)
  int root = 0;
  bool in_place = false;
  int type = 0;           // 0: f32 sum, 1: f64 max, 2: i32 min, 3: bf16 sum
  bool windowed = false;  // the buffers in the object's registered window
};

// A call's element type and op, as RandomCall::type names them.
struct RandomCallType {
  DataType dtype;
  ReduceOp op;
};
inline RandomCallType random_call_type(const RandomCall& c) {
  switch (c.type) {
    case 0:
      return {DataType::f32, ReduceOp::sum};
    case 1:
      return {DataType::f64, ReduceOp::max};
    case 2:
      return {DataType::i32, ReduceOp::min};
    default:
      return {DataType::bf16, ReduceOp::sum};
  }
}

// `n` calls from `seed`. Counts cross the fast boxes (up to 96 bytes), the staged outputs' 2 KiB
// blocks, the eager limits, one slot, a few slots and many chunks. `windows`: about half the calls
// in the objects' windows.
inline std::vector<RandomCall> random_calls(std::uint32_t seed, int p, int n, bool windows) {
  static constexpr std::uint64_t kMixedCounts[] = {
      1,   2,   3,   5,   8,   12,  23,  24,  25,   31,   48,   63,   64,   65,
      100, 255, 256, 257, 511, 512, 513, 700, 1000, 2047, 3000, 5000, 9000, 20000};
  static constexpr plan::Collective kCollectives[] = {
      plan::Collective::allreduce, plan::Collective::reduce_scatter, plan::Collective::all_gather,
      plan::Collective::broadcast, plan::Collective::reduce};
  std::mt19937 rng(seed);
  std::vector<RandomCall> calls;
  calls.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    RandomCall c;
    c.collective = kCollectives[rng() % std::size(kCollectives)];
    c.count = kMixedCounts[rng() % std::size(kMixedCounts)];
    // Blocked collectives count per rank: keep their buffers in the range of the others'.
    if (!plan::has_root(c.collective) && c.collective != plan::Collective::allreduce)
      c.count = std::max<std::uint64_t>(1, c.count / static_cast<std::uint64_t>(p));
    c.root = static_cast<int>(rng() % static_cast<std::uint32_t>(p));
    c.in_place = rng() % 2 == 0;
    c.type = static_cast<int>(rng() % 4);
    c.windowed = windows && rng() % 2 == 0;
    calls.push_back(c);
  }
  return calls;
}

// How many times as many sequences a test runs: CCOLL_TEST_SOAK=N (default 1), for a soak run.
inline int soak_factor() {
  const char* soak = std::getenv("CCOLL_TEST_SOAK");
  return soak != nullptr ? std::max(1, std::atoi(soak)) : 1;
}

// Bytes of the window that holds any call of random_calls() with its guards (8-byte elements).
inline constexpr std::size_t kRandomCallWindowBytes = 2 * (20000 + 64) * 8 + 4096;

}  // namespace ccoll::testing
