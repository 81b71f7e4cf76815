// ccoll/coord/mpi_control_plane.hpp: the coordinator's control plane over MPI, for ranks that
// are processes (what Horovod uses: MPI_BAND / MPI_BOR allreduces, gather and broadcast).
//
// Include only from code built with MPI (<mpi.h>). MPI must be initialised before construction;
// errors from MPI calls become ccoll::Error(ErrorCode::System) naming the call and the rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ccoll/coord/control_plane.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::coord {

class MpiControlPlane final : public ControlPlane {
 public:
  explicit MpiControlPlane(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &nranks_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  void allreduce_and(std::span<std::uint64_t> words) override { reduce(words, MPI_BAND); }
  void allreduce_or(std::span<std::uint64_t> words) override { reduce(words, MPI_BOR); }

  std::vector<std::string> gather_to_root(const std::string& payload) override {
    int size = static_cast<int>(payload.size());
    std::vector<int> sizes(rank_ == 0 ? static_cast<std::size_t>(nranks_) : 0);
    check(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_), "MPI_Gather");
    std::vector<int> displs(sizes.size());
    std::string all;
    if (rank_ == 0) {
      int total = 0;
      for (std::size_t r = 0; r < sizes.size(); ++r) {
        displs[r] = total;
        total += sizes[r];
      }
      all.resize(static_cast<std::size_t>(total));
    }
    check(MPI_Gatherv(payload.data(), size, MPI_CHAR, all.data(), sizes.data(), displs.data(),
                      MPI_CHAR, 0, comm_),
          "MPI_Gatherv");
    std::vector<std::string> out;
    for (std::size_t r = 0; r < sizes.size(); ++r)
      out.push_back(
          all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(sizes[r])));
    return out;
  }

  std::string broadcast_from_root(const std::string& payload) override {
    std::uint64_t size = rank_ == 0 ? payload.size() : 0;
    check(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, comm_), "MPI_Bcast");
    std::string out = rank_ == 0 ? payload : std::string(size, '\0');
    check(MPI_Bcast(out.data(), static_cast<int>(size), MPI_CHAR, 0, comm_), "MPI_Bcast");
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
  int rank_ = -1;
  int nranks_ = 0;
};

}  // namespace ccoll::coord
