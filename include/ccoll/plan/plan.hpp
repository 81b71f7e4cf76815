// ccoll/plan/plan.hpp: the Plan, the one intermediate form every executor runs.
//
// A plan is built once for (ranks, count, element size, algorithm) and then interpreted by the host
// threads, shared-memory, MPI and CUDA executors and by the simulator. For P ranks (relays that
// only forward are ranks too) it holds channels; each channel holds, per rank, a program: an
// ordered list of steps. Channels run concurrently and independently (a GPU block or a host group
// each); the steps of one (rank, channel) program run in order.
//
// A step computes one value per element of its chunk [offset, offset + count):
//
//     value = recv_1[i] (+) ... (+) recv_k[i] (+) src[i] (+) recv_k+1[i] (+) ... (+) recv_n[i]
//             with k = src_position, src[i] = in[i] (Input), out[i] (Output) or absent (None),
//             folded left to right
//     if final:        value = finalize(value)   (avg divides by the number of active ranks)
//     if write_output: out[i] = value
//     for each send port: slot[i] = value
//
// Fixing where the local operand goes lets every rank fold the same operands in the same order
// (rank 0's first, say), so algorithms in which several ranks compute the same sum (one-shot,
// recursive doubling) give bit-identical results on every rank for floating-point data too.
//
// which covers NCCL's vocabulary: send (src, 1 send), recv (1 recv, write), recv-reduce-send,
// recv-reduce-copy(-send), recv-copy-send (relays and broadcast), local copy (src=Input, write).
//
// A connection u->v is a FIFO of `nslots` slots of `slot_elems` elements in v's memory with two
// monotonically increasing counters (tail: messages written by u; head: messages consumed by v). A
// port names a connection and the message's sequence number on it within one collective call; the
// slot is seq % nslots. Executors add the number of messages of earlier calls to reach the absolute
// counter values, so counters never reset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/core/platform.hpp"

namespace ccoll::plan {

using Rank = std::int32_t;

enum class Source : std::uint8_t { None, Input, Output };

// What a plan computes (plan/collective.hpp states each one's semantics, as NCCL's).
enum class Collective : std::uint8_t { allreduce, reduce_scatter, all_gather, broadcast, reduce };

struct Connection {
  Rank from = 0;
  Rank to = 0;
  std::uint32_t channel = 0;
  // Messages this connection carries per collective call (filled by Plan::finalize()).
  std::uint32_t messages_per_call = 0;
};

struct Port {
  std::uint32_t connection = 0;  // index into Plan::connections
  std::uint32_t seq = 0;         // message number on that connection within one call
};

struct Step {
  std::uint64_t offset = 0;  // first element of the chunk, in the allreduce's index space
  std::uint64_t count = 0;   // elements; at most Plan::slot_elems when the step sends or receives
  std::uint32_t recv_begin = 0;  // ports [recv_begin, recv_begin + recv_count) of Plan::ports
  std::uint32_t recv_count = 0;
  std::uint32_t send_begin = 0;  // ports [send_begin, send_begin + send_count)
  std::uint32_t send_count = 0;
  Source src = Source::None;
  std::uint8_t src_position = 0;  // operands received before src (0: src first); <= recv_count
  bool write_output = false;
  bool final = false;
};

struct Program {
  std::vector<Step> steps;
};

struct Channel {
  std::vector<Program> programs;  // indexed by rank; size Plan::nranks
};

struct Plan {
  std::string algorithm;     // "ring", "dbtree", "tree", "tree-overlap", "forest", ...
  Rank nranks = 0;           // every participant, relays included
  std::vector<bool> active;  // contributes input and receives output (false: relay)
  Collective collective = Collective::allreduce;
  // broadcast: the rank whose input every active rank receives; reduce: the rank that receives
  // the reduction. An active rank.
  Rank root = 0;
  // Elements of the index space the steps address: the allreduce's count; for reduce-scatter and
  // all-gather, nactive() blocks of equal size, one per active rank (plan/collective.hpp).
  std::uint64_t count = 0;
  std::uint64_t slot_elems = 0;  // capacity of one slot, in elements
  std::uint32_t nslots = 2;      // FIFO depth of every connection
  std::vector<Connection> connections;
  std::vector<Port> ports;
  std::vector<Channel> channels;

  int nactive() const {
    int n = 0;
    for (bool a : active) n += a ? 1 : 0;
    return n;
  }
  // The channels up to the last one with a step on any rank (at least one): what a GPU executor
  // launches blocks for. The channels after it are empty everywhere (a policy that chooses among
  // plans pads them: algo/by_size.hpp), and a block of theirs would only start and stop.
  std::uint32_t channels_in_use() const {
    for (auto c = static_cast<std::uint32_t>(channels.size()); c > 1; --c)
      for (const Program& prog : channels[c - 1].programs)
        if (!prog.steps.empty()) return c;
    return 1;
  }

