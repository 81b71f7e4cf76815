// ccoll_mpi/interpose.cpp: the collectives, MPI_Init, MPI_Init_thread and MPI_Finalize of
// libccoll_mpi.so (PMPI interposition, MPI standard Sec. 15.2): MPI_Allreduce,
// MPI_Reduce_scatter_block, MPI_Reduce_scatter (equal counts), MPI_Allgather, MPI_Bcast and
// MPI_Reduce.
//
// Each call decides, from what the ranks of a call have in common, whether ccoll serves it or the
// PMPI function of the same name does: the settings (compared across the ranks at MPI_Init), count,
// datatype, op, root, the kind and size of the communicator and, for CCOLL_MPI_ALGO=auto, the size.
// MPI's in-place forms map onto NCCL's, which ccoll takes (serve()). Nothing local (buffers,
// timing) enters the decision. MPI requires the ranks of a reduction to pass the same count,
// datatype and op, so its ranks never split between ccoll and MPI; a broadcast or all-gather whose
// ranks describe the same bytes with different types or counts (MPI_INT x 4 on one rank, a
// contiguous type of 4 MPI_INT on another) is legal MPI but would split them, and is not
// supported (docs/mpi.md, Limits). A served call that fails has
// no result to return: the error is printed and the job aborted (MPI_Abort), never passed on as
// an error code a program may ignore.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>

#include <ccoll/algo/registry.hpp>
#include <ccoll/core/config.hpp>
#include <ccoll/core/error.hpp>
#include <ccoll/plan/collective.hpp>

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
// Set by MPI_Init or MPI_Init_thread once the ranks compared their settings (agree_settings):
// refused, every call of every rank goes to MPI.
std::atomic<bool> g_settings_compared{false};
std::atomic<bool> g_settings_refused{false};

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char ch : text) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;
  }
  return h;
}

// After PMPI_Init (every process of MPI_COMM_WORLD calls it): the ranks compare their settings.
// One rank with a bad value or with values that differ from the others' would otherwise send its
// calls to MPI while the others serve them with ccoll, and the job would hang; so every rank then
// hands every call to MPI. The lowest rank with a bad value names it (the others would repeat
// it), or world rank 0 says that the values differ.
void agree_settings() {
  const Process& p = process();
  int size = 1;
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::uint64_t h = fnv1a(p.settings.fingerprint);
  const bool bad = !p.settings.error.empty();
  // The maxima of h and ~h are h and ~h on every rank only if every rank has the same h.
  std::uint64_t v[3] = {h, ~h, bad ? static_cast<std::uint64_t>(size - p.world_rank) : 0};
  if (PMPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) {
    g_settings_refused = true;
    g_settings_compared = true;
    return;
  }
  const bool differ = v[0] != h || v[1] != ~h;
  const int first_bad = v[2] == 0 ? -1 : size - static_cast<int>(v[2]);
  if (first_bad == p.world_rank)
    std::fprintf(stderr, "ccoll_mpi: %s (world rank %d); every call goes to MPI, on every rank\n",
                 p.settings.error.c_str(), p.world_rank);
  else if (first_bad < 0 && differ && p.world_rank == 0)
    std::fprintf(stderr,
                 "ccoll_mpi: CCOLL_MPI_* values (or the CCOLL_MPI_TUNING table's contents) differ "
                 "across the ranks; they decide whether ccoll or MPI serves a call, so every call "
                 "goes to MPI (Open MPI: mpirun -x NAME sets a variable on every rank)\n");
  g_settings_refused = first_bad >= 0 || differ;
  g_settings_compared = true;
}
// Inside a served call, or setting one up: a nested call (the transports' own MPI_Allgather and
// MPI_Bcast among them) goes to MPI.
thread_local bool t_in_call = false;
struct InCall {
  InCall() { t_in_call = true; }
  ~InCall() { t_in_call = false; }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;
};

