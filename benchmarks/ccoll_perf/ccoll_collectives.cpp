// ccoll_perf/ccoll_collectives.cpp: ccoll::Allreduce behind ccoll_perf's Collective and
// RankCollective, one generic path for every transport.
//
// An algorithm is a registry entry made into an algo::Registered (perf_cli.hpp's
// prepare_algorithms); its spec says the schedule (overlap: Pipelined<Overlap::ReduceBroadcast>,
// else Phased; "tree" is [C-Cube]'s phased baseline B and "tree-overlap" its overlapped C1). The
// transport is a template parameter and nothing else depends on it: threads, shm and mpi construct
// the same Allreduce<T, algo::Registered, S> and call it through the same rank view, ar.rank(r).
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <ccoll/algo/registry.hpp>
#include <ccoll/allreduce.hpp>
#include <ccoll/schedule/pipelined.hpp>
#include <ccoll/transport/host_threads.hpp>
#include <ccoll/transport/shared_memory.hpp>
#if CCOLL_HAVE_MPI
#include <ccoll/transport/mpi.hpp>
#include <ccoll/transport/mpi_hybrid.hpp>
#endif

#include "runner.hpp"

namespace ccoll_perf {

namespace {

// One rank of any ccoll::Allreduce: its handle, ar.rank(r).
template <class AR>
class RankView final : public RankCollective {
 public:
  explicit RankView(typename AR::Rank rank) : rank_(rank) {}
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    rank_.run(send, recv, count, d, op);
  }

 private:
  typename AR::Rank rank_;
};

template <class T, class S>
class AllreduceCollective final : public Collective {
  using AR = ccoll::Allreduce<T, ccoll::algo::Registered, S>;

 public:
  AllreduceCollective(const ccoll::Config& config, ccoll::algo::Registered logical)
      : ar_(config, std::move(logical)) {}
  std::unique_ptr<RankCollective> rank(int r) override {
    return std::make_unique<RankView<AR>>(ar_.rank(r));
  }
  std::string name() const override { return ar_.name(); }
  std::span<std::byte> allocate_window(std::size_t bytes) override {
    if constexpr (requires { ar_.allocate_window(bytes); })
      return ar_.allocate_window(bytes);
    else
      throw std::invalid_argument("--window: transport '" + std::string(T::name) +
                                  "' has no registered windows");
  }

 private:
  AR ar_;
};

template <class T>
std::unique_ptr<Collective> make_for(const PreparedAlgorithm& algo, const ccoll::Config& config) {
  using Overlapped = ccoll::schedule::Pipelined<ccoll::schedule::Overlap::ReduceBroadcast>;
  if (algo.spec.overlap)
    return std::make_unique<AllreduceCollective<T, Overlapped>>(config, algo.logical);
  return std::make_unique<AllreduceCollective<T, ccoll::schedule::Phased>>(config, algo.logical);
}

}  // namespace

ccoll::Config make_config(const Options& knobs, int rank, int nranks, const std::string& session) {
  ccoll::Config cfg;
  cfg.rank = rank;
  cfg.nranks = nranks;
  cfg.session = session;
  if (knobs.slot_bytes != 0) cfg.slot_bytes = knobs.slot_bytes;
  if (knobs.nslots != 0) cfg.nslots = knobs.nslots;
  cfg.nchannels = knobs.nchannels;
  cfg.nchunks = knobs.nchunks;
  if (knobs.stream_slot_bytes) cfg.stream_slot_bytes = *knobs.stream_slot_bytes;
  if (knobs.slot_stores == Options::SlotStores::streamed) cfg.tune_slot_stores = false;
  if (knobs.slot_stores == Options::SlotStores::cached) cfg.stream_slot_bytes = 0;
  if (knobs.timeout_ms) cfg.timeout = std::chrono::milliseconds(*knobs.timeout_ms);
  cfg.protocol = knobs.protocol;
  if (knobs.in_band_agreement_bytes) cfg.in_band_agreement_bytes = *knobs.in_band_agreement_bytes;
  return cfg;
}

std::unique_ptr<Collective> make_collective(Transport transport, const PreparedAlgorithm& algo,
                                            const ccoll::Config& config) {
  switch (transport) {
    case Transport::threads:
      return make_for<ccoll::transport::HostThreads>(algo, config);
    case Transport::shm:
      return make_for<ccoll::transport::SharedMemory>(algo, config);
    case Transport::mpi:
    case Transport::mpi_hybrid:
#if CCOLL_HAVE_MPI
      if (transport == Transport::mpi_hybrid)
        return make_for<ccoll::transport::MpiHybrid>(algo, config);  // on MPI_COMM_WORLD
      return make_for<ccoll::transport::Mpi>(algo, config);
#else
      throw std::invalid_argument("--transport mpi: this ccoll_perf was built without MPI");
#endif
    case Transport::cuda_virtual:
    case Transport::cuda_p2p:
      // Every rank of a GPU transport is in one process: device_backend.hpp, not a rank view.
      throw std::invalid_argument("--transport " + std::string(to_string(transport)) +
                                  ": runs through a device transport (device_backend.hpp)");
  }
  throw std::invalid_argument("unknown transport");
}

}  // namespace ccoll_perf
