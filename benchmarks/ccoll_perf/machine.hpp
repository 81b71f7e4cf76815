// ccoll_perf/machine.hpp: what the header of a ccoll_perf run says about the machine, and the
// STREAM-like memory bandwidth that the busbw bound of a shared-memory allreduce is computed from.
#pragma once

#include <cstddef>

#include <string>

#include "perf_report.hpp"

namespace ccoll_perf {

// CPU model (/proc/cpuinfo), online cores, host name, UTC date, load average.
MachineInfo read_machine_info();

// Current /proc/loadavg (three numbers).
std::string read_load_average();

// Copy (memcpy), scale, triad and a non-temporal copy over arrays of `array_bytes` each (>>
// last-level cache), split across `threads` threads that first-touch their own part; best of `reps`
// repetitions.
MemoryBandwidth measure_memory_bandwidth(int threads, std::size_t array_bytes, int reps);

}  // namespace ccoll_perf