// One call of an interposed function, as ccoll takes it (NCCL's arguments: count per rank for the
// blocked collectives) once the MPI arguments are mapped.
struct Call {
  Function function;
  ccoll::plan::Collective collective;
  const void* send;  // MPI_IN_PLACE as given
  void* recv;
  // Arguments MPI takes and ccoll does not (unequal MPI_Reduce_scatter counts, MPI_Allgather send
  // and receive sides that differ): the call goes to MPI.
  bool mpi_only = false;
  int count;
  MPI_Datatype datatype;
  MPI_Op op;  // MPI_SUM for the functions without an op
  MPI_Comm comm;
  int root = 0;
};

const char* name_of(const Call& c) {
  return kFunctionNames[static_cast<std::size_t>(c.function)];
}

[[noreturn]] void fatal(const Call& c, ccoll::DataType d, ccoll::ReduceOp op, const char* stage,
                        const char* what) {
  int rank = -1;
  PMPI_Comm_rank(c.comm, &rank);
  std::fprintf(stderr,
               "ccoll_mpi: rank %d of the communicator (world rank %d): %s(count %d, %.*s, %.*s) "
               "failed while %s: %s\nccoll_mpi: aborting the job, since the call has no correct "
               "result to return (CCOLL_MPI_DISABLE=1 hands every call to MPI)\n",
               rank, process().world_rank, name_of(c), c.count,
               static_cast<int>(ccoll::to_string(d).size()), ccoll::to_string(d).data(),
               static_cast<int>(ccoll::to_string(op).size()), ccoll::to_string(op).data(), stage,
               what);
  std::fflush(stderr);
  PMPI_Abort(c.comm, 1);
  std::abort();
}

// The entry of `name` for the call's collective on this communicator, made on first use
// (collective).
CommState::Entry& entry(CommState& state, std::string_view name, const Call& c, ccoll::DataType d,
                        ccoll::ReduceOp op) {
  if (CommState::Entry* e = state.find(name, c.collective)) return *e;
  CommState::Entry& e = state.entries.emplace_back();
  e.name = std::string(name);
  e.collective = c.collective;
  const Process& p = process();
  std::optional<ccoll::algo::Registered> logical;
  // A tuned choice in the LowLatency protocol: the algorithm's plans with Config::protocol "ll".
  const bool low_latency = name.ends_with(kLowLatencySuffix);
  const std::string_view base =
      low_latency ? name.substr(0, name.size() - kLowLatencySuffix.size()) : name;
  ccoll::Config config = p.config;
  if (low_latency) config.protocol = ccoll::protocol::name(ccoll::protocol::Id::low_latency);
  const ccoll::algo::AlgorithmSpec spec =
      p.settings.algorithm ? *p.settings.algorithm : ccoll::algo::find_algorithm(base);
  try {
    logical.emplace(plan_algorithm(spec, state.size));
    if (!ccoll::algo::plans_collective(*logical, c.collective, state.size))
      throw ccoll::Error(
          ccoll::ErrorCode::Unsupported, -1,
          "it has no " + std::string(ccoll::plan::collective_name(c.collective)) + " plans");
  } catch (const ccoll::Error& err) {  // the same on every rank: the call goes to MPI everywhere
    if (p.world_rank == 0)
      std::fprintf(stderr,
                   "ccoll_mpi: %s cannot serve %s on a communicator of %d ranks (%s); those "
                   "calls go to MPI\n",
                   e.name.c_str(), name_of(c), state.size, err.what());
    return e;
  } catch (const std::exception& err) {  // perhaps on this rank only: no safe way back to MPI
    fatal(c, d, op, ("planning " + e.name).c_str(), err.what());
  }
  try {
    state.served = true;
    e.runner = p.settings.transport == Transport::hybrid
                   ? make_runner<ccoll::transport::MpiHybrid>(spec, std::move(*logical), config,
                                                              c.comm, c.collective)
                   : make_runner<ccoll::transport::Mpi>(spec, std::move(*logical), config, c.comm,
                                                        c.collective);
  } catch (const std::exception& err) {
    fatal(c, d, op, ("setting up " + e.name + " on the communicator").c_str(), err.what());
  }
  return e;
}

