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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
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

  // Room for `requests` tensors in flight at once, named with up to `name_length` characters
  // (groups as defined so far): a cycle whose requests all hit the response cache then allocates
  // nothing. Request objects are recycled, each with that much room for its name and group.
  void reserve(std::size_t requests, std::size_t name_length) {
    name_length_ = std::max(name_length_, name_length);
    group_length_ = std::max(group_length_, queue_.longest_group_name());
    queue_.reserve(requests, name_length_);
    for (auto* v : {&ready_, &hits_, &uncached_, &requeue_, &group_members_, &executed_, &spare_})
      v->reserve(requests);
    while (spare_.size() < requests) {
      TensorRequest r;
      room_for_names(r);
      spare_.push_back(std::move(r));
    }
    grouped_.reserve(requests);
    hit_bits_.reserve(requests);
    group_bits_.reserve(requests);
    fused_.reserve(requests);
    scratch_.reserve(requests);
  }

  void submit(TensorRequest r) { queue_.submit(std::move(r)); }
  void submit(std::string_view name, DataType dtype, std::uint64_t count,
              ReduceOp op = ReduceOp::sum) {
    recycle();
    TensorRequest r;
    if (spare_.empty()) {
      room_for_names(r);
    } else {
      r = std::move(spare_.back());
      spare_.pop_back();
    }
    r.name.assign(name);
    r.dtype = dtype;
    r.count = count;
    r.op = op;
    submit(std::move(r));
  }

  // One cycle, collective over the control plane; returns the fused responses to execute, in order.
  std::vector<FusedResponse> run_cycle() {
    std::vector<FusedResponse> out;
    for (const FusedRange& f : cycle()) {
      FusedResponse& r = out.emplace_back();
      r.dtype = f.dtype;
      r.op = f.op;
      r.bytes = f.bytes;
      r.tensors.assign(executed_.begin() + static_cast<std::ptrdiff_t>(f.begin),
                       executed_.begin() + static_cast<std::ptrdiff_t>(f.end));
    }
    return out;
  }

  // The same cycle as run_cycle(), its result kept here until the next cycle: ranges of
  // responses() (the fused allreduces, in order). Nothing is copied, so once every request hits the
  // response cache and reserve() made room, a cycle allocates nothing.
  std::span<const FusedRange> cycle() {
    recycle();
    if (!options_agreed_) check_options();
    stats_ = CycleStats{};
    stats_.cycle = ++cycles_;
    const std::uint32_t nbits = cache_.num_bits();

    // 2. Classify this rank's ready requests, a whole group at a time.
    queue_.pop_ready(ready_);
    hits_.clear();
    uncached_.clear();
    requeue_.clear();
    invalid_.resize(nbits);
    bool local_invalid = false;
    {
      // A unit is one ungrouped request or a whole group; it goes one way as a whole.
      auto classify = [&](TensorRequest* first, TensorRequest* last) {
        bool all_hit = options_.cache_enabled, any_invalid = false;
        for (auto* r = first; r != last; ++r) {
          const auto l = options_.cache_enabled ? cache_.lookup(*r) : ResponseCache::Lookup{};
          if (l.state == ResponseCache::State::invalid) {
            invalid_.set(l.bit);
            any_invalid = true;
          }
          all_hit = all_hit && l.state == ResponseCache::State::hit;
        }
        auto& dest = any_invalid ? requeue_ : all_hit ? hits_ : uncached_;
        local_invalid = local_invalid || any_invalid;
        for (auto* r = first; r != last; ++r) dest.push_back(std::move(*r));
      };
      // Ungrouped requests in order, then the groups by name, members in order.
      grouped_.clear();
      for (std::size_t i = 0; i < ready_.size(); ++i) {
        if (ready_[i].group.empty())
          classify(&ready_[i], &ready_[i] + 1);
        else
          grouped_.push_back(i);
      }
      std::sort(grouped_.begin(), grouped_.end(), [&](std::size_t x, std::size_t y) {
        const int c = ready_[x].group.compare(ready_[y].group);
        return c != 0 ? c < 0 : x < y;
      });
      for (std::size_t i = 0; i < grouped_.size();) {
        std::size_t j = i + 1;
        while (j < grouped_.size() && ready_[grouped_[j]].group == ready_[grouped_[i]].group) ++j;
        group_members_.clear();
        for (std::size_t k = i; k < j; ++k)
          group_members_.push_back(std::move(ready_[grouped_[k]]));
        classify(group_members_.data(), group_members_.data() + group_members_.size());
        i = j;
      }
    }

    // 3-4. One AND allreduce of status + hit bits; an OR of invalid bits only when needed.
    bool uncached_anywhere = true, invalid_anywhere = false;
    common_.resize(nbits);
    if (options_.cache_enabled) {
      bits_.resize(kStatusBits + nbits);
      bits_.assign(0, uncached_.empty());
      bits_.assign(1, !local_invalid);
      for (const auto& r : hits_) bits_.set(kStatusBits + cache_.lookup(r).bit);
      control_.allreduce_and(bits_.words());
      stats_.bitvector_bytes = bits_.bytes();
      uncached_anywhere = !bits_.test(0);
      invalid_anywhere = !bits_.test(1);
      for (std::uint32_t b = 0; b < nbits; ++b) common_.assign(b, bits_.test(kStatusBits + b));
      if (invalid_anywhere) {
        control_.allreduce_or(invalid_.words());
        stats_.invalid_bytes = invalid_.bytes();
        invalid_.for_each_set([&](std::size_t b) {
          common_.reset(b);
          cache_.erase(static_cast<std::uint32_t>(b));
        });
      }
      drop_incomplete_groups(common_);
    }

    // Cached responses ready everywhere, in ascending bit order (identical on every rank). A bit
    // in `common` is set on every rank, so this rank holds the hit that set it, and a hit equals
    // its cache entry field for field: the request itself is the response.
    hit_bits_.clear();
    for (std::size_t i = 0; i < hits_.size(); ++i) {
      const auto l = cache_.lookup(hits_[i]);
      if (l.state == ResponseCache::State::hit && common_.test(l.bit))
        hit_bits_.emplace_back(l.bit, i);
      else
        requeue_.push_back(std::move(hits_[i]));
    }
    std::sort(hit_bits_.begin(), hit_bits_.end());
    for (const auto& [bit, i] : hit_bits_) executed_.push_back(std::move(hits_[i]));
    stats_.cached_responses = executed_.size();

    // 5. Coordinator path for requests no cache knows yet.
    if (uncached_anywhere) coordinate();
    queue_.requeue_front(requeue_);

    // 6. Execute in the agreed order; the cache sees the same puts in the same order everywhere.
    fuse_in_place(executed_, options_.fusion_threshold_bytes, fused_, scratch_);
    for (const auto& r : executed_) {
      if (options_.cache_enabled) cache_.put(r);
      queue_.complete(r.name);
    }
    stats_.fused_responses = fused_.size();
    return fused_;
  }

  // The responses of the last cycle(), in execution order (FusedRange indexes them); valid until
  // the next submit() or cycle, which recycle them.
  std::span<const Response> responses() const noexcept { return executed_; }

  const CycleStats& last_cycle() const noexcept { return stats_; }
  const ResponseCache& cache() const noexcept { return cache_; }
  const TensorQueue& queue() const noexcept { return queue_; }
  std::size_t awaiting() const noexcept { return awaiting_.size(); }

 private:
  // A group executes only as a whole: drop cached group members whose group is not complete in
  // `common`. Depends only on `common` and the cache, both identical on every rank.
  void drop_incomplete_groups(BitVector& common) {
    group_bits_.clear();
    common.for_each_set([&](std::size_t b) {
      const Response& r = cache_.at(static_cast<std::uint32_t>(b));
      if (!r.group.empty()) group_bits_.emplace_back(&r, static_cast<std::uint32_t>(b));
    });
    if (group_bits_.empty()) return;
    std::sort(group_bits_.begin(), group_bits_.end(), [](const auto& x, const auto& y) {
      const int c = x.first->group.compare(y.first->group);
      return c != 0 ? c < 0 : x.second < y.second;
    });
    for (std::size_t i = 0; i < group_bits_.size();) {
      std::size_t j = i + 1;
      while (j < group_bits_.size() && group_bits_[j].first->group == group_bits_[i].first->group)
        ++j;
      for (std::size_t k = i; k < j; ++k)
        if (j - i != group_bits_[k].first->group_size) common.reset(group_bits_[k].second);
      i = j;
    }
  }

  // Ranks configured differently would run different collectives without noticing: another
  // capacity evicts other entries (a bit then names another tensor on each rank), another
  // threshold fuses differently, a rank without the cache skips the AND allreduce. So the first
  // cycle compares the options, before any of that: AND(v) == ~AND(~v) iff every rank has v.
  void check_options() {
    const std::uint64_t values[3] = {
        options_.cache_enabled ? 1u : 0u,
        options_.cache_enabled ? static_cast<std::uint64_t>(options_.cache_capacity) : 0u,
        options_.fusion_threshold_bytes};
    std::uint64_t words[6];
    for (std::size_t i = 0; i < 3; ++i) {
      words[2 * i] = values[i];
      words[2 * i + 1] = ~values[i];
    }
    control_.allreduce_and(words);
    static constexpr const char* kNames[3] = {"cache_enabled", "cache_capacity",
                                              "fusion_threshold_bytes"};
    std::string differ;
    for (std::size_t i = 0; i < 3; ++i) {
      if (words[2 * i] == ~words[2 * i + 1]) continue;
      differ += differ.empty() ? "" : ", ";
      differ += kNames[i];
    }
    if (!differ.empty())
      throw Error(ErrorCode::Mismatch, rank(),
                  "coordinator options differ across ranks: " + differ);
    options_agreed_ = true;
  }

  // Step 5: gathers the requests no cache knows at rank 0 and appends its decisions to executed_.
  void coordinate() {
    stats_.coordinator_path = true;
    for (auto& r : uncached_) awaiting_.emplace(r.name, r);
    const std::string mine = wire::encode(uncached_);
    uncached_.clear();
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
    for (auto& r : fresh) {
      room_for_names(r);  // it becomes a spare request after this cycle
      executed_.push_back(std::move(r));
    }
  }

  // The last cycle's responses become spare request objects, up to what reserve() made room for
  // (requests submitted whole, by the other submit(), do not pile up here).
  void recycle() {
    for (auto& r : executed_)
      if (spare_.size() < spare_.capacity()) spare_.push_back(std::move(r));
    executed_.clear();
    fused_.clear();
  }

  void room_for_names(TensorRequest& r) const {
    if (r.name.capacity() < name_length_) r.name.reserve(name_length_);
    if (r.group.capacity() < group_length_) r.group.reserve(group_length_);
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
  bool options_agreed_ = false;
  // Kept between cycles so that a cycle reuses their storage (reserve()).
  std::size_t name_length_ = 0;
  std::size_t group_length_ = 0;
  std::vector<TensorRequest> ready_, hits_, uncached_, requeue_, group_members_;
  std::vector<TensorRequest> spare_;  // request objects for submit(), with room for names
  std::vector<Response> executed_;    // the last cycle's responses
  std::vector<FusedRange> fused_;     // ... and their fused allreduces
  std::vector<std::size_t> grouped_;  // indices into ready_ of grouped requests
  std::vector<std::pair<std::uint32_t, std::size_t>> hit_bits_;  // (bit, index into hits_)
  std::vector<std::pair<const Response*, std::uint32_t>> group_bits_;
  BitVector invalid_, common_, bits_;
  FusionScratch scratch_;
};

}  // namespace ccoll::coord
