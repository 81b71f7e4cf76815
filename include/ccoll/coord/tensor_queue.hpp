// ccoll/coord/tensor_queue.hpp: one rank's submitted-but-not-yet-executed tensors, with the
// grouping rule of [Horovod-cache] (Sec. 3.2): a grouped tensor is held back until every member of
// its group has been submitted on this rank, so a group enters coordination as one unit.
//
// Group definitions are local; the coordinator checks that ranks agree (each request carries its
// group's name and size, which must match across ranks like its count and data type).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ccoll/coord/tensor_request.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::coord {

class TensorQueue {
 public:
  explicit TensorQueue(int rank = -1) : rank_(rank) {}

  void define_group(const std::string& group, std::vector<std::string> members) {
    if (group.empty()) throw_invalid_argument(rank_, "group", "a non-empty name", "\"\"");
    if (members.empty()) throw_invalid_argument(rank_, "group members", "at least one", "none");
    if (groups_.count(group) != 0)
      throw_invalid_argument(rank_, "group", "a new group name", quote(group, " again"));
    for (const auto& m : members) {  // check everything before changing anything
      const auto it = member_of_.find(m);
      std::size_t dup = 0;
      for (const auto& other : members) dup += other == m;
      if (it != member_of_.end() || dup > 1) {
        std::string got = quote(m, " in ");
        got += quote(it != member_of_.end() ? it->second : group, " and ");
        got += quote(group, "");
        throw_invalid_argument(rank_, "group member", "a tensor in one group, once", got);
      }
    }
    for (const auto& m : members) member_of_.emplace(m, group);
    groups_.emplace(group, Group{std::move(members), 0});
  }

  const std::vector<std::string>* members(const std::string& group) const {
    const auto it = groups_.find(group);
    return it == groups_.end() ? nullptr : &it->second.members;
  }

  // Queues a request; fills in its group from the definitions.
  void submit(TensorRequest r) {
    if (r.name.empty() || r.name.find_first_of("\t\n") != std::string::npos)
      throw_invalid_argument(rank_, "tensor name", "non-empty, without tabs or newlines",
                             quote(r.name, ""));
    if (r.count == 0) throw_invalid_argument(rank_, "count of " + quote(r.name, ""), "> 0", "0");
    if (!in_flight_.insert(r.name).second)
      throw_invalid_argument(rank_, "tensor name", "not already submitted and pending",
                             quote(r.name, " twice"));
    r.group.clear();
    r.group_size = 0;
    if (const auto it = member_of_.find(r.name); it != member_of_.end()) {
      Group& g = groups_.at(it->second);
      r.group = it->second;
      r.group_size = static_cast<std::uint32_t>(g.members.size());
      ++g.queued;
    }
    pending_.push_back(std::move(r));
  }

  // Removes and returns the requests that may be coordinated now: ungrouped ones and the members
  // of complete groups, in submission order.
  std::vector<TensorRequest> pop_ready() {
    std::vector<TensorRequest> ready, keep;
    for (auto& r : pending_) {
      if (r.group.empty()) {
        ready.push_back(std::move(r));
        continue;
      }
      Group& g = groups_.at(r.group);
      (g.queued == g.members.size() ? ready : keep).push_back(std::move(r));
    }
    for (const auto& r : ready)
      if (!r.group.empty()) groups_.at(r.group).queued = 0;
    pending_ = std::move(keep);
    return ready;
  }

  // Puts requests back (ahead of newer ones) for the next cycle.
  void requeue(std::vector<TensorRequest> rs) {
    for (const auto& r : rs)
      if (!r.group.empty()) ++groups_.at(r.group).queued;
    rs.insert(rs.end(), std::make_move_iterator(pending_.begin()),
              std::make_move_iterator(pending_.end()));
    pending_ = std::move(rs);
  }

  // The tensor's collective ran: the name may be submitted again.
  void complete(const std::string& name) { in_flight_.erase(name); }

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

  struct Group {
    std::vector<std::string> members;
    std::size_t queued = 0;  // members currently in pending_
  };
  int rank_;
  std::vector<TensorRequest> pending_;
  std::unordered_set<std::string> in_flight_;
  std::unordered_map<std::string, Group> groups_;
  std::unordered_map<std::string, std::string> member_of_;
};

}  // namespace ccoll::coord
