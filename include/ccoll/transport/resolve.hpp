// ccoll/transport/resolve.hpp: the Config a collective object's executor is built with: the
// transport's bootstrap (its resolve(), with the transport's own arguments if it takes them) and,
// for a logical topology planned for a fixed set of ranks, that rank count (every public
// collective type resolves through here: allreduce.hpp, collective.hpp).
#pragma once

#include <string>

#include "ccoll/algo/concepts.hpp"
#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/transport/concept.hpp"

namespace ccoll::transport {

template <Transport T, class... A>
Config resolve_transport(const Config& config, const A&... args) {
  if constexpr (requires { T::resolve(config, args...); })
    return T::resolve(config, args...);
  else
    return T::resolve(config);
}

template <Transport T, algo::LogicalTopology L, class... A>
Config resolve_for(Config config, const L& topology, const A&... args) {
  if constexpr (algo::FixedRankTopology<L>) {
    const int needed = static_cast<int>(topology.nranks());  // 0: any
    if (needed <= 0) return resolve_transport<T>(config, args...);
    if (config.nranks == 0) config.nranks = needed;
    config = resolve_transport<T>(config, args...);
    if (config.nranks != needed)
      throw_invalid_argument(config.rank, "Config::nranks",
                             std::to_string(needed) + " (the ranks topology '" +
                                 std::string(topology.name) + "' was planned for)",
                             std::to_string(config.nranks));
    return config;
  } else {
    return resolve_transport<T>(config, args...);
  }
}

}  // namespace ccoll::transport
