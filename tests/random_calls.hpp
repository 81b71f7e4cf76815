// Random sequences of calls of every collective, which every rank makes in the same order, and
// the five `auto` objects (ccoll/allreduce.hpp, ccoll/collective.hpp) of one transport that run
// them: the paths a small call can take (fast boxes, eager calls, in-band agreement with staged
// outputs, registered windows) and the plans of every size meet in one order on one set of
// objects, where each of the other tests takes one of them alone.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/ccoll.hpp"
#include "collective_reference.hpp"

namespace ccoll::testing {

struct RandomCall {
  plan::Collective collective = plan::Collective::allreduce;
  std::uint64_t count = 1;  // as the collective counts it (per rank for the blocked ones)
  int root = 0;
  bool in_place = false;
  int type = 0;           // 0: f32 sum, 1: f64 max, 2: i32 min, 3: bf16 sum
  bool windowed = false;  // the buffers in the object's registered window
};

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

// Bytes of the window that holds any call of random_calls() with its guards (8-byte elements).
inline constexpr std::size_t kRandomCallWindowBytes = 2 * (20000 + 64) * 8 + 4096;

// One `auto` object of each collective on transport T, built by config(which) for which = 0..4
// (each its own communicator) and `join` (what the transport needs beside a Config: an MPI
// communicator); `windows`: each allocates a window for the windowed calls.
template <class T>
struct AutoCollectives {
  using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;
  template <class... Join>
  AutoCollectives(const std::function<Config(int)>& config, bool windows, const Join&... join)
      : ar(config(0), algo::BySize{}, join...),
        rs(config(1), algo::BySize{}, join...),
        ag(config(2), algo::BySize{}, join...),
        bc(config(3), algo::BySize{}, join...),
        rd(config(4), algo::BySize{}, join...) {
    if (!windows) return;
    if constexpr (requires { ar.allocate_window(std::size_t{1}); }) {
      window[0] = ar.allocate_window(kRandomCallWindowBytes);
      window[1] = rs.allocate_window(kRandomCallWindowBytes);
      window[2] = ag.allocate_window(kRandomCallWindowBytes);
      window[3] = bc.allocate_window(kRandomCallWindowBytes);
      window[4] = rd.allocate_window(kRandomCallWindowBytes);
    }
  }
  Allreduce<T, algo::BySize, Overlapped> ar;
  ReduceScatter<T, algo::BySize, Overlapped> rs;
  AllGather<T, algo::BySize, Overlapped> ag;
  Broadcast<T, algo::BySize, Overlapped> bc;
  Reduce<T, algo::BySize, Overlapped> rd;
  std::span<std::byte> window[5];

  // Rank `rank`'s part of call `c`: "" or what was wrong.
  std::string call(const RandomCall& c, int p, int rank) {
    switch (c.type) {
      case 0:
        return call<float, ReduceOp::sum>(c, p, rank, DataType::f32);
      case 1:
        return call<double, ReduceOp::max>(c, p, rank, DataType::f64);
      case 2:
        return call<std::int32_t, ReduceOp::min>(c, p, rank, DataType::i32);
      default:
        return call<BFloat16, ReduceOp::sum>(c, p, rank, DataType::bf16);
    }
  }

 private:
  template <class E, ReduceOp Op>
  std::string call(const RandomCall& c, int p, int rank, DataType d) {
    const auto which =
        static_cast<std::size_t>(c.collective == plan::Collective::allreduce        ? 0
                                 : c.collective == plan::Collective::reduce_scatter ? 1
                                 : c.collective == plan::Collective::all_gather     ? 2
                                 : c.collective == plan::Collective::broadcast      ? 3
                                                                                    : 4);
    const std::span<std::byte> arena = c.windowed ? window[which] : std::span<std::byte>{};
    return check_collective_call<E, Op>(
        c.collective, p, rank, c.count, c.in_place, c.root,
        [&](const void* s, void* o) {
          switch (which) {
            case 0:
              ar.rank(rank).run(s, o, c.count, d, Op);
              break;
            case 1:
              rs.rank(rank).run(s, o, c.count, d, Op);
              break;
            case 2:
              ag.rank(rank).run(s, o, c.count, d);
              break;
            case 3:
              bc.rank(rank).run(s, o, c.count, d, c.root);
              break;
            default:
              rd.rank(rank).run(s, o, c.count, d, Op, c.root);
              break;
          }
        },
        arena);
  }
};

}  // namespace ccoll::testing
