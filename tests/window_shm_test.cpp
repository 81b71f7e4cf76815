// Tests of registered windows on the shared-memory transport (transport/shared_window.hpp,
// runtime/symmetric_allreduce.hpp, symmetric_shards.hpp, symmetric_rooted.hpp): P = 1..5 processes
// fork()ed by the test.
// Buffers at the same offsets of one window on every rank take the direct path (and give the
// reference's bits for every dtype, op, count and in place); buffers elsewhere, or at different
// offsets, stage as before; a rank that never allocates its window is named in the others' error;
// no window is left in /dev/shm.
#include <dirent.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "allreduce_reference.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/collective.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/runtime/symmetric_allreduce.hpp"
#include "collective_reference.hpp"
#include "process_ranks.hpp"
#include "sweep.hpp"

namespace window_shm_test {
using namespace ccoll;
using namespace std::chrono_literals;
using ccoll::testing::check_all;
using process_ranks::error_code_of;
using process_ranks::on_processes;
using process_ranks::Outcome;
using process_ranks::require_all_ok;

namespace {

using AR = Allreduce<transport::SharedMemory, algo::Ring, schedule::Phased>;

std::string unique_session(const std::string& tag) {
  return process_ranks::unique_session("test-window-" + tag);
}

Config window_config(int p, int r, const std::string& session) {
  Config c;
  c.nranks = p;
  c.rank = r;
  c.session = session;
  c.slot_bytes = 1024;
  c.nslots = 2;
  c.timeout = 10s;
  c.in_band_agreement_bytes = 0;  // small calls too agree first, so they may go direct
  return c;
}

// Entries of /dev/shm whose name contains `part`.
int shm_entries_with(const std::string& part) {
  int n = 0;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(d))
      if (std::strstr(e->d_name, part.c_str()) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("symmetric shares cover the elements once, 64-byte aligned") {
  for (int p = 1; p <= 9; ++p)
    for (std::size_t elem : {1u, 2u, 4u, 8u})
      for (std::uint64_t count : {1ull, 7ull, 64ull, 1000ull, 4097ull, 1000003ull}) {
        std::uint64_t next = 0;
        for (int q = 0; q < p; ++q) {
          const runtime::Share s = runtime::symmetric_share(count, elem, p, q);
          REQUIRE(s.begin == next);
          REQUIRE(s.end >= s.begin);
          if (s.end > s.begin && s.end < count) CHECK((s.end * elem) % 64 == 0);
          next = s.end;
        }
        CHECK(next == count);
      }
}

TEST_CASE("shm windows: every dtype, op and count, in place and not, P = 1..5, go direct") {
  ccoll::testing::Sweep sweep;
  for (int p = 1; p <= 5; ++p) {
    if (!sweep.take()) continue;
    INFO("P=" << p);
    const std::string session = unique_session("all");
    auto out = on_processes(p, [&](int r) -> std::string {
      Config c = window_config(p, r, session);
      // Both store kinds for the copies and, untuned, for the shares, at every count.
      c.stream_output_bytes = p % 2 == 1 ? 1 : 0;
      c.stream_slot_bytes = p % 2 == 1 ? 1 : 0;
      c.tune_slot_stores = false;
      AR ar(c);
      const std::span<std::byte> w = ar.allocate_window(std::size_t{2} << 20);
      if (w.size() != (std::size_t{2} << 20)) return "window of the wrong size";
      if (reinterpret_cast<std::uintptr_t>(w.data()) % 4096 != 0) return "window not page-aligned";
      std::string wrong = check_all(ar, {1, 3, 17, 1000, 4099, 65536 + 5}, p != 3, w);
      if (!wrong.empty()) return wrong;
      if (ar.executor().direct_calls() == 0) return "no call went direct";
      return "";
    });
    require_all_ok(out);
    CHECK(shm_entries_with(session) == 0);
  }
}

TEST_CASE("shm windows: large calls stream, and the default config goes direct above 64 KiB") {
  const int p = 3;
  const std::string session = unique_session("large");
  auto out = on_processes(p, [&](int r) -> std::string {
    Config c = window_config(p, r, session);
    c.in_band_agreement_bytes = Config{}.in_band_agreement_bytes;
    c.stream_output_bytes = 1u << 20;
    AR ar(c);
    const std::span<std::byte> w = ar.allocate_window(std::size_t{16} << 20);
    std::string wrong = check_all(ar, {(std::uint64_t{3} << 20) / 4 + 3}, false, w);
    if (!wrong.empty()) return wrong;
    const std::uint64_t direct = ar.executor().direct_calls();
    // f32 and bf16, every op, in place and not: 2 x 5 x 2 calls, all direct.
    if (direct != 20) return "direct calls: " + std::to_string(direct) + ", expected 20";
    return "";
  });
  require_all_ok(out);
}

// Rank r's windowed reduce-scatter or all-gather cases, every dtype, every op reduce-scatter takes,
// every count; each call must read the peers' buffers directly. Out of place, the input lies at
// offset 0 of the window and the output, between guard elements, on the next page boundary, on
// every rank. In place (NCCL's forms), the larger buffer lies between the guards and the smaller
// one is its block r. Returns "" or the first wrong case.
template <class Coll>
std::string check_windowed_cases(Coll& coll, std::span<std::byte> window, int p, int r,
                                 const std::vector<std::uint64_t>& counts, bool in_place) {
  using ccoll::testing::Bytes;
  using ccoll::testing::guard_value;
  using ccoll::testing::kGuard;
  using ccoll::testing::value;
  constexpr plan::Collective C = Coll::collective;
  const bool scatters = C == plan::Collective::reduce_scatter;
  const auto up = static_cast<std::uint64_t>(p);
  const auto ur = static_cast<std::uint64_t>(r);
  for (DataType d : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps) {
      if ((!scatters && op != ReduceOp::sum) || !is_supported(d, op)) continue;
      for (std::uint64_t n : counts) {
        std::string wrong;
        dispatch_data_type(d, [&](auto t) {
          using T = decltype(t);
          dispatch_reduce_op(op, [&](auto tag) {
            constexpr ReduceOp Op = decltype(tag)::value;
            const std::uint64_t in_n = scatters ? n * up : n;
            const std::uint64_t out_n = scatters ? n : n * up;
            // The guarded buffer: the output, or in place the larger buffer.
            const std::uint64_t big_n = in_place ? n * up : out_n;
            const std::uint64_t big_at = in_place ? 0 : (in_n * sizeof(T) + 4095) / 4096 * 4096;
            if (big_at + (big_n + 2 * kGuard) * sizeof(T) > window.size()) {
              wrong = "window too small";
              return;
            }
            T* guarded = reinterpret_cast<T*>(window.data() + big_at);
            T* big = guarded + kGuard;
            for (std::uint64_t j = 0; j < big_n + 2 * kGuard; ++j) guarded[j] = guard_value<T>();
            T* in = reinterpret_cast<T*>(window.data());
            T* out = big;
            if (in_place) {
              in = scatters ? big : big + ur * n;
              out = scatters ? big + ur * n : big;
            }
            const std::uint64_t in_index = scatters ? 0 : ur * n;
            for (std::uint64_t i = 0; i < in_n; ++i) in[i] = value<T>(Op, r, p, in_index + i);
            const std::uint64_t direct_before = coll.executor().direct_calls();
            ccoll::testing::call_collective<Coll>(coll.rank(r), in, out, n, d, op, 0);
            const std::string where =
                std::string(plan::collective_name(C)) + " P=" + std::to_string(p) +
                " rank=" + std::to_string(r) + " count=" + std::to_string(n) +
                " dtype=" + std::string(to_string(d)) + " op=" + std::string(to_string(op)) +
                (in_place ? " in place" : "");
            if (coll.executor().direct_calls() != direct_before + 1) {
              wrong = where + ": the call staged";
              return;
            }
            const std::uint64_t out_at = static_cast<std::uint64_t>(out - guarded);
            for (std::uint64_t j = 0; j < big_n + 2 * kGuard; ++j) {
              const bool in_output = j >= out_at && j < out_at + out_n;
              // In place, the rest of reduce-scatter's input may be anything afterwards (NCCL).
              if (in_place && scatters && !in_output && j >= kGuard && j < kGuard + big_n) continue;
              T want = guard_value<T>();
              if (in_output) {
                const std::uint64_t i = j - out_at;
                if (scatters) {
                  want = value<T>(Op, 0, p, ur * n + i);
                  for (int q = 1; q < p; ++q)
                    want = combine<Op>(want, value<T>(Op, q, p, ur * n + i));
                  want = finalize<Op>(want, p);
                } else {
                  want = value<T>(Op, static_cast<int>(i / n), p, i);
                }
              }
              if (std::bit_cast<Bytes<T>>(want) != std::bit_cast<Bytes<T>>(guarded[j])) {
                wrong = where + ": element " + std::to_string(j) + " of the guarded buffer (" +
                        std::to_string(kGuard) + " guards, then the output) is wrong";
                return;
              }
            }
            if (!in_place)
              for (std::uint64_t i = 0; i < in_n; ++i)
                if (std::bit_cast<Bytes<T>>(in[i]) !=
                    std::bit_cast<Bytes<T>>(value<T>(Op, r, p, in_index + i))) {
                  wrong = where + ": input element " + std::to_string(i) + " was written";
                  return;
                }
          });
        });
        if (!wrong.empty()) return wrong;
      }
    }
  return "";
}

// Rank 0 in place, the others not, with offsets that coincide once in-place calls keep only
// their larger buffer's: (all-gather) rank 0's send = recv = window + X, the others' send at 0
// and recv at X; (reduce-scatter) rank 0's send = recv = X, the others' send at X and recv at 0.
// The placements differ (WindowPlacement::in_place), so every rank stages, and stays right.
template <class Coll>
std::string check_mixed_in_place(Coll& coll, std::span<std::byte> window, int p, int r) {
  using ccoll::testing::value;
  constexpr bool scatters = Coll::collective == plan::Collective::reduce_scatter;
  const std::uint64_t n = 1000;
  const auto up = static_cast<std::uint64_t>(p);
  const auto ur = static_cast<std::uint64_t>(r);
  auto* at0 = reinterpret_cast<float*>(window.data());
  auto* atx = reinterpret_cast<float*>(window.data() + (std::size_t{1} << 20));
  float* in = scatters ? atx : (r == 0 ? atx : at0);
  float* out = scatters ? (r == 0 ? atx : at0) : atx;
  const std::uint64_t in_n = scatters ? n * up : n;
  const std::uint64_t in_index = scatters ? 0 : ur * n;
  for (std::uint64_t i = 0; i < in_n; ++i) in[i] = value<float>(ReduceOp::sum, r, p, in_index + i);
  const std::uint64_t direct = coll.executor().direct_calls();
  ccoll::testing::call_collective<Coll>(coll.rank(r), in, out, n, DataType::f32, ReduceOp::sum, 0);
  if (coll.executor().direct_calls() != direct) return "mixed in-place and other calls went direct";
  for (std::uint64_t i = 0; i < (scatters ? n : n * up); ++i) {
    float want = 0;
    if (scatters)
      for (int q = 0; q < p; ++q) want += value<float>(ReduceOp::sum, q, p, ur * n + i);
    else
      want = value<float>(ReduceOp::sum, static_cast<int>(i / n), p, i);
    if (out[i] != want) return "mixed in-place and other calls: element " + std::to_string(i);
  }
  return "";
}

// Rank r's windowed broadcast or reduce cases: roots 0, P-1 and P/2, every dtype, every op reduce
// takes, every count; each call must read the peers' buffers directly. Out of place, the input lies
// at offset 0 of the window and the output, between guard elements, on the next page boundary, on
// every rank; in place, one buffer between the guards. With `null_unused`, the buffer a rank does
// not use (a broadcast's input off the root, a reduce's output) is null. Returns "" or the first
// wrong case.
template <class Coll>
std::string check_windowed_rooted(Coll& coll, std::span<std::byte> window, int p, int r,
                                  const std::vector<std::uint64_t>& counts, bool in_place,
                                  bool null_unused) {
  using ccoll::testing::Bytes;
  using ccoll::testing::guard_value;
  using ccoll::testing::kGuard;
  using ccoll::testing::value;
  constexpr bool reduces = Coll::collective == plan::Collective::reduce;
  std::vector<int> roots{0};
  for (int x : {p - 1, p / 2})
    if (x != 0 && roots.back() != x) roots.push_back(x);
  for (int root : roots)
    for (DataType d : kAllDataTypes)
      for (ReduceOp op : kAllReduceOps) {
        if ((!reduces && op != ReduceOp::sum) || !is_supported(d, op)) continue;
        for (std::uint64_t n : counts) {
          std::string wrong;
          dispatch_data_type(d, [&](auto t) {
            using T = decltype(t);
            dispatch_reduce_op(op, [&](auto tag) {
              constexpr ReduceOp Op = decltype(tag)::value;
              const bool is_root = r == root;
              const bool uses_input = reduces || is_root;
              const std::uint64_t at = in_place ? 0 : (n * sizeof(T) + 4095) / 4096 * 4096;
              if (at + (n + 2 * kGuard) * sizeof(T) > window.size()) {
                wrong = "window too small";
                return;
              }
              T* guarded = reinterpret_cast<T*>(window.data() + at);
              for (std::uint64_t j = 0; j < n + 2 * kGuard; ++j) guarded[j] = guard_value<T>();
              T* out = guarded + kGuard;
              T* in = in_place ? out : reinterpret_cast<T*>(window.data());
              // Out of place, an unused input holds values too, which must stay as they are.
              if (uses_input || !in_place)
                for (std::uint64_t i = 0; i < n; ++i) in[i] = value<T>(Op, r, p, i);
              const void* send = null_unused && !reduces && !is_root ? nullptr : in;
              void* recv = null_unused && reduces && !is_root ? nullptr : out;
              const std::uint64_t direct_before = coll.executor().direct_calls();
              ccoll::testing::call_collective<Coll>(coll.rank(r), send, recv, n, d, op, root);
              const std::string where =
                  std::string(plan::collective_name(Coll::collective)) + " P=" + std::to_string(p) +
                  " rank=" + std::to_string(r) + " root=" + std::to_string(root) +
                  " count=" + std::to_string(n) + " dtype=" + std::string(to_string(d)) +
                  " op=" + std::string(to_string(op)) + (in_place ? " in place" : "") +
                  (null_unused ? " null unused" : "");
              // Calls a fast box carries take it, windows or not (runtime/fast_box.hpp).
              const bool boxed = p >= 2 && n * sizeof(T) <= ccoll::runtime::kFastBoxPayload &&
                                 p <= ccoll::runtime::kFastBoxMaxRanks;
              if (coll.executor().direct_calls() != direct_before + (boxed ? 0 : 1)) {
                wrong =
                    where + (boxed ? ": a call for a fast box went direct" : ": the call staged");
                return;
              }
              for (std::uint64_t j = 0; j < n + 2 * kGuard; ++j) {
                const bool in_buffer = j >= kGuard && j < kGuard + n;
                const std::uint64_t i = j - kGuard;
                T want = guard_value<T>();
                if (in_buffer && !reduces) {
                  want = value<T>(Op, root, p, i);
                } else if (in_buffer && is_root) {
                  want = value<T>(Op, 0, p, i);
                  for (int q = 1; q < p; ++q) want = combine<Op>(want, value<T>(Op, q, p, i));
                  want = finalize<Op>(want, p);
                } else if (in_buffer && in_place) {
                  want = value<T>(Op, r, p, i);  // a reduce's input off the root
                }
                if (std::bit_cast<Bytes<T>>(want) != std::bit_cast<Bytes<T>>(guarded[j])) {
                  wrong = where + ": element " + std::to_string(j) + " of the guarded buffer (" +
                          std::to_string(kGuard) + " guards, then the output) is wrong";
                  return;
                }
              }
              if (!in_place)
                for (std::uint64_t i = 0; i < n; ++i)
                  if (std::bit_cast<Bytes<T>>(in[i]) !=
                      std::bit_cast<Bytes<T>>(value<T>(Op, r, p, i))) {
                    wrong = where + ": input element " + std::to_string(i) + " was written";
                    return;
                  }
            });
          });
          if (!wrong.empty()) return wrong;
        }
      }
  return "";
}

template <class Coll>
void check_windowed_collective(const char* tag) {
  ccoll::testing::Sweep sweep;
  for (int p = 1; p <= 5; ++p) {
    if (!sweep.take()) continue;
    INFO("P=" << p);
    const std::string session = unique_session(tag);
    auto out = on_processes(p, [&](int r) -> std::string {
      Config c = window_config(p, r, session);
      c.stream_output_bytes = p % 2 == 1 ? 1 : 0;  // both store kinds for the outputs
      Coll coll(c);
      const std::span<std::byte> w = coll.allocate_window(std::size_t{8} << 20);
      const std::vector<std::uint64_t> counts{1, 3, 17, 1000, 4099, 65536 + 5};
      if constexpr (plan::has_root(Coll::collective)) {
        for (bool in_place : {false, true}) {
          std::string wrong = check_windowed_rooted(coll, w, p, r, counts, in_place, false);
          if (!wrong.empty()) return wrong;
        }
        std::string wrong = check_windowed_rooted(coll, w, p, r, {5, 1000}, true, true);
        if (!wrong.empty()) return wrong;
      } else {
        for (bool in_place : {false, true}) {
          std::string wrong = check_windowed_cases(coll, w, p, r, counts, in_place);
          if (!wrong.empty()) return wrong;
        }
        if (p > 1) {
          std::string mixed = check_mixed_in_place(coll, w, p, r);
          if (!mixed.empty()) return mixed;
        }
      }
      // Buffers outside the window stage, and stay right.
      const std::uint64_t direct = coll.executor().direct_calls();
      std::string wrong =
          ccoll::testing::check_collective_cases(coll, coll.rank(r), p, {7, 1000}, false);
      if (!wrong.empty()) return wrong;
      if (coll.executor().direct_calls() != direct) return "a call outside the window went direct";
      return "";
    });
    require_all_ok(out);
    CHECK(shm_entries_with(session) == 0);
  }
}

TEST_CASE("shm windows: broadcast and reduce go direct, in place and not, every root, dtype, op") {
  SUBCASE("broadcast") {
    check_windowed_collective<Broadcast<transport::SharedMemory, algo::Ring>>("bc");
  }
  SUBCASE("reduce") {
    check_windowed_collective<Reduce<transport::SharedMemory, algo::Ring>>("rd");
  }
}

TEST_CASE(
    "shm windows: reduce-scatter and all-gather go direct, in place and not, every dtype, op, "
    "count") {
  SUBCASE("reduce-scatter") {
    check_windowed_collective<ReduceScatter<transport::SharedMemory, algo::Ring>>("rs");
  }
  SUBCASE("all-gather") {
    check_windowed_collective<AllGather<transport::SharedMemory, algo::Ring>>("ag");
  }
}

TEST_CASE("shm windows: buffers outside the window, or at other offsets, stage and stay right") {
  const int p = 4;
  const std::string session = unique_session("fallback");
  auto out = on_processes(p, [&](int r) -> std::string {
    AR ar(window_config(p, r, session));
    const std::span<std::byte> w = ar.allocate_window(1 << 20);
    const std::size_t n = 5000;
    auto* in = reinterpret_cast<float*>(w.data());
    // Rank 2's output sits elsewhere in the window: no longer symmetric.
    auto* out_buf = reinterpret_cast<float*>(w.data() + (r == 2 ? 4096 * 64 : 4096 * 32));
    std::vector<float> outside(n);
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t i = 0; i < n; ++i)
        in[i] = static_cast<float>(r + 1) * static_cast<float>(i % 7);
      float* dst = pass == 0 ? out_buf : (r == 1 ? outside.data() : out_buf);
      ar.run(in, dst, n, DataType::f32, ReduceOp::sum);
      const int sum_of_factors = p * (p + 1) / 2;  // 1 + 2 + ... + P
      const auto scale = static_cast<float>(sum_of_factors);
      for (std::size_t i = 0; i < n; ++i)
        if (dst[i] != scale * static_cast<float>(i % 7))
          return "pass " + std::to_string(pass) + " element " + std::to_string(i);
    }
    if (ar.executor().direct_calls() != 0) return "a call that is not symmetric went direct";
    return "";
  });
  require_all_ok(out);
}

TEST_CASE("shm windows: a size whose mapping cannot be represented is refused on every rank") {
  const int p = 2;
  const std::string session = unique_session("hugewin");
  auto out = on_processes(p, [&](int r) -> std::string {
    AR ar(window_config(p, r, session));
    for (const std::size_t bytes : {~std::size_t{0}, ~std::size_t{0} - 4095, std::size_t{0}}) {
      try {
        ar.allocate_window(bytes);
        return "window of " + std::to_string(bytes) + " bytes allocated";
      } catch (const Error& e) {
        if (e.code() != ErrorCode::InvalidArgument) return std::string("code: ") + e.what();
      }
    }
    // Nothing was created: the next window is window 0 and works.
    const std::span<std::byte> w = ar.allocate_window(1 << 16);
    auto* buf = reinterpret_cast<float*>(w.data());
    const std::size_t n = 1000;
    for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(r + 1);
    ar.run(buf, buf, n, DataType::f32, ReduceOp::sum);
    for (std::size_t i = 0; i < n; ++i)
      if (buf[i] != 3.0F) return "element " + std::to_string(i);
    if (ar.executor().direct_calls() != 1) return "the call did not go direct";
    return "";
  });
  require_all_ok(out);
  CHECK(shm_entries_with(session) == 0);
}

TEST_CASE("shm windows: a rank that never allocates its window is named within the deadline") {
  const int p = 3;
  const std::string session = unique_session("absent");
  auto out = on_processes(p, [&](int r) -> std::string {
    Config c = window_config(p, r, session);
    c.timeout = 500ms;
    AR ar(c);
    if (r == 2) {
      std::this_thread::sleep_for(1500ms);
      return "absent";
    }
    ar.allocate_window(1 << 16);
    return "allocated";
  });
  // Each waiting rank names rank 2: as the rank that did not create its segment in time
  // (Timeout), or, if the wait outlasted rank 2's communicator (a loaded host), as the rank that
  // left (Aborted).
  for (int r = 0; r < 2; ++r) {
    const Outcome& o = out[static_cast<std::size_t>(r)];
    INFO("rank " << r << ": " << o.message);
    const int code = error_code_of(o);
    CHECK((code == static_cast<int>(ErrorCode::Timeout) ||
           code == static_cast<int>(ErrorCode::Aborted)));
    CHECK(o.message.find("rank 2") != std::string::npos);
  }
  CHECK(out[2].message == "WRONG absent");
  CHECK(shm_entries_with(session) == 0);
}

TEST_CASE("the streaming fold equals the element fold at every alignment and operand count") {
  for (std::uint32_t nsrc = 1; nsrc <= 5; ++nsrc)
    for (std::uint64_t shift : {0u, 1u, 3u})
      for (std::uint64_t n : {0u, 1u, 15u, 16u, 17u, 100u, 1031u}) {
        std::vector<std::vector<float>> in(nsrc, std::vector<float>(n + 4));
        std::vector<const float*> srcs(nsrc);
        for (std::uint32_t k = 0; k < nsrc; ++k) {
          for (std::uint64_t i = 0; i < n + 4; ++i)
            in[k][i] = static_cast<float>((k * 31 + i * 17) % 29) / 7.0f;
          srcs[k] = in[k].data() + shift;
        }
        std::vector<float> out(n + 8, -1.0f);
        runtime::detail::fold_streaming<float, ReduceOp::avg, float>(
            out.data() + shift, srcs.data(), nsrc, n, static_cast<int>(nsrc));
        runtime::detail::stream_fence();
        for (std::uint64_t i = 0; i < n; ++i) {
          const float ref = runtime::detail::fold_element<float, ReduceOp::avg, true, float>(
              srcs.data(), nsrc, i, static_cast<int>(nsrc));
          REQUIRE(std::bit_cast<std::uint32_t>(ref) ==
                  std::bit_cast<std::uint32_t>(out[shift + i]));
        }
        CHECK(out[shift + n] == -1.0f);
        if (shift > 0) CHECK(out[shift - 1] == -1.0f);
      }
  // 16-bit floats: three or more operands fold in float and round once.
  std::vector<std::vector<Half>> h(3, std::vector<Half>(64));
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 64; ++i) h[k][i] = Half(k == 0 ? 2048.0f : 1.0f);
  const Half* hs[3] = {h[0].data(), h[1].data(), h[2].data()};
  std::vector<Half> ho(64);
  runtime::detail::fold_streaming<Half, ReduceOp::sum, float>(ho.data(), hs, 3, 64, 3);
  runtime::detail::stream_fence();
  CHECK(static_cast<float>(ho[0]) == 2050.0f);
  CHECK(static_cast<float>(ho[63]) == 2050.0f);
}

