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
//
// Hostile input (docs/reliability-loaders.md): every field is type-checked before it is read;
// forward_s and backward_s must be finite in [0, 1e6] s; bytes an integer in [0, 2^50] (an
// integral number such as 1e12 is read exactly, 2.5 is refused), with a total of at most 2^53;
// name a string. Every error is a ccoll::Error (InvalidArgument) naming the key, e.g.
// "profile.layers[3].bytes", and quoting at most 40 characters of the value (never a
// nlohmann::json exception).
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
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

namespace detail {

inline constexpr std::uint64_t kMaxLayerBytes = std::uint64_t{1} << 50;
inline constexpr std::uint64_t kMaxTotalBytes = std::uint64_t{1} << 53;
inline constexpr double kMaxSeconds = 1e6;

// A bounded description of a JSON value: scalars dumped (at most 40 characters), arrays and objects
// by their size (never dumped: they may be huge or deeply nested).
inline std::string describe(const nlohmann::json& v) {
  if (v.is_array()) return cat({"an array of ", std::to_string(v.size()), " elements"});
  if (v.is_object()) return cat({"an object with ", std::to_string(v.size()), " keys"});
  const std::string d = v.dump();
  std::string out;
  for (std::size_t k = 0; k < d.size() && k < 40; ++k) {
    const auto c = static_cast<unsigned char>(d[k]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (d.size() > 40) out += "...";
  return out;
}

inline double seconds_field(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
      v.get<double>() > kMaxSeconds)
    throw_invalid_argument(-1, key, "a finite number of seconds in [0, 1e6]", describe(v));
  return v.get<double>();
}

inline std::uint64_t bytes_field(const nlohmann::json& v, const std::string& key) {
  const auto bad = [&] { throw_invalid_argument(-1, key, "an integer in [0, 2^50]", describe(v)); };
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > kMaxLayerBytes) bad();
    return u;
  }
  if (v.is_number_integer()) bad();  // negative (non-negative integers are unsigned)
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < 0 || d > static_cast<double>(kMaxLayerBytes))
      bad();
    return static_cast<std::uint64_t>(d);
  }
  bad();
  return 0;
}

}  // namespace detail

inline ModelProfile profile_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw_invalid_argument(-1, "profile", "a JSON object", j.type_name());
  for (const char* key : {"forward_s", "layers"})
    if (!j.contains(key))
      throw_invalid_argument(-1, detail::cat({"profile.", key}), "present", "missing");
  ModelProfile p;
  if (const auto it = j.find("name"); it != j.end()) {
    if (!it->is_string())
      throw_invalid_argument(-1, "profile.name", "a string", detail::describe(*it));
    p.name = it->get<std::string>();
  } else {
    p.name = "unnamed";
  }
  p.forward_s = detail::seconds_field(j.at("forward_s"), "profile.forward_s");
  const auto& layers = j.at("layers");
  if (!layers.is_array())
    throw_invalid_argument(-1, "profile.layers", "an array", layers.type_name());
  p.layers.reserve(layers.size());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const std::string where = detail::cat({"profile.layers[", std::to_string(i), "]"});
    if (!l.is_object() || !l.contains("bytes") || !l.contains("backward_s"))
      throw_invalid_argument(-1, where, "an object with bytes and backward_s", detail::describe(l));
    LayerProfile lp;
    if (const auto it = l.find("name"); it != l.end()) {
      if (!it->is_string())
        throw_invalid_argument(-1, detail::cat({where, ".name"}), "a string",
                               detail::describe(*it));
      lp.name = it->get<std::string>();
    } else {
      lp.name = detail::cat({"layer", std::to_string(i + 1)});
    }
    lp.bytes = detail::bytes_field(l.at("bytes"), detail::cat({where, ".bytes"}));
    lp.backward_s = detail::seconds_field(l.at("backward_s"), detail::cat({where, ".backward_s"}));
    total += lp.bytes;  // <= 2^50 per layer and <= 2^53 so far: no overflow
    if (total > detail::kMaxTotalBytes)
      throw_invalid_argument(-1, "profile.layers[].bytes", "a total of at most 2^53",
                             detail::cat({"more at ", where}));
    p.layers.push_back(std::move(lp));
  }
  validate(p);
  return p;
}

// The text of a profile file; malformed JSON is a ccoll::Error (InvalidArgument) naming `where`.
inline ModelProfile profile_from_json_text(std::string_view text,
                                           const std::string& where = "profile") {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    const std::string_view what = e.what();
    throw_invalid_argument(-1, where, "valid JSON",
                           detail::cat({what.substr(0, 200), what.size() > 200 ? "..." : ""}));
  }
  return profile_from_json(j);
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
  std::stringstream ss;
  ss << in.rdbuf();
  return profile_from_json_text(ss.str(), "profile " + path);
}

inline void save_profile(const ModelProfile& p, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw_invalid_argument(-1, "profile path", "a writable file", path);
  out << to_json(p).dump(1) << '\n';
}

}  // namespace ccoll::gradient
