// ccoll/runtime/step_marks.hpp: time stamps at the phases of every step a GPU block runs, and
// their reading, for finding where a small call's time goes (benchmarks/gpu/step_marks.cu).
//
// A small allreduce on one GPU costs several microseconds per step where one hop between two
// blocks costs 0.8 us (docs/results/gpu-2026-11-30-h200.md); the marks split a step into the
// leader's waits, the barrier that starts it, its element pass or LowLatency lines, the fence
// and the posts, per block and step, so that the rest can be found rather than guessed.
//
// Off, and compiled to nothing, unless a translation unit defines CCOLL_STEP_MARKS before it
// includes ccoll. The interpreter's device code then differs, so every translation unit of a
// program that turns it on must: the benchmark is one. The block's leader stores the SM's cycle
// counter (clock64) at each phase, and at the kernel's entry and exit %globaltimer as well, into
// one table in device memory (step_mark_table), overwritten by every call: a program reads it
// after a call it waited for. A mark is a register read and a store, against microseconds per
// step. The reading (StepMarkTable's functions, plain host code) is tested on made-up tables in
// the fast suite.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ccoll/core/platform.hpp"

namespace ccoll::runtime {

// The phases of one step, in order, as the block's leader sees them.
enum class StepPhase : std::uint32_t {
  begin,     // the step starts: the leader's waits for its messages and free slots
  ready,     // the waits are over
  started,   // operands resolved; every member passed the barrier that starts the step
  computed,  // every member's element pass (LowLatency: its lines, arrival included) is done
  fenced,    // the leader's fence before its posts
  posted,    // the leader's posts
};
inline constexpr std::uint32_t kStepPhases = 6;

// The marks of a block's kernel around its program.
enum class KernelMark : std::uint32_t {
  entry,    // the block starts (before its tables are read)
  context,  // its program's context and cached tables are in shared memory
  program,  // its program has run
  exit,     // its message bases are advanced: the block is done with the call
};
inline constexpr std::uint32_t kKernelMarks = 4;

struct StepMarkTable {
  static constexpr std::uint32_t kMaxBlocks = 64;
  static constexpr std::uint32_t kMaxSteps = 64;  // a block's later steps are not marked

  std::uint64_t step[kMaxBlocks][kMaxSteps][kStepPhases];  // clock64
  std::uint64_t kernel_cycles[kMaxBlocks][kKernelMarks];   // clock64
  std::uint64_t kernel_ns[kMaxBlocks][kKernelMarks];       // %globaltimer
  std::uint32_t nsteps[kMaxBlocks];                        // the block's program's steps

