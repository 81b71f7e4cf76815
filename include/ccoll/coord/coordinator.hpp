// ccoll/coord/coordinator.hpp: decides, on every rank, which tensors to allreduce now and in
// which order, when ranks produce their gradients in different orders ([Horovod-cache] Alg. 1-2).
//
// Each rank calls run_cycle() in lock step (it is collective over the ControlPlane). A cycle:
//   1. takes this rank's ready requests (TensorQueue: ungrouped tensors and complete groups);
//   2. looks each up in the ResponseCache: a hit sets the tensor's bit in a bitvector, a request
//   the
//      cache does not know sets "uncached", one that contradicts its entry sets "invalid";
//   3. ANDs the bitvector across ranks: the bits left are tensors ready on every rank;
//   4. if any rank saw an invalid entry, ORs the invalid bits and erases those entries everywhere;
//   5. only if some rank holds uncached requests: gathers them at rank 0, which matches names
//      across ranks and cycles, checks that all ranks agree on count / dtype / op / group (else
//      every rank throws ErrorCode::Mismatch naming the tensor, the ranks and both values), and
//      broadcasts the requests that every rank has now submitted (groups only when complete);
//   6. executes cached responses (ascending bit) then new ones (rank 0's order), groups made
//      contiguous, fused up to the threshold; puts them into the cache in that order.
// Every input to steps 3-6 is either identical on all ranks or the result of a collective, so all
// ranks execute the same fused responses and their caches stay identical (docs/coordination.md).
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ccoll/coord/bitvector.hpp"
#include "ccoll/coord/control_plane.hpp"
#include "ccoll/coord/fusion.hpp"
#include "ccoll/coord/response_cache.hpp"
#include "ccoll/coord/tensor_queue.hpp"
#include "ccoll/coord/tensor_request.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::coord {

struct CoordinatorOptions {
  std::size_t cache_capacity = 1024;  // Horovod's default ([Horovod-cache] Sec. 3.1.1)
  bool cache_enabled = true;          // false: Horovod's original coordinator path every cycle
  std::uint64_t fusion_threshold_bytes = std::uint64_t{64} << 20;  // HOROVOD_FUSION_THRESHOLD
};

// Control traffic of one cycle, as payload bytes this rank hands to the control plane (rank 0:
// gather_bytes is what it receives from all ranks).
struct CycleStats {
  std::uint64_t cycle = 0;
  std::uint64_t bitvector_bytes = 0;  // AND allreduce (status bits + one bit per cache position)
  std::uint64_t invalid_bytes = 0;    // OR allreduce, only when an entry was invalidated
  std::uint64_t gather_bytes = 0;     // coordinator path: request lists
  std::uint64_t broadcast_bytes = 0;  // coordinator path: rank 0's decisions
  bool coordinator_path = false;
  std::size_t cached_responses = 0;
  std::size_t new_responses = 0;
  std::size_t fused_responses = 0;
  std::uint64_t control_bytes() const {
    return bitvector_bytes + invalid_bytes + gather_bytes + broadcast_bytes;
  }
};

class Coordinator {
 public:
  // Bit 0: "this rank has no uncached request", bit 1: "no invalid entry": stored inverted so that
  // the same AND that intersects the cache bits computes "any rank has one" (De Morgan).
  static constexpr std::size_t kStatusBits = 2;

  Coordinator(ControlPlane& control, CoordinatorOptions options = {})
      : control_(control),
        options_(options),
        cache_(options.cache_capacity),
        queue_(control.rank()) {}

  int rank() const { return control_.rank(); }
  void define_group(const std::string& group, std::vector<std::string> members) {
    queue_.define_group(group, std::move(members));
  }
  void submit(TensorRequest r) { queue_.submit(std::move(r)); }
  void submit(std::string name, DataType dtype, std::uint64_t count, ReduceOp op = ReduceOp::sum) {
    submit(TensorRequest{std::move(name), dtype, count, op, {}, 0});
  }

