// ccoll/algo/registry.hpp: the algorithms by name, for code that chooses one at run time: the
// benchmark (ccoll_perf -a), the CLI (ccoll plan/simulate --algo), the MPI library and the tests.
//
// The table is assembled here and only here, from the entry function of every algorithm header
// (algo/registered.hpp says what an entry holds), and every lookup reads it: including this header
// alone gives a program the complete table, whichever algorithm headers it includes besides.
// Adding an algorithm adds its header, with an entry function, and here its include and one line
// in algorithm_table(); nothing else in the library lists algorithm names (the tests hold the
// expected list, tests/expected_algorithms.hpp, so that a table that loses an entry fails).
//
// algo/by_size.hpp ("auto") chooses among the other algorithms by name, so it looks them up here:
// it declares find_algorithm and includes this header after its own definitions, which is the one
// place where an algorithm header reaches the table (either header may be included first).
//
// A name may carry a schedule suffix: "tree-overlap" is the tree with its reduce and broadcast
// overlapped ([C-Cube] Sec. 3), "tree-phased" without; a bare name takes the entry's default.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/algo/by_size.hpp"
#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/hierarchical.hpp"
#include "ccoll/algo/one_shot.hpp"
#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/algo/parameter_server.hpp"
#include "ccoll/algo/recursive_doubling.hpp"
#include "ccoll/algo/registered.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/algo/tree.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::algo {

// Every algorithm, sorted by name; built on first use (thread-safe), never changed after.
inline const std::vector<Algorithm>& algorithm_table() {
  static const std::vector<Algorithm> table = [] {
    std::vector<Algorithm> t = {
        by_size_algorithm(),
        blink_algorithm(),
        direct_algorithm(),
        double_binary_tree_algorithm(),
        hierarchical_double_tree_algorithm(),
        one_shot_algorithm(),
        packed_forest_algorithm(),
        parameter_server_algorithm(),
        recursive_doubling_algorithm(),
        ring_algorithm(),
        tree_algorithm(),
    };
    std::sort(t.begin(), t.end(),
              [](const Algorithm& a, const Algorithm& b) { return a.name < b.name; });
    return t;
  }();
  return table;
}

// The algorithms, sorted by name.
inline std::vector<Algorithm> algorithms() {
  return algorithm_table();
}

inline std::string algorithm_names() {
  std::string s;
  for (const auto& a : algorithm_table()) s += (s.empty() ? "" : ", ") + a.name;
  return s;
}

inline AlgorithmSpec find_algorithm(std::string_view spec) {
  std::string base(spec);
  int suffix = -1;  // -1: none, 0: phased, 1: overlap
  // One suffix at most: stripping both would take "tree-phased-overlap" for the phased tree.
  for (auto [text, value] :
       {std::pair{std::string_view("-overlap"), 1}, std::pair{std::string_view("-phased"), 0}})
    if (base.size() > text.size() && base.ends_with(text)) {
      base.resize(base.size() - text.size());
      suffix = value;
      break;
    }
  for (const auto& a : algorithm_table())
    if (a.name == base) return AlgorithmSpec{a, suffix < 0 ? a.default_overlap : suffix == 1};
  throw_invalid_argument(-1, "algorithm",
                         "one of " + algorithm_names() + " (optionally -overlap or -phased)",
                         std::string(spec));
}

// The algorithm a name gives (its schedule suffix, if any, is the plan request's to set), made
// for `req`.
inline Registered make_algorithm(std::string_view name, const AlgorithmRequest& req) {
  return make_algorithm(find_algorithm(name).algorithm, req);
}

}  // namespace ccoll::algo
