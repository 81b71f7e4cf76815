// The main() of the GPU test binaries (included once per binary, after doctest's implementation).
//
// Before anything else it compares the binary's algorithm table with the expected names
// (host_side.hpp), device or not, so a binary whose lookups would miss an algorithm fails on any
// machine. doctest's queries (--list-test-cases, --count, --help, ...) run no test case and answer
// without a CUDA device, so CI lists every binary's cases where there is none. Any other run
// without a device exits 77, which ctest counts as skipped.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "host_side.hpp"

namespace gpu_test {

// Whether the arguments only ask doctest for a listing, a count, its help or its version, or to
// run nothing.
inline bool doctest_query_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with('-')) continue;
    while (arg.starts_with('-')) arg.remove_prefix(1);
    if (arg.starts_with("dt-")) arg.remove_prefix(3);
    std::string_view value = "true";
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (value == "false" || value == "0" || value == "no" || value == "off") continue;
    for (const std::string_view query :
         {"ltc", "list-test-cases", "lts", "list-test-suites", "lr", "list-reporters", "c", "count",
          "nr", "no-run", "h", "help", "?", "v", "version"})
      if (arg == query) return true;
  }
  return false;
}

// `has_device` is asked only when a test case would run.
inline int run_tests(int argc, char** argv, bool (*has_device)()) {
  const std::string mismatch = algorithm_table_mismatch();
  if (!mismatch.empty()) {
    std::fprintf(stderr, "FAIL: the algorithm table (algo/registry.hpp) is not complete: %s\n",
                 mismatch.c_str());
    return 1;
  }
  if (!doctest_query_only(argc, argv) && !has_device()) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

}  // namespace gpu_test
