// tests/precompiled.hpp: the precompiled header of the fast suite's tests (CCOLL_TEST_PCH=ON).
//
// What nearly every test includes: doctest, the standard headers the tests use most, and the
// library's umbrella header, the presets and the verifier. Only a build that asks
// for it uses it; each test still includes what it uses, which the README's build checks.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/ccoll.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/verifier.hpp"
