// ccoll/coord/tensor_request.hpp: what a rank asks the coordinator for (one tensor to
// allreduce) and the response the coordinator agrees on, plus their wire form for the control
// plane.
//
// A response is the request that every rank submitted identically: the same name, element count,
// data type, reduction and group. The coordinator checks that agreement once, when a name is first
// seen (or after its cache entry is invalidated); after that the response cache replays it.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"

namespace ccoll::coord {

struct TensorRequest {
  std::string name;
  DataType dtype = DataType::f32;
  std::uint64_t count = 0;  // elements
  ReduceOp op = ReduceOp::sum;
  std::string group;  // "" = not grouped
  std::uint32_t group_size = 0;

  std::uint64_t bytes() const { return count * size_of(dtype); }
  bool same_collective(const TensorRequest& o) const {
    return name == o.name && dtype == o.dtype && count == o.count && op == o.op &&
           group == o.group && group_size == o.group_size;
  }
  friend bool operator==(const TensorRequest& a, const TensorRequest& b) {
    return a.same_collective(b);
  }
};

// The coordinator's decision for one tensor: identical to every rank's request.
using Response = TensorRequest;

namespace wire {

// One request per line, tab-separated; names may not contain tabs or newlines (checked at submit).
inline void append(std::string& out, const TensorRequest& r) {
  out += r.name;
  out += '\t';
  out += std::to_string(static_cast<unsigned>(r.dtype));
  out += '\t';
  out += std::to_string(r.count);
  out += '\t';
  out += std::to_string(static_cast<unsigned>(r.op));
  out += '\t';
  out += r.group;
  out += '\t';
  out += std::to_string(r.group_size);
  out += '\n';
}

inline std::string encode(const std::vector<TensorRequest>& list) {
  std::string out;
  for (const auto& r : list) append(out, r);
  return out;
}

inline std::vector<TensorRequest> decode(std::string_view in) {
  std::vector<TensorRequest> out;
  while (!in.empty()) {
    const auto eol = in.find('\n');
    if (eol == std::string_view::npos) throw Error(ErrorCode::Parse, -1, "truncated request list");
    std::string_view line = in.substr(0, eol);
    in.remove_prefix(eol + 1);
    std::string_view field[6];
    for (int f = 0; f < 6; ++f) {
      const auto tab = f < 5 ? line.find('\t') : line.size();
      if (tab == std::string_view::npos) throw Error(ErrorCode::Parse, -1, "bad request line");
      field[f] = line.substr(0, tab);
      line.remove_prefix(f < 5 ? tab + 1 : tab);
    }
    TensorRequest r;
    r.name = std::string(field[0]);
    r.dtype = static_cast<DataType>(std::stoul(std::string(field[1])));
    r.count = std::stoull(std::string(field[2]));
    r.op = static_cast<ReduceOp>(std::stoul(std::string(field[3])));
    r.group = std::string(field[4]);
    r.group_size = static_cast<std::uint32_t>(std::stoul(std::string(field[5])));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace wire
}  // namespace ccoll::coord
