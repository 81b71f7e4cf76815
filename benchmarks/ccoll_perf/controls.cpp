// ccoll_perf/controls.cpp: barriers and cross-rank max/sum for threads, forked processes and MPI.
#include "controls.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include <ccoll/runtime/area_control_plane.hpp>

#if CCOLL_HAVE_MPI
#include <mpi.h>
#endif

namespace ccoll_perf {

void polite_pause(int iteration) {
  if (iteration < 64) return;
  if (iteration < 2000) {
    sched_yield();
    return;
  }
  const timespec ts{0, 20000};  // 20 us
  nanosleep(&ts, nullptr);
}

double ThreadsShared::max(int rank, double v) {
  doubles_[static_cast<std::size_t>(rank)] = v;
  barrier();
  const double m = *std::max_element(doubles_.begin(), doubles_.end());
  barrier();
  return m;
}

long ThreadsShared::sum(int rank, long v) {
  longs_[static_cast<std::size_t>(rank)] = v;
  barrier();
  long s = 0;
  for (long x : longs_) s += x;
  barrier();
  return s;
}

// ---------------------------------------------------------------------------------------------

constexpr int kMaxForkRanks = 1024;

struct ForkShared {
  std::atomic<int> arrived;
  std::atomic<int> generation;
  std::atomic<int> aborted;
  std::atomic<pid_t> pids[kMaxForkRanks];  // 0 until the rank's process calls set_rank()
  double doubles[kMaxForkRanks];
  long longs[kMaxForkRanks];
};
static_assert(std::atomic<int>::is_always_lock_free, "process-shared atomics must be lock-free");
static_assert(std::atomic<pid_t>::is_always_lock_free, "process-shared atomics must be lock-free");

ForkControl::ForkControl(int nranks, std::chrono::milliseconds timeout)
    : nranks_(nranks), timeout_(timeout) {
  if (nranks < 1 || nranks > kMaxForkRanks) {
    throw std::invalid_argument("-t/--nranks: expected 1.." + std::to_string(kMaxForkRanks) +
                                " for --transport shm, got " + std::to_string(nranks));
  }
  void* p =
      mmap(nullptr, sizeof(ForkShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
  shared_ = new (p) ForkShared{};
  shared_->arrived.store(0);
  shared_->generation.store(0);
  shared_->aborted.store(0);
}

void ForkControl::set_rank(int rank) {
  rank_ = rank;
  shared_->pids[rank].store(getpid(), std::memory_order_release);
}

// The first rank whose process is gone (a zombie counts), or -1: a rank killed outside a ccoll
// call (between sections, while printing) would otherwise hold every other rank in the barrier
// for the whole barrier timeout.
int ForkControl::dead_rank() const {
  for (int r = 0; r < nranks_; ++r) {
    const pid_t pid = shared_->pids[r].load(std::memory_order_acquire);
    if (r != rank_ && pid > 0 && ccoll::runtime::process_gone(pid)) return r;
  }
  return -1;
}

ForkControl::~ForkControl() {
  if (shared_ != nullptr) munmap(shared_, sizeof(ForkShared));
}

void ForkControl::abort() {
  shared_->aborted.store(1, std::memory_order_release);
}

void ForkControl::barrier() {
  const int gen = shared_->generation.load(std::memory_order_acquire);
  if (shared_->arrived.fetch_add(1, std::memory_order_acq_rel) == nranks_ - 1) {
    shared_->arrived.store(0, std::memory_order_relaxed);
    shared_->generation.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  auto next_liveness_check = start + kLivenessInterval;
  for (int i = 0; shared_->generation.load(std::memory_order_acquire) == gen; ++i) {
    if (shared_->aborted.load(std::memory_order_acquire) != 0) {
      throw std::runtime_error("rank " + std::to_string(rank_) +
                               ": another rank failed (barrier aborted)");
    }
    if ((i & 255) == 255) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_liveness_check) {
        next_liveness_check = now + kLivenessInterval;
        if (const int dead = dead_rank(); dead >= 0) {
          abort();
          std::string what("rank ");
          what += std::to_string(rank_);
          what += ": rank ";
          what += std::to_string(dead);
          what += " died (its process is gone) while the others waited in a barrier";
          throw std::runtime_error(what);
        }
      }
      if (now > deadline) {
        throw std::runtime_error("rank " + std::to_string(rank_) + ": barrier timed out after " +
                                 std::to_string(timeout_.count()) + " ms (a rank hangs)");
      }
    }
    polite_pause(i);
  }
}

double ForkControl::max(double v) {
  shared_->doubles[rank_] = v;
  barrier();
  double m = shared_->doubles[0];
  for (int r = 1; r < nranks_; ++r) m = std::max(m, shared_->doubles[r]);
  barrier();
  return m;
}

long ForkControl::sum(long v) {
  shared_->longs[rank_] = v;
  barrier();
  long s = 0;
  for (int r = 0; r < nranks_; ++r) s += shared_->longs[r];
  barrier();
  return s;
}

// ---------------------------------------------------------------------------------------------

#if CCOLL_HAVE_MPI

MpiControl::MpiControl() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
}

void MpiControl::barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  for (int i = 0;; ++i) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    polite_pause(i);
  }
}

