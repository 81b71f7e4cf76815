// ccoll/transport/mpi/check.hpp: MPI return codes as ccoll::Error, for the MPI transport, and the
// communicators it owns.
//
// The transport's communicators use MPI_ERRORS_RETURN, so a failed MPI call (a peer whose process
// died, a broken connection) comes back here as ErrorCode::System naming the call, the rank and
// MPI's own description, instead of aborting the job inside MPI.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>

#include "ccoll/core/error.hpp"

namespace ccoll::transport::mpi {

inline std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

inline void check(int code, const char* call, int rank) {
  if (code != MPI_SUCCESS)
    throw Error(ErrorCode::System, rank, std::string(call) + ": " + error_string(code));
}

// Whether MPI may be called now (initialised and not finalised).
inline bool mpi_usable() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

// A communicator ccoll made for its own use, freed with its owner (also when setup throws). The
// constructor from a parent makes one of the parent's ranks, in its order, errors returned rather
// than fatal, by MPI_Comm_split, not MPI_Comm_dup: a duplicate would take the parent's info hints
// (a program's mpi_assert_allow_overtaking would break the FIFO order of the slots' messages, its
// mpi_assert_no_any_source the control plane's receives) and run the program's attribute copy
// callbacks on a communicator it never made.
class OwnedComm {
 public:
  OwnedComm() = default;
  OwnedComm(MPI_Comm parent, int rank) {
    check(MPI_Comm_split(parent, 0, rank, &comm_), "MPI_Comm_split", rank);
    const int set = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    if (set != MPI_SUCCESS) free();
    check(set, "MPI_Comm_set_errhandler", rank);
  }
  // Takes over a communicator made elsewhere (MPI_Comm_split_type, say).
  static OwnedComm adopt(MPI_Comm comm) {
    OwnedComm c;
    c.comm_ = comm;
    return c;
  }
  OwnedComm(OwnedComm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  OwnedComm& operator=(OwnedComm&& other) noexcept {
    if (this != &other) {
      free();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    }
    return *this;
  }
  ~OwnedComm() { free(); }
  MPI_Comm get() const { return comm_; }

 private:
  void free() {
    if (comm_ != MPI_COMM_NULL && mpi_usable()) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace ccoll::transport::mpi
