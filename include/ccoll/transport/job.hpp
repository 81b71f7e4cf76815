// ccoll/transport/job.hpp: how a rank that is a process finds its job: its rank, the job's size and
// its session from Config or from the launcher's environment (Open MPI, MPICH/PMI, Slurm, or
// ccoll's own CCOLL_* variables), and the per-user private directory where the ranks of a job leave
// the tokens that name what they share. The shared-memory transport (transport/shared_memory.hpp)
// and CudaP2P's process ranks (transport/cuda/p2p.cuh) meet this way.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/transport/session.hpp"

namespace ccoll::transport::detail {

inline int env_int(const char* const* names, int fallback) {
  for (const char* const* n = names; *n != nullptr; ++n) {
    if (const char* v = std::getenv(*n); v != nullptr && *v != '\0') {
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(v, &end, 10);
      if (end != nullptr && *end == '\0' && errno == 0 && x >= 0 &&
          x <= std::numeric_limits<int>::max())
        return static_cast<int>(x);
      throw_invalid_argument(-1, std::string("environment variable ") + *n,
                             "an integer in 0.." + std::to_string(std::numeric_limits<int>::max()),
                             v);
    }
  }
  return fallback;
}

// Fills rank, nranks and session from the environment where Config leaves them open.
inline Config resolve_job_config(Config c) {
  static constexpr const char* kRankVars[] = {"CCOLL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                              nullptr};
  static constexpr const char* kSizeVars[] = {"CCOLL_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                              nullptr};
  if (c.rank < 0) c.rank = env_int(kRankVars, -1);
  if (c.nranks <= 0) c.nranks = env_int(kSizeVars, 0);
  if (c.nranks <= 0)
    throw_invalid_argument(c.rank, "Config::nranks",
                           "> 0 (or CCOLL_SIZE / OMPI_COMM_WORLD_SIZE / PMI_SIZE set)",
                           std::to_string(c.nranks));
  if (c.rank < 0 || c.rank >= c.nranks)
    throw_invalid_argument(c.rank, "Config::rank",
                           "0.." + std::to_string(c.nranks - 1) +
                               " (or CCOLL_RANK / OMPI_COMM_WORLD_RANK / PMI_RANK set)",
                           std::to_string(c.rank));
  if (c.session.empty()) {
    // A launcher's job id keeps two concurrent jobs on one host apart without configuration.
    static constexpr const char* kSessionVars[] = {"CCOLL_SESSION", "PMIX_NAMESPACE",
                                                   "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"};
    for (const char* var : kSessionVars)
      if (const char* s = std::getenv(var); s != nullptr && *s != '\0' && c.session.empty()) {
        c.session = s;
        // A Slurm job id names the allocation, which runs many steps (srun, mpiexec) at once.
        if (std::string_view(var) == "SLURM_JOB_ID")
          if (const char* step = std::getenv("SLURM_STEP_ID"); step != nullptr && *step != '\0')
            c.session += std::string(".") + step;
      }
    if (c.session.empty()) c.session = parent_session();
  }
  return with_slot_bytes(c);
}

// The per-user directory where rank 0 leaves the random token that names a session's segment:
// CCOLL_SHM_DIR, else $XDG_RUNTIME_DIR/ccoll when that directory exists and is this user's (a
// batch job may inherit the login node's, which its compute node lacks), else /tmp/ccoll-<uid>.
// It must be this user's, a real directory (not a link) with mode 0700, or nothing is written to
// or read from it.
inline std::string token_dir(int rank) {
  std::string dir;
  struct stat runtime_dir {};
  const char* x = std::getenv("XDG_RUNTIME_DIR");
  if (const char* d = std::getenv("CCOLL_SHM_DIR"); d != nullptr && *d != '\0') {
    dir = d;
  } else if (x != nullptr && *x == '/' && ::stat(x, &runtime_dir) == 0 &&
             S_ISDIR(runtime_dir.st_mode) && runtime_dir.st_uid == ::geteuid()) {
    dir = std::string(x) + "/ccoll";
  } else {
    dir = "/tmp/ccoll-" + std::to_string(::geteuid());
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error(ErrorCode::System, rank,
                "mkdir '" + dir + "' (the session token directory): " + std::strerror(errno));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0)
    throw Error(ErrorCode::System, rank,
                "the session token directory '" + dir +
                    "' is not a private directory of this user (it must be a directory owned by "
                    "uid " +
                    std::to_string(::geteuid()) + " with mode 0700; set CCOLL_SHM_DIR)");
  return dir;
}

}  // namespace ccoll::transport::detail
