// ccoll/plan/verifier.hpp: proves that a plan computes its collective and cannot deadlock.
//
// verify() executes any Plan symbolically. A value is, per element, the set of ranks whose input it
// contains (a bitset over ranks) and whether it was finalized. It checks
//   (a) data, as plan/collective.hpp defines each collective: every output element of every rank
//       that has it ends up holding exactly the contributions it should, each once: the set of
//       active ranks, finalized once, for a reduction (allreduce, reduce-scatter, reduce); the
//       block owner's or the root's input alone, never finalized, for all-gather and broadcast;
//       no step combines two values that share a rank ("rank 3's input counted twice in element
//       range [a,b) at rank 5 channel 1 step 7"), combines a finalized value, finalizes an
//       incomplete one, or (gathers) combines two contributions at all; a step reads input only
//       where the rank's input buffer lies and writes output only where its output buffer lies
//       (the root's, a block); relays read no input and write no output; a channel
//       reads only output elements that it wrote itself earlier, and no two channels of a rank
//       write the same output element (channels run concurrently, so anything else is a race);
//       in place (NCCL's aliasing) input and output are one memory, so no step reads input where
//       its rank's output was already written in the simulated order, and no step sends or
//       writes a value it neither reads nor receives. An input read by one channel and
//       overwritten in place by another must be ordered by messages between them (overlapped
//       trees are); only the simulated order is checked, not every interleaving;
//   (b) structure: ports name connections that start (send) or end (receive) at the step's rank;
//       each connection is sent on by one (rank, channel) program and received on by one; message
//       numbers follow program order; the k-th send and the k-th receive on a connection agree on
//       offset and count; messages fit a slot; chunks lie inside [0, count); every connection has
//       as many receives as sends (= messages_per_call); no two connections join the same
//       (from, to, channel), since a transport keeps one FIFO per such key;
//   (c) no deadlock with FIFOs of depth nslots, and `rounds`: the number of lock-step rounds when
//       every enabled step fires in the same round, each step costing one round.
//
// Why one simulated order decides deadlock-freedom for every interleaving: a step is enabled when
// each of its receive connections holds its message and each of its send connections has a free
// slot. Only a connection's one producer program raises its `tail` and only its one consumer
// program raises its `head`, and both only grow. So an enabled step stays enabled until its own
// program fires it: no other program's action can take a message away or fill a slot it needs.
// Programs are deterministic (a fixed sequence of steps), so the system is a bounded-FIFO Kahn
// network whose transitions are persistent; by the diamond property two enabled steps of different
// programs commute, and every maximal execution fires the same multiset of steps and reaches the
// same final counters. Hence if our greedy execution completes every program, no interleaving can
// get stuck, and if it gets stuck, every interleaving gets stuck at the same place. The same holds
// for the data: a step's value depends only on its inputs and the messages it receives, which are
// fixed by the message numbering, not by timing (output races between channels are rejected).
//
// Elements are cut into segments at every step's chunk boundaries, so each step touches whole
// segments and sets are vectors of 64-bit words: a P = 64 ring with thousands of steps verifies
// in milliseconds.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/collective.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

struct VerifyReport {
  bool ok = true;
  std::string error;         // empty when ok
  std::uint64_t rounds = 0;  // lock-step rounds (unit cost per step)
  std::uint64_t steps = 0;   // steps over all ranks and channels
};

// Round in which each step fires in the lock-step execution, [channel][rank][step].
using LockstepTimeline = std::vector<std::vector<std::vector<std::uint64_t>>>;

namespace detail {

class PlanVerifier {
 public:
  // `timeline`, when given, receives the round (1-based) in which each step fires, indexed
  // [channel][rank][step].
  explicit PlanVerifier(const Plan& plan, LockstepTimeline* timeline = nullptr)
      : plan_(plan), timeline_(timeline) {}

  VerifyReport run() {
    VerifyReport report;
    if (!check_shape() || !check_structure() || !simulate()) {
      report.ok = false;
      report.error = error_;
    }
    report.rounds = rounds_;
    report.steps = steps_;
    return report;
  }

 private:
  // One message in flight; a connection holds at most nslots of them, in slots seq % nslots
  // whose buffers are reused.
  struct Message {
    std::vector<std::uint64_t> bits;  // (segments) x words
    std::vector<std::uint8_t> final;  // per segment
  };

