// ccoll_mpi/comm_state.hpp: what libccoll_mpi.so keeps per MPI communicator, cached on it as an
// attribute (MPI standard Sec. 7.7), so that MPI_Comm_free frees it through the delete callback and
// a communicator's MPI_Comm_dup does not inherit it (MPI_COMM_NULL_COPY_FN).
//
// The state is made on a communicator's first eligible call and is local; the ccoll allreduces in
// it are made on the first served call per algorithm, which is collective: MPI_Allreduce is, and
// the decisions that lead to it (datatype, op, count, size, settings) are the same on every rank.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "counters.hpp"
#include "runner.hpp"

namespace ccoll_mpi {

struct CommState {
  struct Entry {
    std::string name;  // the algorithm, as the registry spells it with its schedule
    ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce;
    // Its counter in each function's Counters (Counters::algorithm_slot; -1: not yet looked up):
    // MPI_Reduce_scatter and MPI_Reduce_scatter_block share the entry.
    std::array<int, kNumFunctions> slots = [] {
      std::array<int, kNumFunctions> s{};
      s.fill(-1);
      return s;
    }();
    std::unique_ptr<Runner> runner;  // null: the algorithm cannot serve this communicator
  };

  MPI_Comm comm = MPI_COMM_NULL;
  int size = 0;
  int rank = 0;                 // this process's rank in it
  bool served = false;          // a collective was set up on this communicator
  std::optional<Counter> pass;  // set: every call on this communicator goes to MPI, for this reason
  std::vector<Entry> entries;   // one per algorithm used on this communicator (a few at most)

  Entry* find(std::string_view name, ccoll::plan::Collective c) {
    for (auto& e : entries)
      if (e.name == name && e.collective == c) return &e;
    return nullptr;
  }
};

class CommStates {
 public:
  // comm's state, made on first use. Local: no communication.
  CommState& get(MPI_Comm comm) {
    std::call_once(keyval_once_, [this] {
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &CommStates::delete_attribute, &keyval_, this);
    });
    void* value = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(comm, keyval_, &value, &found);
    if (found != 0) return *static_cast<CommState*>(value);

    auto state = std::make_unique<CommState>();
    state->comm = comm;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter != 0) {
      state->pass = Counter::intercomm;
    } else {
      PMPI_Comm_size(comm, &state->size);
      PMPI_Comm_rank(comm, &state->rank);
      if (state->size < 2) state->pass = Counter::one_rank;
    }
    CommState* raw = state.get();
    {
      const std::lock_guard lock(mutex_);
      live_.push_back(std::move(state));
    }
    PMPI_Comm_set_attr(comm, keyval_, raw);
    return *raw;
  }

  // Frees every state and the keyval (MPI_Finalize, before PMPI_Finalize): the allreduces free
  // their own communicators. The caller's barrier over MPI_COMM_WORLD, on every rank whether or
  // not it has state, stands for the per-communicator barriers of delete_attribute: after it no
  // rank is inside a call.
  void clear() {
    if (keyval_ == MPI_KEYVAL_INVALID) return;
    finalizing_ = true;
    std::vector<MPI_Comm> comms;
    {
      const std::lock_guard lock(mutex_);
      for (const auto& s : live_) comms.push_back(s->comm);
    }
    for (MPI_Comm c : comms) PMPI_Comm_delete_attr(c, keyval_);
    PMPI_Comm_free_keyval(&keyval_);
  }

 private:
  // MPI_Comm_free (collective) of a communicator with state. When ccoll served calls on it, a
  // barrier over it comes first: a rank returns from its last call as soon as its own part is
  // done, while the messages it sent may still be read out of its staging slots by slower ranks,
  // so no rank may free those slots before every rank has finished.
  static int delete_attribute(MPI_Comm comm, int, void* value, void* extra) {
    auto* self = static_cast<CommStates*>(extra);
    if (static_cast<CommState*>(value)->served && !self->finalizing_) PMPI_Barrier(comm);
    std::unique_ptr<CommState> doomed;
    {
      const std::lock_guard lock(self->mutex_);
      auto it = std::find_if(self->live_.begin(), self->live_.end(),
                             [&](const auto& s) { return s.get() == value; });
      if (it == self->live_.end()) return MPI_SUCCESS;
      doomed = std::move(*it);
      self->live_.erase(it);
    }
    doomed.reset();  // outside the lock: the allreduces' destructors call MPI
    return MPI_SUCCESS;
  }

  std::once_flag keyval_once_;
  bool finalizing_ = false;
  int keyval_ = MPI_KEYVAL_INVALID;
  std::mutex mutex_;
  std::vector<std::unique_ptr<CommState>> live_;
};

}  // namespace ccoll_mpi
