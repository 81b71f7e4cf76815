// Shared by the GradientSync tests (threads and processes): small synthetic models with odd tensor
// sizes and mixed dtypes, every planner's schedule for them, per-rank buffer layouts that make a
// message zero-copy on one rank and staged on another, and exact expected values.
//
// Why bitwise comparisons are right here: every input is a small integer (1..13, testing::value),
// so every partial sum of at most 4 of them is exact in every dtype (u8 and bf16 included), and a
// sum is the same bits whatever order the algorithm adds in, fused or not; avg divides that exact
// sum once. A fused message and a per-tensor allreduce, or the test's own rank-ordered sum, must
// therefore agree bit for bit, and any difference is a data-movement error, never rounding.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "allreduce_reference.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/gradient/asc_wfbp.hpp"
#include "ccoll/gradient/fusion_buffer.hpp"
#include "ccoll/gradient/mg_wfbp.hpp"
#include "ccoll/gradient/optimal.hpp"
#include "ccoll/gradient/single_layer.hpp"
#include "ccoll/gradient/sync.hpp"
#include "ccoll/gradient/wfbp.hpp"
#include "rank_threads.hpp"

namespace gradient_sync_harness {

using namespace ccoll;
using namespace ccoll::gradient;

struct Model {
  std::vector<TensorSpec> tensors;
  ModelProfile profile;
};

// Backward times chosen so that the planners disagree: some layers slow, some fast.
inline Model make_model(std::string name, std::vector<TensorSpec> tensors) {
  std::vector<double> backward;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    backward.push_back(1e-5 * static_cast<double>(1 + (i * 7) % 5));
  Model m;
  m.profile = profile_from_tensors(tensors, backward, 1e-4, std::move(name));
  m.tensors = std::move(tensors);
  return m;
}

inline std::vector<Model> models() {
  using D = DataType;
  std::vector<Model> out;
  out.push_back(make_model("six-f32", {{"l1", 1, D::f32},
                                       {"l2", 37, D::f32},
                                       {"l3", 5, D::f32},
                                       {"l4", 1023, D::f32},
                                       {"l5", 1, D::f32},
                                       {"l6", 257, D::f32}}));
  out.push_back(make_model("nine-mixed", {{"conv.w", 3, D::f32},
                                          {"conv.b", 1, D::f32},
                                          {"bn.mean", 129, D::f64},
                                          {"emb", 17, D::i32},
                                          {"fc1.w", 1, D::i32},
                                          {"fc1.b", 65, D::f16},
                                          {"fc2.w", 4097, D::bf16},
                                          {"fc2.b", 2, D::u8},
                                          {"head", 11, D::i64}}));
  std::vector<TensorSpec> twelve;
  const std::size_t counts[] = {1, 2049, 1, 33, 7, 20001, 1, 513, 3, 1, 127, 4099};
  for (std::size_t i = 0; i < 12; ++i) {
    std::string name("t");
    name += std::to_string(i + 1);
    twelve.push_back({std::move(name), counts[i], D::f32});
  }
  out.push_back(make_model("twelve-f32", std::move(twelve)));
  return out;
}

// Every planner's schedule for the model, plus hand typings that reach what small models may not:
// runs of simultaneous messages wrapping around K = 3 channels, and s / m / n mixed.
inline std::vector<Schedule> policies(const ModelProfile& p) {
  const CommModel c = CommModel::from_line(2e-5, 2e-9, 1.5);
  std::vector<Schedule> out;
  out.push_back(plan_wfbp(p));
  out.push_back(plan_single_layer(p));
  out.push_back(plan_mg_wfbp(p, c));
  out.push_back(plan_mg_wfbp_paper(p, c));
  out.push_back(plan_asc_wfbp(p, c, 2));
  OptimalOptions opt;
  opt.max_concurrent = 2;
  opt.time_limit_s = 0.05;
  out.push_back(solve_optimal(p, c, opt).schedule);
  out.push_back(plan_horovod_fusion(p, {.threshold_bytes = 4096, .cycle_time_s = 2e-5}));
  out.push_back(plan_ddp_buckets(p, {.bucket_cap_bytes = 8192, .first_bucket_cap_bytes = 1024}));
  const auto n = static_cast<std::size_t>(p.num_layers());
  out.push_back(schedule_from_typing(LayerTyping(n, LayerType::simultaneous), 3, "all-s-K3"));
  LayerTyping mixed(n);
  for (std::size_t i = 0; i < n; ++i)
    mixed[i] = i == 0 ? LayerType::simultaneous
                      : std::array{LayerType::merged, LayerType::simultaneous, LayerType::normal,
                                   LayerType::merged, LayerType::simultaneous}[i % 5];
  out.push_back(schedule_from_typing(mixed, 2, "mixed-K2"));
  return out;
}

// Where a rank keeps its gradients: packed (ascending layers, each aligned to its element size,
// so runs of one dtype are contiguous: zero-copy), scattered (one allocation per tensor: staged),
// reversed (descending layers in one block: not ascending, so staged).
enum class Layout { packed, scattered, reversed };

struct RankBuffers {
  std::vector<std::unique_ptr<std::byte[]>> blocks;
  std::vector<void*> ptrs;
};

inline RankBuffers make_buffers(const std::vector<TensorSpec>& tensors, Layout layout) {
  RankBuffers b;
  const std::size_t n = tensors.size();
  b.ptrs.resize(n);
  if (layout == Layout::scattered) {
    for (std::size_t i = 0; i < n; ++i) {
      b.blocks.push_back(std::make_unique<std::byte[]>(tensors[i].bytes()));
      b.ptrs[i] = b.blocks.back().get();
    }
    return b;
  }
  std::vector<std::size_t> offset(n);
  std::size_t total = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = layout == Layout::packed ? k : n - 1 - k;
    const std::size_t a = size_of(tensors[i].dtype);
    total = (total + a - 1) / a * a;
    offset[i] = total;
    total += tensors[i].bytes();
  }
  b.blocks.push_back(std::make_unique<std::byte[]>(total));
  for (std::size_t i = 0; i < n; ++i) b.ptrs[i] = b.blocks.back().get() + offset[i];
  return b;
}

