// ccoll/exec/communicator.hpp: what the host executors share: the shared area, per-call argument
// checks across ranks, the plan cache and the host run loop over the step interpreter.
//
// The host-threads executor puts the shared area on the heap, the shared-memory executor in a
// POSIX segment; both lay it out the same way:
//
//   AreaHeader | RankDescriptor x nranks | ConnectionCounters x nconn | slots (nconn x nslots x
//   slot_bytes)
//
// Connections are identified by (channel, from, to). The set is fixed when the communicator is
// created, from plans built for reference counts, because processes cannot grow a mapped segment
// in agreement cheaply; plans for other counts use a subset of it (ring and tree builders only drop
// connections for tiny counts). A plan that would need a connection outside the set is refused
// with ErrorCode::Unsupported.
//
// One call on rank r:
//   1. local checks (null buffers, count 0, dtype/op pair): the result is published in r's
//      RankDescriptor together with count, dtype and op, whether valid or not;
//   2. r waits for every rank's descriptor of this call and compares them; every rank reaches the
//      same verdict from the same data, so a mismatch or a bad argument anywhere makes every rank
//      throw, before any rank has touched a buffer;
//   3. the cached plan for (count, element size) is run: each (rank, channel) program through the
//      interpreter's try_step, the rank's channels interleaved on its one thread;
//   4. the connections' per-call bases advance by their messages per call.
// Waits give up at the call's deadline (Config::timeout) or when another rank raised the abort
// record; the first failure is published there so that every rank reports the root cause.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/exec/config.hpp"
#include "ccoll/exec/interpreter.hpp"
#include "ccoll/exec/slot_store_tuner.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/sync/abort.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::exec {

inline constexpr std::uint64_t kAreaMagic = 0x63636f6c6c763031ull;  // "ccollv01"
inline constexpr std::size_t kPage = 4096;

struct alignas(128) AreaHeader {
  std::uint64_t magic = 0;       // kAreaMagic once the area is initialised
  std::uint64_t generation = 0;  // nonce of the run that created the area
  std::uint32_t ready = 0;       // 1: initialised (written last, release)
  std::int32_t nranks = 0;
  std::uint64_t config_hash = 0;  // ranks must agree on everything that shapes the area
  std::uint64_t total_bytes = 0;
  std::uint32_t attached = 0;    // ranks that attached (shared memory)
  std::uint32_t left = 0;        // ranks that detached; the last one unlinks
  std::int64_t creator_pid = 0;  // shared memory: a segment whose creator died is stale
  alignas(128) sync::AbortRecord abort;
};

// One rank's arguments for one call, published for the others to compare.
struct alignas(128) RankDescriptor {
  std::uint64_t seq = 0;  // the call this describes (1, 2, ...); written last (release)
  std::uint64_t ack = 0;  // the last call whose descriptors this rank has read
  std::uint64_t count = 0;
  std::uint32_t dtype = 0;
  std::uint32_t op = 0;
  std::uint32_t status = 0;  // 0: arguments fine; otherwise 1 + ErrorCode
  std::uint32_t attached_generation = 0;
  std::uint32_t slot_stores = 0;  // rank 0 only: SlotStoreTuner::Mode of this call's slot writes
  char reason[80] = {};           // the local error's text (truncated)
};

struct AreaLayout {
  std::size_t descriptors = 0;  // offsets from the start of the area
  std::size_t counters = 0;
  std::size_t slots = 0;
  std::size_t total = 0;

  static constexpr std::size_t round_up(std::size_t x, std::size_t a) {
    return (x + a - 1) / a * a;
  }
  static AreaLayout make(int nranks, std::size_t nconnections, std::uint64_t slot_bytes,
                         std::uint32_t nslots) {
    AreaLayout l;
    l.descriptors = round_up(sizeof(AreaHeader), 128);
    l.counters =
        round_up(l.descriptors + sizeof(RankDescriptor) * static_cast<std::size_t>(nranks), kPage);
    l.slots = round_up(l.counters + sizeof(sync::ConnectionCounters) * nconnections, kPage);
    l.total = round_up(l.slots + nconnections * nslots * round_up(slot_bytes, 128), kPage);
    return l;
  }
};

