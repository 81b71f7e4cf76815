// ccoll/transport/cuda/block_tables.hpp: the host half of a plan's device tables, which both CUDA
// executors build the same way: each thread block's program (its steps) and the message bases it
// advances at the end of a call, laid out as block_program.cuh reads them, and the sections of the
// one allocation that holds a plan's tables.
//
// A block advances its base of each connection by the messages its program moves on it (one per
// port), so the two ends of a connection stay in step without a barrier: every message has one
// send port and one receive port. cuda-virtual builds a block per (channel, rank) of the plan and
// counts on the plan's connections; cuda-p2p builds its own rank's blocks and counts on the
// communicator's connection set (ports renumbered onto it). Both place FIFO slots `slot_stride`
// apart.
//
// A block whose program fits kBlockTableCacheBytes also has it in a block-local form: its steps
// with their port ranges counted from the block's own ports, and those ports naming connections
// by their place in the block's advances (its connections, each once). Such a block copies that
// form into shared memory at the start of a call, with its connections' refs and message bases
// gathered beside it (fill_block_cache), so the leader's step loop reads step, port, connection
// and base from shared memory instead of chasing them through global memory, one dependent load
// after another, at every step. A larger program (thousands of pipelined steps: bandwidth-bound,
// where the chase hides behind the data) has no local form and runs from the global tables.
//
// Plain C++ (no CUDA call): the fast suite tests it (tests/cuda_protocol_test.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "ccoll/core/platform.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/runtime/program_context.hpp"
#include "ccoll/sync/connection.hpp"

