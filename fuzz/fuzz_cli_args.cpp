// libFuzzer target: the command-line parsers of `ccoll plan/simulate`, `ccoll schedule`,
// and `ccoll_perf` on arbitrary argument vectors. The input's first byte picks the
// parser; the rest, split at newlines and NUL bytes, is the argument vector. The documented
// failures are the tools' usage errors (std::invalid_argument subclasses naming the flag) and
// ccoll::Error; any other exception, a crash or a sanitizer report is a finding. Parsing touches
// no file: paths are checked and opened later, by the commands. ccoll_perf's parser reads its
// transport table from ccoll_perf's own code (CCOLL_PERF_CORE where the build links it; without
// it, inputs for that parser go to the others).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "tools/ccoll/schedule_args.hpp"
#include "tools/ccoll/topology_args.hpp"
#if CCOLL_PERF_CORE
#include "benchmarks/ccoll_perf/perf_options.hpp"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 4096) return 0;
  std::vector<std::string> args;
  std::string cur;
  for (std::size_t i = 1; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n' || c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  args.push_back(cur);
  try {
    switch (data[0] % 3) {
      case 0:
        (void)ccoll::cli::parse_options(args);
        break;
      case 1:
        (void)ccoll::cli::parse_schedule_options(args);
        break;
      default:
#if CCOLL_PERF_CORE
        (void)ccoll_perf::parse_args(args);
#else
        (void)ccoll::cli::parse_options(args);
#endif
        break;
    }
  } catch (const std::invalid_argument& e) {  // the usage errors of all four parsers
    if (std::string(e.what()).size() > 8192) __builtin_trap();
  } catch (const ccoll::Error&) {
  }
  return 0;
}
