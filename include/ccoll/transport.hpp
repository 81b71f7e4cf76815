// ccoll/transport.hpp: transport policy tags, the first parameter of ccoll::Allreduce.
//
// A transport says where the ranks live and how their connections' memory is shared; it is a tag
// type only. The executor that serves it is a partial specialization of Allreduce in the header
// that implements it (exec/host_threads.hpp, exec/shared_memory.hpp), so a program pays only for
// the transports it includes.
#pragma once

#include <concepts>
#include <string_view>

namespace ccoll::transport {

// Ranks are threads of one process; connection memory is a heap area owned by the Allreduce
// object, which every thread shares.
struct HostThreads {
  static constexpr std::string_view name = "threads";
  static constexpr bool implemented = true;
};

// Ranks are processes on one host; connection memory is a POSIX shared-memory segment
// (shm_open/mmap) named after the session.
struct SharedMemory {
  static constexpr std::string_view name = "shm";
  static constexpr bool implemented = true;
};

// Planned transports. They are declared so that documentation and policy lists can name them, but
// no executor exists for them in this version: Allreduce<Mpi, ...> and the others fail to compile
// with a message saying so (implemented == false).
struct Mpi {  // ranks are MPI processes (InfiniBand / TCP)
  static constexpr std::string_view name = "mpi";
  static constexpr bool implemented = false;
};
struct CudaP2P {  // one GPU per rank, NVLink / PCIe peer access or CUDA IPC
  static constexpr std::string_view name = "cuda-p2p";
  static constexpr bool implemented = false;
};
struct CudaVirtualRanks {  // P ranks as blocks of one GPU (tests/cuda/persistent_kernel.cu
                           // exercises this layout; there is no Allreduce executor for it yet)
  static constexpr std::string_view name = "cuda-virtual";
  static constexpr bool implemented = false;
};
struct Nccl {  // NCCL's own allreduce, as a baseline to compare with
  static constexpr std::string_view name = "nccl";
  static constexpr bool implemented = false;
};

template <class T>
concept Transport = requires {
  { T::name } -> std::convertible_to<std::string_view>;
  { T::implemented } -> std::convertible_to<bool>;
};

static_assert(Transport<HostThreads> && Transport<SharedMemory> && Transport<Mpi> &&
              Transport<CudaP2P> && Transport<CudaVirtualRanks> && Transport<Nccl>);

}  // namespace ccoll::transport
