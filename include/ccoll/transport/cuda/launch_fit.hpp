// ccoll/transport/cuda/launch_fit.hpp: how many channels and threads per block a GPU executor
// launches, so that every thread block of a plan is resident at once.
//
// The blocks of a CUDA executor wait for each other through FIFO counters, so a block left
// unscheduled would hang the rest: a launch must fit (blocks needed <= SMs x blocks per SM at its
// thread count). The executors choose what the user left open (Config::nchannels = 0, threads = 0):
//   - channels: as many as the SMs hold at the default threads (two blocks of 512 threads per SM
//     for kernels within their launch bounds), at most max_channels: enough blocks to keep HBM or
//     NVLink busy at large counts, since each thread keeps only one or two 16-byte packs in flight
//     (runtime/block_loops.hpp, kPackUnroll), with every SM holding as many blocks as the others;
//   - threads: the most, up to kDefaultThreads, at which the blocks fit (a forest's plan has a
//     channel per tree, whatever Config::nchannels says, so its blocks may need fewer threads).
// What the user asked for is kept; a request that does not fit is refused, as is a plan that does
// not fit even one channel at the fewest threads tried.
//
// Plain C++ (no CUDA): the executors call it with the occupancy API's figures, and the fast suite
// tests it on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ccoll::transport::cuda {

// The kernels' __launch_bounds__: at most kMaxThreadsPerBlock threads, and registers for
// kMinBlocksPerSm such blocks per SM: at most 64 registers per thread (65,536 per SM), so that two
// blocks of kDefaultThreads fit an SM.
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr unsigned kMinBlocksPerSm = 1;
inline constexpr unsigned kDefaultThreads = 512;
// Thread counts the default tries, most first.
inline constexpr unsigned kThreadChoices[] = {512, 256, 128, 64};
// The default channels' cap: a channel is a set of connections, each with its FIFO slots.
inline constexpr std::uint32_t kMaxDefaultChannels = 64;
// The default channels' memory limit: their FIFO slots, `bytes_per_channel` each, within a
// sixteenth of the device's `memory`; at least 1, at most `cap`.
inline std::uint32_t channels_within_memory(std::uint64_t memory, std::uint64_t bytes_per_channel,
                                            std::uint32_t cap) {
  const std::uint64_t by_memory = memory / 16 / std::max<std::uint64_t>(1, bytes_per_channel);
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(by_memory, 1, std::max<std::uint32_t>(1, cap)));
}

// The most static shared memory a block of the executors' kernels takes, the 1 KiB the driver
// reserves per block included: the program's table cache (block_tables.hpp,
// kBlockTableCacheBytes) and the context, operands and flags beside it (block_program.cuh
// checks the bound at compile time against the cache; scripts/kernel_resources prints each
// kernel's figure).
inline constexpr std::uint64_t kKernelSharedBytes = 16 * 1024;

// Thread blocks of one kernel an SM holds at `threads` per block
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
struct Occupancy {
  unsigned threads = 0;
  int blocks_per_sm = 0;
};

struct FitRequest {
  std::uint32_t blocks_per_channel = 1;  // plan ranks sharing the device (relays included)
  std::uint32_t channels = 0;            // asked for, or fixed by the plan; 0: the default
  unsigned threads = 0;                  // asked for; 0: the default
  int sms = 0;                           // multiprocessors of the device
  std::span<const Occupancy> occupancy;  // at the requested threads, or at every kThreadChoices
  std::uint32_t max_channels = kMaxDefaultChannels;  // the default's cap (>= 1)
};