// Predefined types that only move (no arithmetic): all-gather and broadcast carry them as bytes.
bool movable_as_bytes(MPI_Datatype t) {
  for (MPI_Datatype b : {MPI_BYTE,    MPI_CHAR,           MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR,
                         MPI_SHORT,   MPI_UNSIGNED_SHORT, MPI_INT,         MPI_UNSIGNED,
                         MPI_LONG,    MPI_UNSIGNED_LONG,  MPI_LONG_LONG,   MPI_UNSIGNED_LONG_LONG,
                         MPI_FLOAT,   MPI_DOUBLE,         MPI_LONG_DOUBLE, MPI_WCHAR,
                         MPI_C_BOOL,  MPI_INT8_T,         MPI_INT16_T,     MPI_INT32_T,
                         MPI_INT64_T, MPI_UINT8_T,        MPI_UINT16_T,    MPI_UINT32_T,
                         MPI_UINT64_T})
    if (t == b) return true;
  return false;
}

// Serves the call with ccoll or hands it to MPI (to_mpi(): the PMPI function with the caller's
// arguments). Every input of the decision is the same on every rank of the call.
template <class ToMpi>
int serve(const Call& c, ToMpi&& to_mpi) {
  Counters& counts = counters(c.function);
  auto pass = [&](Counter reason) {
    counts.add(reason);
    return to_mpi();
  };
  if (t_in_call) return pass(Counter::nested);
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (initialized == 0 || g_finalized.load(std::memory_order_relaxed) || c.comm == MPI_COMM_NULL)
    return pass(Counter::state);
  const Process& p = process();
  if (p.settings.disabled && !g_settings_refused.load(std::memory_order_relaxed))
    return pass(Counter::disabled);
  if (!p.settings.error.empty() || g_settings_refused.load(std::memory_order_relaxed)) {
    // Not compared at MPI_Init (a program whose MPI_Init bypassed this library, as Fortran's
    // does): world rank 0 names its own bad value.
    static std::once_flag named;
    if (!g_settings_compared.load(std::memory_order_relaxed) && p.world_rank == 0)
      std::call_once(named, [&] {
        std::fprintf(stderr, "ccoll_mpi: %s; every call goes to MPI\n", p.settings.error.c_str());
      });
    return pass(Counter::settings);
  }
  if (c.count <= 0) return pass(Counter::count);
  const bool reduction = ccoll::plan::reduces(c.collective);
  auto d = to_ccoll(c.datatype);
  std::size_t scale = 1;  // elements of d per MPI element
  if (!d && !reduction && movable_as_bytes(c.datatype)) {
    int size = 0;
    PMPI_Type_size(c.datatype, &size);
    if (size > 0) {
      d = ccoll::DataType::u8;
      scale = static_cast<std::size_t>(size);
    }
  }
  if (!d) return pass(Counter::datatype);
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
  if (reduction) {
    const OpMapping m = to_ccoll(c.op);
    if (m.kind == OpKind::user) return pass(Counter::user_op);
    if (m.kind == OpKind::predefined) return pass(Counter::op);
    if (!ccoll::is_supported(*d, m.op)) return pass(Counter::pair);
    op = m.op;
  }
  CommState& state = comm_states().get(c.comm);
  if (state.pass) return pass(*state.pass);
  if (c.mpi_only || (ccoll::plan::has_root(c.collective) && (c.root < 0 || c.root >= state.size)))
    return pass(Counter::arguments);

  const std::size_t count = static_cast<std::size_t>(c.count) * scale;
  const std::size_t es = ccoll::size_of(*d);
  // The whole buffer, as nccl-tests counts a collective's size.
  const std::uint64_t bytes =
      count * es *
      (ccoll::plan::has_blocks(c.collective) ? static_cast<std::size_t>(state.size) : 1);
  std::string tuned;
  std::string_view name;
  if (!p.fixed_name.empty()) {
    name = p.fixed_name;
  } else if (p.settings.tuning) {
    if (bytes < p.settings.auto_min_bytes) return pass(Counter::small);
    tuned = choose_tuned(*p.settings.tuning, c.collective, state.size, bytes);
    if (tuned.empty()) return pass(Counter::algorithm);
    name = tuned;
  } else {
    name = c.collective == ccoll::plan::Collective::allreduce
               ? choose_auto(state.size, bytes, p.settings.auto_min_bytes)
               : choose_auto_collective(bytes, p.settings.auto_min_bytes);
    if (name.empty()) return pass(Counter::small);
  }
  const InCall nested;
  CommState::Entry& e = entry(state, name, c, *d, op);
  if (!e.runner) return pass(Counter::algorithm);

  // MPI's in-place forms as ccoll's (NCCL's). MPI_IN_PLACE where MPI does not allow it (a
  // receive buffer, a reduce's input off the root) is a null buffer to ccoll, which every rank
  // then refuses with the same error.
  const bool in_place = c.send == MPI_IN_PLACE;
  const auto at = [&](void* base, int rank) {
    return static_cast<std::byte*>(base) + static_cast<std::size_t>(rank) * count * es;
  };
  const void* send = c.send;
  void* recv = c.recv == MPI_IN_PLACE ? nullptr : c.recv;
  switch (c.collective) {
    case ccoll::plan::Collective::allreduce:
      if (in_place) send = recv;
      break;
    case ccoll::plan::Collective::reduce_scatter:
      // MPI: the input fills recvbuf and the result goes to its start; ccoll reduces in place
      // into the rank's block, moved to the start afterwards.
      if (in_place) {
        send = recv;
        recv = at(c.recv, state.rank);
      }
      break;
    case ccoll::plan::Collective::all_gather:
      if (in_place) send = at(c.recv, state.rank);
      break;
    case ccoll::plan::Collective::broadcast:
      send = recv;  // MPI_Bcast has one buffer: the root's input, everyone's output
      break;
    case ccoll::plan::Collective::reduce:
      if (state.rank != c.root) recv = nullptr;  // insignificant on the other ranks
      if (in_place) send = state.rank == c.root ? recv : nullptr;
      break;
  }
  try {
    e.runner->run(send, recv, count, *d, op, c.root);
  } catch (const std::exception& err) {
    fatal(c, *d, op, ("running " + e.name).c_str(), err.what());
  } catch (...) {
    fatal(c, *d, op, ("running " + e.name).c_str(), "an unknown exception");
  }
  if (c.collective == ccoll::plan::Collective::reduce_scatter && in_place && state.rank != 0)
    std::memmove(c.recv, recv, count * es);
  counts.add(Counter::served);
  counts.add(Counter::served_bytes, bytes);
  if (in_place) counts.add(Counter::served_in_place);
  int& slot = e.slots[static_cast<std::size_t>(c.function)];
  if (slot < 0)
    slot =
        counts.algorithm_slot(std::string(to_string(process().settings.transport)) + "/" + e.name);
  counts.add_served(slot);
  return MPI_SUCCESS;
}

