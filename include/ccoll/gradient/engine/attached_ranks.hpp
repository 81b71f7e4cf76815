// ccoll/gradient/engine/attached_ranks.hpp: the ranks a GradientSync has bound to their gradient
// buffers, each attached once, by the process that hosts it.
//
// Both GradientSync forms (sync.hpp, coordinated_sync.hpp) keep one engine per local rank, made
// when the rank attaches (its workers start then) and looked up by rank afterwards; this is that
// table and its misuse errors, so that both forms refuse the same misuse with the same words.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"

namespace ccoll::gradient::engine {

template <class Rank>
class AttachedRanks {
 public:
  explicit AttachedRanks(int nranks) : ranks_(static_cast<std::size_t>(nranks)) {}

  // Makes rank `rank`'s engine with make() (which starts its threads), once per rank; `local`: the
  // ranks this process hosts.
  template <class Make>
  Rank& attach(int rank, std::span<const int> local, Make&& make) {
    bool hosted = false;
    for (int r : local) hosted = hosted || r == rank;
    if (!hosted)
      throw_invalid_argument(rank, "rank", "a rank this process hosts", std::to_string(rank));
    std::lock_guard lock(mu_);
    auto& slot = ranks_[static_cast<std::size_t>(rank)];
    if (slot) throw_invalid_argument(rank, "rank", "a rank not attached yet", "attached before");
    slot = std::forward<Make>(make)();
    return *slot;
  }

  // The one rank of a process transport, for attach(gradients).
  static int sole(std::span<const int> local) {
    if (local.size() != 1)
      throw_invalid_argument(-1, "rank",
                             "attach(rank, gradients): this transport hosts several ranks",
                             "attach(gradients)");
    return local[0];
  }

  // An attached rank; a rank not attached yet is misuse (its engine has no buffers), not null.
  Rank& at(int r) {
    std::lock_guard lock(mu_);
    if (r < 0 || static_cast<std::size_t>(r) >= ranks_.size() ||
        !ranks_[static_cast<std::size_t>(r)])
      throw_invalid_argument(r, "rank", "an attached rank", std::to_string(r));
    return *ranks_[static_cast<std::size_t>(r)];
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace ccoll::gradient::engine
