// ccoll/coord/fusion.hpp: packing the responses of one cycle into fused allreduces (Horovod's
// tensor fusion, with the group rule of [Horovod-cache] Sec. 3.2).
//
// Responses are taken in the cycle's agreed order; consecutive ones with the same data type and
// reduction share one buffer while it stays within the fusion threshold. A group is never split
// across buffers: its members are made contiguous first, and a group larger than the threshold
// becomes one buffer of its own (the explicit control over buffer sizes that grouping is for).
// Members of a group with several data types form one buffer per (dtype, op), in the same cycle.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
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

// Stable reorder: each group's members move up to where its first member appears.
inline std::vector<Response> make_groups_contiguous(std::vector<Response> in) {
  std::unordered_map<std::string, std::vector<const Response*>> by_group;
  for (const auto& r : in)
    if (!r.group.empty()) by_group[r.group].push_back(&r);
  if (by_group.empty()) return in;
  std::vector<Response> out;
  out.reserve(in.size());
  for (const auto& r : in) {
    if (r.group.empty()) {
      out.push_back(r);
      continue;
    }
    auto it = by_group.find(r.group);
    if (it == by_group.end()) continue;  // already emitted with its first member
    // One run per (dtype, op), in order of first appearance, so a mixed group stays adjacent.
    std::vector<const Response*>& members = it->second;
    std::vector<bool> taken(members.size(), false);
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (taken[i]) continue;
      for (std::size_t j = i; j < members.size(); ++j) {
        if (taken[j] || members[j]->dtype != members[i]->dtype || members[j]->op != members[i]->op)
          continue;
        taken[j] = true;
        out.push_back(*members[j]);
      }
    }
    by_group.erase(it);
  }
  return out;
}

inline std::vector<FusedResponse> fuse_responses(std::vector<Response> ordered,
                                                 std::uint64_t threshold_bytes) {
  std::vector<Response> list = make_groups_contiguous(std::move(ordered));
  std::vector<FusedResponse> out;
  FusedResponse cur;
  auto flush = [&] {
    if (!cur.tensors.empty()) out.push_back(std::move(cur));
    cur = FusedResponse{};
  };
  std::size_t i = 0;
  while (i < list.size()) {
    // A unit: one ungrouped tensor, or the run of a group's members with one dtype and op.
    std::size_t j = i + 1;
    std::uint64_t unit_bytes = list[i].bytes();
    if (!list[i].group.empty()) {
      while (j < list.size() && list[j].group == list[i].group && list[j].dtype == list[i].dtype &&
             list[j].op == list[i].op)
        unit_bytes += list[j++].bytes();
    }
    const bool compatible =
        cur.tensors.empty() || (cur.dtype == list[i].dtype && cur.op == list[i].op &&
                                cur.bytes + unit_bytes <= threshold_bytes);
    if (!compatible) flush();
    if (cur.tensors.empty()) {
      cur.dtype = list[i].dtype;
      cur.op = list[i].op;
    }
    for (std::size_t k = i; k < j; ++k) cur.tensors.push_back(std::move(list[k]));
    cur.bytes += unit_bytes;
    i = j;
  }
  flush();
  return out;
}

}  // namespace ccoll::coord
