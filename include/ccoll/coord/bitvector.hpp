// ccoll/coord/bitvector.hpp: a packed bit set in 64-bit words, the payload of the per-cycle
// coordination allreduce ([Horovod-cache] Sec. 3.1.2).
//
// Every rank sets one bit per response-cache position whose tensor it has ready; a bitwise AND
// across ranks leaves the tensors ready everywhere. The words are what travel, so the type
// exposes them directly (words()) for a control plane to reduce in place.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ccoll::coord {

class BitVector {
 public:
  static constexpr std::size_t kWordBits = 64;

  BitVector() = default;
  explicit BitVector(std::size_t nbits, bool value = false) { resize(nbits, value); }

  // Bits beyond size() in the last word stay zero for `false` and one for `true` fills, so that
  // AND/OR of equally sized vectors never depends on them; count() masks them out.
  void resize(std::size_t nbits, bool value = false) {
    nbits_ = nbits;
    words_.assign((nbits + kWordBits - 1) / kWordBits, value ? ~std::uint64_t{0} : 0);
  }
  std::size_t size() const noexcept { return nbits_; }
  std::size_t bytes() const noexcept { return words_.size() * sizeof(std::uint64_t); }

  bool test(std::size_t i) const noexcept {
    return (words_[i / kWordBits] >> (i % kWordBits)) & 1u;
  }
  void set(std::size_t i) noexcept { words_[i / kWordBits] |= bit(i); }
  void reset(std::size_t i) noexcept { words_[i / kWordBits] &= ~bit(i); }
  void assign(std::size_t i, bool v) noexcept { v ? set(i) : reset(i); }

  BitVector& operator&=(const BitVector& o) noexcept {
    for (std::size_t w = 0; w < words_.size() && w < o.words_.size(); ++w) words_[w] &= o.words_[w];
    return *this;
  }
  BitVector& operator|=(const BitVector& o) noexcept {
    for (std::size_t w = 0; w < words_.size() && w < o.words_.size(); ++w) words_[w] |= o.words_[w];
    return *this;
  }
  bool operator==(const BitVector& o) const noexcept {
    if (nbits_ != o.nbits_) return false;
    for (std::size_t i = 0; i < nbits_; ++i)
      if (test(i) != o.test(i)) return false;
    return true;
  }

  std::size_t count() const noexcept {
    std::size_t n = 0;
    for (std::size_t w = 0; w < words_.size(); ++w) {
      std::uint64_t v = words_[w];
      const std::size_t tail = nbits_ - w * kWordBits;
      if (tail < kWordBits) v &= (std::uint64_t{1} << tail) - 1;
      n += static_cast<std::size_t>(std::popcount(v));
    }
    return n;
  }

  // Calls f(i) for every set bit i < size(), in ascending order.
  template <class F>
  void for_each_set(F&& f) const {
    for (std::size_t w = 0; w < words_.size(); ++w) {
      std::uint64_t v = words_[w];
      while (v != 0) {
        const std::size_t i = w * kWordBits + static_cast<std::size_t>(std::countr_zero(v));
        if (i >= nbits_) return;
        f(i);
        v &= v - 1;
      }
    }
  }

  std::vector<std::uint64_t>& words() noexcept { return words_; }
  const std::vector<std::uint64_t>& words() const noexcept { return words_; }

 private:
  static constexpr std::uint64_t bit(std::size_t i) noexcept {
    return std::uint64_t{1} << (i % kWordBits);
  }
  std::size_t nbits_ = 0;
  std::vector<std::uint64_t> words_;
};

}  // namespace ccoll::coord
