// ccoll/runtime/plan_cache.hpp: plans built, verified and mapped onto a transport's connections,
// once per (count, element size, root).
//
// A communicator serves one collective: the one its plan source builds (Plan::collective of the
// reference plans; docs/collectives.md). Broadcast and reduce plans differ by root, so their
// connection set is the union over every active root's reference plan.
//
// A communicator's connections are fixed when it is created: processes cannot grow shared memory
// or re-wire peers in agreement cheaply. The set is the union of the connections of reference
// plans (counts at which every piece of every channel is non-empty); plans for other counts use a
// subset of it (ring and tree builders only drop connections for tiny counts). A plan that needs a
// connection outside the set is refused with ErrorCode::Unsupported.
//
// The cache keeps at most Config::max_cached_plans plans and evicts the least recently looked up:
// a program that calls many distinct counts does not grow without bound. Plans are shared
// pointers, so a rank still running an evicted plan keeps it alive. A count whose plan would need
// more than kMaxMessagesPerCall messages of slot_bytes is refused before anything is built.
//
// Config::protocol is applied here, to the plan source of every transport (protocol/protocol.hpp:
// "" keeps the policy's choice, "simple" or "ll" forces it), so no transport can leave it out. A
// transport whose connections have no LowLatency region runs a LowLatency plan's messages as
// Simple ones: the same chunks, announced by the tail counter.
//
// The fingerprint covers everything that shapes the connection set and the plans (rank count,
// slot geometry, channels, chunks, the policies' identity and the reference plans' steps), so
// that ranks built differently refuse to run together instead of exchanging wrong data.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/runtime/connection.hpp"
#include "ccoll/runtime/interpreter.hpp"

namespace ccoll::runtime {

// The most messages of Config::slot_bytes one call may move per rank and channel: far beyond any
// real call (2^20 slots of the default 1 MiB is a terabyte), and small enough that a plan for an
// absurd count is refused instead of exhausting memory while it is built.
inline constexpr std::uint64_t kMaxMessagesPerCall = std::uint64_t{1} << 20;

// What tells one cached plan from another (here and in the CUDA executors' device copies):
// the plan's count, the element size and the root (0 where the collective has none).
struct PlanKey {
  std::uint64_t count = 0;
  std::size_t elem_size = 0;
  int root = 0;
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    return std::hash<std::uint64_t>{}(k.count * 16 + k.elem_size) ^
           (static_cast<std::size_t>(k.root) * 0x9e3779b97f4a7c15ull);
  }
};

// Builds the plan for a request: a logical topology and a schedule composed (allreduce.hpp).
using PlanSource = std::function<plan::Plan(const plan::PlanRequest&)>;

struct ConnectionKey {
  std::uint32_t channel = 0;
  plan::Rank from = 0;
  plan::Rank to = 0;
  friend bool operator<(const ConnectionKey& a, const ConnectionKey& b) {
    return std::tie(a.channel, a.from, a.to) < std::tie(b.channel, b.from, b.to);
  }
  friend bool operator==(const ConnectionKey& a, const ConnectionKey& b) = default;
};

// A plan ready to run: per plan connection, its index in the communicator's set and its object.
template <Connection C>
struct PreparedPlan {
  plan::Plan plan;
  std::vector<std::uint32_t> set_index;
  std::vector<C> connections;
  int nactive = 1;
  // The plan runs in LowLatency lines: it is an LL plan and every connection has an LL region (a
  // transport without them runs LL plans in Simple; their half-slot chunks fit).
  bool low_latency = false;
};

