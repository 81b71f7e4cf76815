// ccoll/runtime/communicator.hpp: one collective call, composed from the runtime's parts and a
// transport's control plane and connections.
//
// One call on rank r (every transport whose ranks run the interpreter on host threads) of the
// communicator's collective (runtime/plan_cache.hpp: allreduce, or the one its plan source builds;
// CallShape names it and its root, and the rank's buffers are mapped onto the plan's index space
// by runtime/call_layout()):
//   1. local argument checks (runtime/call_args.hpp); rank 0 also decides how this call writes
//      its slots (runtime/slot_store_tuner.hpp);
//   2. agreement through the transport's control plane (runtime/control_plane.hpp): every rank
//      throws, before touching a buffer, if any rank's arguments are bad or differ; calls of at
//      most Config::in_band_agreement_bytes on a plane that can (InBandControlPlane) publish
//      their arguments here and compare them after step 4 instead;
//   3. the plan for (count, element size) from the plan cache (runtime/plan_cache.hpp), built and
//      verified on first use and mapped onto the transport's connections;
//   4. the rank's programs through the run loop (runtime/run_loop.hpp); an in-band call of a
//      LowLatency plan in which every rank takes part is compared by its messages, whose trailers
//      carry the arguments (protocol/low_latency.hpp), and needs no comparison after the steps;
//      an eager call (a broadcast or reduce of at most Config::eager_rooted_bytes) returns here
//      and is compared when one of the rank's next calls begins (compare_eager_calls());
//   5. the connections' per-call bases advance by their messages per call: counters never reset,
//      the next call's messages follow this call's.
// A transport whose ranks can read each other's registered windows passes the call's placement
// in one (runtime/call_args.hpp) and a `direct` routine: when every rank's buffers lie at the same
// offsets of one window and the plan has no relays, every rank runs `direct` after step 3 instead
// of steps 4-5 (runtime/symmetric_allreduce.hpp, symmetric_shards.hpp, symmetric_rooted.hpp): every
// collective. All ranks decide alike, from the agreement.
// While step 4 runs, the rank's per-channel progress words tell a consumer thread of the same
// process which layers of the output are already final (layer_readiness()).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/runtime/call_args.hpp"
#include "ccoll/runtime/connection.hpp"
#include "ccoll/runtime/control_plane.hpp"
#include "ccoll/runtime/element_loop.hpp"
#include "ccoll/runtime/fast_box.hpp"
#include "ccoll/runtime/layer_readiness.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/runtime/run_loop.hpp"
#include "ccoll/runtime/slot_store_tuner.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::runtime {

// Rejects settings no transport can run with (named after the Config field).
inline void check_config(const Config& config, int nranks) {
  if (nranks < 1) throw_invalid_argument(-1, "Config::nranks", ">= 1", std::to_string(nranks));
  if (config.slot_bytes < 16 || config.slot_bytes % 16 != 0)
    throw_invalid_argument(-1, "Config::slot_bytes", "a multiple of 16, >= 16",
                           std::to_string(config.slot_bytes));
  if (config.nslots < 1) throw_invalid_argument(-1, "Config::nslots", ">= 1", "0");
  if (config.timeout.count() <= 0)
    throw_invalid_argument(-1, "Config::timeout", "> 0 ms", std::to_string(config.timeout.count()));
}

// How many eager calls a rank leaves uncompared before it looks whether its peers' arguments to
// them are in (Communicator::compare_eager_calls): the calls whose summaries share a cache line.
inline constexpr std::uint64_t kEagerComparePeriod = 4;

// The largest block (count x element size) a small reduce-scatter or all-gather stages to agree
// in band: its staged output (P blocks at most) is copied once more, which on shared memory
// costs more than the round of the control plane it saves from about 4 KiB blocks at P = 2
// (docs/results/collectives-2026-11-30.md). A broadcast's root or a reduce's leaves would wait a
// whole round before sending: those stage up to Config::in_band_agreement_bytes.
inline constexpr std::uint64_t kStagedBlockBytes = 2048;

// A control plane whose ranks share the fast boxes of runtime/fast_box.hpp.
template <class P>
concept FastBoxControlPlane = InBandControlPlane<P> && requires(P& p, FailurePoint where) {
  { p.fast_boxes() } -> std::convertible_to<const FastBoxes&>;
  p.acknowledge_call(std::uint64_t{1}, where);
};

