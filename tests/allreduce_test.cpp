// Tests of ccoll::Allreduce on the host-threads transport: results against a reference for every
// dtype and op over P = 1..16 and random counts, in place and out of place, repeated calls, and
// the error paths (bad arguments, mismatches across ranks, a rank that never arrives).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/one_shot.hpp"
#include "ccoll/algo/recursive_doubling.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/algo/tree.hpp"
#include "ccoll/ccoll.hpp"

namespace allreduce_test {
using namespace ccoll;
using namespace std::chrono_literals;

namespace {

using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;

// Runs fn(rank) on P threads; returns each rank's exception (or nullopt).
std::vector<std::optional<Error>> on_threads(int p, const std::function<void(int)>& fn) {
  std::vector<std::optional<Error>> errors(static_cast<std::size_t>(p));
  std::vector<std::string> other(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = e;
      } catch (const std::exception& e) {
        other[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < p; ++r) {
    INFO("rank " << r);
    CHECK(other[static_cast<std::size_t>(r)] == "");
  }
  return errors;
}

// Integer-valued inputs, so that every order of summation gives the same bits (sums stay below
// 2^8, exact in every dtype including bf16 and u8). prod multiplies at most a 2 and a 3.
template <class T>
T input_value(ReduceOp op, int rank, int p, std::uint64_t i) {
  int v;
  if (op == ReduceOp::prod) {
    v = (static_cast<std::uint64_t>(rank) == i % static_cast<std::uint64_t>(p))         ? 2
        : (static_cast<std::uint64_t>(rank) == (i + 1) % static_cast<std::uint64_t>(p)) ? 3
                                                                                        : 1;
  } else {
    v = static_cast<int>((static_cast<std::uint64_t>(rank) * 7 + i * 3) % 11) + 1;  // 1..11
    if (op == ReduceOp::min || op == ReduceOp::max) v += (rank % 3 == 1) ? 3 : 0;
  }
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

template <class T, ReduceOp Op>
T reference_value(int p, std::uint64_t i) {
  T acc = input_value<T>(Op, 0, p, i);
  for (int r = 1; r < p; ++r) acc = combine<Op>(acc, input_value<T>(Op, r, p, i));
  return finalize<Op>(acc, p);
}

template <class T, ReduceOp Op>
std::vector<T> reference(int p, std::uint64_t n) {
  std::vector<T> ref(n);
  for (std::uint64_t i = 0; i < n; ++i) ref[i] = reference_value<T, Op>(p, i);
  return ref;
}

template <class AR>
void check_allreduce(AR& ar, int p, const std::vector<std::uint64_t>& counts, DataType dtype,
                     ReduceOp op, bool in_place) {
  dispatch_data_type(dtype, [&](auto t) {
    using T = decltype(t);
    dispatch_reduce_op(op, [&](auto o) {
      constexpr ReduceOp kOp = decltype(o)::value;
      std::vector<std::vector<T>> outs(static_cast<std::size_t>(p));
      for (std::uint64_t n : counts) {
        const std::vector<T> ref = reference<T, kOp>(p, n);
        auto errors = on_threads(p, [&](int r) {
          std::vector<T> in(n);
          for (std::uint64_t i = 0; i < n; ++i) in[i] = input_value<T>(op, r, p, i);
          auto& out = outs[static_cast<std::size_t>(r)];
          if (in_place) {
            out = in;
            ar.rank(r).run(out.data(), out.data(), n, dtype, op);
          } else {
            out.assign(n, T{});
            ar.rank(r).run(in.data(), out.data(), n, dtype, op);
          }
        });
        for (int r = 0; r < p; ++r) {
          INFO("P=" << p << " n=" << n << " dtype=" << to_string(dtype) << " op=" << to_string(op)
                    << " in_place=" << in_place << " rank=" << r);
          REQUIRE_FALSE(errors[static_cast<std::size_t>(r)].has_value());
          const auto& out = outs[static_cast<std::size_t>(r)];
          // Bitwise: every rank holds the reference, and hence the same bits as every other.
          const bool bitwise_equal = std::memcmp(out.data(), ref.data(), n * sizeof(T)) == 0;
          REQUIRE(bitwise_equal);
        }
      }
    });
  });
}

Config small_config(int p) {
  Config c;
  c.nranks = p;
  c.slot_bytes = 256;  // many messages and slot reuse even for small counts
  c.nslots = 2;
  c.timeout = 20s;
  return c;
}

}  // namespace

TEST_CASE("threads ring: every P from 1 to 16, random counts, sum and avg on f32") {
  std::mt19937_64 rng(7);
  for (int p = 1; p <= 16; ++p) {
    Allreduce<transport::HostThreads, algo::Ring, Overlapped> ar(small_config(p));
    std::vector<std::uint64_t> counts = {1, 2, 31, static_cast<std::uint64_t>(p) * 64 + 1};
    counts.push_back(1 + rng() % 3000);
    check_allreduce(ar, p, counts, DataType::f32, ReduceOp::sum, false);
    check_allreduce(ar, p, {257, 1}, DataType::f32, ReduceOp::avg, true);
  }
}

TEST_CASE("threads ring: every dtype and op, in place and out of place") {
  for (int p : {3, 4}) {
    Config c = small_config(p);
    if (p == 3) c.stream_output_bytes = c.stream_slot_bytes = 1;  // non-temporal stores, every call
    Allreduce<transport::HostThreads, algo::Ring, schedule::Phased> ar(c);
    for (DataType d : kAllDataTypes)
      for (ReduceOp op : kAllReduceOps)
        for (bool in_place : {false, true}) check_allreduce(ar, p, {97, 1000}, d, op, in_place);
  }
}

TEST_CASE("threads: trees and double binary tree, both schedules, several P") {
  for (int p : {2, 5, 8}) {
    Config c = small_config(p);
    Allreduce<transport::HostThreads, algo::Tree, schedule::Phased> tree(c);
    Allreduce<transport::HostThreads, algo::Tree, Overlapped> tree_overlap(c);
    Allreduce<transport::HostThreads, algo::DoubleBinaryTree, Overlapped> dbt(c);
    check_allreduce(tree, p, {1, 13, 1009}, DataType::f32, ReduceOp::sum, false);
    check_allreduce(tree_overlap, p, {1, 13, 1009}, DataType::i32, ReduceOp::max, true);
    check_allreduce(dbt, p, {1, 13, 1009}, DataType::f64, ReduceOp::avg, false);
  }
}

TEST_CASE("threads: more channels and chunks, big slots, repeated calls") {
  Config c = small_config(4);
  c.nchannels = 3;
  c.nchunks = 5;
  Allreduce<transport::HostThreads, algo::Ring, Overlapped> ar(c);
  for (int rep = 0; rep < 3; ++rep)
    check_allreduce(ar, 4, {7, 3001, 7, 1}, DataType::bf16, ReduceOp::sum, rep % 2 == 1);
  Config big = c;
  big.slot_bytes = 1 << 20;
  big.nchannels = 2;
  Allreduce<transport::HostThreads, algo::Ring, Overlapped> ar_big(big);
  check_allreduce(ar_big, 4, {1u << 20, 3}, DataType::f32, ReduceOp::sum, false);
  CHECK(ar_big.plan(1u << 20, DataType::f32).channels.size() == 2);
}

TEST_CASE("threads direct: P = 1..8, every dtype and op, in place, counts around the chunking") {
  for (int p = 1; p <= 8; ++p) {
    Config c = small_config(p);
    c.stream_output_bytes = p % 2 == 0 ? 1 : 0;  // both output store kinds
    c.stream_slot_bytes = p % 3 == 0 ? 0 : 1;    // and both slot store kinds
    Allreduce<transport::HostThreads, algo::Direct, Overlapped> ar(c);
    const auto up = static_cast<std::uint64_t>(p);
    // 64 floats fill a slot: counts below, at and around one piece, one chunk and many chunks.
    const std::vector<std::uint64_t> counts = {
        1, 2, std::max<std::uint64_t>(1, up - 1), up + 1, 61, 64 * up, 64 * up + 1, 3001, 10007};
    for (DataType d : kAllDataTypes)
      for (ReduceOp op : kAllReduceOps) {
        if (p > 4 && d != DataType::f32 && d != DataType::bf16) continue;  // keeps it fast
        check_allreduce(ar, p, counts, d, op, op == ReduceOp::max);
      }
    check_allreduce(ar, p, {4099, 3}, DataType::f32, ReduceOp::sum, true);  // cached plans
  }
  Config c = small_config(4);
  c.nchannels = 2;
  c.nslots = 1;
  c.nchunks = 7;
  Allreduce<transport::HostThreads, algo::Direct, schedule::Phased> ar(c);
  for (int rep = 0; rep < 3; ++rep)
    check_allreduce(ar, 4, {1, 5000, 13}, DataType::f64, ReduceOp::avg, rep == 1);
  CHECK(ar.plan(5000, DataType::f64).channels.size() == 4);
}

TEST_CASE("threads oneshot and recdoubling: P = 1..16, every dtype and op, in place, chunked") {
  for (int p = 1; p <= 16; ++p) {
    const Config c = small_config(p);  // 256-byte slots: counts above 64 floats need chunks
    Allreduce<transport::HostThreads, algo::OneShot, Overlapped> one(c);
    Allreduce<transport::HostThreads, algo::RecursiveDoubling, Overlapped> rd(c);
    const std::vector<std::uint64_t> counts = {1, 2, 63, 64, 65, 1001};
    for (DataType d : kAllDataTypes)
      for (ReduceOp op : kAllReduceOps) {
        if (p > 5 && (d != DataType::f32 || op == ReduceOp::prod)) continue;  // keeps it fast
        check_allreduce(one, p, counts, d, op, op == ReduceOp::max);
        check_allreduce(rd, p, counts, d, op, op == ReduceOp::min);
      }
  }
}

// Values whose sums round: every order of summation gives different bits. Algorithms in which
// every rank computes the sum itself must still agree bit for bit, through a fixed fold order.
TEST_CASE("threads oneshot and recdoubling: every rank gets the same bits when sums round") {
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](float x, float y) {
      return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
    });
  };
  for (int p : {2, 3, 5, 6, 8, 11}) {
    const std::uint64_t n = 777;
    std::vector<std::vector<float>> in(static_cast<std::size_t>(p));
    std::mt19937 rng(static_cast<unsigned>(p));
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    for (auto& v : in) {
      v.resize(n);
      for (auto& x : v) x = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    }
    auto run = [&](auto& ar) {
      std::vector<std::vector<float>> out(static_cast<std::size_t>(p), std::vector<float>(n));
      on_threads(p, [&](int r) {
        ar.rank(r).run(in[static_cast<std::size_t>(r)].data(),
                       out[static_cast<std::size_t>(r)].data(), n, DataType::f32, ReduceOp::sum);
      });
      for (int r = 1; r < p; ++r) {
        INFO("P=" << p << " rank " << r);
        CHECK(same_bits(out[0], out[static_cast<std::size_t>(r)]));
      }
      return out[0];
    };
    const Config c = small_config(p);
    Allreduce<transport::HostThreads, algo::OneShot, Overlapped> one(c);
    Allreduce<transport::HostThreads, algo::RecursiveDoubling, Overlapped> rd(c);
    const std::vector<float> one_out = run(one);
    run(rd);
    // One-shot folds in rank order: ((x0 + x1) + x2) + ...
    std::vector<float> fold = in[0];
    for (int r = 1; r < p; ++r)
      for (std::uint64_t i = 0; i < n; ++i) fold[i] += in[static_cast<std::size_t>(r)][i];
    CHECK(same_bits(fold, one_out));
  }
}

