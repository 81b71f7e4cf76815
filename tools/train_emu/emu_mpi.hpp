// tools/train_emu/emu_mpi.hpp: ccoll_train_emu's ranks as MPI processes (mpirun), on one host or
// across hosts: the meeting point (barrier, allgather, broadcast) over a communicator of its own,
// and a World whose every object is built collectively by every process.
//
// The gradient engines call MPI from several threads at once (a worker per channel, the
// coordinator's cycle thread) beside the rank's own thread, which is what MPI_THREAD_MULTIPLE is
// for; init() refuses an MPI that does not provide it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"

namespace ccoll::train_emu {

// MPI_Init_thread(MPI_THREAD_MULTIPLE); throws if the library provides less.
inline void init_mpi_thread_multiple() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE)
    throw std::runtime_error(
        "MPI does not provide MPI_THREAD_MULTIPLE, which the gradient engines' threads need");
}

class MpiControl {
 public:
  explicit MpiControl(MPI_Comm parent) {
    MPI_Comm_dup(parent, &comm_);
    MPI_Comm_size(comm_, &nranks_);
  }
  ~MpiControl() { MPI_Comm_free(&comm_); }
  MpiControl(const MpiControl&) = delete;
  MpiControl& operator=(const MpiControl&) = delete;

  int nranks() const { return nranks_; }
  void barrier() { MPI_Barrier(comm_); }

  // Every rank's vector, indexed by rank.
  std::vector<std::vector<double>> allgather(int, std::span<const double> mine) {
    const int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(nranks_)), displs(counts.size());
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_);
    int total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      displs[r] = total;
      total += counts[r];
    }
    std::vector<double> all(static_cast<std::size_t>(total));
    MPI_Allgatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                   comm_);
    std::vector<std::vector<double>> out(counts.size());
    for (std::size_t r = 0; r < counts.size(); ++r)
      out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
    return out;
  }

  // Rank 0's text, on every rank.
  std::string broadcast(int rank, const std::string& text) {
    std::uint64_t size = rank == 0 ? text.size() : 0;
    MPI_Bcast(&size, 1, MPI_UINT64_T, 0, comm_);
    std::string out = rank == 0 ? text : std::string(static_cast<std::size_t>(size), '\0');
    MPI_Bcast(out.data(), static_cast<int>(size), MPI_CHAR, 0, comm_);
    return out;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int nranks_ = 0;
};

// Every process builds its own objects, collectively and in the same order (an MPI transport's
// Allreduce duplicates MPI_COMM_WORLD; its rank and size are the communicator's).
struct MpiWorld {
  Config config(int, const std::string&) const { return Config{}; }
  template <class T, class Ctl, class... A>
  std::shared_ptr<T> make(int, Ctl&, A&&... args) {
    return std::make_shared<T>(std::forward<A>(args)...);
  }
};

}  // namespace ccoll::train_emu
