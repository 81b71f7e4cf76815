// ccoll/core/platform.hpp: the one place that knows whether we are compiled by nvcc.
//
// Code shared by host and device is written once with CCOLL_HD and compiles with plain g++/clang++
// too; only this header looks at __CUDACC__ / __CUDA_ARCH__.
#pragma once

#if defined(__CUDACC__)
#define CCOLL_CUDA_COMPILER 1
#define CCOLL_HD __host__ __device__
#define CCOLL_DEVICE __device__
#define CCOLL_FORCEINLINE __forceinline__
#else
#define CCOLL_CUDA_COMPILER 0
#define CCOLL_HD
#define CCOLL_DEVICE
#define CCOLL_FORCEINLINE inline __attribute__((always_inline))
#endif

#if defined(__CUDA_ARCH__)
#define CCOLL_DEVICE_PASS 1
#else
#define CCOLL_DEVICE_PASS 0
#endif

// A function compiled as a call on the GPU (its own register allocation: what the caller keeps
// live is saved around the call instead of squeezing the function's loops), inlined as usual on
// the host.
#if CCOLL_DEVICE_PASS
#define CCOLL_DEVICE_NOINLINE __noinline__
#else
#define CCOLL_DEVICE_NOINLINE
#endif

// A function compiled as a call on the host and the GPU: a rare path kept out of the loops that
// call it (and out of the compiler's view of the objects they pass it).
#if defined(__CUDACC__)
#define CCOLL_NOINLINE __noinline__
#else
#define CCOLL_NOINLINE __attribute__((noinline))
#endif

// libcu++ (cuda::atomic_ref) serves host and device when the CUDA toolkit's CCCL is on the include
// path; otherwise host code falls back to std::atomic_ref (C++20).
#if defined(__has_include)
#if __has_include(<cuda/atomic>)
#define CCOLL_HAVE_LIBCUDACXX 1
#endif
#endif
#ifndef CCOLL_HAVE_LIBCUDACXX
#define CCOLL_HAVE_LIBCUDACXX 0
#endif

namespace ccoll {
inline constexpr int kVersionMajor = 0;
inline constexpr int kVersionMinor = 1;
}  // namespace ccoll