  std::vector<FusedResponse> run_cycle() {
    stats_ = CycleStats{};
    stats_.cycle = ++cycles_;
    const std::uint32_t nbits = cache_.num_bits();

    // 2. Classify this rank's ready requests, a whole group at a time.
    std::vector<TensorRequest> ready = queue_.pop_ready();
    std::vector<TensorRequest> hits, uncached, requeue;
    BitVector invalid(nbits);
    bool local_invalid = false;
    {
      // A unit is one ungrouped request or a whole group; it goes one way as a whole.
      auto classify = [&](TensorRequest* first, TensorRequest* last) {
        bool all_hit = options_.cache_enabled, any_invalid = false;
        for (auto* r = first; r != last; ++r) {
          const auto l = options_.cache_enabled ? cache_.lookup(*r) : ResponseCache::Lookup{};
          if (l.state == ResponseCache::State::invalid) {
            invalid.set(l.bit);
            any_invalid = true;
          }
          all_hit = all_hit && l.state == ResponseCache::State::hit;
        }
        auto& dest = any_invalid ? requeue : all_hit ? hits : uncached;
        local_invalid = local_invalid || any_invalid;
        for (auto* r = first; r != last; ++r) dest.push_back(std::move(*r));
      };
      std::map<std::string, std::vector<TensorRequest>> groups;
      for (auto& r : ready) {
        if (r.group.empty())
          classify(&r, &r + 1);
        else
          groups[r.group].push_back(std::move(r));
      }
      for (auto& [name, members] : groups)
        classify(members.data(), members.data() + members.size());
    }

    // 3-4. One AND allreduce of status + hit bits; an OR of invalid bits only when needed.
    bool uncached_anywhere = true, invalid_anywhere = false;
    BitVector common(nbits);
    if (options_.cache_enabled) {
      BitVector bits(kStatusBits + nbits);
      bits.assign(0, uncached.empty());
      bits.assign(1, !local_invalid);
      for (const auto& r : hits) bits.set(kStatusBits + cache_.lookup(r).bit);
      control_.allreduce_and(bits.words());
      stats_.bitvector_bytes = bits.bytes();
      uncached_anywhere = !bits.test(0);
      invalid_anywhere = !bits.test(1);
      for (std::uint32_t b = 0; b < nbits; ++b) common.assign(b, bits.test(kStatusBits + b));
      if (invalid_anywhere) {
        control_.allreduce_or(invalid.words());
        stats_.invalid_bytes = invalid.bytes();
        invalid.for_each_set([&](std::size_t b) {
          common.reset(b);
          cache_.erase(static_cast<std::uint32_t>(b));
        });
      }
      drop_incomplete_groups(common);
    }

    // Cached responses ready everywhere, in ascending bit order (identical on every rank).
    std::vector<Response> execute;
    common.for_each_set(
        [&](std::size_t b) { execute.push_back(cache_.at(static_cast<std::uint32_t>(b))); });
    stats_.cached_responses = execute.size();
    for (auto& r : hits) {
      const auto l = cache_.lookup(r);
      if (!(l.state == ResponseCache::State::hit && common.test(l.bit)))
        requeue.push_back(std::move(r));
    }

    // 5. Coordinator path for requests no cache knows yet.
    if (uncached_anywhere) {
      stats_.coordinator_path = true;
      for (auto& r : uncached) awaiting_.emplace(r.name, r);
      const std::string mine = wire::encode(uncached);
      const std::vector<std::string> lists = control_.gather_to_root(mine);
      std::string decision;
      if (rank() == 0) {
        for (const auto& l : lists) stats_.gather_bytes += l.size();
        decision = decide(lists);
      } else {
        stats_.gather_bytes = mine.size();
      }
      decision = control_.broadcast_from_root(decision);
      stats_.broadcast_bytes = decision.size();
      std::vector<Response> fresh = parse_decision(decision);
      for (auto& r : fresh) {
        if (awaiting_.erase(r.name) == 0)
          throw Error(ErrorCode::Mismatch, rank(),
                      "coordinator scheduled '" + r.name + "', which this rank did not submit");
      }
      stats_.new_responses = fresh.size();
      execute.insert(execute.end(), fresh.begin(), fresh.end());
    }
    queue_.requeue(std::move(requeue));

    // 6. Execute in the agreed order; the cache sees the same puts in the same order everywhere.
    std::vector<FusedResponse> fused =
        fuse_responses(std::move(execute), options_.fusion_threshold_bytes);
    for (const auto& f : fused) {
      for (const auto& r : f.tensors) {
        if (options_.cache_enabled) cache_.put(r);
        queue_.complete(r.name);
      }
    }
    stats_.fused_responses = fused.size();
    return fused;
  }