  bool fail(const std::string& what) {
    error_ = what;
    return false;
  }

  std::string where(std::uint32_t channel, Rank rank, std::size_t step) const {
    std::ostringstream os;
    os << "rank " << rank << " channel " << channel << " step " << step;
    return os.str();
  }

  std::string conn_name(std::uint32_t c) const {
    const Connection& k = plan_.connections[c];
    std::ostringstream os;
    os << "connection " << c << " (" << k.from << "->" << k.to << ", channel " << k.channel << ")";
    return os.str();
  }

  bool check_shape() {
    P_ = plan_.nranks;
    if (P_ < 1) return fail("nranks is " + std::to_string(P_) + ", expected >= 1");
    if (plan_.active.size() != static_cast<std::size_t>(P_))
      return fail("active has " + std::to_string(plan_.active.size()) + " entries for " +
                  std::to_string(P_) + " ranks");
    if (plan_.nslots < 1) return fail("nslots is 0");
    C_ = static_cast<std::uint32_t>(plan_.channels.size());
    for (std::uint32_t c = 0; c < C_; ++c)
      if (plan_.channels[c].programs.size() != static_cast<std::size_t>(P_))
        return fail("channel " + std::to_string(c) + " has " +
                    std::to_string(plan_.channels[c].programs.size()) + " programs for " +
                    std::to_string(P_) + " ranks");
    W_ = (static_cast<std::size_t>(P_) + 63) / 64;
    full_.assign(W_, 0);
    for (Rank r = 0; r < P_; ++r)
      if (plan_.active[static_cast<std::size_t>(r)]) full_[r / 64] |= std::uint64_t{1} << (r % 64);
    if (plan_.count > 0 && plan_.nactive() == 0) return fail("no active rank");
    const Collective coll = plan_.collective;
    const std::string name(collective_name(coll));
    if (name == "unknown") return fail("unknown collective");
    const int nactive = plan_.nactive();
    block_.assign(static_cast<std::size_t>(P_), 0);
    for (Rank r = 0, k = 0; r < P_; ++r)
      if (plan_.active[static_cast<std::size_t>(r)]) block_[static_cast<std::size_t>(r)] = k++;
    b_ = block_elems(plan_.count, nactive);
    if (has_blocks(coll) && nactive > 0 && plan_.count % static_cast<std::uint64_t>(nactive) != 0)
      return fail(name + " over " + std::to_string(nactive) + " active ranks needs a count that " +
                  "is a multiple of " + std::to_string(nactive) + ", not " +
                  std::to_string(plan_.count));
    if (has_root(coll) &&
        (plan_.root < 0 || plan_.root >= P_ || !plan_.active[static_cast<std::size_t>(plan_.root)]))
      return fail(name + " root " + std::to_string(plan_.root) + " is not an active rank");
    return true;
  }

  BufferSpan input_of(Rank r) const {
    return input_span(plan_.collective, plan_.count, block_[static_cast<std::size_t>(r)], b_,
                      r == plan_.root);
  }
  BufferSpan output_of(Rank r) const {
    return output_span(plan_.collective, plan_.count, block_[static_cast<std::size_t>(r)], b_,
                       r == plan_.root);
  }
  static std::string span_text(const BufferSpan& s) {
    if (s.begin == s.end) return "(none)";
    std::ostringstream os;  // (not operator+: g++ 12 warns falsely about it, -Wrestrict)
    os << '[' << s.begin << ',' << s.end << ')';
    return os.str();
  }

  const Step& step_at(std::size_t prog, std::size_t i) const {
    return plan_.channels[prog / P_].programs[prog % P_].steps[i];
  }

