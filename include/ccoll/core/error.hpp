// ccoll/core/error.hpp: the one exception type ccoll throws.
//
// Every error says which argument (or wait) was wrong, on which rank, and what was expected, so a
// user reading a log from 64 ranks can tell which rank to look at. Timeouts and aborts carry the
// rank, channel, step and peer that the failed wait was waiting on.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ccoll {

enum class ErrorCode : std::uint8_t {
  InvalidArgument,  // a bad argument on this rank
  Mismatch,         // ranks disagree (count, dtype, op, name ...)
  Unsupported,      // a valid request this build or policy cannot serve (e.g. dtype/op pair)
  Timeout,          // a wait passed its deadline
  Aborted,          // a wait saw the abort flag (another rank failed)
  InvalidPlan,      // the verifier rejected a plan
  System,           // an OS / MPI / CUDA call failed
  Parse,            // malformed input file
};

inline const char* to_string(ErrorCode c) {
  switch (c) {
    case ErrorCode::InvalidArgument:
      return "invalid argument";
    case ErrorCode::Mismatch:
      return "mismatch across ranks";
    case ErrorCode::Unsupported:
      return "unsupported";
    case ErrorCode::Timeout:
      return "timeout";
    case ErrorCode::Aborted:
      return "aborted";
    case ErrorCode::InvalidPlan:
      return "invalid plan";
    case ErrorCode::System:
      return "system error";
    case ErrorCode::Parse:
      return "parse error";
  }
  return "error";
}

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, int rank, const std::string& what)
      : std::runtime_error(format(code, rank, what)), code_(code), rank_(rank) {}
  ErrorCode code() const noexcept { return code_; }
  // The rank that raised the error, or -1 when it is not tied to a rank.
  int rank() const noexcept { return rank_; }

 private:
  static std::string format(ErrorCode code, int rank, const std::string& what) {
    std::ostringstream os;
    os << "ccoll: " << to_string(code);
    if (rank >= 0) os << " on rank " << rank;
    os << ": " << what;
    return os.str();
  }
  ErrorCode code_;
  int rank_;
};

// "argument 'count' on rank 3: expected > 0, got 0"
[[noreturn]] inline void throw_invalid_argument(int rank, std::string_view argument,
                                                std::string_view expected, std::string_view got) {
  std::ostringstream os;
  os << "argument '" << argument << "': expected " << expected << ", got " << got;
  throw Error(ErrorCode::InvalidArgument, rank, os.str());
}

}  // namespace ccoll