  const CycleStats& last_cycle() const noexcept { return stats_; }
  const ResponseCache& cache() const noexcept { return cache_; }
  const TensorQueue& queue() const noexcept { return queue_; }
  std::size_t awaiting() const noexcept { return awaiting_.size(); }

 private:
  // A group executes only as a whole: drop cached group members whose group is not complete in
  // `common`. Depends only on `common` and the cache, both identical on every rank.
  void drop_incomplete_groups(BitVector& common) const {
    std::unordered_map<std::string, std::uint32_t> present;
    common.for_each_set([&](std::size_t b) {
      const Response& r = cache_.at(static_cast<std::uint32_t>(b));
      if (!r.group.empty()) ++present[r.group];
    });
    if (present.empty()) return;
    common.for_each_set([&](std::size_t b) {
      const Response& r = cache_.at(static_cast<std::uint32_t>(b));
      if (!r.group.empty() && present[r.group] != r.group_size) common.reset(b);
    });
  }

  static std::string describe(const TensorRequest& r) {
    std::ostringstream os;
    os << "count " << r.count << ", dtype " << to_string(r.dtype) << ", op " << to_string(r.op);
    if (!r.group.empty()) os << ", group '" << r.group << "' of " << r.group_size;
    return os.str();
  }

  // Rank 0: match this cycle's request lists against the requests of earlier cycles.
  std::string decide(const std::vector<std::string>& lists) {
    std::vector<std::string> errors;
    std::vector<std::string> ready;
    for (int r = 0; r < static_cast<int>(lists.size()); ++r) {
      for (auto& req : wire::decode(lists[static_cast<std::size_t>(r)])) {
        auto [it, fresh] = table_.try_emplace(req.name);
        Pending& p = it->second;
        if (fresh) {
          p.first = req;
          p.first_rank = r;
          p.seen.assign(lists.size(), false);
        } else if (!p.first.same_collective(req)) {
          std::ostringstream os;
          os << "tensor '" << req.name << "': rank " << p.first_rank << " submitted "
             << describe(p.first) << "; rank " << r << " submitted " << describe(req);
          errors.push_back(os.str());
          continue;
        }
        if (p.seen[static_cast<std::size_t>(r)]) {
          errors.push_back("tensor '" + req.name + "' submitted twice by rank " +
                           std::to_string(r));
          continue;
        }
        p.seen[static_cast<std::size_t>(r)] = true;
        if (++p.nseen != static_cast<int>(lists.size())) continue;
        if (req.group.empty()) {
          ready.push_back(req.name);
          continue;
        }
        auto& done = group_done_[req.group];
        done.push_back(req.name);
        if (done.size() == req.group_size) {
          ready.insert(ready.end(), done.begin(), done.end());
          group_done_.erase(req.group);
        }
      }
    }
    std::string out = std::to_string(errors.size()) + "\n";
    for (const auto& e : errors) out += e + "\n";
    std::vector<Response> responses;
    for (const auto& name : ready) {
      responses.push_back(table_.at(name).first);
      table_.erase(name);
    }
    return out + wire::encode(responses);
  }

  std::vector<Response> parse_decision(const std::string& decision) const {
    const auto eol = decision.find('\n');
    const std::size_t nerrors = std::stoul(decision.substr(0, eol));
    std::size_t pos = eol + 1;
    if (nerrors > 0) {
      std::string all;
      for (std::size_t e = 0; e < nerrors; ++e) {
        const auto end = decision.find('\n', pos);
        if (e != 0) all += '\n';
        all.append(decision, pos, end - pos);
        pos = end + 1;
      }
      throw Error(ErrorCode::Mismatch, rank(), all);
    }
    return wire::decode(std::string_view(decision).substr(pos));
  }

  struct Pending {
    TensorRequest first;
    int first_rank = 0;
    int nseen = 0;
    std::vector<bool> seen;
  };

  ControlPlane& control_;
  CoordinatorOptions options_;
  ResponseCache cache_;
  TensorQueue queue_;
  std::unordered_map<std::string, TensorRequest> awaiting_;  // sent to rank 0, no response yet
  std::unordered_map<std::string, Pending> table_;           // rank 0 only
  std::unordered_map<std::string, std::vector<std::string>> group_done_;  // rank 0 only
  CycleStats stats_;
  std::uint64_t cycles_ = 0;
};

}  // namespace ccoll::coord
