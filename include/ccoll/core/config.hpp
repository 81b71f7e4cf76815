// ccoll/core/config.hpp: ccoll::Config, the settings of one Allreduce communicator.
//
// Every transport reads the fields it needs; fields a transport does not use are ignored by it
// (each says which transports read it).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ccoll {

// The FIFO slot of the transports that choose none of their own (Config::slot_bytes = 0): the host
// transports and MPI.
inline constexpr std::uint64_t kDefaultSlotBytes = std::uint64_t{1} << 20;

struct Config {
  int nranks = 0;       // HostThreads: number of threads; SharedMemory: 0 = from the environment
                        // (CCOLL_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE)
  int rank = -1;        // SharedMemory: -1 = from the environment (CCOLL_RANK,
                        // OMPI_COMM_WORLD_RANK, PMI_RANK); ignored by HostThreads
  std::string session;  // SharedMemory: the job's name for its segment ("" = env
                        // CCOLL_SESSION, else the launcher's job id: PMIX_NAMESPACE,
                        // OMPI_MCA_ess_base_jobid, SLURM_JOB_ID; else the parent process)
  // Deadline of every wait of one call. The waits before its plan (the agreement) count from the
  // call's start; those after it, from when the plan is ready where the rank looked one up (a
  // count, element size or root other than its previous call's; built and verified on first use).
  std::chrono::milliseconds timeout{60000};
  // Capacity of one FIFO slot of a connection; 0 = the transport's choice: kDefaultSlotBytes
  // (1 MiB) on the host transports and MPI; cuda-virtual and cuda-p2p choose their own
  // (docs/gpu.md, "FIFO slots").
  std::uint64_t slot_bytes = 0;
  std::uint32_t nslots = 4;     // FIFO depth of every connection
  std::uint32_t nchannels = 0;  // 0 = automatic (1 on the host transports)
  std::uint32_t nchunks = 0;    // chunks per channel; 0 = the cost model's optimum
  bool verify_plans = true;  // run plan::verify on every plan before its first use (once per count)
  double alpha_s = 2e-6;     // per-message latency the chunk-count model assumes (host handshake)
  double beta_s_per_byte = 1.0 / 5e9;  // inverse copy bandwidth the chunk-count model assumes
  // Calls of at least this many bytes write their output with non-temporal stores (x86 hosts;
  // 0 = never): above the cache sizes this saves the read-for-ownership of every output line.
  std::uint64_t stream_output_bytes = 8u << 20;
  // Calls of at least this many bytes may write their FIFO slots with non-temporal stores (x86
  // hosts; 0 = never), so that a message reaches its reader through memory rather than through
  // the writer's cache. Where a core is slow to take back the cache lines its reader holds (every
  // slot is rewritten after its reader read it), that is several times faster, at the price of
  // writing and reading each message through memory (docs/results/shm-vs-mpi.md).
  std::uint64_t stream_slot_bytes = 1u << 20;
  // true: for each size, rank 0 times both kinds of slot store and uses the faster
  // (runtime/slot_store_tuner.hpp); false: calls from stream_slot_bytes up always stream.
  bool tune_slot_stores = true;
  // Calls of at most this many bytes check that every rank passed the same count, datatype and op
  // alongside their messages instead of before them (0 = never): one wave of handoffs per call
  // instead of two, which is most of a small call's time. Broadcasts and reduces, and
  // reduce-scatters and all-gathers of blocks of at most 2 KiB (larger blocks check first), run
  // their steps into a scratch output and copy it to recvbuff only once the arguments compared
  // equal, so a disagreement never writes their buffers; an allreduce's may have been written.
  // The difference is what a disagreement costs: it is still reported on every rank (Mismatch,
  // naming the ranks and the call), but the communicator is then aborted; checked before the
  // steps (larger calls, and calls in registered windows other than allreduces), a disagreement
  // throws on every rank and leaves the communicator usable, as does a small call that every
  // rank refuses alike (a rank whose own arguments are bad checks first). Calls whose slots may
  // stream (stream_slot_bytes) always check first. HostThreads and SharedMemory read it (other
  // transports check first); ranks may differ in it.
  std::uint64_t in_band_agreement_bytes = 64u << 10;
  // Broadcasts and reduces of at most this many bytes return as soon as this rank's steps are
  // done, and compare every rank's arguments at one of this rank's next calls (0 = never, the
  // default): a broadcast's root and a reduce's leaves, which receive nothing, then need not wait
  // for the others, and may run several calls ahead of them, as MPI libraries' eager sends do
  // (docs/collectives.md). The difference is what a disagreement costs: it is reported on every
  // rank (Mismatch), by a rank that returned early only at one of its next calls (within 64);
  // buffers may have been written and the communicator is aborted. Calls that fast boxes carry
  // (at most 96 bytes, 2 to 8 ranks: runtime/fast_box.hpp) are compared box by box by their
  // receivers, which write nothing from a box of other arguments (a sender's call counts as
  // compared once its boxes were taken), and eager took 0.55-0.62x the time of the default at
  // P = 2 and 0.07-0.15x at P = 3 and 4 (docs/results/collectives-2026-11-30c.md).
  // Calls whose slots may stream (stream_slot_bytes) always check first. HostThreads and
  // SharedMemory read it (other transports check first); ranks may differ in it.
  std::uint64_t eager_rooted_bytes = 0;
  // Plans kept per communicator (least recently used evicted first): a program calling many
  // distinct counts rebuilds the evicted ones instead of growing without bound.
  std::uint32_t max_cached_plans = 64;
  // How messages signal their arrival (protocol/protocol.hpp): "" = as the policy chooses (`auto`:
  // per size from its tuning table; other algorithms: simple), "simple" (slot and counter) or "ll"
  // (low latency: the arrival flag travels with the data; plans chunked for half a slot less 8
  // bytes; slot_bytes >= 32) for every plan.
  // HostThreads and SharedMemory read it; part of the communicator's fingerprint.
  std::string protocol;
};

// `c` with Config::slot_bytes = `chosen` where it was 0 (the transport's choice).
inline Config with_slot_bytes(Config c, std::uint64_t chosen = kDefaultSlotBytes) {
  if (c.slot_bytes == 0) c.slot_bytes = chosen;
  return c;
}

}  // namespace ccoll
