// Shared pieces of the transport::CudaP2P tests (tests/cuda/p2p_threads.cu, p2p_processes.cu):
// random inputs, bitwise comparison, the host-threads reference and device buffers.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "host_side.hpp"

namespace p2p_test {

using namespace ccoll;

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>)
      x = static_cast<T>(std::uniform_real_distribution<double>(-1.0, 1.0)(gen));
    else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      x = T(std::uniform_real_distribution<float>(-1.0f, 1.0f)(gen));
    else
      x = static_cast<T>(gen() % 1000);
  }
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

inline Config make_config(int nranks, std::uint32_t nchannels) {
  Config c;
  c.nranks = nranks;
  c.nchannels = nchannels;
  c.slot_bytes = 64 << 10;
  c.nslots = 4;
  c.timeout = std::chrono::milliseconds(30000);
  return c;
}

// Every rank's inputs, and what host threads running the same plan compute from them.
template <class T>
struct Case {
  std::vector<std::vector<T>> in, expected;
};

template <class T>
Case<T> make_case(const gpu_test::Source& source, const Config& c, std::size_t count, ReduceOp op,
                  unsigned seed) {
  Case<T> k;
  std::vector<std::vector<std::byte>> bytes;
  for (int r = 0; r < c.nranks; ++r) {
    k.in.push_back(random_values<T>(count, seed + static_cast<unsigned>(r)));
    bytes.emplace_back(count * sizeof(T));
    std::memcpy(bytes.back().data(), k.in.back().data(), count * sizeof(T));
  }
  Config host = c;
  host.rank = -1;
  const auto out = gpu_test::run_on_host(source, host, bytes, count, data_type_of<T>(), op);
  for (const auto& o : out) {
    k.expected.emplace_back(count);
    std::memcpy(k.expected.back().data(), o.data(), count * sizeof(T));
  }
  return k;
}

// One rank's device buffers on the current device: `offset` elements past a cudaMalloc'd base
// (1: not 16-byte aligned), in place or out of place (the output poisoned first).
template <class T>
struct RankBuffers {
  T* send_base = nullptr;
  T* recv_base = nullptr;
  T* send = nullptr;
  T* recv = nullptr;
  std::size_t count = 0;

  cudaError_t init(const std::vector<T>& in, bool in_place, std::size_t offset) {
    count = in.size();
    cudaError_t e = cudaMalloc(&send_base, (count + offset) * sizeof(T));
    if (e != cudaSuccess) return e;
    send = send_base + offset;
    e = cudaMemcpy(send, in.data(), count * sizeof(T), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return e;
    if (in_place) {
      recv = send;
      return cudaSuccess;
    }
    e = cudaMalloc(&recv_base, (count + offset) * sizeof(T));
    if (e != cudaSuccess) return e;
    recv = recv_base + offset;
    return cudaMemset(recv, 0xff, count * sizeof(T));
  }
  std::vector<T> result() const {
    std::vector<T> out(count);
    if (cudaMemcpy(out.data(), recv, count * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
      out.clear();
    return out;
  }
  ~RankBuffers() {
    if (send_base != nullptr) cudaFree(send_base);
    if (recv_base != nullptr) cudaFree(recv_base);
  }
};

}  // namespace p2p_test
