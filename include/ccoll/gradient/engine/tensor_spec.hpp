// ccoll/gradient/engine/tensor_spec.hpp: the gradient tensors a GradientSync all-reduces.
//
// A training loop registers its gradients once, one tensor per layer in profile order: tensor i is
// layer i + 1 of profile.hpp, layer 1 at the input side, so the schedules that the planners build
// for a ModelProfile index the same objects the engine moves. A layer whose gradient is several
// tensors (weight and bias) is registered as several consecutive layers: every planner may merge
// them back into one message, and a profile that lists them separately describes them exactly.
// The two helpers convert between the two views, so that a profile file (data/profiles/*.json)
// yields the tensor list and a tensor list plus measured backward times yields a profile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/gradient/profile.hpp"

namespace ccoll::gradient {

struct TensorSpec {
  std::string name;
  std::size_t count = 0;  // elements
  DataType dtype = DataType::f32;

  std::uint64_t bytes() const { return static_cast<std::uint64_t>(count) * size_of(dtype); }
};

// Throws InvalidArgument unless there is at least one tensor, every count is positive and the
// names are distinct (ready(name) and the error messages identify a tensor by its name).
inline void validate_tensors(std::span<const TensorSpec> tensors) {
  if (tensors.empty()) throw_invalid_argument(-1, "tensors", "at least one tensor", "none");
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].count == 0)
      throw_invalid_argument(-1, detail::cat({"tensors[", std::to_string(i), "].count"}), "> 0",
                             "0");
    if (!seen.insert(tensors[i].name).second)
      throw_invalid_argument(-1, detail::cat({"tensors[", std::to_string(i), "].name"}),
                             "a name no other tensor has",
                             detail::cat({"'", tensors[i].name, "'"}));
  }
}

// The tensors of a profile, each layer one tensor of `dtype` (its bytes must be a positive
// multiple of the element size).
inline std::vector<TensorSpec> tensors_from_profile(const ModelProfile& p, DataType dtype) {
  std::vector<TensorSpec> out;
  out.reserve(p.layers.size());
  const std::uint64_t elem = size_of(dtype);
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const LayerProfile& l = p.layers[i];
    if (l.bytes == 0 || l.bytes % elem != 0)
      throw_invalid_argument(-1, detail::cat({"profile.layers[", std::to_string(i), "].bytes"}),
                             detail::cat({"a positive multiple of ", std::to_string(elem),
                                          " (the size of ", to_string(dtype), ")"}),
                             std::to_string(l.bytes));
    out.push_back({l.name, static_cast<std::size_t>(l.bytes / elem), dtype});
  }
  return out;
}

// The profile of registered tensors, with the backward time of each (empty: 0 each) and the
// forward time: what a planner needs to choose a schedule for them.
inline ModelProfile profile_from_tensors(std::span<const TensorSpec> tensors,
                                         std::span<const double> backward_s = {},
                                         double forward_s = 0, std::string name = "tensors") {
  if (!backward_s.empty() && backward_s.size() != tensors.size())
    throw_invalid_argument(-1, "backward_s",
                           detail::cat({std::to_string(tensors.size()), " times"}),
                           std::to_string(backward_s.size()));
  ModelProfile p;
  p.name = std::move(name);
  p.forward_s = forward_s;
  p.layers.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i)
    p.layers.push_back(
        {tensors[i].name, tensors[i].bytes(), backward_s.empty() ? 0.0 : backward_s[i]});
  validate(p);
  return p;
}

}  // namespace ccoll::gradient
