// ccoll/coord/response_cache.hpp: the response cache of [Horovod-cache] (Sec. 3.1.1): the responses
// the coordinator agreed on, each at a fixed bit position, so that ranks can later say "tensor at
// bit b is ready" with one bit instead of a name.
//
// The cache is a deterministic function of the sequence of operations applied to it (put, touch,
// erase, in order). The coordinator applies the same sequence on every rank -- responses in the
// globally agreed execution order, erasures in ascending bit order -- so every rank's cache is
// identical: same entries at the same bits, same LRU order, same evictions. Nothing here is
// rank-local; that is the invariant the bitvector relies on (docs/coordination.md).
//
// Positions: a new entry takes the lowest free position; when the cache is full, the least
// recently executed entry is evicted and its position reused. Positions never move otherwise, so
// bitvectors stay short (at most `capacity` bits).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ccoll/coord/tensor_request.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::coord {

class ResponseCache {
 public:
  enum class State : std::uint8_t {
    miss,     // no entry for the name
    hit,      // an entry with the same collective (count, dtype, op, group)
    invalid,  // an entry for the name, but the request differs: the entry must go everywhere
  };
  struct Lookup {
    State state = State::miss;
    std::uint32_t bit = 0;
  };

  explicit ResponseCache(std::size_t capacity = 1024) : capacity_(capacity) {
    if (capacity == 0) throw_invalid_argument(-1, "cache capacity", ">= 1", "0");
  }

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t size() const noexcept { return by_name_.size(); }
  // Bit positions in use are all below num_bits(); the coordination bitvector has this length.
  std::uint32_t num_bits() const noexcept { return static_cast<std::uint32_t>(slots_.size()); }
  std::uint64_t evictions() const noexcept { return evictions_; }

  Lookup lookup(const TensorRequest& r) const {
    const auto it = by_name_.find(r.name);
    if (it == by_name_.end()) return {};
    const Slot& s = slots_[it->second];
    return {s.response.same_collective(r) ? State::hit : State::invalid, it->second};
  }
  bool occupied(std::uint32_t bit) const noexcept {
    return bit < slots_.size() && slots_[bit].used;
  }
  const Response& at(std::uint32_t bit) const { return slots_.at(bit).response; }

  // Inserts (or replaces, for a known name) and marks most recently used. Returns the position.
  std::uint32_t put(const Response& r) {
    if (const auto it = by_name_.find(r.name); it != by_name_.end()) {
      Response& cached = slots_[it->second].response;
      if (!cached.same_collective(r)) cached = r;
      touch(it->second);
      return it->second;
    }
    if (by_name_.size() == capacity_) {
      erase(lru_.back());
      ++evictions_;
    }
    std::uint32_t bit;
    if (!free_.empty()) {
      bit = *free_.begin();
      free_.erase(free_.begin());
    } else {
      bit = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[bit];
    s.used = true;
    s.response = r;
    lru_.push_front(bit);
    s.lru = lru_.begin();
    by_name_.emplace(r.name, bit);
    return bit;
  }

  // Marks an entry most recently used (the coordinator does this when the entry executes).
  void touch(std::uint32_t bit) {
    Slot& s = slots_.at(bit);
    if (!s.used) return;
    lru_.splice(lru_.begin(), lru_, s.lru);
  }

  void erase(std::uint32_t bit) {
    Slot& s = slots_.at(bit);
    if (!s.used) return;
    by_name_.erase(s.response.name);
    lru_.erase(s.lru);
    s.used = false;
    s.response = Response{};
    free_.insert(bit);
  }

  // A hash of the whole structure (positions, entries, LRU order): equal on every rank.
  std::uint64_t fingerprint() const {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
      for (int i = 0; i < 8; ++i) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 1099511628211ull;
      }
    };
    for (std::uint32_t b = 0; b < slots_.size(); ++b) {
      if (!slots_[b].used) continue;
      const Response& r = slots_[b].response;
      mix(b);
      for (char c : r.name) mix(static_cast<unsigned char>(c));
      mix(r.count);
      mix(static_cast<std::uint64_t>(r.dtype) << 8 | static_cast<std::uint64_t>(r.op));
    }
    for (std::uint32_t b : lru_) mix(b);
    return h;
  }

  // Positions from most to least recently used.
  std::vector<std::uint32_t> lru_order() const { return {lru_.begin(), lru_.end()}; }

 private:
  struct Slot {
    bool used = false;
    Response response;
    std::list<std::uint32_t>::iterator lru;
  };
  std::size_t capacity_;
  std::vector<Slot> slots_;
  std::list<std::uint32_t> lru_;  // front = most recently used
  std::unordered_map<std::string, std::uint32_t> by_name_;
  std::set<std::uint32_t> free_;
  std::uint64_t evictions_ = 0;
};

}  // namespace ccoll::coord