namespace ccoll::transport::cuda {

// The line the executors align device tables and FIFO slots to.
inline constexpr std::uint64_t kDeviceLine = 128;

// The FIFO slot each GPU transport takes when Config::slot_bytes is 0 (docs/gpu.md, "FIFO
// slots"). A slot bounds a step's message, so it trades the per-step cost (a wait, a fence, a
// counter store: 1-6 us a step on a GPU) against FIFO memory and the pipeline's fill.
// - cuda-virtual: by default the channels fill the SMs (two 512-thread blocks each), so each block
//   gets its share of HBM: about 3.7 TB/s over 264 blocks at P = 8 on an H200, 14 GB/s. A step of
//   256 KiB (three passes over it when it reduces) then takes about 55 us, ten times the per-step
//   cost, and 264 connections x 4 slots take 264 MiB, where 1 MiB slots took 1 GiB for no gain.
// - cuda-p2p: a step crosses NVLink, shared by the rank's channels (16-32 blocks: 12-23 GB/s each
//   of about 370 GB/s), and each one pays system-scope fences; 512 KiB keeps a step above 20 us,
//   NCCL's step size for its Simple protocol (a 4 MiB buffer in 8 steps).
inline constexpr std::uint64_t kVirtualRanksSlotBytes = 256 * 1024;
inline constexpr std::uint64_t kP2PSlotBytes = 512 * 1024;

// The bytes between two FIFO slots on a GPU: a slot, and the slack that lets every message keep
// its chunk's offset modulo 16 bytes (runtime::kBlockSlotSlack: the block's 16-byte packs), on
// whole lines.
constexpr std::uint64_t slot_stride(std::uint64_t slot_bytes) {
  return (slot_bytes + runtime::kBlockSlotSlack + kDeviceLine - 1) / kDeviceLine * kDeviceLine;
}

// The most FIFO memory one cuda-virtual channel of `nranks` ranks takes: `nslots` slots of
// `slot_bytes` for every ordered pair of ranks (a direct plan's connections), what its default
// channels are counted against (CudaVirtualRanks::resolve, launch_fit.hpp).
constexpr std::uint64_t virtual_ranks_channel_fifo_bytes(std::uint64_t nranks, std::uint32_t nslots,
                                                         std::uint64_t slot_bytes) {
  return nranks * (nranks == 0 ? 0 : nranks - 1) * nslots * slot_stride(slot_bytes);
}

// The most bytes of lines a LowLatency message may take on a GPU: its LL slot. A LowLatency plan
// with larger messages runs as Simple. LL moves 4 bytes of payload per 8-byte line, half the
// bandwidth of Simple, which pays only where a message's latency dominates; the host-measured
// tuning tables (algo/by_size.hpp) choose LL up to megabytes at 2 and 3 ranks, where on a GPU it
// would halve the bandwidth. 64 KiB of lines carry 32 KiB less 16 bytes of payload.
inline constexpr std::uint64_t kMaxLowLatencySlotBytes = 64 * 1024;

// The LowLatency slot a GPU plan gives each of its connections: the flagged lines (protocol/
// low_latency.hpp) of the plan's largest message, on whole lines. LowLatency plans carry small
// messages, so this is far less than a Simple slot (whose size, the plan's slot_elems, is what
// the plan's chunks may reach, not what they do at a small count); a plan forced into LowLatency
// at a large count gets LL slots about as large as its Simple ones.
inline std::uint64_t low_latency_slot_bytes(const plan::Plan& p, std::uint64_t elem_size) {
  std::uint64_t largest = 0;
  for (const auto& channel : p.channels)
    for (const auto& program : channel.programs)
      for (const auto& s : program.steps)
        if (s.recv_count + s.send_count > 0) largest = std::max(largest, s.count);
  const std::uint64_t bytes =
      protocol::LowLatency::lines(largest * elem_size) * protocol::LowLatency::kLineBytes;
  return (bytes + kDeviceLine - 1) / kDeviceLine * kDeviceLine;
}

// What block b runs.
struct BlockProgram {
  std::uint32_t first_step = 0;
  std::uint32_t nsteps = 0;
  std::int32_t rank = 0;
  std::uint32_t channel = 0;
  std::uint32_t first_advance = 0;  // this block's entries of the tables' advances
  std::uint32_t nadvance = 0;
  // The block-local form (cached != 0: the block's program fits kBlockTableCacheBytes): nsteps
  // entries of the tables' local steps from first_local_step, nlocal_ports of its local ports.
  std::uint32_t first_local_step = 0;
  std::uint32_t first_local_port = 0;
  std::uint32_t nlocal_ports = 0;
  std::uint32_t cached = 0;
};

// At the end of a call, block b adds `messages` to its base of connection `connection`.
struct BaseAdvance {
  std::uint32_t connection = 0;
  std::uint32_t messages = 0;
};

// The shared memory a block keeps its program in (fill_block_cache): a few hundred steps of the
// short programs whose time is the leader's step loop; two 512-thread blocks per SM keep 24 KiB
// of an H100's 228 KiB per SM for it (launch_fit.hpp counts it in kKernelSharedBytes).
inline constexpr std::uint32_t kBlockTableCacheBytes = 12 * 1024;

// Where each part of a block's cached program lies (bytes from the cache's start, 16-aligned),
// and the bytes it takes. ConnectionBytes: sizeof the connection ref the kernel reads.
struct BlockCacheLayout {
  std::uint32_t steps = 0;
  std::uint32_t ports = 0;
  std::uint32_t connections = 0;
  std::uint32_t bases = 0;
  std::uint64_t bytes = 0;
};

CCOLL_HD constexpr std::uint64_t align16(std::uint64_t n) {
  return (n + 15) / 16 * 16;
}

template <std::size_t ConnectionBytes>
CCOLL_HD constexpr BlockCacheLayout block_cache_layout(const BlockProgram& b) {
  BlockCacheLayout l;
  std::uint64_t at = 0;
  l.steps = 0;
  at = align16(std::uint64_t{b.nsteps} * sizeof(plan::Step));
  l.ports = static_cast<std::uint32_t>(at);
  at += align16(std::uint64_t{b.nlocal_ports} * sizeof(plan::Port));
  l.connections = static_cast<std::uint32_t>(at);
  at += align16(std::uint64_t{b.nadvance} * ConnectionBytes);
  l.bases = static_cast<std::uint32_t>(at);
  at += align16(std::uint64_t{b.nadvance} * sizeof(std::uint64_t));
  l.bytes = at;
  return l;
}

// Whether block b's program, with nlocal_ports ports, fits the cache (BlockProgram::cached).
template <std::size_t ConnectionBytes>
CCOLL_HD constexpr bool block_fits_cache(const BlockProgram& b) {
  return block_cache_layout<ConnectionBytes>(b).bytes <= kBlockTableCacheBytes;
}

// A block's program as its step loop reads it: steps, ports, connections and the connections'
// message bases at the start of the call, indexed alike.
template <class C>
struct ProgramTables {
  const plan::Step* steps = nullptr;
  const plan::Port* ports = nullptr;
  const C* connections = nullptr;
  const std::uint64_t* base = nullptr;
};

// The blocks' programs, their steps (one array, each program a run of it) and their advances;
// the programs that fit kBlockTableCacheBytes in block-local form too (local_steps and
// local_ports, each block's a run of each).
struct BlockTablesImage {
  std::vector<BlockProgram> programs;
  std::vector<plan::Step> steps;
  std::vector<BaseAdvance> advances;
  std::vector<plan::Step> local_steps;
  std::vector<plan::Port> local_ports;

