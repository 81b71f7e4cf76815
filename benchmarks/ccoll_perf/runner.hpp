// ccoll_perf/runner.hpp: the per-rank measurement loop shared by every transport and by the MPI
// peer, and the small interfaces it runs over.
//
// A rank sees one RankCollective (ccoll's Allreduce bound to this rank, or MPI_Allreduce) and one
// Control (barrier, max and sum across the ranks: std::barrier for threads, a shared-memory barrier
// for forked processes, MPI for processes started by mpirun). Timing follows nccl-tests: after a
// barrier every rank times its own n back-to-back calls, and the reported time is the maximum over
// ranks of the per-call mean.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <string_view>

#include "ccoll/core/config.hpp"
#include "ccoll/plan/collective.hpp"
#include "perf_options.hpp"
#include "perf_prepare.hpp"
#include "perf_report.hpp"

namespace ccoll_perf {

class Control {
 public:
  virtual ~Control() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual void barrier() = 0;
  virtual double max(double v) = 0;
  virtual long sum(long v) = 0;
};

// Which collective a run times (-C) and its root (--root).
struct CollectiveCall {
  ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce;
  int root = 0;
};

// One rank's view of a collective's implementation. `count` is the sweep's element count: the
// whole buffer, as nccl-tests counts it (reduce-scatter's input and all-gather's output hold
// count elements, a multiple of P; the implementation passes count / P as NCCL's recvcount or
// sendcount).
class RankCollective {
 public:
  virtual ~RankCollective() = default;
  virtual void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
                   ccoll::ReduceOp op) = 0;
  // Where this rank's result is after run(): recv, except for implementations that work in place
  // (MPI_Bcast leaves the root's in its input).
  virtual const void* result(const void* send, void* recv) const {
    (void)send;
    return recv;
  }
};

// Buffers of one rank, sized for the largest message, with inputs and the reference result filled
// once (the values of element i do not depend on the message size, so every size uses a prefix).
class RankBuffers {
 public:
  RankBuffers(std::uint64_t max_count, ccoll::DataType d, ccoll::ReduceOp op, int rank, int nranks,
              bool with_expected);
  // The same, with send and receive buffers in `memory` (at least 2 x max_count elements, which
  // the caller owns and keeps alive): its first half sends, its second half receives.
  RankBuffers(std::uint64_t max_count, ccoll::DataType d, ccoll::ReduceOp op, int rank, int nranks,
              bool with_expected, std::span<std::byte> memory);
  ~RankBuffers();
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;
  void* send() const { return send_; }
  void* recv() const { return recv_; }
  // The reference result for the ranks `active` marks (empty: every rank): the allreduce of
  // their inputs, computed once per set of ranks, so that collectives with different relays
  // (--interleave, a peer that runs on every rank) each check against their own. Null on a rank
  // outside the set (a relay: no input, no output), which checks nothing, and without -c.
  const void* expected(const std::vector<bool>& active) const;
  // Computes that reference ahead of the timed calls.
  void expect(const std::vector<bool>& active) const { (void)expected(active); }

 private:
  // Places the buffers, fills the inputs, poisons the output and computes the reference.
  void fill(void* send, void* recv);

  std::uint64_t max_count_ = 0;
  ccoll::DataType dtype_;
  ccoll::ReduceOp op_;
  int rank_ = 0;
  int nranks_ = 0;
  bool with_expected_ = false;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  struct Reference {
    std::vector<int> contributors;
    void* data = nullptr;
  };
  mutable std::vector<Reference> references_;
  bool owns_buffers_ = true;
};

struct SweepSpec {
  std::string transport;  // the row's transport column
  std::string algo;       // the row's algo column
  CollectiveCall call;    // -C, --root
  std::vector<std::uint64_t> sizes;
  ccoll::DataType dtype = ccoll::DataType::f32;
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  int rounds = 1;  // timed blocks per size (the best is kept); with a peer, alternating with it
  // The ranks that contribute and receive (empty: all); relays of a plan on a graph do neither,
  // and the bus bandwidth counts the others.
  std::vector<bool> active;
};

