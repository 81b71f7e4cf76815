// ccoll_mpi/counters.hpp: what happened to this process's calls of each interposed collective, and
// the report printed at MPI_Finalize (CCOLL_MPI_REPORT): per function, one line
// "MPI_<Name> calls N: served by ccoll M (...), passed to MPI K" and its details.
//
// One relaxed atomic per counter (ccoll_mpi.h lists them) and one per algorithm served, so that
// threads of an MPI_THREAD_MULTIPLE program calling on different communicators never serialise
// here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll_mpi.h"

namespace ccoll_mpi {

enum class Counter : int {
  served = CCOLL_MPI_SERVED,
  served_bytes = CCOLL_MPI_SERVED_BYTES,
  served_in_place = CCOLL_MPI_SERVED_IN_PLACE,
  disabled = CCOLL_MPI_PASS_DISABLED,
  settings = CCOLL_MPI_PASS_SETTINGS,
  nested = CCOLL_MPI_PASS_NESTED,
  state = CCOLL_MPI_PASS_STATE,
  count = CCOLL_MPI_PASS_COUNT,
  datatype = CCOLL_MPI_PASS_DATATYPE,
  user_op = CCOLL_MPI_PASS_USER_OP,
  op = CCOLL_MPI_PASS_OP,
  pair = CCOLL_MPI_PASS_PAIR,
  intercomm = CCOLL_MPI_PASS_INTERCOMM,
  one_rank = CCOLL_MPI_PASS_ONE_RANK,
  small = CCOLL_MPI_PASS_SMALL,
  algorithm = CCOLL_MPI_PASS_ALGORITHM,
  arguments = CCOLL_MPI_PASS_ARGUMENTS,
};

// The interposed functions, each with its own counters.
enum class Function : int {
  allreduce = CCOLL_MPI_ALLREDUCE,
  reduce_scatter_block = CCOLL_MPI_REDUCE_SCATTER_BLOCK,
  reduce_scatter = CCOLL_MPI_REDUCE_SCATTER,
  allgather = CCOLL_MPI_ALLGATHER,
  bcast = CCOLL_MPI_BCAST,
  reduce = CCOLL_MPI_REDUCE,
};
inline constexpr int kNumFunctions = CCOLL_MPI_NFUNCTIONS;
inline constexpr std::array<const char*, kNumFunctions> kFunctionNames = {
    "MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather", "MPI_Bcast",
    "MPI_Reduce"};
inline constexpr int kNumCounters = CCOLL_MPI_NCOUNTERS;

// The report's words for each counter.
inline constexpr std::array<std::string_view, kNumCounters> kCounterNames = {
    "served",
    "served bytes",
    "served in place",
    "disabled (CCOLL_MPI_DISABLE=1)",
    "bad CCOLL_MPI_* setting",
    "nested call",
    "MPI not initialized/finalized or MPI_COMM_NULL",
    "count <= 0",
    "datatype not carried by ccoll",
    "user-defined op",
    "predefined op not in ccoll",
    "datatype/op pair refused",
    "intercommunicator",
    "communicator of one process",
    "auto: below CCOLL_MPI_AUTO_MIN_BYTES",
    "algorithm not available for the communicator",
    "arguments ccoll does not take",
};

class Counters {
 public:
  static constexpr int kMaxAlgorithms = 64;

  void add(Counter c, std::uint64_t n = 1) {
    values_[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t get(int id) const {
    return id >= 0 && id < kNumCounters ? values_[id].load(std::memory_order_relaxed) : 0;
  }

  // A slot for the served calls of one algorithm (its registry name with schedule suffix).
  int algorithm_slot(const std::string& name) {
    const std::lock_guard lock(names_mutex_);
    for (std::size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return static_cast<int>(i);
    if (names_.size() == kMaxAlgorithms) return kMaxAlgorithms - 1;  // shared overflow slot
    names_.push_back(name);
    return static_cast<int>(names_.size() - 1);
  }
  void add_served(int slot) { by_algorithm_[slot].fetch_add(1, std::memory_order_relaxed); }

  // Calls made: served plus passed.
  std::uint64_t calls() const {
    std::uint64_t n = get(static_cast<int>(Counter::served));
    for (int i = static_cast<int>(Counter::disabled); i < kNumCounters; ++i) n += get(i);
    return n;
  }

  // One line per non-zero counter, each prefixed with "[ccoll_mpi] rank R:", grep-friendly.
  void print(std::FILE* out, int world_rank, const char* function) const {
    const std::uint64_t served = get(static_cast<int>(Counter::served));
    const std::uint64_t calls = this->calls();
    const std::uint64_t passed = calls - served;
    std::fprintf(out,
                 "[ccoll_mpi] rank %d: %s calls %llu: served by ccoll %llu (%llu "
                 "bytes, %llu in place), passed to MPI %llu\n",
                 world_rank, function, static_cast<unsigned long long>(calls),
                 static_cast<unsigned long long>(served),
                 static_cast<unsigned long long>(get(static_cast<int>(Counter::served_bytes))),
                 static_cast<unsigned long long>(get(static_cast<int>(Counter::served_in_place))),
                 static_cast<unsigned long long>(passed));
    {
      const std::lock_guard lock(names_mutex_);
      for (std::size_t i = 0; i < names_.size(); ++i)
        std::fprintf(
            out, "[ccoll_mpi] rank %d:   served by %s: %llu\n", world_rank, names_[i].c_str(),
            static_cast<unsigned long long>(by_algorithm_[i].load(std::memory_order_relaxed)));
    }
    for (int i = static_cast<int>(Counter::disabled); i < kNumCounters; ++i)
      if (get(i) != 0)
        std::fprintf(out, "[ccoll_mpi] rank %d:   passed to MPI, %.*s: %llu\n", world_rank,
                     static_cast<int>(kCounterNames[i].size()), kCounterNames[i].data(),
                     static_cast<unsigned long long>(get(i)));
    std::fflush(out);
  }

 private:
  std::array<std::atomic<std::uint64_t>, kNumCounters> values_{};
  std::array<std::atomic<std::uint64_t>, kMaxAlgorithms> by_algorithm_{};
  mutable std::mutex names_mutex_;
  std::vector<std::string> names_;
};

inline Counters& counters(Function f = Function::allreduce) {
  static std::array<Counters, kNumFunctions> c;
  return c[static_cast<std::size_t>(f)];
}

// The report: MPI_Allreduce's always, every other function's when it was called.
inline void print_report(std::FILE* out, int world_rank) {
  for (int f = 0; f < kNumFunctions; ++f) {
    const Counters& c = counters(static_cast<Function>(f));
    if (f == 0 || c.calls() != 0)
      c.print(out, world_rank, kFunctionNames[static_cast<std::size_t>(f)]);
  }
}

}  // namespace ccoll_mpi