inline std::uint64_t seed_of(int tensor, int iteration) {
  return static_cast<std::uint64_t>(tensor) * 7 + static_cast<std::uint64_t>(iteration) * 13;
}

// Rank `rank`'s gradient of `tensor` in `iteration`.
inline void fill(const TensorSpec& t, void* p, int rank, int nranks, int tensor, int iteration) {
  dispatch_data_type(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* d = static_cast<T*>(p);
    for (std::size_t i = 0; i < t.count; ++i)
      d[i] = testing::value<T>(ReduceOp::sum, rank, nranks, i + seed_of(tensor, iteration));
  });
}

// "" if `got` holds the reduction over all ranks of fill(); else what differs.
inline std::string check(const TensorSpec& t, const void* got, int nranks, int tensor,
                         int iteration, ReduceOp op) {
  std::string wrong;
  dispatch_data_type(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    dispatch_reduce_op(op, [&](auto o) {
      constexpr ReduceOp kOp = decltype(o)::value;
      const T* d = static_cast<const T*>(got);
      for (std::size_t i = 0; i < t.count && wrong.empty(); ++i) {
        const std::uint64_t k = i + seed_of(tensor, iteration);
        T ref = testing::value<T>(ReduceOp::sum, 0, nranks, k);
        for (int r = 1; r < nranks; ++r)
          ref = combine<kOp>(ref, testing::value<T>(ReduceOp::sum, r, nranks, k));
        ref = finalize<kOp>(ref, nranks);
        // Bits, not values: -0 and +0, or two NaNs, must not pass for each other.
        if (std::bit_cast<testing::Bytes<T>>(ref) != std::bit_cast<testing::Bytes<T>>(d[i])) {
          wrong = "tensor '";
          wrong += t.name;
          wrong += "' element ";
          wrong += std::to_string(i);
          wrong += " iteration ";
          wrong += std::to_string(iteration);
        }
      }
    });
  });
  return wrong;
}

// The order in which a rank marks its tensors ready: backward (L..1), forward (1..L, the opposite
// of what the schedule issues first), or a permutation that changes every iteration.
inline void ready_order(std::vector<int>& order, int rank, int iteration) {
  const int n = static_cast<int>(order.size());
  for (int i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = n - 1 - i;
  if (rank % 3 == 1) std::reverse(order.begin(), order.end());
  if (rank % 3 == 2) {
    std::mt19937 rng(static_cast<unsigned>(rank * 1000 + iteration));
    std::shuffle(order.begin(), order.end(), rng);
  }
}

using ccoll::testing::on_threads;

// The code of the ccoll::Error that f() throws; fails the test when it throws none.
template <class E>
ErrorCode code_of(E&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("no ccoll::Error thrown");
  return ErrorCode::System;
}

}  // namespace gradient_sync_harness
