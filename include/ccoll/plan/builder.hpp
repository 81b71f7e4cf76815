// ccoll/plan/builder.hpp: a fast way to append steps to a Plan, shared by the plan builders.
//
// Plan::add_step() finds connections by a linear search, which is fine for a hand-made plan but
// quadratic for a 64-rank ring with thousands of steps. PlanBuilder keeps a hash map from
// (from, to, channel) to the connection index and lets a step name its connections explicitly,
// which the overlapped tree needs: its root's reduce program (one channel) sends into the
// children's broadcast programs (another channel).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

class PlanBuilder {
 public:
  // Starts `plan` afresh: nranks, nchannels, every rank active unless `active` says otherwise.
  PlanBuilder(Plan& plan, std::string algorithm, const PlanRequest& req, std::uint32_t nchannels,
              std::vector<bool> active = {})
      : plan_(plan) {
    plan_ = Plan{};
    plan_.algorithm = std::move(algorithm);
    plan_.count = req.count;
    plan_.nslots = req.nslots;
    plan_.slot_elems = req.elem_size == 0 ? 0 : req.slot_bytes / req.elem_size;
    plan_.active = active.empty() ? std::vector<bool>(static_cast<std::size_t>(req.nranks), true)
                                  : std::move(active);
    plan_.reset(req.nranks, nchannels);
  }

  // The connection from->to whose FIFO is read by `channel`'s program on `to`.
  std::uint32_t connection(Rank from, Rank to, std::uint32_t channel) {
    if (channel >= index_.size()) index_.resize(channel + 1);
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(from)) << 32) |
                              static_cast<std::uint32_t>(to);
    auto [it, inserted] =
        index_[channel].try_emplace(key, static_cast<std::uint32_t>(plan_.connections.size()));
    if (inserted) plan_.connections.push_back(Connection{from, to, channel, 0});
    return it->second;
  }

  // Appends a step to (rank, channel) with explicit connection indices for its ports; returns it
  // (valid until the next add) for fields the arguments do not cover, such as src_position.
  Step& add(std::uint32_t channel, Rank rank, std::uint64_t offset, std::uint64_t count, Source src,
            const std::vector<std::uint32_t>& recv_connections,
            const std::vector<std::uint32_t>& send_connections, bool write_output, bool is_final) {
    Step s;
    s.offset = offset;
    s.count = count;
    s.src = src;
    s.write_output = write_output;
    s.final = is_final;
    s.recv_begin = static_cast<std::uint32_t>(plan_.ports.size());
    for (std::uint32_t c : recv_connections) plan_.ports.push_back(Port{c, 0});
    s.recv_count = static_cast<std::uint32_t>(recv_connections.size());
    s.send_begin = static_cast<std::uint32_t>(plan_.ports.size());
    for (std::uint32_t c : send_connections) plan_.ports.push_back(Port{c, 0});
    s.send_count = static_cast<std::uint32_t>(send_connections.size());
    auto& steps = plan_.channels[channel].programs[static_cast<std::size_t>(rank)].steps;
    steps.push_back(s);
    return steps.back();
  }

  // Numbers the messages (Plan::finalize) and returns the plan.
  Plan& finish() {
    plan_.finalize();
    return plan_;
  }

 private:
  Plan& plan_;
  std::vector<std::unordered_map<std::uint64_t, std::uint32_t>> index_;  // per channel
};

// Splits n elements into `parts` contiguous ranges whose sizes differ by at most one (the first
// n % parts ranges get the extra element); returns the begin of range i (i = parts gives n).
inline std::uint64_t even_split_begin(std::uint64_t n, std::uint64_t parts, std::uint64_t i) {
  const std::uint64_t base = n / parts, extra = n % parts;
  return i * base + (i < extra ? i : extra);
}

inline void check_request(const PlanRequest& req) {
  if (req.nranks < 1) throw_invalid_argument(-1, "nranks", ">= 1", std::to_string(req.nranks));
  if (req.elem_size == 0) throw_invalid_argument(-1, "elem_size", ">= 1", "0");
  if (req.nslots < 1) throw_invalid_argument(-1, "nslots", ">= 1", "0");
  if (req.nranks > 1 && req.slot_bytes < req.elem_size)
    throw_invalid_argument(-1, "slot_bytes", ">= elem_size (" + std::to_string(req.elem_size) + ")",
                           std::to_string(req.slot_bytes));
}

}  // namespace ccoll::plan
