// ccoll_perf/controls.hpp: the Control implementations (barrier, max, sum across ranks) for
// threads, forked processes and MPI processes.
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runner.hpp"

namespace ccoll_perf {

// P threads of this process.
class ThreadsShared {
 public:
  explicit ThreadsShared(int nranks)
      : nranks_(nranks), barrier_(nranks), doubles_(nranks), longs_(nranks) {}
  int nranks() const { return nranks_; }
  void barrier() { barrier_.arrive_and_wait(); }
  double max(int rank, double v);
  long sum(int rank, long v);

 private:
  int nranks_;
  std::barrier<> barrier_;
  std::vector<double> doubles_;
  std::vector<long> longs_;
};

class ThreadsControl final : public Control {
 public:
  ThreadsControl(ThreadsShared& shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return shared_.nranks(); }
  void barrier() override { shared_.barrier(); }
  double max(double v) override { return shared_.max(rank_, v); }
  long sum(long v) override { return shared_.sum(rank_, v); }

 private:
  ThreadsShared& shared_;
  int rank_;
};

// Processes that share an anonymous MAP_SHARED mapping made before fork(). The barrier spins
// briefly, then yields and sleeps, so that ranks waiting in it leave the cores to the ranks still
// timing on an oversubscribed host. Every 100 ms it checks that the other ranks' processes exist,
// so a rank that dies outside a ccoll call is named at once; a rank that lives but never arrives
// is reported after `timeout`.
struct ForkShared;
class ForkControl final : public Control {
 public:
  // Call before fork(); every process then calls set_rank() with its own rank.
  ForkControl(int nranks, std::chrono::milliseconds timeout);
  ~ForkControl() override;
  ForkControl(const ForkControl&) = delete;
  ForkControl& operator=(const ForkControl&) = delete;
  void set_rank(int rank);
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void barrier() override;
  double max(double v) override;
  long sum(long v) override;
  // Makes every rank's next (or current) barrier fail: a rank that failed calls this.
  void abort();

 private:
  static constexpr std::chrono::milliseconds kLivenessInterval{100};
  int dead_rank() const;

  ForkShared* shared_ = nullptr;
  int nranks_;
  int rank_ = 0;
  std::chrono::milliseconds timeout_;
};

#if CCOLL_HAVE_MPI
// Processes started by mpirun. The barrier is MPI_Ibarrier polled with yields and short sleeps
// (Open MPI's blocking barrier busy-polls, which would steal the cores from ranks still timing).
class MpiControl final : public Control {
 public:
  MpiControl();
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void barrier() override;
  double max(double v) override;
  long sum(long v) override;

 private:
  int rank_ = 0;
  int nranks_ = 1;
};

// The peer, as a RankCollective: the MPI library's call for the collective (MPI_Allreduce,
// MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast or MPI_Reduce; avg: the sum, then divided
// by P where the result lands). Half and bfloat16 have no MPI type: run() throws.
std::unique_ptr<RankCollective> make_mpi_peer(const CollectiveCall& call);
std::string mpi_function_name(ccoll::plan::Collective c);
bool mpi_supports(ccoll::DataType d);

// The MPI library's name and version (the first line of MPI_Get_library_version), for the header.
std::string mpi_library_version();
#endif

// Spin, then yield, then sleep: the wait policy of the process barriers.
void polite_pause(int iteration);

}  // namespace ccoll_perf