  // Appends the block that runs rank `rank`'s program of channel `channel`. `ports` are the plan's
  // ports with their connection indices as the tables count them (fewer than nconnections).
  // Returns the new block's index.
  std::uint32_t add_block(const plan::Plan& p, std::uint32_t channel, std::int32_t rank,
                          std::span<const plan::Port> ports, std::size_t nconnections) {
    const auto& prog = p.channels[channel].programs[static_cast<std::size_t>(rank)].steps;
    BlockProgram b;
    b.first_step = static_cast<std::uint32_t>(steps.size());
    b.nsteps = static_cast<std::uint32_t>(prog.size());
    b.rank = rank;
    b.channel = channel;
    steps.insert(steps.end(), prog.begin(), prog.end());
    // Every port of the program is one message of its connection in this call.
    messages_.assign(nconnections, 0u);
    for (const auto& s : prog) {
      for (std::uint32_t k = 0; k < s.recv_count; ++k)
        ++messages_[ports[s.recv_begin + k].connection];
      for (std::uint32_t k = 0; k < s.send_count; ++k)
        ++messages_[ports[s.send_begin + k].connection];
    }
    b.first_advance = static_cast<std::uint32_t>(advances.size());
    for (std::size_t i = 0; i < nconnections; ++i)
      if (messages_[i] != 0) advances.push_back({static_cast<std::uint32_t>(i), messages_[i]});
    b.nadvance = static_cast<std::uint32_t>(advances.size()) - b.first_advance;
    // The block-local form, if it fits: each step's receive ports, then its send ports, on a
    // connection's place among the block's advances.
    std::uint32_t nports = 0;
    for (const auto& s : prog) nports += s.recv_count + s.send_count;
    b.nlocal_ports = nports;
    b.cached = block_fits_cache<sizeof(sync::ConnectionRef)>(b) ? 1u : 0u;
    b.nlocal_ports = b.cached != 0 ? nports : 0;
    if (b.cached == 0) {
      programs.push_back(b);
      return static_cast<std::uint32_t>(programs.size() - 1);
    }
    for (std::uint32_t k = 0; k < b.nadvance; ++k)
      messages_[advances[b.first_advance + k].connection] = k;
    b.first_local_step = static_cast<std::uint32_t>(local_steps.size());
    b.first_local_port = static_cast<std::uint32_t>(local_ports.size());
    for (const auto& s : prog) {
      plan::Step local = s;
      local.recv_begin = static_cast<std::uint32_t>(local_ports.size()) - b.first_local_port;
      for (std::uint32_t k = 0; k < s.recv_count; ++k) {
        const plan::Port& port = ports[s.recv_begin + k];
        local_ports.push_back({messages_[port.connection], port.seq});
      }
      local.send_begin = static_cast<std::uint32_t>(local_ports.size()) - b.first_local_port;
      for (std::uint32_t k = 0; k < s.send_count; ++k) {
        const plan::Port& port = ports[s.send_begin + k];
        local_ports.push_back({messages_[port.connection], port.seq});
      }
      local_steps.push_back(local);
    }
    programs.push_back(b);
    return static_cast<std::uint32_t>(programs.size() - 1);
  }

