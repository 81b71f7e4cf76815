// tests/sweep.hpp: property sweeps that a slow build may thin out.
//
// The largest sweeps (every P, count, chunking and FIFO depth of a plan kind; every collective,
// dtype and root) take seconds in an optimised build and minutes under a sanitizer, which runs
// the code some 12x slower. CCOLL_TEST_SWEEP="STRIDE/OFFSET" makes each sweep that asks take only
// the cases whose index is OFFSET modulo STRIDE: CI's ASan + UBSan run takes one case in eight,
// with an offset derived from the commit, so successive commits cover different eighths and a
// failure is reproduced by setting the same value (CI prints it). Unset, or "1/0": every case.
//
//   ccoll::testing::Sweep sweep;
//   for (...) for (...) {
//     if (!sweep.take()) continue;
//     ...
//   }
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ccoll::testing {

struct SweepShare {
  std::uint64_t stride = 1;
  std::uint64_t offset = 0;
};

// "STRIDE/OFFSET" (or "STRIDE", offset 0); anything else is every case, with a warning.
inline SweepShare parse_sweep_share(const char* text) {
  SweepShare share;
  if (text == nullptr || *text == '\0') return share;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };  // strtoull takes "-3"
  char* end = nullptr;
  const unsigned long long stride = digit(*text) ? std::strtoull(text, &end, 10) : 0;
  unsigned long long offset = 0;
  bool ok = stride >= 1;
  if (ok && *end == '/') {
    const char* at = end + 1;
    ok = digit(*at);
    if (ok) offset = std::strtoull(at, &end, 10);
  }
  ok = ok && *end == '\0';
  if (!ok) {
    std::fprintf(stderr, "CCOLL_TEST_SWEEP=\"%s\" is not STRIDE/OFFSET: every case runs\n", text);
    return share;
  }
  share.stride = stride;
  share.offset = offset % stride;
  return share;
}

inline SweepShare sweep_share() {
  static const SweepShare share = parse_sweep_share(std::getenv("CCOLL_TEST_SWEEP"));
  return share;
}

// One sweep's case counter.
class Sweep {
 public:
  Sweep() : share_(sweep_share()) {}
  explicit Sweep(SweepShare share) : share_(share) {}

  // Whether the next case runs.
  bool take() { return next_++ % share_.stride == share_.offset; }
  std::uint64_t taken() const {
    return next_ / share_.stride + (next_ % share_.stride > share_.offset ? 1 : 0);
  }

 private:
  SweepShare share_;
  std::uint64_t next_ = 0;
};

}  // namespace ccoll::testing
