// ccoll/transport/mpi/check.hpp: MPI return codes as ccoll::Error, for the MPI transport.
//
// The transport's communicators use MPI_ERRORS_RETURN, so a failed MPI call (a peer whose process
// died, a broken connection) comes back here as ErrorCode::System naming the call, the rank and
// MPI's own description, instead of aborting the job inside MPI.
#pragma once

#include <mpi.h>

#include <string>

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

}  // namespace ccoll::transport::mpi