  // Block b's advances.
  std::span<const BaseAdvance> advances_of(std::uint32_t b) const {
    const BlockProgram& prog = programs[b];
    return {advances.data() + prog.first_advance, prog.nadvance};
  }

  // The ranks block b exchanges messages with (the other ends of the connections it advances),
  // each once, in rank order: the peers whose calls a cuda-p2p block compares with its own
  // (call_record.hpp). keys[i]: the ends (from, to) of connection i as the tables count them.
  template <class Keys>
  std::vector<std::int32_t> peers_of(std::uint32_t b, const Keys& keys) const {
    const std::int32_t rank = programs[b].rank;
    std::vector<std::int32_t> peers;
    for (const BaseAdvance& a : advances_of(b)) {
      const auto& k = keys[a.connection];
      const auto from = static_cast<std::int32_t>(k.from), to = static_cast<std::int32_t>(k.to);
      const std::int32_t other = from == rank ? to : from;
      if (other != rank) peers.push_back(other);
    }
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    return peers;
  }

 private:
  std::vector<std::uint32_t> messages_;  // per connection, for the block being added
};

// Copies block b's program in its block-local form into `cache` (kBlockTableCacheBytes, 16-byte
// aligned; b.cached must be set), each member of the group a share: member `first` of `stride`
// copies entries first, first + stride, ... of each table. The connections' refs and the
// bases of this call are gathered from the global tables (`connections` and `base_row` are
// indexed by the tables' connection numbers). The members must meet at a barrier before the
// tables are read. Returns where the cached program lies.
template <class C>
CCOLL_HD ProgramTables<C> fill_block_cache(std::byte* cache, const BlockProgram& b,
                                           const plan::Step* local_steps,
                                           const plan::Port* local_ports, const C* connections,
                                           const std::uint64_t* base_row,
                                           const BaseAdvance* advances, std::uint64_t first,
                                           std::uint64_t stride) {
  const BlockCacheLayout l = block_cache_layout<sizeof(C)>(b);
  auto* const steps = reinterpret_cast<plan::Step*>(cache + l.steps);
  auto* const ports = reinterpret_cast<plan::Port*>(cache + l.ports);
  auto* const conns = reinterpret_cast<C*>(cache + l.connections);
  auto* const bases = reinterpret_cast<std::uint64_t*>(cache + l.bases);
  for (std::uint64_t i = first; i < b.nsteps; i += stride)
    steps[i] = local_steps[b.first_local_step + i];
  for (std::uint64_t i = first; i < b.nlocal_ports; i += stride)
    ports[i] = local_ports[b.first_local_port + i];
  for (std::uint64_t i = first; i < b.nadvance; i += stride) {
    const std::uint32_t c = advances[b.first_advance + i].connection;
    conns[i] = connections[c];
    bases[i] = base_row[c];
  }
  return {steps, ports, conns, bases};
}

// The sections of one allocation, each starting on a 128-byte line (no two blocks' words, and no
// table and counter, share a line), and a host image of it to copy in one transfer.
class TableSections {
 public:
  static constexpr std::size_t kLine = kDeviceLine;
  // The offset of a new section of `bytes`.
  std::size_t add(std::size_t bytes) {
    const std::size_t at = total_;
    total_ += (bytes + kLine - 1) / kLine * kLine;
    return at;
  }
  std::size_t total() const { return total_; }

 private:
  std::size_t total_ = 0;
};

// Copies v's elements into `image` at byte offset `at` (the image holds the section).
template <class V>
void put_section(std::vector<std::byte>& image, std::size_t at, const V& v) {
  if (!v.empty()) std::memcpy(image.data() + at, v.data(), v.size() * sizeof(v[0]));
}

}  // namespace ccoll::transport::cuda