double MpiControl::max(double v) {
  barrier();  // the blocking collective below then finds everyone there
  double m = v;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

long MpiControl::sum(long v) {
  barrier();
  long s = v;
  MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return s;
}

namespace {

MPI_Datatype mpi_type(ccoll::DataType d) {
  switch (d) {
    case ccoll::DataType::f32:
      return MPI_FLOAT;
    case ccoll::DataType::f64:
      return MPI_DOUBLE;
    case ccoll::DataType::i32:
      return MPI_INT32_T;
    case ccoll::DataType::i64:
      return MPI_INT64_T;
    case ccoll::DataType::u8:
      return MPI_UINT8_T;
    case ccoll::DataType::f16:
    case ccoll::DataType::bf16:
      break;
  }
  throw std::invalid_argument("--peer mpi: MPI has no " + std::string(ccoll::to_string(d)) +
                              " type");
}

MPI_Op mpi_op(ccoll::ReduceOp op) {
  switch (op) {
    case ccoll::ReduceOp::sum:
    case ccoll::ReduceOp::avg:
      return MPI_SUM;
    case ccoll::ReduceOp::prod:
      return MPI_PROD;
    case ccoll::ReduceOp::min:
      return MPI_MIN;
    case ccoll::ReduceOp::max:
      return MPI_MAX;
  }
  return MPI_SUM;
}

// avg = MPI_SUM, then a local division by P inside the timed call (MPI has no average).
class MpiPeer final : public RankCollective {
 public:
  explicit MpiPeer(const CollectiveCall& call) : call_(call) {
    MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }
  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    using C = ccoll::plan::Collective;
    // MPI's counts are int: a larger message would wrap into a wrong or negative count.
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument("--peer mpi: " + std::to_string(count) +
                                  " elements exceed MPI's int count (" +
                                  std::to_string(std::numeric_limits<int>::max()) + ")");
    const int n = static_cast<int>(count);
    const int block = static_cast<int>(count / static_cast<std::size_t>(nranks_));
    std::size_t finalized = count;  // elements of recv to divide for avg
    switch (call_.collective) {
      case C::allreduce:
        MPI_Allreduce(send, recv, n, mpi_type(d), mpi_op(op), MPI_COMM_WORLD);
        break;
      case C::reduce_scatter:
        MPI_Reduce_scatter_block(send, recv, block, mpi_type(d), mpi_op(op), MPI_COMM_WORLD);
        finalized = static_cast<std::size_t>(block);
        break;
      case C::all_gather:
        MPI_Allgather(send, block, mpi_type(d), recv, block, mpi_type(d), MPI_COMM_WORLD);
        return;
      case C::broadcast:
        // In place, as MPI_Bcast is: the root sends from its input (result() says so).
        MPI_Bcast(rank_ == call_.root ? const_cast<void*>(send) : recv, n, mpi_type(d), call_.root,
                  MPI_COMM_WORLD);
        return;
      case C::reduce:
        MPI_Reduce(send, recv, n, mpi_type(d), mpi_op(op), call_.root, MPI_COMM_WORLD);
        if (rank_ != call_.root) return;
        break;
    }
    if (op != ccoll::ReduceOp::avg) return;
    const std::size_t count_out = finalized;
    ccoll::dispatch_data_type(d, [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, ccoll::Half> || std::is_same_v<T, ccoll::BFloat16>) {
        throw std::invalid_argument("--peer mpi: no 16-bit float types");
      } else {
        T* out = static_cast<T*>(recv);
        for (std::size_t i = 0; i < count_out; ++i)
          out[i] = ccoll::finalize<ccoll::ReduceOp::avg>(out[i], nranks_);
      }
    });
  }
  const void* result(const void* send, void* recv) const override {
    return call_.collective == ccoll::plan::Collective::broadcast && rank_ == call_.root ? send
                                                                                         : recv;
  }

 private:
  CollectiveCall call_;
  int nranks_ = 1;
  int rank_ = 0;
};

}  // namespace

bool mpi_supports(ccoll::DataType d) {
  return d != ccoll::DataType::f16 && d != ccoll::DataType::bf16;
}

std::unique_ptr<RankCollective> make_mpi_peer(const CollectiveCall& call) {
  return std::make_unique<MpiPeer>(call);
}

std::string mpi_function_name(ccoll::plan::Collective c) {
  switch (c) {
    case ccoll::plan::Collective::reduce_scatter:
      return "MPI_Reduce_scatter_block";
    case ccoll::plan::Collective::all_gather:
      return "MPI_Allgather";
    case ccoll::plan::Collective::broadcast:
      return "MPI_Bcast";
    case ccoll::plan::Collective::reduce:
      return "MPI_Reduce";
    case ccoll::plan::Collective::allreduce:
      break;
  }
  return "MPI_Allreduce";
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<std::size_t>(len));
  v = v.substr(0, v.find_first_of("\n,"));
  // MPICH's is "MPICH Version:<tab>4.0.2": runs of blanks become one space.
  std::string out;
  for (const char c : v) {
    const bool blank = c == ' ' || c == '\t';
    if (blank && (out.empty() || out.back() == ' ')) continue;
    out += blank ? ' ' : c;
  }
  return out;
}

#endif

}  // namespace ccoll_perf
