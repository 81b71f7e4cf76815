// ccoll_mpi/interpose.cpp: MPI_Allreduce and MPI_Finalize of libccoll_mpi.so (PMPI interposition,
// MPI standard Sec. 15.2).
//
// MPI_Allreduce decides, from what every rank of the call has in common, whether ccoll serves the
// call or PMPI_Allreduce does: the settings, count, datatype, op, the kind and size of the
// communicator and, for CCOLL_MPI_ALGO=auto, the size. Nothing local (buffers, timing) enters the
// decision, so the ranks of a call never split between ccoll and MPI. A served call that fails has
// no result to return: the error is printed and the job aborted (MPI_Abort), never passed on as
// an error code a program may ignore.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <ccoll/algo/registry.hpp>
#include <ccoll/core/config.hpp>
#include <ccoll/core/error.hpp>

#include "ccoll_mpi.h"
#include "comm_state.hpp"
#include "counters.hpp"
#include "mpi_types.hpp"
#include "settings.hpp"

#define CCOLL_MPI_EXPORT __attribute__((visibility("default")))

namespace ccoll_mpi {
namespace {

// The process-wide state: settings read on the first call after MPI_Init.
struct Process {
  Settings settings;
  std::string fixed_name;  // CCOLL_MPI_ALGO with its schedule suffix; empty: auto
  int world_rank = 0;
  ccoll::Config config;
};

const Process& process() {
  static const Process p = [] {
    Process q;
    q.settings = read_settings();
    PMPI_Comm_rank(MPI_COMM_WORLD, &q.world_rank);
    if (!q.settings.error.empty() && q.world_rank == 0)
      std::fprintf(stderr, "ccoll_mpi: %s; every MPI_Allreduce goes to MPI\n",
                   q.settings.error.c_str());
    if (q.settings.algorithm) q.fixed_name = q.settings.algorithm->name();
    if (q.settings.slot_bytes != 0) q.config.slot_bytes = q.settings.slot_bytes;
    if (q.settings.nslots != 0) q.config.nslots = q.settings.nslots;
    q.config.timeout =
        q.settings.timeout.count() == 0 ? std::chrono::milliseconds::max() : q.settings.timeout;
    return q;
  }();
  return p;
}

CommStates& comm_states() {
  static CommStates s;
  return s;
}

std::atomic<bool> g_finalized{false};
thread_local bool t_in_call = false;  // inside a served call: a nested call goes to MPI

struct Call {
  const void* send;
  void* recv;
  int count;
  MPI_Datatype datatype;
  MPI_Op op;
  MPI_Comm comm;
};

int pass(Counter reason, const Call& c) {
  counters().add(reason);
  return PMPI_Allreduce(c.send, c.recv, c.count, c.datatype, c.op, c.comm);
}

[[noreturn]] void fatal(const Call& c, ccoll::DataType d, ccoll::ReduceOp op, const char* stage,
                        const char* what) {
  int rank = -1;
  PMPI_Comm_rank(c.comm, &rank);
  std::fprintf(stderr,
               "ccoll_mpi: rank %d of the communicator (world rank %d): MPI_Allreduce(count %d, "
               "%.*s, %.*s) failed while %s: %s\nccoll_mpi: aborting the job, since the call has "
               "no correct result to return (CCOLL_MPI_DISABLE=1 hands every call to MPI)\n",
               rank, process().world_rank, c.count, static_cast<int>(ccoll::to_string(d).size()),
               ccoll::to_string(d).data(), static_cast<int>(ccoll::to_string(op).size()),
               ccoll::to_string(op).data(), stage, what);
  std::fflush(stderr);
  PMPI_Abort(c.comm, 1);
  std::abort();
}

// The entry of `name` on this communicator, its allreduce made on first use (collective).
CommState::Entry& entry(CommState& state, std::string_view name, const Call& c, ccoll::DataType d,
                        ccoll::ReduceOp op) {
  if (CommState::Entry* e = state.find(name)) return *e;
  CommState::Entry& e = state.entries.emplace_back();
  e.name = std::string(name);
  const Process& p = process();
  e.slot = counters().algorithm_slot(std::string(to_string(p.settings.transport)) + "/" + e.name);
  std::optional<ccoll::algo::Registered> logical;
  const ccoll::algo::AlgorithmSpec spec =
      p.settings.algorithm ? *p.settings.algorithm : ccoll::algo::find_algorithm(name);
  try {
    logical.emplace(plan_algorithm(spec, state.size));
  } catch (const ccoll::Error& err) {  // the same on every rank: the call goes to MPI everywhere
    if (p.world_rank == 0)
      std::fprintf(stderr,
                   "ccoll_mpi: %s cannot serve a communicator of %d ranks (%s); its calls "
                   "go to MPI\n",
                   e.name.c_str(), state.size, err.what());
    return e;
  } catch (const std::exception& err) {  // perhaps on this rank only: no safe way back to MPI
    fatal(c, d, op, ("planning " + e.name).c_str(), err.what());
  }
  try {
    state.served = true;
    e.runner =
        p.settings.transport == Transport::hybrid
            ? make_runner<ccoll::transport::MpiHybrid>(spec, std::move(*logical), p.config, c.comm)
            : make_runner<ccoll::transport::Mpi>(spec, std::move(*logical), p.config, c.comm);
  } catch (const std::exception& err) {
    fatal(c, d, op, ("setting up " + e.name + " on the communicator").c_str(), err.what());
  }
  return e;
}

int allreduce(const Call& c) {
  if (t_in_call) return pass(Counter::nested, c);
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (initialized == 0 || g_finalized.load(std::memory_order_relaxed) || c.comm == MPI_COMM_NULL)
    return pass(Counter::state, c);
  const Process& p = process();
  if (p.settings.disabled) return pass(Counter::disabled, c);
  if (!p.settings.error.empty()) return pass(Counter::settings, c);
  if (c.count <= 0) return pass(Counter::count, c);
  const auto d = to_ccoll(c.datatype);
  if (!d) return pass(Counter::datatype, c);
  const OpMapping op = to_ccoll(c.op);
  if (op.kind == OpKind::user) return pass(Counter::user_op, c);
  if (op.kind == OpKind::predefined) return pass(Counter::op, c);
  if (!ccoll::is_supported(*d, op.op)) return pass(Counter::pair, c);
  CommState& state = comm_states().get(c.comm);
  if (state.pass) return pass(*state.pass, c);

  const auto count = static_cast<std::size_t>(c.count);
  const std::uint64_t bytes = count * ccoll::size_of(*d);
  std::string_view name;
  if (!p.fixed_name.empty()) {
    name = p.fixed_name;
  } else {
    name = choose_auto(state.size, bytes, p.settings.auto_min_bytes);
    if (name.empty()) return pass(Counter::small, c);
  }
  CommState::Entry& e = entry(state, name, c, *d, op.op);
  if (!e.runner) return pass(Counter::algorithm, c);

  const bool in_place = c.send == MPI_IN_PLACE;
  t_in_call = true;
  try {
    e.runner->run(in_place ? c.recv : c.send, c.recv, count, *d, op.op);
  } catch (const std::exception& err) {
    fatal(c, *d, op.op, ("running " + e.name).c_str(), err.what());
  } catch (...) {
    fatal(c, *d, op.op, ("running " + e.name).c_str(), "an unknown exception");
  }
  t_in_call = false;
  counters().add(Counter::served);
  counters().add(Counter::served_bytes, bytes);
  if (in_place) counters().add(Counter::served_in_place);
  counters().add_served(e.slot);
  return MPI_SUCCESS;
}

void finalize() {
  comm_states().clear();
  g_finalized.store(true, std::memory_order_relaxed);
  const Process& p = process();
  if (p.settings.report == Report::all || (p.settings.report == Report::rank0 && p.world_rank == 0))
    counters().print(stderr, p.world_rank);
}

}  // namespace
}  // namespace ccoll_mpi

extern "C" {

CCOLL_MPI_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  try {
    return ccoll_mpi::allreduce({sendbuf, recvbuf, count, datatype, op, comm});
  } catch (const std::exception& err) {  // bad_alloc and the like, outside a call's own handlers
    std::fprintf(stderr, "ccoll_mpi: MPI_Allreduce: %s; aborting the job\n", err.what());
  }
  PMPI_Abort(comm, 1);
  return MPI_ERR_INTERN;
}

CCOLL_MPI_EXPORT int MPI_Finalize(void) {
  int initialized = 0;
  int finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (initialized != 0 && finalized == 0) {
    try {
      ccoll_mpi::finalize();
    } catch (const std::exception& err) {
      std::fprintf(stderr, "ccoll_mpi: MPI_Finalize: %s\n", err.what());
    }
  }
  return PMPI_Finalize();
}

CCOLL_MPI_EXPORT unsigned long long ccoll_mpi_counter(int id) {
  return ccoll_mpi::counters().get(id);
}

}  // extern "C"
