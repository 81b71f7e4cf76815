// ccoll/coord/allreduce_control_plane.hpp: the coordinator's ControlPlane carried by a ccoll
// allreduce communicator of its own, so that it runs on every transport an allreduce runs on
// (host threads, shared-memory processes, MPI) with that transport's timeout and abort rules.
//
// Every collective of the interface becomes one or two allreduces of bytes, all exact:
//   - AND (OR) of words: one byte per bit, reduced with min (max); a bit is 0 or 1 on every rank,
//     so min is AND and max is OR. Eight times the bytes of a word allreduce, which for the
//     response cache's at most `capacity` bits is still a small message;
//   - gather to rank 0: the payload sizes (an allreduce max of a vector with one slot per rank,
//     zero except its own), then the payloads side by side (max again: each byte is non-zero on at
//     most one rank);
//   - broadcast from rank 0: its size, then its bytes, each zero on every other rank (max).
// Sizes are rounded up to a power of two so that the communicator's plan cache sees few distinct
// counts. The gather and the broadcast run only on the coordinator path (requests no cache knows),
// so their second allreduce is rare; the word allreduce runs every cycle.
//
// A Handle is one rank's handle of an allreduce communicator used by nothing else at the same time
// (`handle.run(send, recv, count, dtype, op)`, e.g. Allreduce::rank(r)); calls are collective and
// in the same order on every rank, like the interface requires.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/coord/control_plane.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"

namespace ccoll::coord {

template <class Handle>
class AllreduceControlPlane final : public ControlPlane {
 public:
  AllreduceControlPlane(Handle handle, int rank, int nranks)
      : handle_(std::move(handle)), rank_(rank), nranks_(nranks) {}

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  void allreduce_and(std::span<std::uint64_t> words) override { reduce(words, ReduceOp::min); }
  void allreduce_or(std::span<std::uint64_t> words) override { reduce(words, ReduceOp::max); }

  std::vector<std::string> gather_to_root(const std::string& payload) override {
    sizes_.assign(static_cast<std::size_t>(nranks_), 0);
    sizes_[static_cast<std::size_t>(rank_)] = static_cast<std::int64_t>(payload.size());
    handle_.run(sizes_.data(), sizes_.data(), sizes_.size(), DataType::i64, ReduceOp::max);
    std::size_t total = 0, offset = 0;
    for (int r = 0; r < nranks_; ++r) {
      if (r == rank_) offset = total;
      total += static_cast<std::size_t>(sizes_[static_cast<std::size_t>(r)]);
    }
    bytes_.assign(rounded(total), 0);
    if (!payload.empty()) std::memcpy(bytes_.data() + offset, payload.data(), payload.size());
    handle_.run(bytes_.data(), bytes_.data(), bytes_.size(), DataType::u8, ReduceOp::max);
    std::vector<std::string> out;
    if (rank_ != 0) return out;
    std::size_t at = 0;
    for (std::int64_t s : sizes_) {
      out.emplace_back(reinterpret_cast<const char*>(bytes_.data() + at),
                       static_cast<std::size_t>(s));
      at += static_cast<std::size_t>(s);
    }
    return out;
  }

  std::string broadcast_from_root(const std::string& payload) override {
    std::int64_t size = rank_ == 0 ? static_cast<std::int64_t>(payload.size()) : 0;
    handle_.run(&size, &size, 1, DataType::i64, ReduceOp::max);
    bytes_.assign(rounded(static_cast<std::size_t>(size)), 0);
    if (rank_ == 0 && !payload.empty()) std::memcpy(bytes_.data(), payload.data(), payload.size());
    handle_.run(bytes_.data(), bytes_.data(), bytes_.size(), DataType::u8, ReduceOp::max);
    return {reinterpret_cast<const char*>(bytes_.data()), static_cast<std::size_t>(size)};
  }

 private:
  static std::size_t rounded(std::size_t n) { return std::bit_ceil(std::max<std::size_t>(n, 8)); }

  void reduce(std::span<std::uint64_t> words, ReduceOp op) {
    if (words.empty()) return;
    bits_.resize(words.size() * 64);
    for (std::size_t i = 0; i < bits_.size(); ++i)
      bits_[i] = static_cast<std::uint8_t>((words[i / 64] >> (i % 64)) & 1u);
    handle_.run(bits_.data(), bits_.data(), bits_.size(), DataType::u8, op);
    for (std::size_t w = 0; w < words.size(); ++w) {
      std::uint64_t v = 0;
      for (std::size_t b = 0; b < 64; ++b)
        v |= static_cast<std::uint64_t>(bits_[w * 64 + b] & 1u) << b;
      words[w] = v;
    }
  }

  Handle handle_;
  int rank_;
  int nranks_;
  std::vector<std::int64_t> sizes_;  // sizes are never negative: max over i64 is exact
  std::vector<std::uint8_t> bytes_;
  std::vector<std::uint8_t> bits_;  // one per bit of the words being reduced
};

}  // namespace ccoll::coord