  bool check_structure() {
    const std::size_t nconn = plan_.connections.size();
    const std::size_t nprog = static_cast<std::size_t>(C_) * static_cast<std::size_t>(P_);
    sender_.assign(nconn, -1);
    receiver_.assign(nconn, -1);
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> sent(nconn);
    std::vector<std::uint32_t> received(nconn, 0);
    std::vector<std::uint32_t> touched;  // duplicate-port detection within one step
    std::vector<std::uint32_t> mark(nconn, 0);
    std::uint32_t stamp = 0;
    for (std::size_t c = 0; c < nconn; ++c) {
      const Connection& k = plan_.connections[c];
      if (k.from < 0 || k.from >= P_ || k.to < 0 || k.to >= P_ || k.from == k.to)
        return fail(conn_name(c) + " has invalid endpoints");
    }
    // A transport keeps one FIFO per (from, to, channel): two plan connections with one key would
    // number their messages from one base and share its slots.
    {
      std::vector<std::size_t> order(nconn);
      for (std::size_t c = 0; c < nconn; ++c) order[c] = c;
      const auto key = [&](std::size_t c) {
        const Connection& k = plan_.connections[c];
        return std::tuple(k.from, k.to, k.channel);
      };
      std::sort(order.begin(), order.end(),
                [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
      for (std::size_t i = 1; i < nconn; ++i)
        if (key(order[i - 1]) == key(order[i]))
          return fail(conn_name(order[i - 1]) + " and " + conn_name(order[i]) +
                      " join the same ranks in the same channel (one FIFO each way per channel)");
    }
    // Pass 1: per step checks and sends; pass 2: receives (matched against the sends).
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t prog = 0; prog < nprog; ++prog) {
        const auto ch = static_cast<std::uint32_t>(prog / P_);
        const auto rank = static_cast<Rank>(prog % P_);
        const bool active = plan_.active[static_cast<std::size_t>(rank)];
        const auto& steps = plan_.channels[ch].programs[static_cast<std::size_t>(rank)].steps;
        for (std::size_t i = 0; i < steps.size(); ++i) {
          const Step& s = steps[i];
          if (pass == 0) {
            ++steps_;
            if (static_cast<std::uint64_t>(s.recv_begin) + s.recv_count > plan_.ports.size() ||
                static_cast<std::uint64_t>(s.send_begin) + s.send_count > plan_.ports.size())
              return fail(where(ch, rank, i) + ": port range outside Plan::ports");
            if (s.offset > plan_.count || s.count > plan_.count - s.offset)
              return fail(where(ch, rank, i) + ": chunk [" + std::to_string(s.offset) + "," +
                          std::to_string(s.offset + s.count) + ") outside [0," +
                          std::to_string(plan_.count) + ")");
            if ((s.recv_count + s.send_count) > 0 && s.count > plan_.slot_elems)
              return fail(where(ch, rank, i) + ": message of " + std::to_string(s.count) +
                          " elements exceeds slot_elems " + std::to_string(plan_.slot_elems));
            if (!active && s.src != Source::None)
              return fail(where(ch, rank, i) + ": relay reads its " +
                          (s.src == Source::Input ? "input" : "output"));
            if (!active && s.write_output)
              return fail(where(ch, rank, i) + ": relay writes output");
            // Its value would be whatever the slot or the output held before: no executor
            // computes a value from nothing.
            if (s.count > 0 && s.src == Source::None && s.recv_count == 0 &&
                (s.send_count > 0 || s.write_output))
              return fail(where(ch, rank, i) + ": " +
                          (s.send_count > 0 ? "sends" : "writes output") +
                          " a value it neither reads nor receives");
            if (active && s.src == Source::Input &&
                !input_of(rank).contains(s.offset, s.offset + s.count))
              return fail(where(ch, rank, i) + ": reads input elements [" +
                          std::to_string(s.offset) + "," + std::to_string(s.offset + s.count) +
                          ") outside its input " + span_text(input_of(rank)) + " of the " +
                          std::string(collective_name(plan_.collective)));
            if (active && s.write_output && !output_of(rank).contains(s.offset, s.offset + s.count))
              return fail(where(ch, rank, i) + ": writes output elements [" +
                          std::to_string(s.offset) + "," + std::to_string(s.offset + s.count) +
                          ") outside its output " + span_text(output_of(rank)) + " of the " +
                          std::string(collective_name(plan_.collective)));
            if (s.final && !reduces(plan_.collective))
              return fail(where(ch, rank, i) + ": finalizes, but a " +
                          std::string(collective_name(plan_.collective)) + " does not reduce");
            if (s.src_position > (s.src == Source::None ? 0u : s.recv_count))
              return fail(where(ch, rank, i) + ": src_position " + std::to_string(s.src_position) +
                          " beyond its " + std::to_string(s.recv_count) + " received operands" +
                          (s.src == Source::None ? " (and it has no local source)" : ""));
            ++stamp;
            for (std::uint32_t p = 0; p < s.recv_count + s.send_count; ++p) {
              const bool is_recv = p < s.recv_count;
              const Port& port =
                  plan_.ports[is_recv ? s.recv_begin + p : s.send_begin + (p - s.recv_count)];
              if (port.connection >= nconn)
                return fail(where(ch, rank, i) + ": port names connection " +
                            std::to_string(port.connection) + " of " + std::to_string(nconn));
              const Connection& k = plan_.connections[port.connection];
              if ((is_recv ? k.to : k.from) != rank)
                return fail(where(ch, rank, i) + ": " + (is_recv ? "receives on " : "sends on ") +
                            conn_name(port.connection) + ", which does not " +
                            (is_recv ? "end" : "start") + " at this rank");
              if (mark[port.connection] == stamp)
                return fail(where(ch, rank, i) + ": uses " + conn_name(port.connection) + " twice");
              mark[port.connection] = stamp;
              auto& owner = is_recv ? receiver_[port.connection] : sender_[port.connection];
              if (owner == -1) owner = static_cast<std::int64_t>(prog);
              if (owner != static_cast<std::int64_t>(prog))
                return fail(conn_name(port.connection) + " is " +
                            (is_recv ? "received on" : "sent on") + " by channels " +
                            std::to_string(static_cast<std::size_t>(owner) / P_) + " and " +
                            std::to_string(ch) + " of rank " + std::to_string(rank) +
                            "; a connection needs one producer and one consumer program");
              if (!is_recv) {
                auto& list = sent[port.connection];
                if (port.seq != list.size())
                  return fail(where(ch, rank, i) + ": send on " + conn_name(port.connection) +
                              " has message number " + std::to_string(port.seq) + ", expected " +
                              std::to_string(list.size()) + " (program order)");
                list.emplace_back(s.offset, s.count);
              }
            }
          } else {
            for (std::uint32_t p = 0; p < s.recv_count; ++p) {
              const Port& port = plan_.ports[s.recv_begin + p];
              const auto& list = sent[port.connection];
              const std::uint32_t k = received[port.connection]++;
              if (port.seq != k)
                return fail(where(ch, rank, i) + ": receive on " + conn_name(port.connection) +
                            " has message number " + std::to_string(port.seq) + ", expected " +
                            std::to_string(k) + " (program order)");
              if (k >= list.size())
                return fail(where(ch, rank, i) + ": receives message " + std::to_string(k) +
                            " on " + conn_name(port.connection) + ", which carries only " +
                            std::to_string(list.size()));
              if (list[k].first != s.offset || list[k].second != s.count)
                return fail(where(ch, rank, i) + ": receives [" + std::to_string(s.offset) + "," +
                            std::to_string(s.offset + s.count) + ") as message " +
                            std::to_string(k) + " on " + conn_name(port.connection) +
                            ", but the sender sent [" + std::to_string(list[k].first) + "," +
                            std::to_string(list[k].first + list[k].second) + ")");
            }
          }
        }
      }
    }
    for (std::size_t c = 0; c < nconn; ++c) {
      if (received[c] != sent[c].size())
        return fail(conn_name(c) + " carries " + std::to_string(sent[c].size()) + " sends but " +
                    std::to_string(received[c]) + " receives");
      if (plan_.connections[c].messages_per_call != sent[c].size())
        return fail(conn_name(c) + " has messages_per_call " +
                    std::to_string(plan_.connections[c].messages_per_call) + " but carries " +
                    std::to_string(sent[c].size()) + " messages (call Plan::finalize())");
    }
    sent_messages_.assign(nconn, 0);
    for (std::size_t c = 0; c < nconn; ++c) sent_messages_[c] = sent[c].size();
    // Segment boundaries.
    bounds_.clear();
    bounds_.push_back(0);
    bounds_.push_back(plan_.count);
    if (has_blocks(plan_.collective) && b_ > 0)
      for (std::uint64_t x = b_; x < plan_.count; x += b_) bounds_.push_back(x);
    for (const auto& chan : plan_.channels)
      for (const auto& prog : chan.programs)
        for (const auto& s : prog.steps) {
          bounds_.push_back(s.offset);
          bounds_.push_back(s.offset + s.count);
        }
    std::sort(bounds_.begin(), bounds_.end());
    bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
    S_ = bounds_.size() - 1;
    return true;
  }

