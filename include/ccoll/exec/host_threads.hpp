// ccoll/exec/host_threads.hpp: the host-threads executor: the ranks are threads of one process.
//
// The shared area (descriptors, abort record, connection FIFOs) is one anonymous mapping owned by
// the executor, which all threads share; pages are zero and committed only when first touched, so
// the FIFOs of a 16-rank communicator cost memory only for the slots a call actually uses. Each
// thread keeps its own RankState (call count, connection bases, program counters), so a call
// allocates nothing after the first call of a given count; plans are cached per (count, element
// size) behind a mutex that a rank takes only when its count changes.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/exec/communicator.hpp"
#include "ccoll/exec/config.hpp"

namespace ccoll::exec {

class HostThreadsExecutor {
 public:
  HostThreadsExecutor(const Config& config, Communicator::BuildFn build,
                      std::string_view policy_name)
      : comm_(config, config.nranks, build, policy_name),
        states_(static_cast<std::size_t>(config.nranks)) {
    bytes_ = comm_.layout().total;
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw Error(ErrorCode::System, -1,
                  "mmap of " + std::to_string(bytes_) + " bytes: " + std::strerror(errno));
    area_ = static_cast<std::byte*>(p);
    comm_.init_area(area_, 1);
    comm_.attach(area_);
    for (auto& s : states_) comm_.init_rank_state(s);
  }
  ~HostThreadsExecutor() { ::munmap(area_, bytes_); }
  HostThreadsExecutor(const HostThreadsExecutor&) = delete;
  HostThreadsExecutor& operator=(const HostThreadsExecutor&) = delete;

  void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
    if (rank < 0 || rank >= comm_.nranks())
      throw_invalid_argument(rank, "rank", "0.." + std::to_string(comm_.nranks() - 1),
                             std::to_string(rank));
    comm_.run(states_[static_cast<std::size_t>(rank)], rank, send, recv, count, dtype, op);
  }

  int nranks() const { return comm_.nranks(); }
  const Config& config() const { return comm_.config(); }
  Communicator& communicator() { return comm_; }

 private:
  Communicator comm_;
  std::vector<RankState> states_;
  std::byte* area_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ccoll::exec