TEST_CASE(
    "threads, agreement before the steps: bad arguments fail on every rank and leave "
    "outputs untouched") {
  const int p = 3;
  Config c = small_config(p);
  c.in_band_agreement_bytes = 0;
  Allreduce<transport::HostThreads, algo::Ring, Overlapped> ar(c);
  const std::uint64_t n = 100;
  std::vector<std::vector<float>> in(p, std::vector<float>(n, 1.0f)),
      out(p, std::vector<float>(n, -7.0f));
  auto untouched = [&] {
    for (const auto& o : out)
      for (float x : o)
        if (x != -7.0f) return false;
    return true;
  };

  SUBCASE("count 0 everywhere") {
    auto errors = on_threads(p, [&](int r) {
      ar.rank(r).run(in[r].data(), out[r].data(), 0, DataType::f32, ReduceOp::sum);
    });
    for (const auto& e : errors) {
      REQUIRE(e.has_value());
      CHECK(e->code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e->what()).find("count") != std::string::npos);
    }
  }
  SUBCASE("count mismatch on one rank: every rank throws Mismatch naming both values") {
    auto errors = on_threads(p, [&](int r) {
      ar.rank(r).run(in[r].data(), out[r].data(), r == 2 ? n - 1 : n, DataType::f32, ReduceOp::sum);
    });
    for (const auto& e : errors) {
      REQUIRE(e.has_value());
      CHECK(e->code() == ErrorCode::Mismatch);
      const std::string w = e->what();
      CHECK(w.find("rank 2") != std::string::npos);
      CHECK(w.find("100") != std::string::npos);
      CHECK(w.find("99") != std::string::npos);
    }
  }
  SUBCASE("dtype and op mismatches") {
    auto errors = on_threads(p, [&](int r) {
      ar.rank(r).run(in[r].data(), out[r].data(), n, r == 1 ? DataType::i32 : DataType::f32,
                     ReduceOp::sum);
    });
    for (const auto& e : errors) {
      REQUIRE(e.has_value());
      CHECK(e->code() == ErrorCode::Mismatch);
      CHECK(std::string(e->what()).find("int32") != std::string::npos);
    }
    errors = on_threads(p, [&](int r) {
      ar.rank(r).run(in[r].data(), out[r].data(), n, DataType::f32,
                     r == 0 ? ReduceOp::max : ReduceOp::sum);
    });
    for (const auto& e : errors) {
      REQUIRE(e.has_value());
      CHECK(e->code() == ErrorCode::Mismatch);
      CHECK(std::string(e->what()).find("max") != std::string::npos);
    }
  }
  SUBCASE("a null buffer on one rank fails every rank, naming it") {
    auto errors = on_threads(p, [&](int r) {
      ar.rank(r).run(r == 1 ? nullptr : in[r].data(), out[r].data(), n, DataType::f32,
                     ReduceOp::sum);
    });
    for (int r = 0; r < p; ++r) {
      const auto& e = errors[static_cast<std::size_t>(r)];
      REQUIRE(e.has_value());
      CHECK(e->code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e->what()).find("sendbuff") != std::string::npos);
      if (r != 1) CHECK(std::string(e->what()).find("rank 1 passed") != std::string::npos);
    }
  }
  SUBCASE("partially overlapping buffers") {
    std::vector<float> big(2 * n);
    auto errors = on_threads(p, [&](int r) {
      if (r == 0)
        ar.rank(r).run(big.data(), big.data() + 1, n, DataType::f32, ReduceOp::sum);
      else
        ar.rank(r).run(in[r].data(), out[r].data(), n, DataType::f32, ReduceOp::sum);
    });
    for (const auto& e : errors) REQUIRE(e.has_value());
  }
  CHECK(untouched());
  // The communicator is still usable after argument errors.
  check_allreduce(ar, p, {n}, DataType::f32, ReduceOp::sum, false);
  CHECK_THROWS_AS(ar.rank(3).run(in[0].data(), out[0].data(), n, DataType::f32, ReduceOp::sum),
                  Error);
  CHECK_THROWS_AS(ar.rank(-1).run(in[0].data(), out[0].data(), n, DataType::f32, ReduceOp::sum),
                  Error);
}