void finalize() {
  // Every rank, whether or not it made a call this library looked at: a rank that did has state
  // to free, and must not free it while another rank still reads its slots (clear()).
  PMPI_Barrier(MPI_COMM_WORLD);
  comm_states().clear();
  g_finalized.store(true, std::memory_order_relaxed);
  const Process& p = process();
  if (p.settings.report == Report::all || (p.settings.report == Report::rank0 && p.world_rank == 0))
    print_report(stderr, p.world_rank);
}

// The interposed functions' bodies: a failure outside a call's own handlers (bad_alloc and the
// like) aborts the job.
template <class Body>
int guarded(const char* function, MPI_Comm comm, Body&& body) {
  try {
    return body();
  } catch (const std::exception& err) {
    std::fprintf(stderr, "ccoll_mpi: %s: %s; aborting the job\n", function, err.what());
  }
  PMPI_Abort(comm, 1);
  return MPI_ERR_INTERN;
}

}  // namespace
}  // namespace ccoll_mpi

extern "C" {

using ccoll::plan::Collective;
using ccoll_mpi::Function;

CCOLL_MPI_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return ccoll_mpi::guarded("MPI_Allreduce", comm, [&] {
    return ccoll_mpi::serve(
        {Function::allreduce, Collective::allreduce, sendbuf, recvbuf, false, count, datatype, op,
         comm},
        [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
  });
}

CCOLL_MPI_EXPORT int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return ccoll_mpi::guarded("MPI_Reduce_scatter_block", comm, [&] {
    return ccoll_mpi::serve(
        {Function::reduce_scatter_block, Collective::reduce_scatter, sendbuf, recvbuf, false,
         recvcount, datatype, op, comm},
        [&] { return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm); });
  });
}

