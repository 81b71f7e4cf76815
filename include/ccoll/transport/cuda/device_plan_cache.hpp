// ccoll/transport/cuda/device_plan_cache.hpp: the plans a CUDA executor keeps in device memory,
// by (count, element size, root), least recently used first out.
//
// Both CUDA executors keep one (cuda-virtual per executor, cuda-p2p per local rank), at most
// Config::max_cached_plans. An evicted plan's memory may still be read by a queued kernel, so the
// executor frees it behind that kernel (its `evict` callback); and an open session may name any
// cached plan in an item it has not run yet, so no plan is evicted while one is open: the
// executor refuses a new plan instead (make_room's `session_open`).
//
// Plain C++ (no CUDA call): the fast suite tests it (tests/cuda_protocol_test.cpp).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

#include "ccoll/core/error.hpp"
#include "ccoll/runtime/plan_cache.hpp"

namespace ccoll::transport::cuda {

template <class DevicePlan>
class DevicePlanCache {
 public:
  // The cached plan for `key`, now the most recently used; null if there is none.
  DevicePlan* find(const runtime::PlanKey& key) {
    auto it = plans_.find(key);
    if (it == plans_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return &it->second.plan;
  }

  // Makes room for one more plan under `capacity` (at least 1): evicts the least recently used
  // ones, handing each to evict(plan) first. With a session open nothing may be evicted:
  // Unsupported, naming `who` ("an open cuda::Session", say) and `rank`.
  template <class Evict>
  void make_room(std::size_t capacity, bool session_open, const std::string& who, int rank,
                 Evict&& evict) {
    capacity = std::max<std::size_t>(1, capacity);
    if (plans_.size() < capacity) return;
    if (session_open)
      throw Error(ErrorCode::Unsupported, rank,
                  who + " uses more distinct counts than Config::max_cached_plans (" +
                      std::to_string(capacity) + ")");
    while (plans_.size() >= capacity) {
      auto it = plans_.find(lru_.back());
      evict(it->second.plan);
      plans_.erase(it);
      lru_.pop_back();
    }
  }

  // Caches `plan` for `key`, which find() did not find, as the most recently used; the cached
  // plan.
  DevicePlan& insert(const runtime::PlanKey& key, DevicePlan plan) {
    assert(plans_.find(key) == plans_.end());
    lru_.push_front(key);
    return plans_.emplace(key, Entry{std::move(plan), lru_.begin()}).first->second.plan;
  }

  std::size_t size() const { return plans_.size(); }
  void clear() {
    plans_.clear();
    lru_.clear();
  }
  // f(key, plan) for every cached plan, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [key, entry] : plans_) f(key, entry.plan);
  }
  template <class F>
  void for_each(F&& f) {
    for (auto& [key, entry] : plans_) f(key, entry.plan);
  }

 private:
  struct Entry {
    DevicePlan plan;
    std::list<runtime::PlanKey>::iterator lru;
  };
  std::unordered_map<runtime::PlanKey, Entry, runtime::PlanKeyHash> plans_;
  std::list<runtime::PlanKey> lru_;  // most recently used first
};

}  // namespace ccoll::transport::cuda
