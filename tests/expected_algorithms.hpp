// The algorithms the table of algo/registry.hpp must hold, written out by hand: a program's table
// that loses an entry (a header that no longer reaches it, a line dropped from algorithm_table())
// fails the tests that compare with this list (tests/registry_test.cpp, and the GPU test binaries
// at startup, tests/cuda/gpu_main.hpp). A new algorithm adds its name here.
#pragma once

#include <array>
#include <string_view>

namespace ccoll_test {

struct ExpectedAlgorithm {
  std::string_view name;
  bool needs_topology;  // planned on a physical graph
};

// Sorted by name, as the table is.
inline constexpr std::array<ExpectedAlgorithm, 11> kExpectedAlgorithms = {{
    {"auto", false},
    {"blink", true},
    {"dbtree", false},
    {"direct", false},
    {"forest", true},
    {"hdbtree", true},
    {"oneshot", false},
    {"ps", false},
    {"recdoubling", false},
    {"ring", false},
    {"tree", false},
}};

}  // namespace ccoll_test
