// ccoll/plan/traffic.hpp: the memory traffic of a plan, counted step by step.
//
// Where every buffer and every FIFO slot of a plan lives in one memory (all ranks on one GPU, as
// transport::CudaVirtualRanks runs them), that memory's bandwidth bounds the plan: no executor can
// finish before it has read and written every byte its steps name. A step of `count` elements
// reads each received message and its local operand (Input or Output) once, and writes its output
// (write_output) and each sent message once; so per step
//
//     reads  = count x (recv_count + (src != None))
//     writes = count x (send_count + write_output)
//
// elements. memory_traffic() sums that over every step of every (rank, channel) program. The count
// is what the plan asks for, not what a cache lets an executor skip: docs/benchmark.md ("The HBM
// bound of a plan on one GPU") derives the time bound from it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccoll/plan/plan.hpp"

namespace ccoll::plan {

struct MemoryTraffic {
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
  std::uint64_t total() const { return read_bytes + write_bytes; }
};

// Bytes read and written by one step, for elements of `elem_size` bytes.
inline MemoryTraffic step_traffic(const Step& s, std::size_t elem_size) {
  const std::uint64_t reads = s.recv_count + (s.src != Source::None ? 1u : 0u);
  const std::uint64_t writes = s.send_count + (s.write_output ? 1u : 0u);
  const std::uint64_t bytes = s.count * elem_size;
  return MemoryTraffic{reads * bytes, writes * bytes};
}

// Bytes read and written by every step of every rank and channel of `p`.
inline MemoryTraffic memory_traffic(const Plan& p, std::size_t elem_size) {
  MemoryTraffic t;
  for (const Channel& ch : p.channels)
    for (const Program& prog : ch.programs)
      for (const Step& s : prog.steps) {
        const MemoryTraffic st = step_traffic(s, elem_size);
        t.read_bytes += st.read_bytes;
        t.write_bytes += st.write_bytes;
      }
  return t;
}

}  // namespace ccoll::plan
