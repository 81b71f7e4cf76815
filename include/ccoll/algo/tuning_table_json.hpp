// ccoll/algo/tuning_table_json.hpp: the JSON form of a tuning table (algo/by_size.hpp), for
// tables measured on a machine and shipped or passed to `ccoll_perf --tuning FILE`:
//
//   {"rules": [{"algorithm": "oneshot", "max_bytes": 65536, "max_ranks": 2},
//              {"algorithm": "recdoubling", "max_bytes": 32768, "min_ranks": 3},
//              {"algorithm": "direct"}]}
//
// A rule may also name its protocol, "protocol": "simple" (the default) or "ll" (protocol/
// protocol.hpp). The first rule whose rank range and max_bytes (count x element size, inclusive)
// match is used; absent fields match everything. Every error is a ccoll::Error (InvalidArgument)
// naming the key, e.g. "tuning.rules[1].max_bytes". Needs nlohmann-json.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/protocol/protocol.hpp"

namespace ccoll::algo {

inline TuningTable tuning_table_from_json(const std::string& text) {
  auto bad = [](const std::string& key, const std::string& rule) {
    throw Error(ErrorCode::InvalidArgument, -1, "argument '" + key + "': expected " + rule);
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    bad("tuning", std::string("JSON (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("rules") || !j["rules"].is_array())
    bad("tuning", "an object with a \"rules\" array");
  TuningTable t;
  std::size_t i = 0;
  for (const auto& r : j["rules"]) {
    const std::string key = "tuning.rules[" + std::to_string(i++) + "]";
    if (!r.is_object()) bad(key, "an object");
    SizeRule rule;
    if (!r.contains("algorithm") || !r["algorithm"].is_string())
      bad(key + ".algorithm", "the name of a registered algorithm");
    rule.algorithm = r["algorithm"].get<std::string>();
    auto integer = [&](const char* field, std::uint64_t lo, std::uint64_t hi) -> std::uint64_t {
      const auto& v = r[field];
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
        bad(key + "." + field,
            "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      const auto x = v.get<std::uint64_t>();
      if (x < lo || x > hi)
        bad(key + "." + field, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   "], got " + std::to_string(x));
      return x;
    };
    constexpr auto kMaxRanks = static_cast<std::uint64_t>(std::numeric_limits<int>::max());
    if (r.contains("max_bytes"))
      rule.max_bytes = integer("max_bytes", 0, std::numeric_limits<std::uint64_t>::max());
    if (r.contains("min_ranks"))
      rule.min_ranks = static_cast<int>(integer("min_ranks", 1, kMaxRanks));
    if (r.contains("max_ranks"))
      rule.max_ranks = static_cast<int>(integer("max_ranks", 1, kMaxRanks));
    if (r.contains("protocol")) {
      if (!r["protocol"].is_string()) bad(key + ".protocol", "\"simple\" or \"ll\"");
      rule.protocol = protocol::parse(r["protocol"].get<std::string>(), key + ".protocol");
    }
    t.rules.push_back(rule);
  }
  return t;
}

}  // namespace ccoll::algo
