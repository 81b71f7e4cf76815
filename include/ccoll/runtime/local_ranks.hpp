// ccoll/runtime/local_ranks.hpp: the ranks a process hosts, as the public collectives
// (ccoll::Allreduce, ccoll::Collective) hand them out: rank(r) for a rank of this process, rank()
// for the one rank of a process that hosts one, with the same errors everywhere.
#pragma once

#include <string>

#include "ccoll/core/error.hpp"

namespace ccoll::runtime {

// r, if this process hosts rank r (threads: 0..nranks-1; a process: its own rank); otherwise
// InvalidArgument naming the ranks it hosts.
template <class Executor>
int hosted_rank(const Executor& exec, int r) {
  std::string locals;
  for (int local : exec.local_ranks()) {
    if (local == r) return r;
    locals += (locals.empty() ? "" : ", ") + std::to_string(local);
  }
  throw_invalid_argument(r, "rank", "a rank of this process (" + locals + ")", std::to_string(r));
}

// The one rank this process hosts (transports with one rank per process); InvalidArgument
// otherwise.
template <class Executor>
int sole_rank(const Executor& exec) {
  const auto locals = exec.local_ranks();
  if (locals.size() != 1)
    throw_invalid_argument(
        -1, "rank",
        "rank(r): this transport hosts " + std::to_string(locals.size()) + " ranks per process",
        "rank()");
  return locals[0];
}

}  // namespace ccoll::runtime