TEST_CASE(
    "shm windows: a rank that exits instead of allocating is named long before the deadline") {
  const int p = 3;
  const std::string session = unique_session("exited");
  const auto start = std::chrono::steady_clock::now();
  auto out = on_processes(p, [&](int r) -> std::string {
    Config c = window_config(p, r, session);
    c.timeout = 10s;
    AR ar(c);
    if (r == 2) return "exited";
    ar.allocate_window(1 << 16);
    return "allocated";
  });
  const auto took = std::chrono::steady_clock::now() - start;
  for (int r = 0; r < 2; ++r) {
    const Outcome& o = out[static_cast<std::size_t>(r)];
    INFO("rank " << r << ": " << o.message);
    CHECK(error_code_of(o) == static_cast<int>(ErrorCode::Aborted));
    CHECK(o.message.find("rank 2 left") != std::string::npos);
  }
  CHECK(took < 5s);
  CHECK(shm_entries_with(session) == 0);
}

TEST_CASE("shm windows: a plan with relays stages, and only active ranks contribute") {
  // dgx1v with five active GPUs: three processes relay. Their window buffers must neither
  // contribute nor receive, so the call cannot go direct even though every placement agrees.
  const std::string session = unique_session("relays");
  auto out = on_processes(8, [&](int r) -> std::string {
    auto dgx = physical::preset("dgx1v");
    dgx.set_active({"gpu0", "gpu1", "gpu2", "gpu5", "gpu6"});
    algo::PackedForest forest(dgx);
    Config c = window_config(0, r, session);
    c.slot_bytes = 16 * 1024;
    c.nslots = 4;
    Allreduce<transport::SharedMemory, algo::PackedForest, schedule::Phased> ar(c, forest);
    const std::size_t n = 20011;
    const std::span<std::byte> w = ar.allocate_window(2 * n * sizeof(float));
    auto* in = reinterpret_cast<float*>(w.data());
    auto* res = reinterpret_cast<float*>(w.data() + n * sizeof(float));
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(1 + r + i % 5);
    ar.run(in, res, n, DataType::f32, ReduceOp::sum);
    if (ar.executor().direct_calls() != 0) return "a plan with relays went direct";
    if (!forest.ranks().active[static_cast<std::size_t>(r)]) return "";
    for (std::size_t i = 0; i < n; ++i) {
      float expect = 0;
      for (int q = 0; q < 8; ++q)
        if (forest.ranks().active[static_cast<std::size_t>(q)])
          expect += static_cast<float>(1 + q + i % 5);
      if (res[i] != expect) return "element " + std::to_string(i);
    }
    return "";
  });
  require_all_ok(out);
  CHECK(shm_entries_with(session) == 0);
}
}  // namespace window_shm_test
