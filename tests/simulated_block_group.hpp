// Test helper: a host model of a CUDA thread block as the step interpreter's Group.
//
// The block code paths of the step interpreter (runtime/block_loops.hpp, runtime/interpreter.hpp:
// partitioning the elements over the members, the split into a scalar head, 16-byte packs and a
// scalar tail, the leader polling the counters and broadcasting the outcome) otherwise only run on
// a GPU, which the fast suite has none of. Here a block is k std::threads sharing a std::barrier:
// member i is thread i, the leader is member 0, sync() is the barrier and any() ORs the members'
// values through shared memory around one barrier, as __syncthreads_or does in
// transport/cuda/block_group.cuh.
#pragma once

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#include "ccoll/runtime/interpreter.hpp"

namespace ccoll::testing {

// What the members of one simulated block share.
struct SimulatedBlock {
  explicit SimulatedBlock(std::uint32_t threads) : size(threads), barrier(threads) {}

  std::uint32_t size;
  std::barrier<> barrier;
  // any()'s words, one per call number modulo 3: call k ORs into word[k % 3], which the leader
  // cleared in call k - 1 before that call's barrier (so after every member read it in call k - 3,
  // and before any member writes it in call k).
  std::atomic<bool> word[3] = {false, false, false};
  // Totals over the steps the leader ran: elements in scalar heads and tails, and whole packs.
  std::atomic<std::uint64_t> scalar_elems{0};
  std::atomic<std::uint64_t> packs{0};
  // The step's operands (runtime/step_operands.hpp), as a CUDA block keeps them in shared memory.
  // Bytes, in which the trivial StepOperands<T> of whatever element type the block runs exists
  // implicitly (C++20's implicit object creation), as in a CUDA block's shared memory.
  alignas(runtime::StepOperands<double>) std::byte operands[sizeof(runtime::StepOperands<double>)];
  // The same for a LowLatency step's lines (runtime::LowLatencyOperands).
  alignas(runtime::LowLatencyOperands<double>) std::byte
      low_latency_operands[sizeof(runtime::LowLatencyOperands<double>)];
};

// One member's view of its block.
class SimulatedBlockGroup {
 public:
  static constexpr bool kSingleThread = false;
  // As a CUDA block: the leader's fence after the barrier orders every member's writes, and the
  // posts after it are relaxed stores (a seq_cst fence before a relaxed store is a release).
  static constexpr bool kFenceOrdersPosts = true;

  SimulatedBlockGroup(SimulatedBlock& block, std::uint32_t index) : block_(&block), index_(index) {}

  std::uint64_t first() const { return index_; }
  std::uint64_t stride() const { return block_->size; }
  bool leader() const { return index_ == 0; }
  void sync() const { block_->barrier.arrive_and_wait(); }
  // True if any member passes true, seen by every member; also a barrier (__syncthreads_or).
  bool any(bool value) const {
    const unsigned k = calls_++ % 3;
    if (leader()) block_->word[(k + 1) % 3].store(false, std::memory_order_relaxed);
    if (value) block_->word[k].store(true, std::memory_order_relaxed);
    block_->barrier.arrive_and_wait();
    return block_->word[k].load(std::memory_order_relaxed);
  }
  void fence_before_post() const { std::atomic_thread_fence(std::memory_order_seq_cst); }
  // Every member gets the same object; the leader writes it before the barrier that starts a step
  // and the members read it after (the interpreter's protocol). One element type per block: a
  // block that ran steps of another type would need the object made anew in the storage.
  template <class T>
  runtime::StepOperands<T>* shared_operands() const {
    static_assert(sizeof(runtime::StepOperands<T>) == sizeof(runtime::StepOperands<double>));
    static_assert(std::is_trivial_v<runtime::StepOperands<T>>);
    return std::launder(reinterpret_cast<runtime::StepOperands<T>*>(block_->operands));
  }
  template <class T>
  runtime::LowLatencyOperands<T>* shared_low_latency_operands() const {
    static_assert(sizeof(runtime::LowLatencyOperands<T>) ==
                  sizeof(runtime::LowLatencyOperands<double>));
    static_assert(std::is_trivial_v<runtime::LowLatencyOperands<T>>);
    return std::launder(
        reinterpret_cast<runtime::LowLatencyOperands<T>*>(block_->low_latency_operands));
  }
  // Observes the interpreter's pack split (runtime::detail::block_pass), so that tests can tell
  // that the vector path ran.
  void on_pack_split(const runtime::detail::PackSplit& split) const {
    if (!leader()) return;
    block_->scalar_elems.fetch_add(split.head + split.tail, std::memory_order_relaxed);
    block_->packs.fetch_add(split.packs, std::memory_order_relaxed);
  }

 private:
  SimulatedBlock* block_;
  std::uint32_t index_;
  mutable unsigned calls_ = 0;  // any() calls so far, for the word's index
};

// Runs body(group) on block.size threads, one member each, and joins them.
inline void run_block(SimulatedBlock& block,
                      const std::function<void(const SimulatedBlockGroup&)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(block.size);
  for (std::uint32_t i = 0; i < block.size; ++i)
    threads.emplace_back([&block, &body, i] { body(SimulatedBlockGroup(block, i)); });
  for (auto& t : threads) t.join();
}

}  // namespace ccoll::testing
