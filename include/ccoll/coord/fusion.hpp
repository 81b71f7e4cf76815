// ccoll/coord/fusion.hpp: packing the responses of one cycle into fused allreduces (Horovod's
// tensor fusion, with the group rule of [Horovod-cache] Sec. 3.2).
//
// Responses are taken in the cycle's agreed order; consecutive ones with the same data type and
// reduction share one buffer while it stays within the fusion threshold. A group is never split
// across buffers: its members are made contiguous first, and a group larger than the threshold
// becomes one buffer of its own (the explicit control over buffer sizes that grouping is for).
// Members of a group with several data types form one buffer per (dtype, op), in the same cycle.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/coord/tensor_request.hpp"

namespace ccoll::coord {

struct FusedResponse {
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::vector<Response> tensors;  // in buffer order
  std::uint64_t bytes = 0;
};

// One fused allreduce as a range of a response list (fuse_in_place).
struct FusedRange {
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::uint64_t bytes = 0;
  std::size_t begin = 0;  // [begin, end) of the list
  std::size_t end = 0;
};

// Working storage of fuse_in_place, kept by its caller so that a cycle's fusion reuses it.
struct FusionScratch {
  std::vector<std::array<std::size_t, 3>> keys;
  std::vector<Response> moved;
  void reserve(std::size_t n) {
    keys.reserve(n);
    moved.reserve(n);
  }
};

// Stable reorder in place: each group's members move up to where its first member appears, one
// run per (dtype, op) in order of first appearance, so a mixed group stays adjacent. Sorting by
// (first member of the group, first member of the run, position) is that order, and it needs no
// map from group names.
inline void make_groups_contiguous(std::vector<Response>& list, FusionScratch& s) {
  if (std::none_of(list.begin(), list.end(), [](const Response& r) { return !r.group.empty(); }))
    return;
  s.keys.clear();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Response& r = list[i];
    std::size_t group = i, run = i;
    if (!r.group.empty()) {
      for (std::size_t j = 0; j < i; ++j) {
        if (list[j].group != r.group) continue;
        group = std::min(group, j);
        if (list[j].dtype == r.dtype && list[j].op == r.op) {
          run = j;
          break;
        }
      }
    }
    s.keys.push_back({group, run, i});
  }
  std::sort(s.keys.begin(), s.keys.end());
  s.moved.clear();
  for (const auto& k : s.keys) s.moved.push_back(std::move(list[k[2]]));
  for (std::size_t i = 0; i < list.size(); ++i) list[i] = std::move(s.moved[i]);
  s.moved.clear();
}

inline std::vector<Response> make_groups_contiguous(std::vector<Response> in) {
  FusionScratch s;
  make_groups_contiguous(in, s);
  return in;
}

// Saturates instead of wrapping: a wrapped sum of huge tensors would look small enough to fuse.
inline std::uint64_t add_bytes(std::uint64_t a, std::uint64_t b) noexcept {
  return b > std::numeric_limits<std::uint64_t>::max() - a
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

// Packs `list` (reordered in place by make_groups_contiguous) into `out`'s ranges. Consecutive
// responses with the same dtype and op share a range while it stays within the threshold.
inline void fuse_in_place(std::vector<Response>& list, std::uint64_t threshold_bytes,
                          std::vector<FusedRange>& out, FusionScratch& s) {
  make_groups_contiguous(list, s);
  out.clear();
  FusedRange cur;
  std::size_t i = 0;
  while (i < list.size()) {
    // A unit: one ungrouped tensor, or the run of a group's members with one dtype and op.
    std::size_t j = i + 1;
    std::uint64_t unit_bytes = list[i].bytes();
    if (!list[i].group.empty()) {
      while (j < list.size() && list[j].group == list[i].group && list[j].dtype == list[i].dtype &&
             list[j].op == list[i].op)
        unit_bytes = add_bytes(unit_bytes, list[j++].bytes());
    }
    const bool empty = cur.end == cur.begin;
    const bool compatible =
        empty || (cur.dtype == list[i].dtype && cur.op == list[i].op &&
                  cur.bytes <= threshold_bytes && unit_bytes <= threshold_bytes - cur.bytes);
    if (!compatible) {
      out.push_back(cur);
      cur = FusedRange{};
    }
    if (cur.end == cur.begin) {
      cur.dtype = list[i].dtype;
      cur.op = list[i].op;
      cur.begin = i;
    }
    cur.end = j;
    cur.bytes = add_bytes(cur.bytes, unit_bytes);
    i = j;
  }
  if (cur.end != cur.begin) out.push_back(cur);
}

inline std::vector<FusedResponse> fuse_responses(std::vector<Response> ordered,
                                                 std::uint64_t threshold_bytes) {
  FusionScratch s;
  std::vector<FusedRange> ranges;
  fuse_in_place(ordered, threshold_bytes, ranges, s);
  std::vector<FusedResponse> out;
  out.reserve(ranges.size());
  for (const auto& f : ranges) {
    FusedResponse& r = out.emplace_back();
    r.dtype = f.dtype;
    r.op = f.op;
    r.bytes = f.bytes;
    for (std::size_t i = f.begin; i < f.end; ++i) r.tensors.push_back(std::move(ordered[i]));
  }
  return out;
}

}  // namespace ccoll::coord