TEST_CASE(
    "threads, in-band agreement: every rank reports a disagreement, then the communicator "
    "is aborted") {
  const int p = 3;
  const std::uint64_t n = 100;  // 400 bytes: in band under the default threshold
  std::vector<std::vector<float>> in(p, std::vector<float>(n, 1.0f)),
      out(p, std::vector<float>(n, -7.0f));
  auto expect_aborted = [&](auto& ar) {
    auto errors = on_threads(p, [&](int r) {
      ar.rank(r).run(in[r].data(), out[r].data(), n, DataType::f32, ReduceOp::sum);
    });
    for (const auto& e : errors) REQUIRE(e.has_value());
  };
  // Both algorithms: one-shot (every rank hears every rank) and ring (a rank hears only its
  // predecessor, so a disagreement further along the ring is found by check_peers or afterwards).
  // Both protocols: Simple compares the published arguments after the steps; LowLatency messages
  // carry them, so ranks that disagree never take each other's messages and check_peers names the
  // culprit.
  std::string protocol;
  auto config = [&] {
    Config c = small_config(p);
    c.protocol = protocol;
    return c;
  };
  auto scenarios = [&](auto tag) {
    using A = typename decltype(tag)::type;
    SUBCASE("count mismatch on one rank: every rank throws Mismatch naming rank 2") {
      Allreduce<transport::HostThreads, A, Overlapped> ar(config());
      check_allreduce(ar, p, {n}, DataType::f32, ReduceOp::sum, false);
      const auto t0 = std::chrono::steady_clock::now();
      auto errors = on_threads(p, [&](int r) {
        ar.rank(r).run(in[r].data(), out[r].data(), r == 2 ? n - 1 : n, DataType::f32,
                       ReduceOp::sum);
      });
      CHECK(std::chrono::steady_clock::now() - t0 < 10s);  // found, not timed out (20 s)
      for (const auto& e : errors) {
        REQUIRE(e.has_value());
        CHECK(e->code() == ErrorCode::Mismatch);
        CHECK(std::string(e->what()).find("rank 2") != std::string::npos);
      }
      expect_aborted(ar);
    }
    SUBCASE("op mismatch") {
      Allreduce<transport::HostThreads, A, Overlapped> ar(config());
      auto errors = on_threads(p, [&](int r) {
        ar.rank(r).run(in[r].data(), out[r].data(), n, DataType::f32,
                       r == 0 ? ReduceOp::max : ReduceOp::sum);
      });
      for (const auto& e : errors) {
        REQUIRE(e.has_value());
        CHECK(e->code() == ErrorCode::Mismatch);
      }
      expect_aborted(ar);
    }
    SUBCASE("a null buffer on one rank stops every rank at once, naming it") {
      Allreduce<transport::HostThreads, A, Overlapped> ar(config());
      const auto t0 = std::chrono::steady_clock::now();
      auto errors = on_threads(p, [&](int r) {
        ar.rank(r).run(r == 1 ? nullptr : in[r].data(), out[r].data(), n, DataType::f32,
                       ReduceOp::sum);
      });
      CHECK(std::chrono::steady_clock::now() - t0 < 10s);
      for (int r = 0; r < p; ++r) {
        const auto& e = errors[static_cast<std::size_t>(r)];
        REQUIRE(e.has_value());
        const std::string w = e->what();
        // Rank 1 agrees first (its own arguments are bad); the others, stopped in their steps,
        // report the same cause once every rank's arguments are in.
        CHECK(e->code() == ErrorCode::InvalidArgument);
        CHECK(w.find("sendbuff") != std::string::npos);
        if (r != 1) CHECK(w.find("rank 1") != std::string::npos);
      }
      expect_aborted(ar);
    }
  };
  SUBCASE("oneshot") {
    scenarios(std::type_identity<algo::OneShot>{});
  }
  SUBCASE("ring") {
    scenarios(std::type_identity<algo::Ring>{});
  }
  SUBCASE("oneshot, LowLatency") {
    protocol = "ll";
    scenarios(std::type_identity<algo::OneShot>{});
  }
  SUBCASE("ring, LowLatency") {
    protocol = "ll";
    scenarios(std::type_identity<algo::Ring>{});
  }
}