// Eager calls pending at which a rank that sent through the fast boxes reads whether its readers
// took them (compare_eager_calls): a line per reader every so many calls, not every call.
inline constexpr std::uint64_t kFastBoxLookPending = 16;

// Timeouts from which a call's deadline starts from sync::coarse_now_ns(): a tick (at most 10 ms)
// early is then at most 10% of the timeout.
inline constexpr std::chrono::milliseconds kCoarseStartTimeout{100};

template <ControlPlane P, Connection C>
class Communicator {
 public:
  using connection_type = C;
  using rank_state = RankState<C>;

  Communicator(const Config& config, int nranks, PlanSource source, std::string_view policy_id)
      : config_((check_config(with_slot_bytes(config), nranks), with_slot_bytes(config))),
        nranks_(nranks),
        plans_(config, nranks, std::move(source), policy_id),
        wait_policy_(sync::WaitPolicy::for_ranks(static_cast<unsigned>(nranks),
                                                 std::thread::hardware_concurrency())),
        learned_spin_(std::make_unique<LearnedSpin>(LearnedSpin{wait_policy_.spin_ns})) {
    wait_policy_.learned_spin_ns = &learned_spin_->ns;
    // Every plan's channels (runtime::executor_channels).
    progress_channels_ = executor_channels(plans_, config_);
    // Each rank's words start on their own cache line: a consumer polling one rank's words must
    // not slow down the others.
    constexpr std::size_t kLineWords = 128 / sizeof(std::uint64_t);
    progress_stride_ = (progress_channels_ + kLineWords - 1) / kLineWords * kLineWords;
    progress_.assign(static_cast<std::size_t>(nranks) * progress_stride_ + kLineWords, 0);
    const auto addr = reinterpret_cast<std::uintptr_t>(progress_.data());
    progress_first_ = (kLineWords - addr / sizeof(std::uint64_t) % kLineWords) % kLineWords;
    all_active_ =
        std::all_of(plans_.active().begin(), plans_.active().end(), [](bool a) { return a; });
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const Config& config() const { return config_; }
  int nranks() const { return nranks_; }
  // The connections the transport must provide, and the fingerprint ranks must agree on.
  const std::vector<ConnectionKey>& connection_keys() const { return plans_.keys(); }
  std::uint64_t fingerprint() const { return plans_.fingerprint(); }
  // How this communicator's waits spin, yield and sleep (no spinning when ranks outnumber the
  // machine's cores; a spin learned from its waits otherwise).
  const sync::WaitPolicy& wait_policy() const { return wait_policy_; }

  // Connects the communicator to the transport: its control plane and one connection per key.
  void attach(P plane, std::vector<C> connections) {
    plane_ = std::move(plane);
    plans_.set_connections(std::move(connections));
  }
  P& control_plane() { return plane_; }

  void init_rank_state(rank_state& s) const {
    s.base_by_set.assign(plans_.keys().size(), 0);
    s.base.assign(plans_.keys().size(), 0);
    if constexpr (FastBoxControlPlane<P>)
      s.boxes.reset(nranks_, static_cast<std::size_t>(plane_.max_unverified_calls()) + 1);
  }

  // The plan for `count` elements of `elem_size` bytes (built, verified and cached on first use).
  std::shared_ptr<const PreparedPlan<C>> prepared_plan(std::uint64_t count, std::size_t elem_size) {
    return plans_.prepared(count, elem_size);
  }
  std::size_t cached_plans() const { return plans_.size(); }

  // The readiness of `rank`'s output layers in its calls of `count` elements of `elem_size` bytes,
  // for a thread of this process other than the rank's ([C-Cube] Sec. III-D's gradient queuing):
  // layer l is [layer_end[l-1], layer_end[l]) and the last ends at count. Valid while the
  // communicator lives; waits end early (Aborted) once it is aborted.
  LayerReadiness layer_readiness(int rank, std::uint64_t count, std::size_t elem_size,
                                 std::span<const std::uint64_t> layer_end) {
    if (rank < 0 || rank >= nranks_)
      throw_invalid_argument(rank, "rank", "0.." + std::to_string(nranks_ - 1),
                             std::to_string(rank));
    const auto pp = plans_.prepared(count, elem_size);
    if (pp->plan.channels.size() > progress_channels_)
      throw Error(ErrorCode::Unsupported, rank,
                  "layer readiness: the plan for count " + std::to_string(count) + " has " +
                      std::to_string(pp->plan.channels.size()) + " channels, more than the " +
                      std::to_string(progress_channels_) + " the communicator tracks");
    return LayerReadiness(LayerChunkTable(pp->plan, rank, layer_end), progress_words(rank),
                          plane_.abort_word(), wait_policy_);
  }

  // The collective this communicator runs (every call's CallShape names it).
  plan::Collective collective() const { return plans_.collective(); }
  // Whether small calls may run through the fast boxes (run_fast_box_call): a broadcast or
  // reduce on 2 to kFastBoxMaxRanks ranks without relays. Only then does the transport's area
  // carry the rings.
  bool uses_fast_boxes() const {
    return plan::has_root(plans_.collective()) && all_active_ && fast_box_bytes(nranks_) != 0;
  }

  // One collective call by `rank` (its state must be used by one thread only). `count` counts as
  // the collective does (call_layout()).
  void run(rank_state& st, int rank, const void* send, void* recv, std::size_t count,
           DataType dtype, ReduceOp op, CallShape shape = CallShape{}) {
    run(
        st, rank, send, recv, count, dtype, op, WindowPlacement{}, [](const StepOptions&) {},
        shape);
  }
  // The same, for buffers at `placement` in a registered window: direct(options) runs the call
  // when every rank's buffers lie at the same offsets of that window.
  template <class Direct>
  void run(rank_state& st, int rank, const void* send, void* recv, std::size_t count,
           DataType dtype, ReduceOp op, const WindowPlacement& placement, Direct&& direct,
           CallShape shape = CallShape{}) {
    StepOptions o;
    o.timeout_ms = static_cast<long>(config_.timeout.count());
    start_clock(st, o);
    FailurePoint here{rank, -1, -1, -1, FailurePoint::Waiting::nothing};
    if (plane_.aborted()) {
      const Error stopped = plane_.stopped_error(here, st.seq + 1);
      const bool first = !st.reported_stop;
      st.reported_stop = true;
      throw first ? stopped : later_stop(stopped);
    }
    // 1. Local checks; rank 0 chooses how every rank writes its slots in this call.
    const bool allreduce = shape.collective == plan::Collective::allreduce;
    CallArgs args = check_call_arguments(send, recv, count, dtype, op, shape,
                                         rank < nranks_ ? rank : -1, plans_.active());
    // A bad argument like the others: the ranks that agree with the communicator learn of it.
    if (shape.collective != plans_.collective() && args.ok()) {
      args.error = ErrorCode::InvalidArgument;
      args.reason = "a " + std::string(plan::collective_name(shape.collective)) +
                    " call on a communicator of " +
                    std::string(plan::collective_name(plans_.collective())) + " plans";
    }
    const CallLayout layout = call_layout(shape, count, rank, plans_.active());
    const std::uint64_t bytes = layout.plan_count * size_of(dtype);
    const bool may_stream = config_.stream_slot_bytes != 0 && bytes >= config_.stream_slot_bytes;
    SlotStoreTuner* tuner = nullptr;
    bool in_band = false;
    bool eager = false;
    bool staged = false;
    // A broadcast or reduce small enough for one fast box per message runs without its plan
    // (run_fast_box_call). Every rank decides alike from the arguments they compare, whatever
    // their Config: the plan path's messages and the boxes' never meet.
    bool boxed = false;
    if constexpr (FastBoxControlPlane<P>)
      boxed = uses_fast_boxes() && args.ok() && bytes <= kFastBoxPayload &&
              static_cast<bool>(plane_.fast_boxes());
    // Small calls agree in band. The other collectives then run their steps into a scratch output
    // (RankState::staged_output) and copy it to the user's buffer only once every rank's arguments
    // compared equal, so that a bad or mismatched argument on one rank never lets another write
    // its buffers: the copy costs less than the round of the control plane it saves
    // (docs/collectives.md). Broadcasts and reduces of at most Config::eager_rooted_bytes return
    // first instead and write the user's buffers at once. A rank whose own arguments are bad
    // agrees first (AreaControlPlane::agree, which aborts the communicator if a peer ran its
    // steps): when every rank refuses the call alike, no steps ran and it stays usable.
    if constexpr (InBandControlPlane<P>) {
      const bool small = !may_stream && config_.in_band_agreement_bytes != 0 &&
                         bytes <= config_.in_band_agreement_bytes && args.ok();
      eager = plan::has_root(shape.collective) && !may_stream && config_.eager_rooted_bytes != 0 &&
              bytes <= config_.eager_rooted_bytes && args.ok();
      // Windowed calls of the other collectives agree first: they may then read the peers'
      // buffers in place (runtime/symmetric_shards.hpp, symmetric_rooted.hpp). A reduce-scatter
      // or all-gather stages only blocks of at most kStagedBlockBytes: its extra copy grows with
      // the block, while the round it saves does not.
      staged = small && !allreduce && !eager && !boxed && placement.window == 0 &&
               (plan::has_root(shape.collective) || count * size_of(dtype) <= kStagedBlockBytes);
      in_band = (small && allreduce) || staged || eager || (small && boxed);
      compare_eager_calls(st, eager, o.deadline_ns, here);
    }
    // Small calls agree in band, after their steps, so they stage whatever their buffers.
    const bool windowed = placement.window != 0 && !in_band && !boxed;
    if (windowed) args.placement = placement;
    if (rank == 0) {
      const bool eligible = args.ok() && may_stream;
      SlotStoreTuner::Mode mode = eligible ? SlotStoreTuner::Streamed : SlotStoreTuner::Cached;
      if (eligible && config_.tune_slot_stores) {
        tuner = &(windowed ? st.window_tuners : st.tuners)[slot_store_bucket(bytes)];
        mode = tuner->next();
      }
      args.root_choice = mode;
    }
    o.seq = ++st.seq;
    // A call that fails with the communicator aborted has reported the stop: this rank's later
    // calls report a refused call's code as Aborted (later_stop). A call refused alike by every
    // rank leaves the communicator usable, and reports nothing of a later abort.
    struct CallEnd {
      rank_state& st;
      const P& plane;
      int exceptions = std::uncaught_exceptions();
      ~CallEnd() {
        if (std::uncaught_exceptions() != exceptions && plane.aborted()) st.reported_stop = true;
      }
    } call_end{st, plane_};

    // 2. Agreement: before the steps, or (small calls) alongside them.
    Agreement agreed;
    if (in_band) {
      if constexpr (InBandControlPlane<P>) plane_.publish(args, o.seq, o.deadline_ns, here);
    } else {
      try {
        agreed = plane_.agree(args, o.seq, o.deadline_ns, here);
      } catch (const Error& e) {
        // Stopped before every rank's arguments were in (a peer that ran its steps in band
        // raised the abort, or a late peer was found): a rank with a bad argument still names it.
        // A control plane that throws the refusal itself (MPI's) has aborted nothing.
        if (!args.ok() && plane_.aborted()) {
          const std::string why = e.what();
          const auto at = why.find("stopped ");
          throw Error(args.error, rank,
                      args.reason + "; the communicator is aborted (" +
                          (at == std::string::npos ? why : why.substr(at)) + ")");
        }
        throw;
      }
      if (!agreed.verdict.empty()) throw Error(agreed.code, rank, agreed.verdict);
    }
    o.stream_slots = !in_band && static_cast<SlotStoreTuner::Mode>(agreed.root_choice) ==
                                     SlotStoreTuner::Streamed;
    if constexpr (FastBoxControlPlane<P>) {
      if (boxed) {
        run_fast_box_call(st, rank, send, recv, count, dtype, op, shape, o, in_band, eager, here);
        return;
      }
    }

    // 3. The plan.
    if (st.last_plan == nullptr || st.last_count != layout.plan_count ||
        st.last_elem_size != size_of(dtype) || st.last_root != shape.root) {
      try {
        st.last_plan = plans_.prepared(layout.plan_count, size_of(dtype), shape.root);
      } catch (const Error& e) {
        plane_.raise(e.code(), here);
        throw;
      } catch (const std::exception&) {
        raise_foreign(here);
        throw;
      }
      st.last_count = layout.plan_count;
      st.last_elem_size = size_of(dtype);
      st.last_root = shape.root;
      // Building and verifying a plan is this rank's own work, not a wait for its peers (seconds
      // for a large forest or in an unoptimised build, and a peer of the same process waits for
      // the cache's lock meanwhile): the call's waits count from when its plan is ready.
      start_clock(st, o);
    }
    const PreparedPlan<C>* pp = st.last_plan.get();
    const plan::Plan& p = pp->plan;
    o.op = op;
    o.ll_signature = protocol::LowLatency::signature(count, static_cast<std::uint32_t>(dtype),
                                                     static_cast<std::uint32_t>(op));
    o.stream_output = config_.stream_output_bytes != 0 && bytes >= config_.stream_output_bytes;
    const bool direct_call = windowed && agreed.symmetric && pp->nactive == nranks_;
    // A tuner's times are of one kind of call only (a windowed call that stages is not timed);
    // direct reduce-scatters and all-gathers write no share that peers read, so nothing to tune.
    if (windowed != direct_call || (direct_call && !allreduce)) tuner = nullptr;
    if (direct_call) {
      // Relays (nactive < nranks) contribute nothing and receive nothing: those plans stage.
      // o.stream_slots: rank 0's choice of stores for the shares the peers read.
      const std::uint64_t direct_start = tuner != nullptr ? sync::now_ns() : 0;
      try {
        direct(o);
      } catch (const Error& e) {
        plane_.raise(e.code(), here);
        throw;
      } catch (const std::exception&) {
        raise_foreign(here);
        throw;
      }
      if (tuner != nullptr) record(*tuner, agreed.root_choice, bytes, direct_start);
      return;
    }
    for (std::size_t i = 0; i < pp->set_index.size(); ++i)
      st.base[i] = st.base_by_set[pp->set_index[i]];
    try {
      if (st.pcs.size() < p.channels.size()) st.pcs.resize(p.channels.size());
    } catch (const std::exception&) {
      raise_foreign(here);
      throw;
    }
    // Layer readiness reads the user's output (Allreduce only): staged calls publish no progress.
    if (rank >= 0 && rank < nranks_ && !staged) {
      o.progress = progress_words(rank);
      o.progress_channels = progress_channels_;
    }
    void* output = recv;
    const std::size_t output_bytes = (layout.output.end - layout.output.begin) * size_of(dtype);
    if (staged && output_bytes != 0) {
      try {
        if (st.staged_output.size() < output_bytes) st.staged_output.resize(output_bytes);
      } catch (const std::exception&) {
        raise_foreign(here);
        throw;
      }
      output = st.staged_output.data();
    }

    // 4. The steps.
    const std::uint64_t steps_start = tuner != nullptr ? sync::now_ns() : 0;
    const IndexBases at = index_bases(layout, send, output, size_of(dtype));
    try {
      dispatch_data_type(dtype, [&](auto t) {
        using T = decltype(t);
        run_steps<T>(plane_, st, *pp, rank, static_cast<const T*>(at.input),
                     static_cast<T*>(at.output), o, wait_policy_);
      });
    } catch (const Error& e) {
      // A transport error in the middle of the steps (a broken MPI connection, say) stops every
      // rank, not only this one (a failure already raised keeps its record: the first one wins).
      plane_.raise(e.code(), here);
      if constexpr (InBandControlPlane<P>) {
        // Steps of ranks that disagree stop on the abort their disagreement raised: once every
        // rank's arguments are in, report the disagreement itself, as agreeing first would.
        if (in_band && !eager && plane_.published_by_all(o.seq, here)) {
          const Agreement verdict = plane_.verify(o.seq, o.deadline_ns, here);
          if (!verdict.verdict.empty()) throw Error(verdict.code, rank, verdict.verdict);
        }
      }
      throw;
    } catch (const std::exception&) {
      raise_foreign(here);
      throw;
    }
    if constexpr (InBandControlPlane<P>) {
      if (eager) {
        // A broadcast's root or a reduce's leaf has received nothing that carried the others'
        // arguments: the comparison waits for one of this rank's next calls.
        if (st.unverified_first == st.unverified_end) st.unverified_first = o.seq;
        st.unverified_end = o.seq + 1;
      } else if (in_band && pp->low_latency && pp->nactive == nranks_ &&
                 !plan::has_root(shape.collective)) {
        // Every message taken carried this call's arguments, and every rank's input reached
        // this rank (allreduce, reduce-scatter, all-gather): every rank passed the same ones
        // (protocol/low_latency.hpp).
        plane_.settle(o.seq, here);
      } else if (in_band) {
        const Agreement verdict = plane_.verify(o.seq, o.deadline_ns, here);
        if (!verdict.verdict.empty()) throw Error(verdict.code, rank, verdict.verdict);
      }
    }
    if (output != recv) std::memcpy(recv, output, output_bytes);
    if (tuner != nullptr) record(*tuner, agreed.root_choice, bytes, steps_start);
    // 5. Bases.
    for (std::size_t i = 0; i < pp->set_index.size(); ++i)
      st.base_by_set[pp->set_index[i]] += p.connections[i].messages_per_call;
  }

 private:
  // Starts the call's waits' clock: its deadline Config::timeout from now. A long timeout starts
  // from the coarse clock: at most a tick early, and the fine clock's read is a noticeable share
  // of a small call (sync/backoff.hpp).
  void start_clock(rank_state& st, StepOptions& o) const {
    o.start_ns = config_.timeout >= kCoarseStartTimeout ? sync::coarse_now_ns() : sync::now_ns();
    o.deadline_ns = sync::deadline_after(o.start_ns, config_.timeout);
    st.call_start_ns = o.start_ns;
  }

  // An exception that is not ccoll's (std::bad_alloc, say) leaving a call after its agreement
  // stops every rank at once, as a failure of this rank's system: its peers would otherwise wait
  // for its messages until their deadline and report a timeout. ccoll's own errors raise their
  // code where they are caught.
  void raise_foreign(const FailurePoint& here) { plane_.raise(ErrorCode::System, here); }

  // Compares the eager calls this rank returned from before every rank's arguments were in
  // (oldest first; their descriptors stay until this rank has read them): every
  // kEagerComparePeriod calls, those whose arguments are all in by then, without waiting; the
  // oldest ones, waiting, while this call would leave more uncompared than the control plane
  // holds; and all of them before a call that is not eager, which waits for its peers anyway and
  // must report an earlier disagreement first. So a broadcast's root (a reduce's leaf) runs up to
  // max_unverified_calls() calls ahead of its slowest peer, as far as its connections' FIFOs
  // allow, where comparing at once would make it wait for that peer's arrival every call; and it
  // reads its peers' descriptors once per period, a cache line per peer for the period's calls
  // (runtime/shared_area.hpp), not once per call.
  void compare_eager_calls(rank_state& st, bool eager, std::uint64_t deadline_ns,
                           const FailurePoint& here) {
    const std::uint64_t most = plane_.max_unverified_calls();
    const auto pending = [&st] { return st.unverified_end - st.unverified_first; };
    if (eager && pending() < most && pending() % kEagerComparePeriod != 0) return;
    while (pending() != 0) {
      const std::uint64_t seq = st.unverified_first;
      if constexpr (FastBoxControlPlane<P>) {
        // A call through the boxes is compared by its receivers: one that received compared its
        // box; one that sent, once its boxes were taken (the readers' words read when
        // kFastBoxLookPending calls are pending, or when this call must compare). A box left
        // untaken falls back to the descriptors.
        const FastBoxCall& c = st.boxes.call(seq);
        const bool must = !eager || pending() >= most;
        if (c.seq == seq &&
            (c.received || fast_box_taken(plane_.fast_boxes(), st.boxes, here.rank, c,
                                          must || pending() >= kFastBoxLookPending))) {
          ++st.unverified_first;
          plane_.acknowledge_call(seq, here);
          continue;
        }
        if (c.seq == seq && !must) return;
      }
      if (eager && pending() < most && !plane_.published_by_all(seq, here)) return;
      ++st.unverified_first;
      const Agreement verdict = plane_.verify(seq, deadline_ns, here);
      if (!verdict.verdict.empty())
        throw Error(verdict.code, here.rank,
                    verdict.verdict + " (compared when call " + std::to_string(st.seq + 1) +
                        " began: Config::eager_rooted_bytes)");
    }
  }

  // A broadcast or reduce of at most kFastBoxPayload bytes (every rank active) through the fast
  // boxes (runtime/fast_box.hpp): the root's input to every other rank, or every other rank's
  // input to the root, one box each. A rank reads a box only if the call and arguments it
  // carries are its own, so a disagreement never writes a buffer from it; a rank that heard from
  // every peer (a reduce's root; a broadcast's other rank at P = 2) has then compared every
  // rank's arguments and needs no descriptor read (settle, unless older eager calls are pending).
  // Otherwise an in-band call compares every rank's descriptor before the outputs are written,
  // unless eager: a receiver has compared its box and only acknowledges the call; a sender's call
  // is pending until its readers took its boxes (compare_eager_calls), which they do only with
  // the same arguments. Ranks that disagree, on the root too, leave a box untaken or a rank
  // waiting, so a sender's comparison or a waiting rank's check_peers() finds the disagreement.
  // A reduce's root folds every input at once, in rank order, with the interpreter's element
  // loop: the bits of the `direct` plan (a tree or chain folds in another order, so
  // floating-point results may differ in their last bits).
  void run_fast_box_call(rank_state& st, int rank, const void* send, void* recv, std::size_t count,
                         DataType dtype, ReduceOp op, CallShape shape, const StepOptions& o,
                         bool in_band, bool eager, const FailurePoint& here) {
    const FastBoxes& boxes = plane_.fast_boxes();
    const int root = shape.root;
    const bool broadcast = shape.collective == plan::Collective::broadcast;
    const bool sends = broadcast ? rank == root : rank != root;
    const std::size_t bytes = count * size_of(dtype);
    const FastBoxArgs mine{o.seq, count, encode_shape(shape),
                           static_cast<std::uint32_t>(dtype) | static_cast<std::uint32_t>(op) << 8};
    const auto wait_for = [&](int peer) {
      return [this, rank, peer, &o](const std::uint64_t* word, std::uint64_t target) {
        plane_.wait_peer_word(word, target, rank, peer, o.deadline_ns, o.seq);
      };
    };
    const FastBox* got[kFastBoxMaxRanks] = {};
    int heard = 0;
    bool compared = false;
    try {
      if (sends) {
        for (int q = 0; q < nranks_; ++q)
          if (q != rank && (broadcast || q == root))
            fast_box_send(boxes, st.boxes, rank, q, mine, send, bytes, wait_for(q));
      } else {
        for (int q = 0; q < nranks_; ++q) {
          if (q == rank || (broadcast && q != root)) continue;
          const FastBox& b = fast_box_receive(boxes, st.boxes, rank, q, wait_for(q));
          if (!(fast_box_args(b) == mine)) {
            compared = true;
            throw fast_box_disagreement(q, b.seq, o, here);
          }
          got[q] = &b;
          ++heard;
        }
      }
      // settle() acknowledges the call, which tells the peers that this rank has read every
      // descriptor up to it: not while older eager calls wait for their comparison.
      const bool pending = st.unverified_first != st.unverified_end;
      if (in_band && heard == nranks_ - 1 && !pending) {
        plane_.settle(o.seq, here);
      } else if (in_band && eager && heard > 0 && !pending) {
        // This rank compared its root's box: a disagreement elsewhere leaves a box untaken or a
        // rank waiting, and is found there. It will read no descriptor of this call.
        plane_.acknowledge_call(o.seq, here);
      } else if (in_band && eager) {
        // Compared later (compare_eager_calls): a sender's call once its readers took its boxes.
        FastBoxCall& c = st.boxes.call(o.seq);
        c.seq = o.seq;
        c.received = heard > 0;
        for (int q = 0; q < nranks_; ++q) {
          const auto i = static_cast<std::size_t>(q);
          c.upto[i] = sends && q != rank && (broadcast || q == root) ? st.boxes.sent[i] : 0;
        }
        if (st.unverified_first == st.unverified_end) st.unverified_first = o.seq;
        st.unverified_end = o.seq + 1;
      } else if (in_band) {
        compared = true;
        const Agreement verdict = plane_.verify(o.seq, o.deadline_ns, here);
        if (!verdict.verdict.empty()) throw Error(verdict.code, rank, verdict.verdict);
      }
    } catch (const Error& e) {
      plane_.raise(e.code(), here);
      // A wait stopped by a peer's disagreement reports the disagreement, as the plan path does.
      if (in_band && !eager && !compared && plane_.published_by_all(o.seq, here)) {
        const Agreement verdict = plane_.verify(o.seq, o.deadline_ns, here);
        if (!verdict.verdict.empty()) throw Error(verdict.code, rank, verdict.verdict);
      }
      throw;
    }
    if (broadcast) {
      if (rank == root) {
        if (recv != send) std::memcpy(recv, send, bytes);
      } else {
        std::memcpy(recv, got[root]->payload, bytes);
        fast_box_release(boxes, st.boxes, rank, root);
      }
      return;
    }
    if (rank != root) return;
    dispatch_data_type(dtype, [&](auto t) {
      using T = decltype(t);
      dispatch_reduce_op(op, [&](auto tag) {
        const T* srcs[kFastBoxMaxRanks];
        for (int q = 0; q < nranks_; ++q)
          srcs[q] =
              q == root ? static_cast<const T*>(send) : reinterpret_cast<const T*>(got[q]->payload);
        T* out = static_cast<T*>(recv);
        detail::element_loop<T, decltype(tag)::value, true>(
            HostGroup{}, &out, 1, srcs, static_cast<std::uint32_t>(nranks_), count, nranks_);
      });
    });
    for (int q = 0; q < nranks_; ++q)
      if (q != root) fast_box_release(boxes, st.boxes, rank, q);
  }

  // The error of a box from `writer` whose call or arguments are not this rank's: the
  // descriptors' verdict (naming the ranks and arguments) when they differ, else the calls are
  // out of step (the writer's message belongs to another of its calls).
  Error fast_box_disagreement(int writer, std::uint64_t writer_seq, const StepOptions& o,
                              const FailurePoint& here) {
    if (writer_seq == o.seq) {
      const Agreement verdict = plane_.verify(o.seq, o.deadline_ns, here);
      if (!verdict.verdict.empty()) return Error(verdict.code, here.rank, verdict.verdict);
    }
    plane_.raise(ErrorCode::Mismatch,
                 FailurePoint{writer, -1, -1, here.rank, FailurePoint::Waiting::nothing});
    return Error(ErrorCode::Mismatch, here.rank,
                 "rank " + std::to_string(writer) + "'s message belongs to its call " +
                     std::to_string(writer_seq) + ", not to call " + std::to_string(o.seq) +
                     ": the ranks' calls are out of step (an earlier call whose arguments "
                     "differed, another root say, left messages that no rank took)");
  }

  // Records a timed call in its bucket's tuner, scaled to the bucket's smallest size so that calls
  // of different sizes in one bucket compare as per-byte times.
  static void record(SlotStoreTuner& tuner, std::uint32_t mode, std::uint64_t bytes,
                     std::uint64_t start_ns) {
    const double scale = static_cast<double>(std::uint64_t{1} << slot_store_bucket(bytes)) /
                         static_cast<double>(bytes);
    tuner.record(
        static_cast<SlotStoreTuner::Mode>(mode),
        static_cast<std::uint64_t>(static_cast<double>(sync::now_ns() - start_ns) * scale));
  }

  std::uint64_t* progress_words(int rank) {
    return progress_.data() + progress_first_ + static_cast<std::size_t>(rank) * progress_stride_;
  }

  Config config_;
  int nranks_;
  PlanCache<C> plans_;
  sync::WaitPolicy wait_policy_;
  // The spin its waits learned (WaitPolicy::learned_spin_ns); on the heap, so that copies of the
  // policy keep pointing at it.
  // On a line of its own: every wait of every rank reads it.
  struct alignas(128) LearnedSpin {
    std::uint64_t ns;
  };
  std::unique_ptr<LearnedSpin> learned_spin_;
  P plane_{};
  // Per rank, per channel: steps done (runtime/layer_readiness.hpp), written by the rank's thread
  // and read by consumers; progress_channels_ words per rank, progress_stride_ apart.
  std::vector<std::uint64_t> progress_;
  std::size_t progress_first_ = 0;
  std::size_t progress_stride_ = 0;
  std::uint32_t progress_channels_ = 1;
  bool all_active_ = false;  // no relays: every rank has buffers
};

}  // namespace ccoll::runtime
