// Host-side helpers of the GPU tests, compiled by the C++ compiler (tests/cuda/host_side.cpp) so
// that nvcc compiles neither the planners nor the host executors: plan sources by algorithm name,
// and the host-threads run that the GPU results must equal bit for bit.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/plan.hpp"

namespace gpu_test {

using Source = std::function<ccoll::plan::Plan(const ccoll::plan::PlanRequest&)>;

// How this binary's algorithm table (algo/registry.hpp) differs from the expected names
// (tests/expected_algorithms.hpp): the names missing and the names unexpected; empty when they
// agree. Every lookup by name below reads that table.
std::string algorithm_table_mismatch();

// A registered algorithm (algo/registry.hpp) on `nranks` abstract ranks.
Source registered(const std::string& name, int nranks);
// A registered algorithm on a preset physical topology (relays included); *nranks: plan ranks.
Source registered_on(const std::string& name, const std::string& preset, int* nranks);
// A ring whose rank 1 has no program on channel 0: its neighbours wait for it forever.
Source ring_without_rank1();

// Runs one allreduce on host threads (one per rank); inputs and outputs as raw bytes per rank.
std::vector<std::vector<std::byte>> run_on_host(const Source& source, const ccoll::Config& config,
                                                const std::vector<std::vector<std::byte>>& in,
                                                std::size_t count, ccoll::DataType dtype,
                                                ccoll::ReduceOp op);

}  // namespace gpu_test