TEST_CASE("threads: a rank that never arrives makes the others time out, then stay aborted") {
  const int p = 4;
  Config c = small_config(p);
  // Long enough that the good call below never times out on a loaded 2-core CI machine (TSan, or
  // ctest -j2 beside the shm tests); the failing call still ends within a few seconds.
  c.timeout = 1500ms;
  Allreduce<transport::HostThreads, algo::Ring, Overlapped> ar(c);
  const std::uint64_t n = 5000;
  std::vector<std::vector<float>> in(p, std::vector<float>(n, 1.0f)), out(p, std::vector<float>(n));
  // One good call first, so that the failure happens on warm connections.
  auto errors = on_threads(p, [&](int r) {
    ar.rank(r).run(in[r].data(), out[r].data(), n, DataType::f32, ReduceOp::sum);
  });
  for (const auto& e : errors) {
    if (e) FAIL_CHECK(e->what());
  }
  const auto t0 = std::chrono::steady_clock::now();
  errors = on_threads(p, [&](int r) {
    if (r == 2) return;  // never arrives
    ar.rank(r).run(in[r].data(), out[r].data(), n, DataType::f32, ReduceOp::sum);
  });
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  CHECK(elapsed < 10s);  // bounded by the deadline, not a hang (generous: loaded machine)
  for (int r = 0; r < p; ++r) {
    if (r == 2) continue;
    const auto& e = errors[static_cast<std::size_t>(r)];
    REQUIRE(e.has_value());
    CHECK(e->code() == ErrorCode::Timeout);
    CHECK(std::string(e->what()).find("rank 2") != std::string::npos);
  }
  // Sticky: the communicator is aborted for everyone, including the late rank.
  errors = on_threads(p, [&](int r) {
    ar.rank(r).run(in[r].data(), out[r].data(), n, DataType::f32, ReduceOp::sum);
  });
  for (const auto& e : errors) {
    REQUIRE(e.has_value());
    CHECK((e->code() == ErrorCode::Timeout || e->code() == ErrorCode::Aborted));
  }
}
}  // namespace allreduce_test