// Equal counts are MPI_Reduce_scatter_block; unequal ones go to MPI (CCOLL_MPI_PASS_ARGUMENTS).
CCOLL_MPI_EXPORT int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return ccoll_mpi::guarded("MPI_Reduce_scatter", comm, [&] {
    auto to_mpi = [&] {
      return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    };
    // The counts of an intracommunicator's ranks; serve() passes every other case on.
    int initialized = 0, finalized = 0, inter = 0, size = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (initialized != 0 && finalized == 0 && comm != MPI_COMM_NULL) {
      PMPI_Comm_test_inter(comm, &inter);
      if (inter == 0) PMPI_Comm_size(comm, &size);
    }
    bool unequal = false;
    if (recvcounts != nullptr)
      for (int r = 1; r < size; ++r) unequal = unequal || recvcounts[r] != recvcounts[0];
    return ccoll_mpi::serve(
        {Function::reduce_scatter, Collective::reduce_scatter, sendbuf, recvbuf, unequal,
         recvcounts != nullptr ? recvcounts[0] : 0, datatype, op, comm},
        to_mpi);
  });
}

// The same count and type on both sides (or MPI_IN_PLACE); anything else goes to MPI.
CCOLL_MPI_EXPORT int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                   MPI_Comm comm) {
  return ccoll_mpi::guarded("MPI_Allgather", comm, [&] {
    auto to_mpi = [&] {
      return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    };
    const bool differ = sendbuf != MPI_IN_PLACE && (sendcount != recvcount || sendtype != recvtype);
    return ccoll_mpi::serve({Function::allgather, Collective::all_gather, sendbuf, recvbuf, differ,
                             recvcount, recvtype, MPI_SUM, comm},
                            to_mpi);
  });
}

CCOLL_MPI_EXPORT int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root,
                               MPI_Comm comm) {
  return ccoll_mpi::guarded("MPI_Bcast", comm, [&] {
    return ccoll_mpi::serve({Function::bcast, Collective::broadcast, buffer, buffer, false, count,
                             datatype, MPI_SUM, comm, root},
                            [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); });
  });
}

CCOLL_MPI_EXPORT int MPI_Reduce(const void* sendbuf, void* recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  return ccoll_mpi::guarded("MPI_Reduce", comm, [&] {
    return ccoll_mpi::serve(
        {Function::reduce, Collective::reduce, sendbuf, recvbuf, false, count, datatype, op, comm,
         root},
        [&] { return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm); });
  });
}

CCOLL_MPI_EXPORT int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS)
    ccoll_mpi::guarded("MPI_Init", MPI_COMM_WORLD, [] {
      ccoll_mpi::agree_settings();
      return MPI_SUCCESS;
    });
  return rc;
}

CCOLL_MPI_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS)
    ccoll_mpi::guarded("MPI_Init_thread", MPI_COMM_WORLD, [] {
      ccoll_mpi::agree_settings();
      return MPI_SUCCESS;
    });
  return rc;
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

CCOLL_MPI_EXPORT unsigned long long ccoll_mpi_function_counter(int function, int id) {
  if (function < 0 || function >= ccoll_mpi::kNumFunctions) return 0;
  return ccoll_mpi::counters(static_cast<Function>(function)).get(id);
}

}  // extern "C"
