// tools/ccoll/cli_common.hpp: what every `ccoll` sub-command shares: number and list arguments,
// --help detection, reading a whole file, and the mapping from exceptions to exit statuses with
// the command's name in front of the message. The usage error (exit status 2) and the size and
// algorithm parsers are ccoll_perf's too (tools/support/cli_args.hpp).
#pragma once

#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../support/cli_args.hpp"  // UsageError, sizes, algorithm names (shared with ccoll_perf)

namespace ccoll::cli {

// A finite decimal number, all of `s` ("4", "-1.5", "2e-3"); the error names the flag. Hex and
// leading blanks, which strtod also reads, are refused.
inline double parse_number(const std::string& flag, const std::string& s) {
  std::size_t used = 0;
  double v = 0;
  if (s.find_first_not_of("0123456789+-.eE") == std::string::npos) {
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
  }
  if (s.empty() || used != s.size() || !std::isfinite(v))
    throw UsageError(flag + ": expected a number, got \"" + s + "\"");
  return v;
}

// An integer option in [lo, hi]; the error names the flag and the range.
inline long parse_integer(const std::string& flag, const std::string& s, long lo, long hi) {
  const double v = parse_number(flag, s);
  if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
    throw UsageError(flag + ": expected an integer from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", got \"" + s + "\"");
  return static_cast<long>(v);
}

// A number in [lo, hi]; the error names the flag and the range.
inline double parse_bounded(const std::string& flag, const std::string& s, double lo, double hi) {
  const double v = parse_number(flag, s);
  if (v < lo || v > hi) {
    std::ostringstream os;
    os << flag << ": expected a number from " << lo << " to " << hi << ", got \"" << s << "\"";
    throw UsageError(os.str());
  }
  return v;
}

// "a,b,c" -> {"a", "b", "c"}; an empty entry ("a,,b", a trailing comma) is a usage error naming
// `flag`, as a typo rather than a list to shorten silently.
inline std::vector<std::string> split_list(const std::string& s, const std::string& flag) {
  std::vector<std::string> out;
  std::string cur;
  const auto take = [&] {
    if (cur.empty()) throw UsageError(flag + ": an empty entry in \"" + s + "\"");
    out.push_back(cur);
    cur.clear();
  };
  for (char c : s) {
    if (c == ',')
      take();
    else
      cur += c;
  }
  take();
  return out;
}

inline bool wants_help(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

inline std::string read_text_file(const std::string& path) {
  // An ifstream opens a directory on Linux and reads nothing from it.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error("cannot read \"" + path + "\": it is a directory");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Checks that `path` can be written, before the work that would write it: an output file that
// cannot be written is an error (exit status 1, as when writing it fails) at once, not after a
// long run. An existing file is opened for appending (left as it is); a new one is created and
// removed again.
inline void check_output_file(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw std::runtime_error(flag + ": cannot write \"" + path + "\": it is a directory");
  const bool existed = fs::exists(path, ec);
  errno = 0;
  {
    std::ofstream f(path, std::ios::app);
    if (!f) {
      const int e = errno;
      throw std::runtime_error(flag + ": cannot write \"" + path + "\"" +
                               (e ? std::string(": ") + std::strerror(e) : std::string()));
    }
  }
  if (!existed) fs::remove(path, ec);
}

// Runs a sub-command's body and turns its exceptions into "ccoll <name>: <what>" on `err` and the
// exit status (2 for a usage error, 1 for anything else).
template <class Body>
int run_reporting(const char* name, std::ostream& err, Body&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    err << "ccoll " << name << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "ccoll " << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ccoll::cli