// FNV-1a over 64-bit words.
class Fingerprint {
 public:
  void mix(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) h_ = (h_ ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
  void mix(std::string_view s) {
    for (char ch : s) mix(static_cast<std::uint64_t>(static_cast<unsigned char>(ch)));
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 1469598103934665603ull;
};

template <Connection C>
class PlanCache {
 public:
  PlanCache(const Config& config, int nranks, PlanSource source, std::string_view policy_id)
      : config_(with_slot_bytes(config)),
        nranks_(nranks),
        source_(protocol::configured_source(config, std::move(source))) {
    Fingerprint fp;
    fp.mix(static_cast<std::uint64_t>(nranks));
    fp.mix(config_.slot_bytes);
    fp.mix(config.nslots);
    fp.mix(config.nchannels);
    fp.mix(config.nchunks);
    fp.mix(protocol::configured_policy_id(config, policy_id));
    for (std::size_t elem : {std::size_t{4}, std::size_t{1}}) {
      const std::uint64_t nch = std::max<std::uint32_t>(1, config.nchannels);
      // nranks x nch x 4096 elements; a reduce-scatter or all-gather with relays needs a multiple
      // of its active ranks, fewer than nranks: then the largest m x nch x 4096 it accepts.
      std::uint64_t count = 0;
      plan::Plan first;
      int first_root = 0;
      std::string full_count_error;  // root 0's at nranks x nch x 4096
      try {
        // Where no count plans, the error to report is one that is not about the probe's count
        // (a FIFO too shallow for the plan, say), not the last count's "expected a multiple".
        std::exception_ptr full_error, countless_error;
        for (int m = nranks;; --m) {
          count = static_cast<std::uint64_t>(m) * nch * 4096;
          try {
            first = build(count, elem, 0);
            break;
          } catch (const Error& e) {
            if (m == nranks) {
              full_count_error = e.what();
              full_error = std::current_exception();
            }
            if (e.code() != ErrorCode::InvalidArgument) throw;
            if (!countless_error &&
                std::string_view(e.what()).find("argument 'count'") == std::string_view::npos)
              countless_error = std::current_exception();
            if (m <= 1) std::rethrow_exception(countless_error ? countless_error : full_error);
          }
        }
      } catch (const Error& e) {
        // A broadcast or reduce is planned from active roots only (any count), and rank 0 may be
        // a relay: the first rank that plans as the root, at most nranks - 1 more builds (as many
        // as the counts above). A root whose error is root 0's word for word shows that the root
        // is not what fails (a collective without one, say): no more tries. So a plan source's
        // error for a rank that cannot be the root names that rank, as the library's do. Where
        // none plans, the error is root 0's.
        if (e.code() != ErrorCode::InvalidArgument) throw;
        const std::exception_ptr root0_error = std::current_exception();
        count = static_cast<std::uint64_t>(nranks) * nch * 4096;
        for (first_root = 1; first_root < nranks; ++first_root) {
          try {
            first = build(count, elem, first_root);
            break;
          } catch (const Error& again) {
            if (again.code() != ErrorCode::InvalidArgument) throw;
            if (again.what() == full_count_error) std::rethrow_exception(root0_error);
          }
        }
        if (first_root == nranks || !plan::has_root(first.collective))
          std::rethrow_exception(root0_error);
      }
      if (first.nranks != nranks)
        throw Error(ErrorCode::InvalidArgument, -1,
                    "the logical topology '" + first.algorithm + "' plans for " +
                        std::to_string(first.nranks) + " ranks; the communicator has " +
                        std::to_string(nranks));
      collective_ = first.collective;
      active_ = first.active;
      fp.mix(static_cast<std::uint64_t>(collective_));
      // Broadcast and reduce: every active rank's plan as the root; the others: the first plan.
      const bool rooted = plan::has_root(collective_);
      for (int root = 0; root < (rooted ? nranks : 1); ++root) {
        if (rooted && !first.active[static_cast<std::size_t>(root)]) continue;
        const plan::Plan p = root == first_root ? first : build(count, elem, root);
        channels_ = std::max(channels_, static_cast<std::uint32_t>(p.channels.size()));
        for (const auto& c : p.connections) keys_.push_back(ConnectionKey{c.channel, c.from, c.to});
        for (const auto& ch : p.channels)
          for (const auto& prog : ch.programs)
            for (const auto& s : prog.steps) {
              fp.mix(s.offset);
              fp.mix(s.count);
              fp.mix((std::uint64_t{s.recv_count} << 32) | s.send_count);
              fp.mix((std::uint64_t{s.src_position} << 8) | static_cast<std::uint64_t>(s.src));
            }
      }
    }
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    fp.mix(keys_.size());
    fingerprint_ = fp.value();
  }
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  const std::vector<ConnectionKey>& keys() const { return keys_; }
  // The most channels of the reference plans: every plan of the policy has at most these (a
  // policy that chooses among plans gives each as many as the most any has: algo/by_size.hpp;
  // relay programs placed in their hosts keep the reference plans' channels: plan/placement.hpp).
  // Not the connections' labels, which name no channel a program runs on.
  std::uint32_t channels() const { return channels_; }
  std::uint64_t fingerprint() const { return fingerprint_; }
  // The collective every plan of this cache computes, and which ranks contribute and receive
  // (the others relay).
  plan::Collective collective() const { return collective_; }
  const std::vector<bool>& active() const { return active_; }
  // The transport's connection object for every key, in key order.
  void set_connections(std::vector<C> connections) { connections_ = std::move(connections); }

  // The plan for (count, elem_size, root), built, verified and mapped on first use. Thread-safe.
  // `root` matters only to broadcast and reduce.
  std::shared_ptr<const PreparedPlan<C>> prepared(std::uint64_t count, std::size_t elem_size,
                                                  int root = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!plan::has_root(collective_)) root = 0;
    const Key key{count, elem_size, root};
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.plan;
    }
    check_size(count, elem_size);
    auto prepared = std::make_shared<PreparedPlan<C>>();
    prepared->plan = build(count, elem_size, root);
    const plan::Plan& p = prepared->plan;
    if (p.nranks != nranks_ || p.count != count)
      throw Error(ErrorCode::InvalidPlan, -1,
                  "the topology built a plan for " + std::to_string(p.nranks) + " ranks and " +
                      std::to_string(p.count) + " elements; expected " + std::to_string(nranks_) +
                      " and " + std::to_string(count));
    if (p.collective != collective_ || (plan::has_root(collective_) && p.root != root))
      throw Error(ErrorCode::InvalidPlan, -1,
                  "the topology built a " + std::string(plan::collective_name(p.collective)) +
                      " plan (root " + std::to_string(p.root) + "); expected " +
                      std::string(plan::collective_name(collective_)) + " (root " +
                      std::to_string(root) + ")");
    // The verifier checks a plan against its own active set, and the call's buffers are laid out
    // for the communicator's (active()): a plan that makes a rank a relay would leave its output
    // unwritten and its input out of every sum, yet verify.
    if (p.active != active_) {
      std::size_t r = 0;
      while (r < p.active.size() && r < active_.size() && p.active[r] == active_[r]) ++r;
      throw Error(
          ErrorCode::InvalidPlan, -1,
          "the topology's plan for count " + std::to_string(count) +
              (r < p.active.size() && r < active_.size()
                   ? " makes rank " + std::to_string(r) + (p.active[r] ? " active" : " a relay")
                   : " has " + std::to_string(p.active.size()) + " ranks' activity") +
              ", unlike its reference plans");
    }
    // The verifier proves deadlock freedom for the plan's own FIFO depth, but the transport's
    // connections have Config::nslots slots: a plan source that ignores the request's depth would
    // pass the proof and then hang. A shallower plan depth is safe (more slots only add room).
    if (p.nslots > config_.nslots)
      throw Error(
          ErrorCode::InvalidPlan, -1,
          "plan '" + p.algorithm + "' is verified for FIFOs of " + std::to_string(p.nslots) +
              " slots; the connections have Config::nslots = " + std::to_string(config_.nslots));
    if (config_.verify_plans) plan::verify_or_throw(p);
    if (!check_step_shapes(p))
      throw Error(ErrorCode::Unsupported, -1,
                  "plan '" + p.algorithm + "' has a step with more than " +
                      std::to_string(kMaxStepPorts) + " ports");
    if (p.slot_elems * elem_size > config_.slot_bytes)
      throw Error(ErrorCode::InvalidPlan, -1, "plan messages exceed Config::slot_bytes");
    // A LowLatency message also carries its trailer (protocol::build_for chunks for this).
    if (protocol::is_low_latency(p) &&
        p.slot_elems * elem_size >
            protocol::payload_bytes(protocol::Id::low_latency, config_.slot_bytes))
      throw Error(ErrorCode::InvalidPlan, -1,
                  "plan '" + p.algorithm + "': LowLatency messages of " +
                      std::to_string(p.slot_elems * elem_size) + " bytes exceed the " +
                      std::to_string(
                          protocol::payload_bytes(protocol::Id::low_latency, config_.slot_bytes)) +
                      " bytes of payload an LL slot of Config::slot_bytes holds");
    prepared->nactive = p.nactive();
    for (const auto& c : p.connections) {
      const ConnectionKey k{c.channel, c.from, c.to};
      auto pos = std::lower_bound(keys_.begin(), keys_.end(), k);
      if (pos == keys_.end() || !(*pos == k))
        throw Error(ErrorCode::Unsupported, -1,
                    "plan '" + p.algorithm + "' for count " + std::to_string(count) +
                        " uses connection " + std::to_string(c.from) + "->" + std::to_string(c.to) +
                        " on channel " + std::to_string(c.channel) +
                        ", which the reference plans did not; the communicator has no room for it");
      const auto idx = static_cast<std::uint32_t>(pos - keys_.begin());
      prepared->set_index.push_back(idx);
      prepared->connections.push_back(connections_.at(idx));
    }
    if constexpr (LowLatencyConnection<C>) {
      prepared->low_latency = protocol::is_low_latency(p);
      for (const C& c : prepared->connections)
        prepared->low_latency = prepared->low_latency && c.has_low_latency();
    }
    const std::size_t cap = std::max<std::size_t>(1, config_.max_cached_plans);
    while (plans_.size() >= cap) {
      plans_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    plans_.emplace(key, Entry{prepared, lru_.begin()});
    return prepared;
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }

 private:
  using Key = PlanKey;
  using KeyHash = PlanKeyHash;
  struct Entry {
    std::shared_ptr<const PreparedPlan<C>> plan;
    typename std::list<Key>::iterator lru;
  };

  // Refuses counts whose messages could not be counted, or planned, in bounded memory.
  void check_size(std::uint64_t count, std::size_t elem_size) const {
    if (elem_size == 0 || count > std::numeric_limits<std::uint64_t>::max() / elem_size)
      throw_invalid_argument(-1, "count", "a byte size below 2^64", std::to_string(count));
    const std::uint64_t bytes = count * elem_size;
    const std::uint64_t messages = bytes / config_.slot_bytes + 1;
    const std::uint64_t nch = std::max<std::uint32_t>(1, config_.nchannels);
    if (messages / nch > kMaxMessagesPerCall)
      throw Error(ErrorCode::Unsupported, -1,
                  "count " + std::to_string(count) + " (" + std::to_string(bytes) +
                      " bytes) needs more than " + std::to_string(kMaxMessagesPerCall) +
                      " messages of Config::slot_bytes = " + std::to_string(config_.slot_bytes) +
                      " per channel; raise slot_bytes or nchannels, or split the call");
  }

  plan::Plan build(std::uint64_t count, std::size_t elem_size, int root) const {
    plan::PlanRequest req;
    req.root = root;
    req.nranks = nranks_;
    req.count = count;
    req.elem_size = elem_size;
    req.nchannels = config_.nchannels == 0 ? 1 : config_.nchannels;
    req.nchunks = config_.nchunks;
    req.slot_bytes = config_.slot_bytes;
    req.nslots = config_.nslots;
    req.alpha_s = config_.alpha_s;
    req.beta_s_per_byte = config_.beta_s_per_byte;
    return source_(req);
  }

  Config config_;
  int nranks_;
  PlanSource source_;
  std::vector<ConnectionKey> keys_;
  std::uint64_t fingerprint_ = 0;
  std::vector<C> connections_;
  std::uint32_t channels_ = 1;
  mutable std::mutex mutex_;
  plan::Collective collective_ = plan::Collective::allreduce;
  std::vector<bool> active_;
  std::unordered_map<Key, Entry, KeyHash> plans_;
  std::list<Key> lru_;  // keys, most recently used first
};

// The channels an executor keeps state for (a GPU block each, progress words, message bases):
// those of the reference plans, and Config::nchannels for connection-free plans (one rank). A plan
// with more is refused where it would run.
template <Connection C>
std::uint32_t executor_channels(const PlanCache<C>& plans, const Config& config) {
  return std::max<std::uint32_t>({1, config.nchannels, plans.channels()});
}

}  // namespace ccoll::runtime