// A peer timed in the same rounds as the collective under test (--peer mpi): its row goes to
// on_row (rank 0 only) just before ours, and our row carries its busbw.
struct PairedPeer {
  RankCollective* coll = nullptr;
  std::string transport;
  std::string algo;
  std::function<void(const Row&)> on_row;
};

// Runs every size of `spec` on this rank; rank 0 gets each finished row through on_row (the other
// ranks get nothing). `buffers` must hold the largest size.
void run_sweep(const SweepSpec& spec, RankCollective& coll, Control& control,
               const RankBuffers& buffers, const std::function<void(const Row&)>& on_row,
               const PairedPeer* peer = nullptr);

// One of several collectives timed in turn (run_interleaved_sweep): its sweep (the sizes, rounds
// and data of the first one's are used for all), this rank's view and buffers.
struct InterleavedCollective {
  SweepSpec spec;
  RankCollective* coll = nullptr;
  const RankBuffers* buffers = nullptr;
};

// Several collectives timed in turn at each size (--interleave, --tune): every round times each
// once, in order, and each keeps its best round, so that a change of the machine's state (a
// burst of other work, where the scheduler placed the ranks) hits all of them or is discarded
// from all, instead of favouring whichever ran when the machine was quiet. Rank 0 gets each
// finished row with the index of its collective.
void run_interleaved_sweep(const std::vector<InterleavedCollective>& runs, Control& control,
                           const std::function<void(std::size_t, const Row&)>& on_row);

// Largest element count of the sweep.
std::uint64_t max_count(const std::vector<std::uint64_t>& sizes, ccoll::DataType d);

// ccoll's Allreduce behind the runner (allreduce_collective.hpp): one
// ccoll::Allreduce<T, algo::Registered, S> for any host transport T, with S the spec's schedule
// (Pipelined<Overlap::ReduceBroadcast> or Phased). Threads share one object (rank(r) for each
// thread); a shm process has its own (rank(its rank)).
class Collective {
 public:
  virtual ~Collective() = default;
  // Rank r's view (ar.rank(r)): r must be a rank of this process.
  virtual std::unique_ptr<RankCollective> rank(int r) = 0;
  // transport/topology/schedule, as ccoll::Allreduce::name().
  virtual std::string name() const = 0;
  // Collective: a registered window of `bytes` (allocate_window), for transports that
  // have them; throws std::invalid_argument for the others.
  virtual std::span<std::byte> allocate_window(std::size_t bytes) = 0;
};

// The ccoll::Config of a run: rank and nranks (-1 / 0 leave them to the transport), the shm
// session, and the knobs ccoll_perf exposes (slot_bytes, nslots, nchannels, nchunks, slot stores;
// 0 keeps the library's default).
ccoll::Config make_config(const Options& knobs, int rank, int nranks, const std::string& session);

// ccoll's Allreduce for `algo` on the host transport named `transport`, made by its entry in the
// transport table (transport_registry.hpp); a GPU transport's name is std::invalid_argument.
std::unique_ptr<Collective> make_collective(std::string_view transport,
                                            const PreparedAlgorithm& algo,
                                            const ccoll::Config& config,
                                            const CollectiveCall& call = {});

// One algorithm's sweep on `nranks` threads of this process, each with its own buffers and
// rank view (the threads transport of ccoll_perf). A thread that throws calls on_error(rank,
// what), which must not return (the other threads would wait for it forever).
void run_threads_sweep(const SweepSpec& spec, Collective& coll, int nranks,
                       const std::function<void(const Row&)>& on_row,
                       const std::function<void(int, const std::string&)>& on_error);

// The same for several collectives timed in turn (run_interleaved_sweep) on `nranks` threads.
void run_threads_interleaved(const std::vector<SweepSpec>& specs,
                             const std::vector<Collective*>& colls, int nranks,
                             const std::function<void(std::size_t, const Row&)>& on_row,
                             const std::function<void(int, const std::string&)>& on_error);

}  // namespace ccoll_perf