struct ConnectionKey {
  std::uint32_t channel = 0;
  plan::Rank from = 0;
  plan::Rank to = 0;
  friend bool operator<(const ConnectionKey& a, const ConnectionKey& b) {
    return std::tie(a.channel, a.from, a.to) < std::tie(b.channel, b.from, b.to);
  }
  friend bool operator==(const ConnectionKey& a, const ConnectionKey& b) = default;
};

// A plan ready to run: the connections it uses, mapped onto the area.
struct PreparedPlan {
  plan::Plan plan;
  std::vector<std::uint32_t> arena_index;        // per plan connection
  std::vector<sync::ConnectionRef> connections;  // per plan connection
  int nactive = 1;
};

// What one rank keeps between calls (only that rank's thread touches it).
struct alignas(128) RankState {
  std::uint64_t seq = 0;                     // calls attempted
  std::vector<std::uint64_t> base_by_arena;  // messages of earlier calls per area connection
  std::vector<std::uint64_t> base;           // per connection of the current plan
  std::vector<std::uint32_t> pcs;            // per channel: next step
  const PreparedPlan* last_plan = nullptr;   // cache of the last lookup (no lock)
  std::uint64_t last_count = 0;
  std::size_t last_elem_size = 0;
  // Rank 0 only: how to write slots, per (count, element size) (Config::tune_slot_stores).
  std::unordered_map<std::uint64_t, SlotStoreTuner> tuners;
};

class Communicator {
 public:
  using BuildFn = plan::Plan (*)(const plan::PlanRequest&);

  Communicator(const Config& config, int nranks, BuildFn build, std::string_view policy_name)
      : config_(config), nranks_(nranks), build_(build) {
    if (nranks < 1) throw_invalid_argument(-1, "Config::nranks", ">= 1", std::to_string(nranks));
    if (config.slot_bytes < 16 || config.slot_bytes % 16 != 0)
      throw_invalid_argument(-1, "Config::slot_bytes", "a multiple of 16, >= 16",
                             std::to_string(config.slot_bytes));
    if (config.nslots < 1) throw_invalid_argument(-1, "Config::nslots", ">= 1", "0");
    if (config.timeout.count() <= 0)
      throw_invalid_argument(-1, "Config::timeout", "> 0 ms",
                             std::to_string(config.timeout.count()));
    // The connection set: the union over reference plans whose every piece is non-empty.
    for (std::size_t elem : {std::size_t{4}, std::size_t{1}}) {
      const std::uint64_t nch = std::max<std::uint32_t>(1, config.nchannels);
      const plan::Plan p =
          build_plan_unchecked(static_cast<std::uint64_t>(nranks) * nch * 4096, elem);
      for (const auto& c : p.connections) keys_.push_back(ConnectionKey{c.channel, c.from, c.to});
    }
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    layout_ = AreaLayout::make(nranks, keys_.size(), config.slot_bytes, config.nslots);
    // Everything that shapes the area or the plans, so that ranks built differently refuse to mix.
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
      for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
    };
    mix(static_cast<std::uint64_t>(nranks));
    mix(config.slot_bytes);
    mix(config.nslots);
    mix(config.nchannels);
    mix(config.nchunks);
    mix(keys_.size());
    for (char ch : policy_name) mix(static_cast<unsigned char>(ch));
    config_hash_ = h;
    const unsigned cores = std::thread::hardware_concurrency();
    wait_policy_ = sync::WaitPolicy::for_ranks(static_cast<unsigned>(nranks), cores);
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const Config& config() const { return config_; }
  int nranks() const { return nranks_; }
  const AreaLayout& layout() const { return layout_; }
  std::uint64_t config_hash() const { return config_hash_; }
  // How this communicator's waits spin, yield and sleep (no spinning when ranks outnumber cores).
  const sync::WaitPolicy& wait_policy() const { return wait_policy_; }
  std::size_t nconnections() const { return keys_.size(); }

  // Writes a fresh header into a zeroed area (the creator only; `ready` is published last).
  void init_area(std::byte* area, std::uint64_t generation, std::int64_t creator_pid = 0) const {
    auto* h = new (area) AreaHeader{};
    h->magic = kAreaMagic;
    h->creator_pid = creator_pid;
    h->generation = generation;
    h->nranks = nranks_;
    h->config_hash = config_hash_;
    h->total_bytes = layout_.total;
    sync::AtomicWord<std::uint32_t>(&h->ready).store_release(1);
  }

