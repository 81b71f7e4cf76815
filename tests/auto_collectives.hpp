// The five `auto` objects (ccoll/allreduce.hpp, ccoll/collective.hpp) of one transport that run
// random_calls.hpp's sequences, each call checked by collective_reference.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/ccoll.hpp"
#include "collective_reference.hpp"
#include "random_calls.hpp"

namespace ccoll::testing {

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

  // Rank `rank`'s part of every call of `calls`: "" or the first wrong one. A rank whose result
  // is wrong goes on calling, so that its peers finish their calls and report too instead of
  // waiting for it until their timeout; an exception after that is added to the report rather
  // than replacing it.
  std::string run_sequence(const std::vector<RandomCall>& calls, int p, int rank) {
    std::string first_wrong;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      std::string wrong;
      try {
        wrong = call(calls[i], p, rank);
      } catch (const std::exception& e) {
        if (first_wrong.empty()) throw;
        return first_wrong + "; then call " + std::to_string(i) + " threw: " + e.what();
      }
      if (!wrong.empty() && first_wrong.empty())
        first_wrong =
            "call " + std::to_string(i) + (calls[i].windowed ? " (windowed): " : ": ") + wrong;
    }
    return first_wrong;
  }

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
