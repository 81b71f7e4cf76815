// ccoll/coord/tensor_queue.hpp: one rank's submitted-but-not-yet-executed tensors, with the
// grouping rule of [Horovod-cache] (Sec. 3.2): a grouped tensor is held back until every member of
// its group has been submitted on this rank, so a group enters coordination as one unit.
//
// Group definitions are local; the coordinator checks that ranks agree (each request carries its
// group's name and size, which must match across ranks like its count and data type).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ccoll/coord/tensor_request.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::coord {

class TensorQueue {
 public:
  explicit TensorQueue(int rank = -1) : rank_(rank) {}

  void define_group(const std::string& group, std::vector<std::string> members) {
    if (group.empty()) throw_invalid_argument(rank_, "group", "a non-empty name", "\"\"");
    // The group name travels in the tab- and newline-separated wire form: a tab there would shift
    // the fields, a newline would fail to parse on rank 0 alone and leave the others waiting.
    if (group.find_first_of("\t\n") != std::string::npos)
      throw_invalid_argument(rank_, "group", "a name without tabs or newlines", quote(group, ""));
    if (members.empty()) throw_invalid_argument(rank_, "group members", "at least one", "none");
    if (groups_.count(group) != 0)
      throw_invalid_argument(rank_, "group", "a new group name", quote(group, " again"));
    for (const auto& m : members) {  // check everything before changing anything
      const auto it = member_of_.find(m);
      std::size_t dup = 0;
      for (const auto& other : members) dup += other == m;
      // A member submit() would reject could never be queued: its group would never be complete.
      if (m.empty() || m.find_first_of("\t\n") != std::string::npos)
        throw_invalid_argument(rank_, "group member", "non-empty, without tabs or newlines",
                               quote(m, ""));
      if (it != member_of_.end() || dup > 1) {
        std::string got = quote(m, " in ");
        got += quote(it != member_of_.end() ? it->second : group, " and ");
        got += quote(group, "");
        throw_invalid_argument(rank_, "group member", "a tensor in one group, once", got);
      }
    }
    for (const auto& m : members) member_of_.emplace(m, group);
    longest_group_ = std::max(longest_group_, group.size());
    groups_.emplace(group, Group{std::move(members), 0});
  }

  const std::vector<std::string>* members(const std::string& group) const {
    const auto it = groups_.find(group);
    return it == groups_.end() ? nullptr : &it->second.members;
  }

  // Room for `requests` tensors in flight at once, with names of up to `name_length` characters:
  // from then on, submitting, popping, requeueing and completing that many allocate nothing.
  void reserve(std::size_t requests, std::size_t name_length) {
    pending_.reserve(requests);
    in_flight_.reserve(requests);
    spare_.reserve(requests);
    while (spare_.size() < requests) {
      std::string key;
      key.reserve(name_length);
      std::unordered_set<std::string> one;
      spare_.push_back(one.extract(one.insert(std::move(key)).first));
    }
  }
  // The longest group name defined: a request's `group` is copied from it.
  std::size_t longest_group_name() const noexcept { return longest_group_; }

  // Queues a request; fills in its group from the definitions.
  void submit(TensorRequest r) {
    if (r.name.empty() || r.name.find_first_of("\t\n") != std::string::npos)
      throw_invalid_argument(rank_, "tensor name", "non-empty, without tabs or newlines",
                             quote(r.name, ""));
    if (r.count == 0) throw_invalid_argument(rank_, "count of " + quote(r.name, ""), "> 0", "0");
    if (size_of(r.dtype) == 0)
      throw_invalid_argument(rank_, "dtype of " + quote(r.name, ""), "a known data type",
                             std::to_string(static_cast<unsigned>(r.dtype)));
    // bytes() must not wrap: fusion sizes its buffers from it.
    if (r.count > std::numeric_limits<std::uint64_t>::max() / size_of(r.dtype))
      throw_invalid_argument(rank_, "count of " + quote(r.name, ""), "under 2^64 bytes",
                             std::to_string(r.count));
    if (!mark_in_flight(r.name))
      throw_invalid_argument(rank_, "tensor name", "not already submitted and pending",
                             quote(r.name, " twice"));
    r.group_size = 0;
    if (const auto it = member_of_.find(r.name); it != member_of_.end()) {
      Group& g = groups_.at(it->second);
      r.group = it->second;
      r.group_size = static_cast<std::uint32_t>(g.members.size());
      ++g.queued;
    } else {
      r.group.clear();
    }
    pending_.push_back(std::move(r));
  }

  // Moves the requests that may be coordinated now into `ready` (cleared first): ungrouped ones
  // and the members of complete groups, in submission order.
  void pop_ready(std::vector<TensorRequest>& ready) {
    ready.clear();
    std::size_t keep = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      TensorRequest& r = pending_[i];
      bool go = r.group.empty();
      if (!go) {
        const Group& g = groups_.at(r.group);
        go = g.queued == g.members.size();
      }
      if (go) {
        ready.push_back(std::move(r));
      } else {
        if (keep != i) pending_[keep] = std::move(r);
        ++keep;
      }
    }
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(keep), pending_.end());
    for (const auto& r : ready)
      if (!r.group.empty()) groups_.at(r.group).queued = 0;
  }
  std::vector<TensorRequest> pop_ready() {
    std::vector<TensorRequest> ready;
    pop_ready(ready);
    return ready;
  }

  // Moves `rs` back (ahead of newer requests) for the next cycle; leaves it empty.
  void requeue_front(std::vector<TensorRequest>& rs) {
    for (const auto& r : rs)
      if (!r.group.empty()) ++groups_.at(r.group).queued;
    pending_.insert(pending_.begin(), std::make_move_iterator(rs.begin()),
                    std::make_move_iterator(rs.end()));
    rs.clear();
  }
  void requeue(std::vector<TensorRequest> rs) { requeue_front(rs); }

  // The tensor's collective ran: the name may be submitted again. Its set node is kept for the
  // next submission, whose name it takes without allocating.
  void complete(const std::string& name) {
    auto node = in_flight_.extract(name);
    if (!node.empty()) spare_.push_back(std::move(node));
  }

  std::size_t in_flight() const noexcept { return in_flight_.size(); }
  std::size_t queued() const noexcept { return pending_.size(); }
  bool is_in_flight(const std::string& name) const { return in_flight_.count(name) != 0; }

 private:
  static std::string quote(const std::string& s, const char* suffix) {
    std::string q = "'";
    q += s;
    q += '\'';
    q += suffix;
    return q;
  }

  // Inserts `name` into in_flight_ through a spare node when there is one; false if present.
  bool mark_in_flight(const std::string& name) {
    if (spare_.empty()) return in_flight_.insert(name).second;
    auto node = std::move(spare_.back());
    spare_.pop_back();
    node.value() = name;
    auto result = in_flight_.insert(std::move(node));
    if (!result.inserted) spare_.push_back(std::move(result.node));
    return result.inserted;
  }

  struct Group {
    std::vector<std::string> members;
    std::size_t queued = 0;  // members currently in pending_
  };
  int rank_;
  std::vector<TensorRequest> pending_;
  std::unordered_set<std::string> in_flight_;
  std::vector<std::unordered_set<std::string>::node_type> spare_;  // nodes of completed names
  std::size_t longest_group_ = 0;
  std::unordered_map<std::string, Group> groups_;
  std::unordered_map<std::string, std::string> member_of_;
};

}  // namespace ccoll::coord
