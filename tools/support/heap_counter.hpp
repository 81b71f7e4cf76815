// tools/support/heap_counter.hpp: every heap allocation of a program, counted, for the tests and
// tools that assert or report "no allocation per iteration" (gradient engines, the training
// emulator).
//
// Linking the object library ccoll_heap_counter (heap_counter.cpp) into a program replaces its
// global operator new and delete with ones that count; a program links it at most once, since a
// program has one replacement of each. Reading the count is one relaxed load: take it around the
// region of interest, on a barrier that all threads of the region have passed.
#pragma once

#include <cstdint>

namespace ccoll_support {

// Calls of any replaceable operator new (plain, array, aligned) since the program started.
std::uint64_t heap_allocations() noexcept;

}  // namespace ccoll_support
