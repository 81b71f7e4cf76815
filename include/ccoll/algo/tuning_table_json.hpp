// ccoll/algo/tuning_table_json.hpp: the JSON form of a tuning table (algo/by_size.hpp), for
// tables measured on a machine and shipped or passed to `ccoll_perf --tuning FILE`:
//
//   {"rules": [{"algorithm": "oneshot", "max_bytes": 65536, "max_ranks": 2},
//              {"algorithm": "recdoubling", "max_bytes": 32768, "min_ranks": 3},
//              {"algorithm": "direct"}]}
//
// A rule may also name its protocol, "protocol": "simple" (the default) or "ll" (protocol/
// protocol.hpp), and its collective, "collective": "allreduce" (the default), "reduce_scatter",
// "all_gather", "broadcast" or "reduce". The first rule of the call's collective whose rank range
// and max_bytes (the whole buffer in bytes, inclusive) match is used; absent fields match every
// rank count and size; a field of another name is refused. Every error is a ccoll::Error
// (InvalidArgument) naming the key, e.g. "tuning.rules[1].max_bytes". tuning_table_to_json
// writes the same form (ccoll_perf --tune). Needs nlohmann-json.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/collective.hpp"
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
    // A misspelt field ("max_byte") would leave its default, which matches every size or rank
    // count: the rule would take the calls of every rule after it, with no word of it.
    for (const auto& item : r.items()) {
      const std::string& field = item.key();
      if (field != "algorithm" && field != "max_bytes" && field != "min_ranks" &&
          field != "max_ranks" && field != "protocol" && field != "collective") {
        std::string where = key;
        where.append(".").append(field);
        bad(where,
            "a rule's field: algorithm, max_bytes, min_ranks, max_ranks, protocol or collective");
      }
    }
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
    if (r.contains("collective")) {
      const std::string expected = "allreduce, reduce_scatter, all_gather, broadcast or reduce";
      if (!r["collective"].is_string()) bad(key + ".collective", expected);
      const std::string name = r["collective"].get<std::string>();
      bool known = false;
      for (const plan::Collective c :
           {plan::Collective::allreduce, plan::Collective::reduce_scatter,
            plan::Collective::all_gather, plan::Collective::broadcast, plan::Collective::reduce})
        if (name == plan::collective_name(c)) {
          rule.collective = c;
          known = true;
        }
      if (!known) {
        std::string got = expected;
        got.append(", got \"").append(name).append("\"");
        bad(key + ".collective", got);
      }
    }
    t.rules.push_back(rule);
  }
  return t;
}

// The JSON form of `t` (fields at their defaults left out), one rule per line.
inline std::string tuning_table_to_json(const TuningTable& t) {
  std::string out = "{\"rules\": [\n";
  for (std::size_t i = 0; i < t.rules.size(); ++i) {
    const SizeRule& r = t.rules[i];
    nlohmann::ordered_json j;
    if (r.collective != plan::Collective::allreduce)
      j["collective"] = std::string(plan::collective_name(r.collective));
    j["algorithm"] = r.algorithm;
    if (r.protocol != protocol::Id::simple) j["protocol"] = std::string(protocol::name(r.protocol));
    if (r.min_ranks != 1) j["min_ranks"] = r.min_ranks;
    if (r.max_ranks != std::numeric_limits<int>::max()) j["max_ranks"] = r.max_ranks;
    if (r.max_bytes != std::numeric_limits<std::uint64_t>::max()) j["max_bytes"] = r.max_bytes;
    out += "  " + j.dump() + (i + 1 < t.rules.size() ? ",\n" : "\n");
  }
  return out + "]}\n";
}

}  // namespace ccoll::algo
