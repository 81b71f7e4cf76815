// ccoll/transport/host_threads.hpp: the host-threads transport: the ranks are threads of one
// process.
//
// Bootstrap: Config::nranks threads, all local to the one executor. The shared area (runtime/
// shared_area.hpp: descriptors, abort record, connection FIFOs; runtime/low_latency_area.hpp: the
// connections' LL slots) is one anonymous mapping owned by the executor, which all threads
// share; pages are zero and committed only when first touched, so the FIFOs of a 16-rank
// communicator cost memory only for the slots a call actually uses. Each thread keeps its own rank
// state (call count, connection bases, program counters), so a call allocates nothing after the
// first call of a given count; plans are cached per (count, element size) behind a mutex that a
// rank takes only when its count changes.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/runtime/area_communicator.hpp"
#include "ccoll/runtime/low_latency_area.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/concept.hpp"

namespace ccoll::transport {

struct HostThreads {
  static constexpr std::string_view name = "threads";
  using connection_type = sync::ConnectionRef;

  static Config resolve(Config c) {
    if (c.nranks < 1)
      throw_invalid_argument(-1, "Config::nranks", ">= 1 (the number of threads)",
                             std::to_string(c.nranks));
    c.rank = -1;
    return with_slot_bytes(c);
  }

  class Executor {
   public:
    Executor(const Config& config, runtime::PlanSource source, std::string_view policy_id)
        : comm_(config, config.nranks, std::move(source), policy_id),
          states_(static_cast<std::size_t>(config.nranks)),
          busy_(std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(config.nranks))),
          local_(static_cast<std::size_t>(config.nranks)) {
      std::iota(local_.begin(), local_.end(), 0);
      const runtime::LowLatencyAreaLayout layout = runtime::low_latency_area_layout(comm_);
      bytes_ = layout.total;
      void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        throw Error(ErrorCode::System, -1,
                    "mmap of " + std::to_string(bytes_) + " bytes: " + std::strerror(errno));
      area_ = static_cast<std::byte*>(p);
      runtime::init_area(area_, layout.area, comm_.nranks(), comm_.fingerprint(), 1);
      runtime::attach_area_with_low_latency(comm_, area_);
      for (auto& s : states_) comm_.init_rank_state(s);
    }
    ~Executor() { ::munmap(area_, bytes_); }
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
             runtime::CallShape shape = {}) {
      if (rank < 0 || rank >= comm_.nranks())
        throw_invalid_argument(rank, "rank", "0.." + std::to_string(comm_.nranks() - 1),
                               std::to_string(rank));
      // Two threads passing the same rank would interleave one rank's program and leave another
      // rank's missing: refuse the second at once, and stop the others rather than let them time
      // out.
      auto& busy = busy_[static_cast<std::size_t>(rank)];
      if (busy.exchange(true, std::memory_order_acquire)) {
        const runtime::FailurePoint here{rank, -1, -1, -1, runtime::FailurePoint::Waiting::nothing};
        comm_.control_plane().raise(ErrorCode::InvalidArgument, here);
        throw Error(ErrorCode::InvalidArgument, rank,
                    "rank " + std::to_string(rank) +
                        " is already in a call on another thread (each thread passes its own "
                        "rank); the communicator is aborted");
      }
      struct Release {
        std::atomic<bool>& flag;
        ~Release() { flag.store(false, std::memory_order_release); }
      } release{busy};
      comm_.run(states_[static_cast<std::size_t>(rank)], rank, send, recv, count, dtype, op, shape);
    }
    int nranks() const { return comm_.nranks(); }
    std::span<const int> local_ranks() const { return local_; }
    const Config& config() const { return comm_.config(); }
    plan::Plan plan(std::size_t count, std::size_t elem_size) {
      return comm_.prepared_plan(count, elem_size)->plan;
    }
    runtime::AreaCommunicator& communicator() { return comm_; }

   private:
    runtime::AreaCommunicator comm_;
    std::vector<runtime::AreaCommunicator::rank_state> states_;
    std::unique_ptr<std::atomic<bool>[]> busy_;  // per rank: a thread is in a call
    std::vector<int> local_;
    std::byte* area_ = nullptr;
    std::size_t bytes_ = 0;
  };
};

static_assert(Transport<HostThreads>);

}  // namespace ccoll::transport