  std::size_t seg(std::uint64_t x) const {
    return static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), x) -
                                    bounds_.begin());
  }

  std::string range(std::size_t s) const {
    std::ostringstream os;  // (not operator+: g++ 12 warns falsely about it, -Wrestrict)
    os << '[' << bounds_[s] << ',' << bounds_[s + 1] << ')';
    return os.str();
  }

  bool empty(const std::uint64_t* a) const {
    for (std::size_t w = 0; w < W_; ++w)
      if (a[w]) return false;
    return true;
  }

  static constexpr Rank kCombined = -1, kFinalizedOperand = -2;

  // cur (+)= other. Returns kCombined, kFinalizedOperand, or the lowest rank counted twice.
  Rank combine(std::uint64_t* cur, std::uint8_t& cur_final, const std::uint64_t* other,
               std::uint8_t other_final) const {
    const bool other_empty = !other_final && empty(other);
    if (other_empty) return kCombined;
    if (!cur_final && empty(cur)) {
      std::copy(other, other + W_, cur);
      cur_final = other_final;
      return kCombined;
    }
    for (std::size_t w = 0; w < W_; ++w)
      if (const std::uint64_t both = cur[w] & other[w])
        return static_cast<Rank>(w * 64 + static_cast<std::size_t>(std::countr_zero(both)));
    if (cur_final || other_final) return kFinalizedOperand;
    for (std::size_t w = 0; w < W_; ++w) cur[w] |= other[w];
    return kCombined;
  }

  std::string missing(const std::uint64_t* a) const {
    for (std::size_t w = 0; w < W_; ++w)
      if (full_[w] & ~a[w]) {
        const std::uint64_t m = full_[w] & ~a[w];
        return "rank " + std::to_string(w * 64 + static_cast<std::size_t>(std::countr_zero(m))) +
               "'s input";
      }
    for (std::size_t w = 0; w < W_; ++w)
      if (a[w] & ~full_[w]) {
        const std::uint64_t m = a[w] & ~full_[w];
        return "nothing (but holds relay " +
               std::to_string(w * 64 + static_cast<std::size_t>(std::countr_zero(m))) + "'s input)";
      }
    return "nothing";
  }

  bool is_full(const std::uint64_t* a) const { return std::equal(a, a + W_, full_.begin()); }

  bool enabled(std::size_t prog) const {
    const std::size_t pc = pc_[prog];
    const Step& s = step_at(prog, pc);
    for (std::uint32_t p = 0; p < s.recv_count; ++p) {
      const Port& port = plan_.ports[s.recv_begin + p];
      if (tail_[port.connection] <= port.seq) return false;
    }
    for (std::uint32_t p = 0; p < s.send_count; ++p) {
      const Port& port = plan_.ports[s.send_begin + p];
      if (tail_[port.connection] - head_[port.connection] >= plan_.nslots) return false;
    }
    return true;
  }

  // Fires the next step of `prog`: computes its value symbolically and moves the messages.
  bool fire(std::size_t prog) {
    const auto ch = static_cast<std::uint32_t>(prog / P_);
    const auto rank = static_cast<Rank>(prog % P_);
    const std::size_t idx = pc_[prog]++;
    const Step& s = step_at(prog, idx);
    const std::size_t s0 = seg(s.offset), s1 = seg(s.offset + s.count), n = s1 - s0;
    cur_.assign(n * W_, 0);
    cur_final_.assign(n, 0);
    const auto urank = static_cast<std::size_t>(rank);
    std::string at;
    auto location = [&]() -> const std::string& {
      if (at.empty()) at = where(ch, rank, idx);
      return at;
    };
    if (s.src == Source::Input) {
      for (std::size_t i = 0; i < n; ++i) {
        // In place (NCCL's aliasing of each collective) an element's input and output are one
        // word of memory, so once the output is written there the input is gone.
        if (const std::int32_t w = writer_[urank * S_ + s0 + i]; w >= 0)
          return fail(location() + " reads input element range " + range(s0 + i) +
                      " after channel " + std::to_string(w) +
                      " wrote its output there (in place, the same memory)");
        cur_[i * W_ + urank / 64] = std::uint64_t{1} << (urank % 64);
      }
    } else if (s.src == Source::Output) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t w = writer_[urank * S_ + s0 + i];
        if (w != static_cast<std::int32_t>(ch))
          return fail(location() + " reads output element range " + range(s0 + i) +
                      (w < 0 ? " before any step wrote it"
                             : " written by channel " + std::to_string(w) +
                                   " (channels run concurrently: a race)"));
        std::copy_n(&out_[(urank * S_ + s0 + i) * W_], W_, &cur_[i * W_]);
        cur_final_[i] = out_final_[urank * S_ + s0 + i];
      }
    }
    const bool reduction = reduces(plan_.collective);
    for (std::uint32_t p = 0; p < s.recv_count; ++p) {
      const Port& port = plan_.ports[s.recv_begin + p];
      Message& m = slots_[slot_index(port)];
      for (std::size_t i = 0; i < n; ++i) {
        if (!reduction && !empty(&cur_[i * W_]) && !empty(&m.bits[i * W_]))
          return fail(location() + " combines two contributions in element range " + range(s0 + i) +
                      ", but a " + std::string(collective_name(plan_.collective)) +
                      " does not reduce");
        const Rank twice = combine(&cur_[i * W_], cur_final_[i], &m.bits[i * W_], m.final[i]);
        if (twice == kFinalizedOperand)
          return fail("a finalized value is reduced again in element range " + range(s0 + i) +
                      " at " + location());
        if (twice != kCombined)
          return fail("rank " + std::to_string(twice) + "'s input counted twice in element range " +
                      range(s0 + i) + " at " + location());
      }
      ++head_[port.connection];
    }
    if (s.final)
      for (std::size_t i = 0; i < n; ++i) {
        if (cur_final_[i])
          return fail(location() + " finalizes element range " + range(s0 + i) + " twice");
        if (!is_full(&cur_[i * W_]))
          return fail(location() + " finalizes element range " + range(s0 + i) +
                      " before it holds every active rank's input (misses " +
                      missing(&cur_[i * W_]) + ")");
        cur_final_[i] = 1;
      }
    if (s.write_output)
      for (std::size_t i = 0; i < n; ++i) {
        std::int32_t& w = writer_[urank * S_ + s0 + i];
        if (w >= 0 && w != static_cast<std::int32_t>(ch))
          return fail(location() + " writes output element range " + range(s0 + i) +
                      " that channel " + std::to_string(w) +
                      " also writes (channels run concurrently: a race)");
        w = static_cast<std::int32_t>(ch);
        std::copy_n(&cur_[i * W_], W_, &out_[(urank * S_ + s0 + i) * W_]);
        out_final_[urank * S_ + s0 + i] = cur_final_[i];
      }
    for (std::uint32_t p = 0; p < s.send_count; ++p) {
      const Port& port = plan_.ports[s.send_begin + p];
      Message& m = slots_[slot_index(port)];
      m.bits.assign(cur_.begin(), cur_.end());
      m.final.assign(cur_final_.begin(), cur_final_.end());
      ++tail_[port.connection];
    }
    return true;
  }

  std::string describe_wait(std::size_t prog) const {
    const auto ch = static_cast<std::uint32_t>(prog / P_);
    const auto rank = static_cast<Rank>(prog % P_);
    const Step& s = step_at(prog, pc_[prog]);
    std::ostringstream os;
    os << where(ch, rank, pc_[prog]);
    for (std::uint32_t p = 0; p < s.recv_count; ++p) {
      const Port& port = plan_.ports[s.recv_begin + p];
      if (tail_[port.connection] <= port.seq) {
        os << " waits for message " << port.seq << " from rank "
           << plan_.connections[port.connection].from << " on " << conn_name(port.connection)
           << " (" << tail_[port.connection] << " sent)";
        return os.str();
      }
    }
    for (std::uint32_t p = 0; p < s.send_count; ++p) {
      const Port& port = plan_.ports[s.send_begin + p];
      if (tail_[port.connection] - head_[port.connection] >= plan_.nslots) {
        os << " waits for a free slot on " << conn_name(port.connection) << " (all " << plan_.nslots
           << " slots full; rank " << plan_.connections[port.connection].to << " has consumed "
           << head_[port.connection] << ")";
        return os.str();
      }
    }
    os << " is enabled";
    return os.str();
  }

  bool simulate() {
    const std::size_t nconn = plan_.connections.size();
    const std::size_t nprog = static_cast<std::size_t>(C_) * static_cast<std::size_t>(P_);
    tail_.assign(nconn, 0);
    head_.assign(nconn, 0);
    // No connection holds more messages than it carries in a call, however deep its FIFO: a
    // record per slot up to that, so that a huge nslots costs nothing (seq % depth is then seq).
    std::size_t most = 1;
    for (const auto& list : sent_messages_) most = std::max(most, list);
    slot_depth_ = std::min<std::size_t>(plan_.nslots, most);
    slots_.assign(nconn * slot_depth_, Message{});
    pc_.assign(nprog, 0);
    out_.assign(static_cast<std::size_t>(P_) * S_ * W_, 0);
    out_final_.assign(static_cast<std::size_t>(P_) * S_, 0);
    writer_.assign(static_cast<std::size_t>(P_) * S_, -1);
    std::vector<std::size_t> candidates, enabled_now, next;
    std::vector<std::uint64_t> queued(nprog, ~std::uint64_t{0});
    auto size_of = [&](std::size_t prog) {
      return plan_.channels[prog / P_].programs[prog % P_].steps.size();
    };
    for (std::size_t p = 0; p < nprog; ++p)
      if (size_of(p) > 0) candidates.push_back(p);
    if (timeline_) {
      timeline_->assign(C_, {});
      for (std::uint32_t c = 0; c < C_; ++c)
        for (const auto& prog : plan_.channels[c].programs)
          (*timeline_)[c].emplace_back(prog.steps.size(), 0);
    }
    rounds_ = 0;
    while (!candidates.empty()) {
      enabled_now.clear();
      for (std::size_t p : candidates)
        if (pc_[p] < size_of(p) && enabled(p)) enabled_now.push_back(p);
      if (enabled_now.empty()) break;
      ++rounds_;
      next.clear();
      auto wake = [&](std::size_t p) {
        if (p < nprog && queued[p] != rounds_) {
          queued[p] = rounds_;
          next.push_back(p);
        }
      };
      for (std::size_t p : enabled_now) {
        const Step& s = step_at(p, pc_[p]);
        if (timeline_) (*timeline_)[p / P_][p % P_][pc_[p]] = rounds_;
        if (!fire(p)) return false;
        wake(p);
        for (std::uint32_t k = 0; k < s.recv_count; ++k)
          wake(static_cast<std::size_t>(sender_[plan_.ports[s.recv_begin + k].connection]));
        for (std::uint32_t k = 0; k < s.send_count; ++k)
          wake(static_cast<std::size_t>(receiver_[plan_.ports[s.send_begin + k].connection]));
      }
      candidates.swap(next);
    }
    std::vector<std::string> stuck;
    std::size_t nstuck = 0;
    for (std::size_t p = 0; p < nprog; ++p)
      if (pc_[p] < size_of(p)) {
        if (stuck.size() < 4) stuck.push_back(describe_wait(p));
        ++nstuck;
      }
    if (nstuck > 0) {
      std::string msg = "deadlock (nslots " + std::to_string(plan_.nslots) + ") after " +
                        std::to_string(rounds_) + " rounds: ";
      for (std::size_t i = 0; i < stuck.size(); ++i) msg += (i ? "; " : "") + stuck[i];
      if (nstuck > stuck.size())
        msg += "; and " + std::to_string(nstuck - stuck.size()) + " more programs";
      return fail(msg);
    }
    const bool reduction = reduces(plan_.collective);
    std::vector<std::uint64_t> single(W_);
    for (Rank r = 0; r < P_; ++r) {
      if (!plan_.active[static_cast<std::size_t>(r)]) continue;
      const auto ur = static_cast<std::size_t>(r);
      const BufferSpan out = output_of(r);
      for (std::size_t s = 0; s < S_; ++s) {
        if (bounds_[s] < out.begin || bounds_[s + 1] > out.end) continue;  // not its output
        const std::uint64_t* v = &out_[(ur * S_ + s) * W_];
        if (writer_[ur * S_ + s] < 0)
          return fail("rank " + std::to_string(r) + "'s output element range " + range(s) +
                      " is never written");
        if (reduction) {
          if (!is_full(v))
            return fail("rank " + std::to_string(r) + "'s output element range " + range(s) +
                        " misses " + missing(v));
          if (!out_final_[ur * S_ + s])
            return fail("rank " + std::to_string(r) + "'s output element range " + range(s) +
                        " is never finalized");
          continue;
        }
        const Rank owner =
            plan_.collective == Collective::broadcast ? plan_.root : owner_of(bounds_[s]);
        std::fill(single.begin(), single.end(), 0);
        single[static_cast<std::size_t>(owner) / 64] = std::uint64_t{1} << (owner % 64);
        if (!std::equal(v, v + W_, single.begin()))
          return fail("rank " + std::to_string(r) + "'s output element range " + range(s) +
                      " should hold rank " + std::to_string(owner) + "'s input alone, but " +
                      (empty(v) ? std::string("holds nothing") : "holds " + ranks_text(v)));
      }
    }
    return true;
  }

  // The active rank whose block holds element x (blocked collectives).
  Rank owner_of(std::uint64_t x) const {
    const std::uint64_t k = b_ == 0 ? 0 : x / b_;
    for (Rank r = 0; r < P_; ++r)
      if (plan_.active[static_cast<std::size_t>(r)] &&
          static_cast<std::uint64_t>(block_[static_cast<std::size_t>(r)]) == k)
        return r;
    return 0;
  }

  std::string ranks_text(const std::uint64_t* a) const {
    std::string s;
    for (std::size_t w = 0; w < W_; ++w)
      for (std::uint64_t m = a[w]; m != 0; m &= m - 1)
        s += (s.empty() ? "rank " : ", ") +
             std::to_string(w * 64 + static_cast<std::size_t>(std::countr_zero(m)));
    return s + "'s input";
  }

  const Plan& plan_;
  LockstepTimeline* timeline_ = nullptr;
  std::string error_;
  Rank P_ = 0;
  std::uint32_t C_ = 0;
  std::size_t W_ = 1;  // 64-bit words per rank set
  std::size_t S_ = 0;  // segments
  std::vector<std::uint64_t> full_;
  std::vector<int> block_;  // block index of each active rank (its position among them)
  std::uint64_t b_ = 0;     // block size of a blocked collective
  std::vector<std::uint64_t> bounds_;
  std::vector<std::int64_t> sender_, receiver_;  // program (channel * P + rank) per connection
  std::vector<std::uint64_t> tail_, head_;
  std::vector<Message> slots_;
  std::vector<std::size_t> pc_;
  std::vector<std::uint64_t> out_;
  std::vector<std::uint8_t> out_final_;
  std::vector<std::int32_t> writer_;        // channel that wrote each (rank, segment); -1: none
  std::vector<std::size_t> sent_messages_;  // per connection: messages per call
  std::size_t slot_depth_ = 1;              // message records per connection

  std::size_t slot_index(const Port& port) const {
    return static_cast<std::size_t>(port.connection) * slot_depth_ + port.seq % slot_depth_;
  }
  std::vector<std::uint64_t> cur_;
  std::vector<std::uint8_t> cur_final_;
  std::uint64_t rounds_ = 0;
  std::uint64_t steps_ = 0;
};

}  // namespace detail

// Verifies `plan` (see the top of this header); never throws for a malformed plan.
inline VerifyReport verify(const Plan& plan) {
  return detail::PlanVerifier(plan).run();
}

// Verifies `plan` and fills `timeline` with the lock-step round (1-based) of every step, as in
// [C-Cube] Fig. 5 and 7 (unfired steps of a rejected plan stay 0). For pictures and the CLI.
inline VerifyReport verify(const Plan& plan, LockstepTimeline& timeline) {
  return detail::PlanVerifier(plan, &timeline).run();
}

// Throws Error(InvalidPlan) with the verifier's message when `plan` does not compute its collective
// or may deadlock.
inline void verify_or_throw(const Plan& plan) {
  const VerifyReport r = verify(plan);
  if (!r.ok) throw Error(ErrorCode::InvalidPlan, -1, plan.algorithm + ": " + r.error);
}

}  // namespace ccoll::plan
