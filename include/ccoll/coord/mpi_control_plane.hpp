// ccoll/coord/mpi_control_plane.hpp: the coordinator's control plane over MPI, for ranks that
// are processes (what Horovod uses: MPI_BAND / MPI_BOR allreduces, gather and broadcast).
//
// Include only from code built with MPI (<mpi.h>). MPI must be initialised before construction;
// errors from MPI calls become ccoll::Error(ErrorCode::System) naming the call and the rank.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "ccoll/coord/control_plane.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::coord {

class MpiControlPlane final : public ControlPlane {
 public:
  // MPI counts are ints: a payload travels in messages of at most `max_message_bytes` (the
  // largest int by default; tests pass less to exercise the splitting).
  explicit MpiControlPlane(MPI_Comm comm = MPI_COMM_WORLD,
                           std::uint64_t max_message_bytes = std::numeric_limits<int>::max())
      : comm_(comm),
        max_message_bytes_(std::max<std::uint64_t>(
            1, std::min<std::uint64_t>(max_message_bytes, std::numeric_limits<int>::max()))) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &nranks_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  void allreduce_and(std::span<std::uint64_t> words) override { reduce(words, MPI_BAND); }
  void allreduce_or(std::span<std::uint64_t> words) override { reduce(words, MPI_BOR); }

  // Every rank learns every payload's size, then rounds of MPI_Gatherv carry up to
  // max_message_bytes / nranks bytes of each payload, so that no count or displacement of a
  // round exceeds an int whatever the payloads add up to (one round unless they exceed it).
  std::vector<std::string> gather_to_root(const std::string& payload) override {
    const auto P = static_cast<std::size_t>(nranks_);
    const std::uint64_t mine = payload.size();
    std::vector<std::uint64_t> sizes(P);
    check(MPI_Allgather(&mine, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_),
          "MPI_Allgather");
    std::vector<std::string> out(rank_ == 0 ? P : 0);
    for (std::size_t r = 0; r < out.size(); ++r) out[r].resize(sizes[r]);
    const std::uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
    const std::uint64_t per_round = std::max<std::uint64_t>(1, max_message_bytes_ / P);
    const auto part = [&](std::size_t r, std::uint64_t offset) {
      return offset >= sizes[r] ? std::uint64_t{0} : std::min(per_round, sizes[r] - offset);
    };
    std::vector<int> counts(P), displs(P);
    std::string round;
    for (std::uint64_t offset = 0; offset < largest; offset += per_round) {
      int total = 0;
      for (std::size_t r = 0; r < P; ++r) {
        counts[r] = static_cast<int>(part(r, offset));
        displs[r] = total;
        total += counts[r];
      }
      if (rank_ == 0) round.resize(static_cast<std::size_t>(total));
      const auto own = static_cast<std::size_t>(rank_);
      check(MPI_Gatherv(payload.data() + std::min(offset, mine), counts[own], MPI_CHAR,
                        round.data(), counts.data(), displs.data(), MPI_CHAR, 0, comm_),
            "MPI_Gatherv");
      for (std::size_t r = 0; r < out.size(); ++r)
        if (counts[r] > 0)  // a payload that ended earlier: no pointer past its end
          std::copy_n(round.data() + displs[r], counts[r], out[r].data() + offset);
    }
    return out;
  }

  std::string broadcast_from_root(const std::string& payload) override {
    std::uint64_t size = rank_ == 0 ? payload.size() : 0;
    check(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, comm_), "MPI_Bcast");
    std::string out = rank_ == 0 ? payload : std::string(size, '\0');
    for (std::uint64_t offset = 0; offset < size; offset += max_message_bytes_)
      check(MPI_Bcast(out.data() + offset,
                      static_cast<int>(std::min(max_message_bytes_, size - offset)), MPI_CHAR, 0,
                      comm_),
            "MPI_Bcast");
    return out;
  }

 private:
  void reduce(std::span<std::uint64_t> words, MPI_Op op) {
    check(MPI_Allreduce(MPI_IN_PLACE, words.data(), static_cast<int>(words.size()), MPI_UINT64_T,
                        op, comm_),
          "MPI_Allreduce");
  }
  void check(int rc, const char* call) const {
    if (rc != MPI_SUCCESS) throw Error(ErrorCode::System, rank_, std::string(call) + " failed");
  }

  MPI_Comm comm_;
  std::uint64_t max_message_bytes_;
  int rank_ = -1;
  int nranks_ = 0;
};

}  // namespace ccoll::coord
