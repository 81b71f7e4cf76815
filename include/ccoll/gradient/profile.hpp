// ccoll/gradient/profile.hpp: what a gradient-level schedule knows about a model.
//
// A model is L gradient tensors ("layers"), layer 1 at the input side and layer L at the output
// side. The forward pass runs 1..L, the backward pass L..1, and layer l's gradient is ready for
// communication when its backward step finishes ([MG-WFBP] Sec. 2.3, [ASC-WFBP] Sec. II-B). A
// profile holds, per layer, the gradient bytes and the backward time, plus the forward time.
// JSON form (the shipped data/profiles/*.json, docs/profiles.md):
//   {"name": "resnet152", "forward_s": 0.091,
//    "layers": [{"name": "conv1.weight", "bytes": 37632, "backward_s": 0.0009}, ...]}
// layers[0] is layer 1. Other keys are ignored on input. In C++ the layers are indexed from 0, so
// layers[i] is layer i + 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/error.hpp"

namespace ccoll::gradient {

namespace detail {
// Concatenation without operator+(const char*, std::string&&), which trips g++ 12's -Wrestrict.
inline std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p);
  return s;
}
}  // namespace detail

struct LayerProfile {
  std::string name;
  std::uint64_t bytes = 0;  // bytes of this layer's gradient tensor(s)
  double backward_s = 0;    // time of this layer's backward step
};

struct ModelProfile {
  std::string name;
  double forward_s = 0;
  std::vector<LayerProfile> layers;  // layers[0] = layer 1 (input side)

  int num_layers() const { return static_cast<int>(layers.size()); }

  double backward_s() const {
    double t = 0;
    for (const auto& l : layers) t += l.backward_s;
    return t;
  }

  std::uint64_t total_bytes() const {
    std::uint64_t b = 0;
    for (const auto& l : layers) b += l.bytes;
    return b;
  }

  // When layer index i (0-based) finishes its backward step, with the forward pass starting at 0.
  // ready[i] = forward_s + sum_{j >= i} backward_s[j] ([MG-WFBP] Eq. 6).
  std::vector<double> ready_times() const {
    std::vector<double> ready(layers.size());
    double t = forward_s;
    for (int i = num_layers() - 1; i >= 0; --i) {
      t += layers[static_cast<std::size_t>(i)].backward_s;
      ready[static_cast<std::size_t>(i)] = t;
    }
    return ready;
  }
};

// Throws ccoll::Error (InvalidArgument) naming the offending key.
inline void validate(const ModelProfile& p) {
  if (p.layers.empty()) throw_invalid_argument(-1, "profile.layers", "at least one layer", "none");
  if (!(p.forward_s >= 0) || !std::isfinite(p.forward_s))
    throw_invalid_argument(-1, "profile.forward_s", "finite >= 0", std::to_string(p.forward_s));
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const double t = p.layers[i].backward_s;
    if (!(t >= 0) || !std::isfinite(t))
      throw_invalid_argument(-1,
                             detail::cat({"profile.layers[", std::to_string(i), "].backward_s"}),
                             "finite >= 0", std::to_string(t));
  }
}

inline ModelProfile profile_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw_invalid_argument(-1, "profile", "a JSON object", j.type_name());
  for (const char* key : {"forward_s", "layers"})
    if (!j.contains(key))
      throw_invalid_argument(-1, detail::cat({"profile.", key}), "present", "missing");
  ModelProfile p;
  p.name = j.value("name", std::string("unnamed"));
  p.forward_s = j.at("forward_s").get<double>();
  const auto& layers = j.at("layers");
  if (!layers.is_array())
    throw_invalid_argument(-1, "profile.layers", "an array", layers.type_name());
  p.layers.reserve(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const std::string where = detail::cat({"profile.layers[", std::to_string(i), "]"});
    if (!l.is_object() || !l.contains("bytes") || !l.contains("backward_s"))
      throw_invalid_argument(-1, where, "an object with bytes and backward_s", l.dump());
    if (!l.at("bytes").is_number_integer() || l.at("bytes").get<std::int64_t>() < 0)
      throw_invalid_argument(-1, detail::cat({where, ".bytes"}), "an integer >= 0",
                             l.at("bytes").dump());
    LayerProfile lp;
    lp.name = l.value("name", detail::cat({"layer", std::to_string(i + 1)}));
    lp.bytes = l.at("bytes").get<std::uint64_t>();
    lp.backward_s = l.at("backward_s").get<double>();
    p.layers.push_back(std::move(lp));
  }
  validate(p);
  return p;
}

inline nlohmann::json to_json(const ModelProfile& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : p.layers)
    layers.push_back({{"name", l.name}, {"bytes", l.bytes}, {"backward_s", l.backward_s}});
  return {{"name", p.name}, {"forward_s", p.forward_s}, {"layers", std::move(layers)}};
}

inline ModelProfile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_invalid_argument(-1, "profile path", "a readable file", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid_argument(-1, "profile " + path, "valid JSON", e.what());
  }
  return profile_from_json(j);
}

inline void save_profile(const ModelProfile& p, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw_invalid_argument(-1, "profile path", "a writable file", path);
  out << to_json(p).dump(1) << '\n';
}

}  // namespace ccoll::gradient
