// ccoll/coord/control_plane.hpp: the collectives that the tensor coordinator needs, as an
// abstract interface, so that one coordinator runs over threads (tests), processes, or MPI.
//
// The coordination of [Horovod-cache] Sec. 3.1.2 uses two kinds of control traffic: every cycle, a
// bitwise AND (and, rarely, OR) allreduce of a small bitvector; and, only in cycles where some rank
// holds a request that no cache knows, a gather of request lists to rank 0 and a broadcast of its
// decisions. Every call is collective: all ranks call the same sequence with equally long vectors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ccoll::coord {

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // In place: words[i] becomes the AND (OR) of words[i] over all ranks.
  virtual void allreduce_and(std::span<std::uint64_t> words) = 0;
  virtual void allreduce_or(std::span<std::uint64_t> words) = 0;
  // Rank 0 gets every rank's payload, indexed by rank; the other ranks get an empty vector.
  virtual std::vector<std::string> gather_to_root(const std::string& payload) = 0;
  // Every rank returns rank 0's payload; the argument is ignored on the other ranks.
  virtual std::string broadcast_from_root(const std::string& payload) = 0;
};

}  // namespace ccoll::coord
