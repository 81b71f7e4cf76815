// Host-side helpers of the GPU tests, compiled by the C++ compiler (tests/cuda/host_side.cpp) so
// that nvcc compiles neither the planners nor the host executors: plan sources by algorithm name,
// the host-threads run that the GPU results must equal bit for bit, and the collectives'
// reference (tests/collective_reference.hpp) for calls made on device copies of its buffers.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/plan/collective.hpp"
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
// LowLatency plans of `source` below `below` elements, its own plans above: both protocols in one
// run, on the same connections.
Source low_latency_below(const Source& source, std::uint64_t below);

// Runs one allreduce on host threads (one per rank); inputs and outputs as raw bytes per rank.
std::vector<std::vector<std::byte>> run_on_host(const Source& source, const ccoll::Config& config,
                                                const std::vector<std::vector<std::byte>>& in,
                                                std::size_t count, ccoll::DataType dtype,
                                                ccoll::ReduceOp op);

// `source` planning collective `c` (as ccoll::Collective<c, ...> asks its topology).
Source for_collective(const Source& source, ccoll::plan::Collective c);

// One rank's buffers of a collective call, in host memory: the regions a device copy mirrors
// (the guards around the buffers included, so that a stray write shows) and where the call's
// send and recv buffers lie in them (region -1: the rank passes nullptr).
struct HostRegion {
  std::byte* data = nullptr;
  std::size_t bytes = 0;
};
struct RankBuffers {
  std::vector<HostRegion> regions;
  int send_region = -1;
  std::size_t send_at = 0;  // bytes into the region
  int recv_region = -1;
  std::size_t recv_at = 0;
};

// One call of collective `c` by every rank of `nranks` with NCCL's arguments (`count` as the
// collective counts it), buffers prepared and results checked by tests/collective_reference.hpp.
// `run` gets every rank's host buffers and must make the call on device copies of the regions and
// copy them back. Returns "" or what was wrong, rank by rank.
std::string check_collective(ccoll::plan::Collective c, int nranks, std::size_t count,
                             ccoll::DataType dtype, ccoll::ReduceOp op, bool in_place, int root,
                             const std::function<void(const std::vector<RankBuffers>&)>& run);

}  // namespace gpu_test
