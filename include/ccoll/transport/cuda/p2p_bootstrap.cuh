// ccoll/transport/cuda/p2p_bootstrap.cuh: how transport::CudaP2P's ranks find each other's
// memory before the first call.
//
// Threads mode: each rank gets a device (P2POptions::devices, or rank r on device r % count),
// and every pair of devices that a connection of the plans joins gets peer access both ways
// (cudaDeviceEnablePeerAccess), or the executor is refused naming the two ranks: a plan that
// needs a path the machine lacks fails when it is built, not in its first call.
// Processes mode: each rank sends the others a P2PProcessRecord through the rendezvous
// (rendezvous.hpp), with its exported FIFO memory (ipc_memory.cuh) and, from rank 0, the job's
// control page as descriptors; a rank refuses a connected peer on a GPU it cannot reach.
//
// The executor (p2p.cuh) keeps what these produce; the choice of devices is plain C++
// (rank_devices, connected_device_pairs: p2p_options.hpp, tested in tests/cuda_protocol_test.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/runtime/plan_cache.hpp"
#include "ccoll/transport/cuda/check.cuh"
#include "ccoll/transport/cuda/ipc_memory.cuh"
#include "ccoll/transport/cuda/p2p_options.hpp"
#include "ccoll/transport/job.hpp"

namespace ccoll::transport::cuda {

// Rank `rank` on device `from` writes to and reads from rank `peer`'s memory on device `to`.
inline void enable_peer_access(int from, int to, int rank, int peer) {
  int can = 0;
  check(cudaDeviceCanAccessPeer(&can, from, to), "cudaDeviceCanAccessPeer", rank);
  if (can == 0)
    throw Error(ErrorCode::Unsupported, rank,
                "cuda-p2p: ranks " + std::to_string(rank) + " (device " + std::to_string(from) +
                    ") and " + std::to_string(peer) + " (device " + std::to_string(to) +
                    ") are connected by the plan, but device " + std::to_string(from) +
                    " cannot access device " + std::to_string(to) +
                    "'s memory (cudaDeviceCanAccessPeer): no NVLink or PCIe peer path");
  check(cudaSetDevice(from), "cudaSetDevice", rank);
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // not an error here; clear it
    return;
  }
  check(e, "cudaDeviceEnablePeerAccess(" + std::to_string(from) + " -> " + std::to_string(to) + ")",
        rank);
}

// Threads mode: peer access both ways between every two devices a connection joins.
inline void enable_connected_peers(const std::vector<runtime::ConnectionKey>& keys,
                                   const std::vector<int>& devices) {
  for (const DevicePair& p : connected_device_pairs(keys, devices)) {
    enable_peer_access(p.a, p.b, p.rank_a, p.rank_b);
    enable_peer_access(p.b, p.a, p.rank_b, p.rank_a);
  }
}

// What each process tells the others in the rendezvous.
struct P2PProcessRecord {
  std::int32_t rank = 0;
  std::int32_t device = 0;
  char bus_id[32] = {};
  IpcDescription memory;
  std::uint32_t memory_fds = 0;   // 1: the first descriptor is the cuMem export
  std::uint32_t control_fds = 0;  // rank 0: 1, the control page follows
};

// Processes mode: refuses a peer on another device this one cannot reach (when that device is
// visible here; otherwise the import itself reports it).
inline void check_peer_path(int me, int device, const char* my_bus, int q,
                            const P2PProcessRecord& r) {
  if (std::strncmp(my_bus, r.bus_id, sizeof r.bus_id) == 0) return;  // the same GPU
  int theirs = -1;
  if (cudaDeviceGetByPCIBusId(&theirs, r.bus_id) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  int can = 0;
  check(cudaDeviceCanAccessPeer(&can, device, theirs), "cudaDeviceCanAccessPeer", me);
  if (can == 0)
    throw Error(ErrorCode::Unsupported, me,
                "cuda-p2p: ranks " + std::to_string(me) + " (GPU " + my_bus + ") and " +
                    std::to_string(q) + " (GPU " + r.bus_id +
                    ") are connected by the plan, but the first cannot access the second's "
                    "memory (cudaDeviceCanAccessPeer): no NVLink or PCIe peer path");
}

// Processes mode: the rendezvous socket (P2POptions::socket_path, or one per Config::session in
// the per-user private directory of transport::SharedMemory's tokens).
inline std::string p2p_socket_path(const P2POptions& options, const Config& config) {
  if (!options.socket_path.empty()) return options.socket_path;
  runtime::Fingerprint h;
  h.mix(config.session);
  char name[48];
  std::snprintf(name, sizeof name, "/p2p-%016llx.sock", static_cast<unsigned long long>(h.value()));
  return transport::detail::token_dir(config.rank) + name;
}

}  // namespace ccoll::transport::cuda