  // The blocks that ran (their entry was marked) in a table zeroed before the call.
  std::uint32_t blocks() const {
    std::uint32_t n = 0;
    for (std::uint32_t b = 0; b < kMaxBlocks; ++b)
      if (kernel_cycles[b][0] != 0) n = b + 1;
    return n;
  }
  std::uint32_t marked_steps(std::uint32_t b) const { return std::min(nsteps[b], kMaxSteps); }
  // Nanoseconds per cycle of block b's SM over its call (0 when a mark is missing).
  double ns_per_cycle(std::uint32_t b) const {
    const auto i = static_cast<std::uint32_t>(KernelMark::entry);
    const auto e = static_cast<std::uint32_t>(KernelMark::exit);
    if (kernel_cycles[b][e] <= kernel_cycles[b][i] || kernel_ns[b][e] <= kernel_ns[b][i]) return 0;
    return static_cast<double>(kernel_ns[b][e] - kernel_ns[b][i]) /
           static_cast<double>(kernel_cycles[b][e] - kernel_cycles[b][i]);
  }
  // Cycles from mark `from` to mark `to` (0 if either is missing or they are out of order).
  static std::uint64_t span(std::uint64_t from, std::uint64_t to) {
    return from != 0 && to >= from ? to - from : 0;
  }
};

// Step s of block b in nanoseconds (all 0 when the block's marks are missing): phase[p] from mark
// p - 1 to mark p, and phase[begin] from the previous step's posts (for the first step, from the
// context) to this step's start.
struct StepTimes {
  double phase[kStepPhases] = {};
};

inline StepTimes step_times(const StepMarkTable& t, std::uint32_t b, std::uint32_t s) {
  StepTimes out;
  const double ns = t.ns_per_cycle(b);
  if (ns == 0 || s >= t.marked_steps(b)) return out;
  const std::uint64_t* m = t.step[b][s];
  const std::uint64_t before =
      s == 0 ? t.kernel_cycles[b][static_cast<std::uint32_t>(KernelMark::context)]
             : t.step[b][s - 1][kStepPhases - 1];
  out.phase[0] = ns * static_cast<double>(StepMarkTable::span(before, m[0]));
  for (std::uint32_t p = 1; p < kStepPhases; ++p)
    out.phase[p] = ns * static_cast<double>(StepMarkTable::span(m[p - 1], m[p]));
  return out;
}

// One block's call in nanoseconds: each step phase summed over its steps (step_times), and the
// time around its program.
struct BlockTimes {
  double phase[kStepPhases] = {};
  double setup = 0;     // entry to context
  double after = 0;     // the last step's posts (the context if it has none) to exit
  double total = 0;     // entry to exit
  double entry_ns = 0;  // %globaltimer at entry, after the earliest block's
};

// Block b's times in `t` (all 0 when its marks are missing); `first_entry_ns`: the earliest
// block's %globaltimer at entry.
inline BlockTimes block_times(const StepMarkTable& t, std::uint32_t b,
                              std::uint64_t first_entry_ns) {
  BlockTimes out;
  const double ns = t.ns_per_cycle(b);
  if (ns == 0) return out;
  const auto k = [&](KernelMark m) { return t.kernel_cycles[b][static_cast<std::uint32_t>(m)]; };
  for (std::uint32_t s = 0; s < t.marked_steps(b); ++s) {
    const StepTimes st = step_times(t, b, s);
    for (std::uint32_t p = 0; p < kStepPhases; ++p) out.phase[p] += st.phase[p];
  }
  const std::uint32_t n = t.marked_steps(b);
  const std::uint64_t last = n == 0 ? k(KernelMark::context) : t.step[b][n - 1][kStepPhases - 1];
  out.setup =
      ns * static_cast<double>(StepMarkTable::span(k(KernelMark::entry), k(KernelMark::context)));
  out.after = ns * static_cast<double>(StepMarkTable::span(last, k(KernelMark::exit)));
  out.total =
      ns * static_cast<double>(StepMarkTable::span(k(KernelMark::entry), k(KernelMark::exit)));
  out.entry_ns = static_cast<double>(t.kernel_ns[b][0] - first_entry_ns);
  return out;
}

// Every block's times in one call's table, and the call's span on %globaltimer (first entry to
// last exit).
struct CallTimes {
  std::vector<BlockTimes> blocks;
  double span_ns = 0;
};

inline CallTimes call_times(const StepMarkTable& t) {
  CallTimes out;
  const std::uint32_t n = t.blocks();
  if (n == 0) return out;
  std::uint64_t first = ~std::uint64_t{0}, last = 0;
  for (std::uint32_t b = 0; b < n; ++b) {
    if (t.kernel_ns[b][0] != 0) first = std::min(first, t.kernel_ns[b][0]);
    last = std::max(last, t.kernel_ns[b][kKernelMarks - 1]);
  }
  for (std::uint32_t b = 0; b < n; ++b) out.blocks.push_back(block_times(t, b, first));
  out.span_ns = last > first ? static_cast<double>(last - first) : 0;
  return out;
}

#if defined(CCOLL_STEP_MARKS) && CCOLL_CUDA_COMPILER
// The table the marks go to (one per program: see the header's comment).
__device__ StepMarkTable step_mark_table;
#endif

#if defined(CCOLL_STEP_MARKS) && CCOLL_DEVICE_PASS
// The step the leader marks (mark_phase): a block runs one step at a time.
__device__ inline std::uint32_t& marked_step() {
  __shared__ std::uint32_t step;
  return step;
}
#endif

// The leader marks the start of step `step`.
template <class Group>
CCOLL_HD CCOLL_FORCEINLINE void mark_step_begin(const Group& g, std::uint32_t step) {
#if defined(CCOLL_STEP_MARKS) && CCOLL_DEVICE_PASS
  if constexpr (!Group::kSingleThread) {
    if (g.leader()) {
      marked_step() = step;
      if (blockIdx.x < StepMarkTable::kMaxBlocks && step < StepMarkTable::kMaxSteps)
        step_mark_table.step[blockIdx.x][step][0] = clock64();
    }
  }
#else
  (void)g;
  (void)step;
#endif
}

// The leader marks phase `p` of the step it marked the start of.
template <class Group>
CCOLL_HD CCOLL_FORCEINLINE void mark_phase(const Group& g, StepPhase p) {
#if defined(CCOLL_STEP_MARKS) && CCOLL_DEVICE_PASS
  if constexpr (!Group::kSingleThread) {
    if (g.leader()) {
      const std::uint32_t step = marked_step();
      if (blockIdx.x < StepMarkTable::kMaxBlocks && step < StepMarkTable::kMaxSteps)
        step_mark_table.step[blockIdx.x][step][static_cast<std::uint32_t>(p)] = clock64();
    }
  }
#else
  (void)g;
  (void)p;
#endif
}

// The leader marks its kernel's progress around the program (`nsteps`: the program's steps,
// recorded at KernelMark::context).
template <class Group>
CCOLL_HD CCOLL_FORCEINLINE void mark_kernel(const Group& g, KernelMark m,
                                            std::uint32_t nsteps = 0) {
#if defined(CCOLL_STEP_MARKS) && CCOLL_DEVICE_PASS
  if (g.leader() && blockIdx.x < StepMarkTable::kMaxBlocks) {
    const auto i = static_cast<std::uint32_t>(m);
    std::uint64_t ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    step_mark_table.kernel_cycles[blockIdx.x][i] = clock64();
    step_mark_table.kernel_ns[blockIdx.x][i] = ns;
    if (m == KernelMark::context) step_mark_table.nsteps[blockIdx.x] = nsteps;
  }
#else
  (void)g;
  (void)m;
  (void)nsteps;
#endif
}

}  // namespace ccoll::runtime