  // Points this communicator at an initialised area.
  void attach(std::byte* area) {
    area_ = area;
    header_ = reinterpret_cast<AreaHeader*>(area);
    descriptors_ = reinterpret_cast<RankDescriptor*>(area + layout_.descriptors);
    auto* counters = reinterpret_cast<sync::ConnectionCounters*>(area + layout_.counters);
    refs_.resize(keys_.size());
    const std::size_t stride = AreaLayout::round_up(config_.slot_bytes, 128);
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      sync::ConnectionRef& r = refs_[i];
      r.slots = area + layout_.slots + i * config_.nslots * stride;
      r.tail = &counters[i].tail;
      r.head = &counters[i].head;
      r.slot_bytes = stride;
      r.nslots = config_.nslots;
      r.from = keys_[i].from;
      r.to = keys_[i].to;
    }
  }
  AreaHeader* header() const { return header_; }

  void init_rank_state(RankState& s) const {
    s.base_by_arena.assign(keys_.size(), 0);
    s.base.assign(keys_.size(), 0);
  }

  // The plan for (count, elem_size), built, verified and mapped on first use. Thread-safe.
  const PreparedPlan& prepared_plan(std::uint64_t count, std::size_t elem_size) {
    std::lock_guard<std::mutex> lock(plans_mutex_);
    const std::uint64_t key = count * 16 + elem_size;  // elem_size <= 8
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
    auto prepared = std::make_unique<PreparedPlan>();
    prepared->plan = build_plan_unchecked(count, elem_size);
    const plan::Plan& p = prepared->plan;
    if (p.nranks != nranks_ || p.count != count)
      throw Error(ErrorCode::InvalidPlan, -1,
                  "the topology built a plan for " + std::to_string(p.nranks) + " ranks and " +
                      std::to_string(p.count) + " elements; expected " + std::to_string(nranks_) +
                      " and " + std::to_string(count));
    if (config_.verify_plans) plan::verify_or_throw(p);
    if (!check_step_shapes(p))
      throw Error(ErrorCode::Unsupported, -1,
                  "plan '" + p.algorithm + "' has a step with more than " +
                      std::to_string(kMaxStepPorts) + " ports");
    if (p.slot_elems * elem_size > config_.slot_bytes)
      throw Error(ErrorCode::InvalidPlan, -1, "plan messages exceed Config::slot_bytes");
    prepared->nactive = p.nactive();
    for (const auto& c : p.connections) {
      const ConnectionKey k{c.channel, c.from, c.to};
      auto pos = std::lower_bound(keys_.begin(), keys_.end(), k);
      if (pos == keys_.end() || !(*pos == k))
        throw Error(ErrorCode::Unsupported, -1,
                    "plan '" + p.algorithm + "' for count " + std::to_string(count) +
                        " uses connection " + std::to_string(c.from) + "->" + std::to_string(c.to) +
                        " on channel " + std::to_string(c.channel) +
                        ", which the reference plans did not; the shared area has no room for it");
      const auto idx = static_cast<std::uint32_t>(pos - keys_.begin());
      prepared->arena_index.push_back(idx);
      prepared->connections.push_back(refs_[idx]);
    }
    const PreparedPlan& result = *prepared;
    plans_.emplace(key, std::move(prepared));
    return result;
  }

  // One collective call by `rank` (its RankState must be used by one thread only).
  void run(RankState& st, int rank, const void* send, void* recv, std::size_t count, DataType dtype,
           ReduceOp op) {
    const std::uint64_t start = sync::now_ns();
    const std::uint64_t deadline =
        start + static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(config_.timeout).count());
    if (header_->abort.raised()) throw_abort(rank, -1, -1, -1, false, st.seq + 1);

    // 1. Local checks, published whatever their outcome.
    std::string local_error;
    ErrorCode local_code = ErrorCode::InvalidArgument;
    if (count == 0) {
      local_error = "argument 'count': expected > 0, got 0";
    } else if (send == nullptr) {
      local_error = "argument 'sendbuff': expected a buffer, got nullptr";
    } else if (recv == nullptr) {
      local_error = "argument 'recvbuff': expected a buffer, got nullptr";
    } else if (static_cast<unsigned>(dtype) > static_cast<unsigned>(DataType::u8) ||
               static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::avg)) {
      local_error = "argument 'datatype'/'op': not a known value";
    } else if (!is_supported(dtype, op)) {
      local_code = ErrorCode::Unsupported;
      local_error = "op " + std::string(to_string(op)) + " on " + std::string(to_string(dtype));
    } else if (send != recv) {
      const auto* s = static_cast<const std::byte*>(send);
      const auto* r = static_cast<const std::byte*>(recv);
      const std::size_t bytes = count * size_of(dtype);
      if (s < r + bytes && r < s + bytes)
        local_error =
            "arguments 'sendbuff'/'recvbuff': expected identical or disjoint buffers, "
            "got partially overlapping ones";
    }
    const std::uint64_t seq = ++st.seq;
    // The previous call's descriptors must have been read by everyone before ours is overwritten.
    for (int q = 0; q < nranks_; ++q)
      wait_word(&descriptors_[q].ack, seq - 1, rank, q, deadline, seq, "arrive at call");
    RankDescriptor& mine = descriptors_[rank];
    mine.count = count;
    mine.dtype = static_cast<std::uint32_t>(dtype);
    mine.op = static_cast<std::uint32_t>(op);
    mine.status = local_error.empty() ? 0u : 1u + static_cast<std::uint32_t>(local_code);
    // Rank 0 chooses how every rank writes its slots in this call (see slot_store_tuner.hpp).
    SlotStoreTuner* tuner = nullptr;
    if (rank == 0) {
      const bool eligible = local_error.empty() && config_.stream_slot_bytes != 0 &&
                            count * size_of(dtype) >= config_.stream_slot_bytes;
      SlotStoreTuner::Mode mode = eligible ? SlotStoreTuner::Streamed : SlotStoreTuner::Cached;
      if (eligible && config_.tune_slot_stores) {
        tuner = &st.tuners[count * 16 + size_of(dtype)];
        mode = tuner->next();
      }
      mine.slot_stores = mode;
    }
    std::memset(mine.reason, 0, sizeof mine.reason);
    std::memcpy(mine.reason, local_error.data(),
                std::min(local_error.size(), sizeof mine.reason - 1));
    sync::AtomicWord<std::uint64_t>(&mine.seq).store_release(seq);
    if (!local_error.empty()) {
      // Nothing of ours to read any more: let the others overwrite their descriptors later.
      sync::AtomicWord<std::uint64_t>(&mine.ack).store_release(seq);
      throw Error(local_code, rank, local_error);
    }

    // 2. Every rank's descriptor; all ranks reach the same verdict.
    for (int q = 0; q < nranks_; ++q)
      wait_word(&descriptors_[q].seq, seq, rank, q, deadline, seq, "arrive at call");
    std::string verdict;
    ErrorCode verdict_code = ErrorCode::Mismatch;
    for (int q = 0; q < nranks_ && verdict.empty(); ++q) {
      const RankDescriptor& d = descriptors_[q];
      if (d.status != 0) {
        verdict_code = static_cast<ErrorCode>(d.status - 1);
        verdict = "rank " + std::to_string(q) + " passed bad arguments to call " +
                  std::to_string(seq) + " (" + std::string(d.reason) +
                  "); no rank touched its buffers";
      }
    }
    const RankDescriptor& d0 = descriptors_[0];
    for (int q = 1; q < nranks_ && verdict.empty(); ++q) {
      const RankDescriptor& d = descriptors_[q];
      std::ostringstream os;
      if (d.count != d0.count) {
        os << "count differs: rank 0 has " << d0.count << ", rank " << q << " has " << d.count;
      } else if (d.dtype != d0.dtype) {
        os << "datatype differs: rank 0 has " << to_string(static_cast<DataType>(d0.dtype))
           << ", rank " << q << " has " << to_string(static_cast<DataType>(d.dtype));
      } else if (d.op != d0.op) {
        os << "op differs: rank 0 has " << to_string(static_cast<ReduceOp>(d0.op)) << ", rank " << q
           << " has " << to_string(static_cast<ReduceOp>(d.op));
      }
      if (!os.str().empty()) verdict = os.str() + " (call " + std::to_string(seq) + ")";
    }
    // Read before the acknowledgement below, after which rank 0 may reuse its descriptor.
    const auto slot_stores = static_cast<SlotStoreTuner::Mode>(d0.slot_stores);
    sync::AtomicWord<std::uint64_t>(&mine.ack).store_release(seq);
    if (!verdict.empty()) throw Error(verdict_code, rank, verdict);

    // 3. The plan, then the steps.
    const PreparedPlan* pp = st.last_plan;
    if (pp == nullptr || st.last_count != count || st.last_elem_size != size_of(dtype)) {
      try {
        pp = &prepared_plan(count, size_of(dtype));
      } catch (const Error& e) {
        raise_abort(e.code(), rank, -1, -1, -1, 0);
        throw;
      }
      st.last_plan = pp;
      st.last_count = count;
      st.last_elem_size = size_of(dtype);
    }
    const plan::Plan& p = pp->plan;
    for (std::size_t i = 0; i < pp->arena_index.size(); ++i)
      st.base[i] = st.base_by_arena[pp->arena_index[i]];
    if (st.pcs.size() < p.channels.size()) st.pcs.resize(p.channels.size());
    const std::uint64_t steps_start = sync::now_ns();
    dispatch_data_type(dtype, [&](auto t) {
      using T = decltype(t);
      dispatch_reduce_op(op, [&](auto o) {
        run_steps<T, decltype(o)::value>(st, *pp, rank, static_cast<const T*>(send),
                                         static_cast<T*>(recv), deadline, start, seq,
                                         slot_stores == SlotStoreTuner::Streamed);
      });
    });
    if (tuner != nullptr) tuner->record(slot_stores, sync::now_ns() - steps_start);
    // 4. Counters never reset: the next call's messages follow this call's.
    for (std::size_t i = 0; i < pp->arena_index.size(); ++i)
      st.base_by_arena[pp->arena_index[i]] += p.connections[i].messages_per_call;
  }

  // Publishes a failure for everyone (first one wins).
  void raise_abort(ErrorCode code, int rank, int channel, std::int64_t step, int peer,
                   std::uint32_t what) {
    header_->abort.raise(static_cast<std::uint32_t>(code), rank, channel, step, peer, what);
  }

 private:
  plan::Plan build_plan_unchecked(std::uint64_t count, std::size_t elem_size) const {
    plan::PlanRequest req;
    req.nranks = nranks_;
    req.count = count;
    req.elem_size = elem_size;
    req.nchannels = config_.nchannels == 0 ? 1 : config_.nchannels;
    req.nchunks = config_.nchunks;
    req.slot_bytes = config_.slot_bytes;
    req.nslots = config_.nslots;
    req.alpha_s = config_.alpha_s;
    req.beta_s_per_byte = config_.beta_s_per_byte;
    return build_(req);
  }

  static const char* what_text(std::uint32_t what) {
    switch (what) {
      case 1:
        return "a message from";
      case 2:
        return "a free slot at";
      case 3:
        return "the arrival of";
      default:
        return "";
    }
  }

  std::string describe_origin() const {
    const sync::AbortRecord& a = header_->abort;
    if (!a.settle()) return "another rank failed";
    std::ostringstream os;
    os << "rank " << a.rank << " failed first (" << to_string(static_cast<ErrorCode>(a.code));
    if (a.waiting_for != 0) os << " waiting for " << what_text(a.waiting_for) << " rank " << a.peer;
    if (a.channel >= 0) os << " on channel " << a.channel << ", step " << a.step;
    os << ")";
    return os.str();
  }

  // Every rank that stops because another failed reports the first failure's code, so that a
  // rank that never arrives makes every other rank report a timeout.
  [[noreturn]] void throw_abort(int rank, int channel, std::int64_t step, int peer,
                                bool waiting_for_slot, std::uint64_t seq) const {
    std::ostringstream os;
    os << "stopped in call " << seq;
    if (channel >= 0)
      os << " at channel " << channel << ", step " << step << " (waiting for "
         << (waiting_for_slot ? "a free slot at rank " : "a message from rank ") << peer << ")";
    os << " because " << describe_origin();
    const auto code =
        header_->abort.settle() ? static_cast<ErrorCode>(header_->abort.code) : ErrorCode::Aborted;
    throw Error(code == ErrorCode::Timeout ? ErrorCode::Timeout : ErrorCode::Aborted, rank,
                os.str());
  }

  void wait_word(const std::uint64_t* word, std::uint64_t target, int rank, int peer,
                 std::uint64_t deadline, std::uint64_t seq, const char* what) {
    sync::Counter c(const_cast<std::uint64_t*>(word));
    const sync::WaitResult r = c.wait(target, &header_->abort.flag, deadline, wait_policy_);
    if (r == sync::WaitResult::Ok) return;
    if (r == sync::WaitResult::Aborted) throw_abort(rank, -1, -1, peer, false, seq);
    raise_abort(ErrorCode::Timeout, rank, -1, -1, peer, 3);
    throw Error(ErrorCode::Timeout, rank,
                "rank " + std::to_string(peer) + " did not " + what + " " + std::to_string(seq) +
                    " within " + std::to_string(config_.timeout.count()) + " ms");
  }

  template <class T, ReduceOp Op>
  void run_steps(RankState& st, const PreparedPlan& pp, int rank, const T* input, T* output,
                 std::uint64_t deadline, std::uint64_t start, std::uint64_t seq,
                 bool stream_slots) {
    const plan::Plan& p = pp.plan;
    const auto nch = static_cast<std::uint32_t>(p.channels.size());
    ProgramContext<T> ctx;
    ctx.ports = p.ports.data();
    ctx.connections = pp.connections.data();
    ctx.base = st.base.data();
    ctx.input = input;
    ctx.output = output;
    ctx.nactive = pp.nactive;
    ctx.rank = rank;
    ctx.abort = &header_->abort.flag;
    ctx.stream_output =
        config_.stream_output_bytes != 0 && p.count * sizeof(T) >= config_.stream_output_bytes;
    ctx.stream_slots = stream_slots;
    std::uint32_t unfinished = 0;
    for (std::uint32_t c = 0; c < nch; ++c) {
      st.pcs[c] = 0;
      if (!p.channels[c].programs[static_cast<std::size_t>(rank)].steps.empty()) ++unfinished;
    }
    const HostGroup group;
    sync::Backoff backoff(wait_policy_);
    while (unfinished > 0) {
      bool progressed = false;
      for (std::uint32_t c = 0; c < nch; ++c) {
        const auto& steps = p.channels[c].programs[static_cast<std::size_t>(rank)].steps;
        if (st.pcs[c] >= steps.size()) continue;
        ctx.steps = steps.data();
        ctx.nsteps = static_cast<std::uint32_t>(steps.size());
        ctx.channel = c;
        while (try_step<T, Op>(group, ctx, st.pcs[c])) progressed = true;
        if (st.pcs[c] >= steps.size()) --unfinished;
      }
      if (progressed) {
        backoff.reset();
        continue;
      }
      const bool aborted = header_->abort.raised();
      if (aborted || sync::now_ns() >= deadline) {
        // Report the first unfinished channel's blocked step.
        for (std::uint32_t c = 0; c < nch; ++c) {
          const auto& steps = p.channels[c].programs[static_cast<std::size_t>(rank)].steps;
          if (st.pcs[c] >= steps.size()) continue;
          ctx.steps = steps.data();
          ctx.nsteps = static_cast<std::uint32_t>(steps.size());
          ctx.channel = c;
          const StepFailure f = blocked_port(ctx, st.pcs[c], sync::WaitResult::Timeout);
          if (aborted)
            throw_abort(rank, static_cast<int>(c), f.step, f.peer, f.waiting_for_slot, seq);
          raise_abort(ErrorCode::Timeout, rank, static_cast<int>(c), f.step, f.peer,
                      f.waiting_for_slot ? 2u : 1u);
          std::ostringstream os;
          os << "call " << seq << ", channel " << c << ", step " << f.step << " of " << steps.size()
             << ": waiting for "
             << (f.waiting_for_slot ? "a free slot at rank " : "a message from rank ") << f.peer
             << " for " << (sync::now_ns() - start) / 1000000 << " ms (Config::timeout "
             << config_.timeout.count() << " ms)";
          throw Error(ErrorCode::Timeout, rank, os.str());
        }
      }
      backoff.pause();
    }
  }

  Config config_;
  int nranks_;
  BuildFn build_;
  std::vector<ConnectionKey> keys_;
  AreaLayout layout_;
  std::uint64_t config_hash_ = 0;
  sync::WaitPolicy wait_policy_;
  std::byte* area_ = nullptr;
  AreaHeader* header_ = nullptr;
  RankDescriptor* descriptors_ = nullptr;
  std::vector<sync::ConnectionRef> refs_;
  std::mutex plans_mutex_;
  std::unordered_map<std::uint64_t, std::unique_ptr<PreparedPlan>> plans_;
};

}  // namespace ccoll::exec