  // Builder helpers ------------------------------------------------------------------------------

  // Returns the index of connection from->to on `channel`, creating it if needed.
  std::uint32_t connection(Rank from, Rank to, std::uint32_t channel) {
    for (std::uint32_t i = 0; i < connections.size(); ++i) {
      const Connection& c = connections[i];
      if (c.from == from && c.to == to && c.channel == channel) return i;
    }
    connections.push_back(Connection{from, to, channel, 0});
    return static_cast<std::uint32_t>(connections.size() - 1);
  }

  // Appends a step to (rank, channel) receiving from `recv_from` and sending to `send_to`.
  // Sequence numbers are assigned by finalize(), in program order per connection.
  Step& add_step(std::uint32_t channel, Rank rank, std::uint64_t offset, std::uint64_t n,
                 Source src, const std::vector<Rank>& recv_from, const std::vector<Rank>& send_to,
                 bool write_output, bool is_final) {
    Step s;
    s.offset = offset;
    s.count = n;
    s.src = src;
    s.write_output = write_output;
    s.final = is_final;
    s.recv_begin = static_cast<std::uint32_t>(ports.size());
    for (Rank peer : recv_from) ports.push_back(Port{connection(peer, rank, channel), 0});
    s.recv_count = static_cast<std::uint32_t>(recv_from.size());
    s.send_begin = static_cast<std::uint32_t>(ports.size());
    for (Rank peer : send_to) ports.push_back(Port{connection(rank, peer, channel), 0});
    s.send_count = static_cast<std::uint32_t>(send_to.size());
    auto& programs = channels.at(channel).programs;
    programs.at(static_cast<std::size_t>(rank)).steps.push_back(s);
    return programs[static_cast<std::size_t>(rank)].steps.back();
  }

  // Sizes channels/programs; call before add_step.
  void reset(Rank ranks, std::uint32_t nchannels) {
    nranks = ranks;
    if (active.size() != static_cast<std::size_t>(ranks))
      active.assign(static_cast<std::size_t>(ranks), true);
    channels.assign(nchannels, Channel{});
    for (auto& c : channels) c.programs.assign(static_cast<std::size_t>(ranks), Program{});
  }

  // Numbers the messages of every connection in program order: a sender's k-th send on a
  // connection and the receiver's k-th receive on it are message k. Sets messages_per_call.
  void finalize() {
    std::vector<std::uint32_t> sent(connections.size(), 0), received(connections.size(), 0);
    for (auto& ch : channels)
      for (auto& prog : ch.programs)
        for (auto& s : prog.steps) {
          for (std::uint32_t p = 0; p < s.recv_count; ++p) {
            Port& port = ports[s.recv_begin + p];
            port.seq = received[port.connection]++;
          }
          for (std::uint32_t p = 0; p < s.send_count; ++p) {
            Port& port = ports[s.send_begin + p];
            port.seq = sent[port.connection]++;
          }
        }
    for (std::size_t i = 0; i < connections.size(); ++i) connections[i].messages_per_call = sent[i];
  }
};

// What a logical topology needs to build a plan. Schedules fill in chunking, channels and overlap.
struct PlanRequest {
  Rank nranks = 1;
  std::uint64_t count = 0;  // the plan's index space (Plan::count)
  std::size_t elem_size = 4;
  std::uint32_t nchannels = 1;
  std::uint32_t nchunks = 0;            // chunks per channel; 0: the cost model's optimum
  std::uint32_t max_chunks = 0;         // with nchunks 0: at most this many (0: no cap)
  bool overlap = true;                  // tree: overlap reduce and broadcast ([C-Cube]'s C1)
  std::uint64_t slot_bytes = 1u << 20;  // capacity of one slot
  std::uint32_t nslots = 4;             // FIFO depth
  double alpha_s = 5e-6;                // per-message latency for the chunk-count model
  double beta_s_per_byte = 1.0 / 10e9;  // inverse link bandwidth for the chunk-count model
  // Which collective to plan (plan/collective.hpp) and, for broadcast and reduce, its root. A
  // logical topology that has no plan of the collective builds none (algo/concepts.hpp).
  Collective collective = Collective::allreduce;
  Rank root = 0;

  bool operator==(const PlanRequest&) const = default;
};

}  // namespace ccoll::plan
