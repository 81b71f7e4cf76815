// ccoll/transport/cuda/p2p_options.hpp: what a user chooses for transport::CudaP2P (placement,
// launch, sharing, agreement), where one rank's FIFO memory keeps what its peers write, and the
// connections a process sees through the ranks' memory. Plain C++, so that the layout is tested
// without a GPU (tests/cuda_protocol_test.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/cuda/block_tables.hpp"

namespace ccoll::transport::cuda {

// How CudaP2P places and launches its ranks (an argument after the topology:
// Allreduce<CudaP2P, L> ar(config, L{}, cuda::P2POptions{...})).
struct P2POptions {
  enum class Mode : std::uint8_t { threads, processes };
  Mode mode = Mode::threads;
  // threads: rank r runs on devices[r] (entries may repeat); empty: rank r on device r % count.
  std::vector<int> devices;
  // processes: this rank's device; -1: the current device.
  int device = -1;
  // Per block: a multiple of 32, at most 1024; 0: per launch, the most up to 512 at which the
  // blocks of the ranks on the device fit (cuda::fit_launch).
  unsigned threads = 0;
  // processes: share memory through cuMem descriptors where the driver allows it (false: always
  // legacy CUDA IPC).
  bool prefer_cumem = true;
  // processes: the rendezvous socket; "": p2p-<hash of Config::session>.sock in the per-user
  // private directory of transport::SharedMemory's tokens.
  std::string socket_path;
  // Every block checks that its peers make the same call (call_record.hpp): one store and one
  // poll of host-mapped memory per peer and call. false: a mismatch runs into the timeouts.
  bool check_calls = true;
};

// Threads mode: the device of each rank (P2POptions::devices, or rank r on device r % count),
// checked against the `count` devices there are.
inline std::vector<int> rank_devices(const P2POptions& options, int nranks, int count) {
  std::vector<int> devices = options.devices;
  if (devices.empty())
    for (int r = 0; r < nranks; ++r) devices.push_back(r % std::max(1, count));
  if (devices.size() != static_cast<std::size_t>(nranks))
    throw_invalid_argument(-1, "cuda::P2POptions::devices",
                           std::to_string(nranks) + " devices (one per rank) or none",
                           std::to_string(devices.size()));
  for (int r = 0; r < nranks; ++r) {
    const int d = devices[static_cast<std::size_t>(r)];
    if (d < 0 || d >= count)
      throw_invalid_argument(r, "cuda::P2POptions::devices[" + std::to_string(r) + "]",
                             "a device in 0.." + std::to_string(count - 1), std::to_string(d));
  }
  return devices;
}

// Threads mode: the pairs of distinct devices (lower first, each once) that a connection joins,
// each with the ranks of the first connection found between them: the devices that need peer
// access both ways.
struct DevicePair {
  int a = 0, b = 0;            // devices, a < b
  int rank_a = 0, rank_b = 0;  // ranks on a and b that a connection joins
  bool operator==(const DevicePair&) const = default;
};
inline std::vector<DevicePair> connected_device_pairs(
    const std::vector<runtime::ConnectionKey>& keys, const std::vector<int>& devices) {
  std::vector<DevicePair> pairs;
  for (const auto& k : keys) {
    const int ru = k.from, rv = k.to;
    const int du = devices[static_cast<std::size_t>(ru)],
              dv = devices[static_cast<std::size_t>(rv)];
    if (du == dv) continue;
    const DevicePair p = du < dv ? DevicePair{du, dv, ru, rv} : DevicePair{dv, du, rv, ru};
    if (std::none_of(pairs.begin(), pairs.end(),
                     [&](const DevicePair& q) { return q.a == p.a && q.b == p.b; }))
      pairs.push_back(p);
  }
  std::sort(pairs.begin(), pairs.end(), [](const DevicePair& x, const DevicePair& y) {
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  return pairs;
}

// The LowLatency slot of a cuda-p2p connection (protocol/low_latency.hpp): the connection set's
// message numbers run on across plans, so its LL slots are the set's too, made with it (zeroed)
// and as large as the largest LowLatency message a GPU runs as such (block_tables.hpp,
// kMaxLowLatencySlotBytes), or as a Simple slot where that is smaller. A LowLatency plan with
// larger messages runs as Simple.
inline std::uint64_t p2p_low_latency_slot_bytes(std::uint64_t slot_stride) {
  return std::min(slot_stride, kMaxLowLatencySlotBytes);
}

// Which block (plan channel) sends and which receives on each connection of a cuda-p2p
// communicator, as the plans of the rank's calls so far use them. A block counts the messages of
// the connections it uses in a row of message bases of its own, which no other block reads, so
// every plan of a communicator must use each connection from the same block at both ends, or
// the counts drift apart (and a session's blocks, which run ahead of each other between items,
// would share a connection). Plans of one algorithm do, at every count and in both protocols;
// `auto` (algo/by_size.hpp) with several channels does not. Every rank decides from the whole
// plan, in call order, so all refuse alike.
class ConnectionBlocks {
 public:
  // "" and the plan's use recorded, or why `p` cannot run beside the plans admitted before it
  // (nothing recorded then).
  // set_index: the communicator's connection of each of the plan's (PreparedPlan::set_index).
  std::string admit(const plan::Plan& p, const std::vector<std::uint32_t>& set_index) {
    std::vector<std::int32_t> sender = sender_, receiver = receiver_;
    for (std::uint32_t c = 0; c < p.channels.size(); ++c)
      for (const auto& prog : p.channels[c].programs)
        for (const auto& s : prog.steps)
          for (std::uint32_t k = 0; k < s.recv_count + s.send_count; ++k) {
            const bool recv = k < s.recv_count;
            const std::uint32_t i =
                p.ports[recv ? s.recv_begin + k : s.send_begin + (k - s.recv_count)].connection;
            const std::uint32_t key = set_index[i];
            auto& blocks = recv ? receiver : sender;
            if (blocks.size() <= key) blocks.resize(key + 1, -1);
            const auto block = static_cast<std::int32_t>(c);
            if (blocks[key] == -1) blocks[key] = block;
            if (blocks[key] != block) {
              const plan::Connection& conn = p.connections[i];
              return "plan '" + p.algorithm + "' " + (recv ? "receives" : "sends") +
                     " on the connection " + std::to_string(conn.from) + "->" +
                     std::to_string(conn.to) + " (channel " + std::to_string(conn.channel) +
                     ") from block " + std::to_string(c) + ", which an earlier plan of this " +
                     "communicator uses from block " + std::to_string(blocks[key]) +
                     "; cuda-p2p keeps a connection's message count in one block: use one "
                     "algorithm per communicator, or one channel";
            }
          }
    sender_ = std::move(sender);
    receiver_ = std::move(receiver);
    return "";
  }

 private:
  std::vector<std::int32_t> sender_, receiver_;  // per connection of the set; -1: none yet
};

// Whether cuda-p2p runs plan `p` (elements of elem_size) as LowLatency, on connections whose LL
// slots hold ll_slot_bytes (0: none): from the plan and the configuration alone, so that every rank
// decides the same. (Whether a process sees LL slots on every connection of a plan would not do:
// a process maps only its own and its peers' memory.)
inline bool p2p_runs_low_latency(const plan::Plan& p, std::uint64_t elem_size,
                                 std::uint64_t ll_slot_bytes) {
  return protocol::is_low_latency(p) && ll_slot_bytes > 0 &&
         low_latency_slot_bytes(p, elem_size) <= ll_slot_bytes;
}

// Where one rank's FIFO memory keeps what its peers write and what it polls (offsets; kNone: not
// in this rank's memory).
struct P2PFifoLayout {
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  std::vector<std::uint64_t> slots, tail, head;  // per connection of the set
  std::vector<std::uint64_t> ll_slots;           // kNone also where ll_slot_bytes is 0
  std::uint64_t total = 0;

  // ll_slot_bytes: each incoming connection's LowLatency slots (nslots of them; 0: none).
  static P2PFifoLayout make(const std::vector<runtime::ConnectionKey>& keys, int rank,
                            std::uint64_t slot_stride, std::uint32_t nslots,
                            std::uint64_t ll_slot_bytes = 0) {
    P2PFifoLayout l;
    const std::size_t n = keys.size();
    l.slots.assign(n, kNone);
    l.tail.assign(n, kNone);
    l.head.assign(n, kNone);
    l.ll_slots.assign(n, kNone);
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (keys[i].to == rank) {
        l.tail[i] = at;
        at += sync::kCounterStride;
      }
      if (keys[i].from == rank) {
        l.head[i] = at;
        at += sync::kCounterStride;
      }
    }
    for (std::size_t i = 0; i < n; ++i)
      if (keys[i].to == rank) {
        l.slots[i] = at;
        at += slot_stride * nslots;
        if (ll_slot_bytes > 0) {
          l.ll_slots[i] = at;
          at += ll_slot_bytes * nslots;
        }
      }
    l.total = std::max<std::uint64_t>(at, sync::kCounterStride);
    return l;
  }
};

// Every connection of the set as this process sees it: its slots, LowLatency slots (where
// ll_slot_bytes > 0, as the layouts were made) and tail in the receiver's FIFO memory, its head in
// the sender's. bases[r]: rank r's FIFO memory mapped into this process
// (layouts[r] places it), null where it is not; a connection without both ends here keeps null
// pointers: no block of this process uses it.
inline std::vector<sync::ConnectionRef> p2p_connection_refs(
    const std::vector<runtime::ConnectionKey>& keys, const std::vector<P2PFifoLayout>& layouts,
    const std::vector<std::byte*>& bases, std::uint64_t slot_stride, std::uint32_t nslots,
    std::uint64_t ll_slot_bytes = 0) {
  std::vector<sync::ConnectionRef> refs(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto to = static_cast<std::size_t>(keys[i].to);
    const auto from = static_cast<std::size_t>(keys[i].from);
    sync::ConnectionRef& c = refs[i];
    c.slot_bytes = slot_stride;
    c.nslots = nslots;
    c.from = keys[i].from;
    c.to = keys[i].to;
    if (bases[to] == nullptr || bases[from] == nullptr) continue;
    c.slots = bases[to] + layouts[to].slots[i];
    c.tail = reinterpret_cast<std::uint64_t*>(bases[to] + layouts[to].tail[i]);
    c.head = reinterpret_cast<std::uint64_t*>(bases[from] + layouts[from].head[i]);
    if (ll_slot_bytes > 0) {
      c.ll_slots = bases[to] + layouts[to].ll_slots[i];
      c.ll_slot_bytes = ll_slot_bytes;
    }
  }
  return refs;
}

}  // namespace ccoll::transport::cuda