struct LaunchFit {
  std::uint32_t channels = 0;
  unsigned threads = 0;
  std::uint64_t blocks = 0;  // channels x blocks_per_channel
  int blocks_per_sm = 0;     // at `threads`
  int sms = 0;
  bool ok = false;  // false: nothing fits; blocks, threads and blocks_per_sm then describe the
                    // last try (the request, or one channel at the fewest threads)
  std::uint64_t capacity() const {
    return static_cast<std::uint64_t>(std::max(0, sms)) *
           static_cast<std::uint64_t>(std::max(0, blocks_per_sm));
  }
  // Why a launch that does not fit is refused: "<needs> 248 thread blocks of 512 threads
  // resident at once (<what>); device 0 holds 132 (132 SMs x 1): <remedy>", where `needs` says
  // whose blocks ("the plan needs").
  std::string refusal(const std::string& needs, const std::string& what, int device,
                      const std::string& remedy) const {
    return needs + " " + std::to_string(blocks) + " thread blocks of " + std::to_string(threads) +
           " threads resident at once (" + what + "); device " + std::to_string(device) +
           " holds " + std::to_string(capacity()) + " (" + std::to_string(sms) + " SMs x " +
           std::to_string(blocks_per_sm) + "): " + remedy;
  }
  // "33 channels x 8 blocks = 264 blocks of 512 threads (132 SMs x 2 resident)".
  std::string describe() const {
    return std::to_string(channels) + " channels x " +
           std::to_string(channels == 0 ? 0 : blocks / channels) +
           " blocks = " + std::to_string(blocks) + " blocks of " + std::to_string(threads) +
           " threads (" + std::to_string(sms) + " SMs x " + std::to_string(blocks_per_sm) +
           " resident)";
  }
};

// Blocks per SM at `threads` of a kernel that meets kernel_launch_bounds() and takes at most
// kKernelSharedBytes of shared memory, on an SM with `shared_per_sm` bytes of it (0: not
// known, not bounded): what the default channels are chosen against before any kernel is known
// (the launch checks the real figure).
inline int bounded_blocks_per_sm(unsigned threads, int max_threads_per_sm, int max_blocks_per_sm,
                                 std::uint64_t shared_per_sm = 0) {
  if (threads == 0 || threads > kMaxThreadsPerBlock) return 0;
  const unsigned by_registers = kMinBlocksPerSm * kMaxThreadsPerBlock / threads;
  const unsigned by_threads = static_cast<unsigned>(std::max(0, max_threads_per_sm)) / threads;
  const unsigned by_shared = shared_per_sm == 0
                                 ? by_threads
                                 : static_cast<unsigned>(std::min<std::uint64_t>(
                                       shared_per_sm / kKernelSharedBytes, by_threads));
  return static_cast<int>(std::min({by_registers, by_threads, by_shared,
                                    static_cast<unsigned>(std::max(0, max_blocks_per_sm))}));
}

// The same for the requested threads or every default choice.
inline std::vector<Occupancy> bounded_occupancy(unsigned requested_threads, int max_threads_per_sm,
                                                int max_blocks_per_sm,
                                                std::uint64_t shared_per_sm = 0) {
  std::vector<Occupancy> v;
  if (requested_threads != 0) {
    v.push_back({requested_threads, bounded_blocks_per_sm(requested_threads, max_threads_per_sm,
                                                          max_blocks_per_sm, shared_per_sm)});
    return v;
  }
  for (unsigned t : kThreadChoices)
    v.push_back(
        {t, bounded_blocks_per_sm(t, max_threads_per_sm, max_blocks_per_sm, shared_per_sm)});
  return v;
}

inline LaunchFit fit_launch(const FitRequest& r) {
  LaunchFit fit;
  fit.sms = r.sms;
  const std::uint64_t per_channel = std::max<std::uint32_t>(1, r.blocks_per_channel);
  auto per_sm = [&r](unsigned threads) {
    for (const Occupancy& o : r.occupancy)
      if (o.threads == threads) return std::max(0, o.blocks_per_sm);
    return 0;
  };
  auto try_threads = [&](unsigned threads) {
    fit.threads = threads;
    fit.blocks_per_sm = per_sm(threads);
    const std::uint64_t capacity = fit.capacity();
    if (r.channels != 0) {
      fit.channels = r.channels;
      fit.blocks = per_channel * r.channels;
      return fit.blocks <= capacity;
    }
    // As many as fit, within the cap.
    const std::uint64_t most = capacity / per_channel;
    const std::uint64_t ch =
        std::min(most, static_cast<std::uint64_t>(std::max<std::uint32_t>(1, r.max_channels)));
    fit.channels = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, ch));
    fit.blocks = per_channel * fit.channels;
    return most >= 1;
  };
  if (r.threads != 0) {
    fit.ok = try_threads(r.threads);
    return fit;
  }
  for (unsigned t : kThreadChoices)
    if (try_threads(t)) {
      fit.ok = true;
      return fit;
    }
  return fit;
}

}  // namespace ccoll::transport::cuda
