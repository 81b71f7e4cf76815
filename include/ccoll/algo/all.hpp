// ccoll/algo/all.hpp: every logical topology, so that the registry (algo/registry.hpp) lists them
// all; tools that choose an algorithm by name include this.
#pragma once

#include "ccoll/algo/by_size.hpp"
#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/hierarchical.hpp"
#include "ccoll/algo/one_shot.hpp"
#include "ccoll/algo/packed_forest.hpp"
#include "ccoll/algo/parameter_server.hpp"
#include "ccoll/algo/recursive_doubling.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/algo/tree.hpp"
