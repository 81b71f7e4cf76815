// Tests of ccoll::ReduceScatter, AllGather, Broadcast and Reduce (ccoll/collective.hpp) on the
// host-threads transport: every collective with ring and direct plans (broadcast and reduce also
// with tree and dbtree) over P = 1..10 and 13,
// counts around the chunking, every dtype and op, in place and out of place, every root; guard
// elements around every buffer; the error paths (bad root, partial overlap, mismatched roots or
// counts across ranks, a topology without the collective's plans); eager broadcasts and reduces
// (Config::eager_rooted_bytes): results over many calls, and disagreements reported by the next
// call on every rank; random sequences of every collective through `auto` (random_calls.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "auto_collectives.hpp"
#include "ccoll/algo/by_size.hpp"
#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/algo/tree.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/runtime/area_control_plane.hpp"
#include "collective_reference.hpp"
#include "rank_threads.hpp"
#include "sweep.hpp"

namespace collectives_test {
using namespace ccoll;
using ccoll::testing::check_collective_call;

namespace {

using ccoll::testing::on_threads;

Config small_config(int p) {
  Config c;
  c.nranks = p;
  c.slot_bytes = 256;  // many chunks per call, and a FIFO that fills
  c.nslots = 2;
  c.nchannels = 2;
  c.timeout = std::chrono::milliseconds(20000);
  return c;
}

// Every rank runs the same list of cases on `coll`.
template <class Coll>
void check_every_case(Coll& coll, int p, const std::vector<std::uint64_t>& counts,
                      bool every_dtype) {
  const auto outcome = on_threads(p, [&](int rank) {
    return ccoll::testing::check_collective_cases(coll, coll.rank(rank), p, counts, every_dtype);
  });
  for (int r = 0; r < p; ++r) {
    INFO(coll.name() << " P=" << p << " rank " << r);
    CHECK(outcome[static_cast<std::size_t>(r)] == "");
  }
}

// Every rank count of `ps`; with `sweep`, those it takes (the sweeps over kRanks: a share under a
// sanitizer, tests/sweep.hpp).
template <template <class, class, class> class Coll, class L>
void check_sizes(const std::vector<int>& ps, const std::vector<std::uint64_t>& counts,
                 bool every_dtype, ccoll::testing::Sweep* sweep = nullptr) {
  using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;
  for (int p : ps) {
    if (sweep != nullptr && !sweep->take()) continue;
    Coll<transport::HostThreads, L, Overlapped> coll(small_config(p));
    check_every_case(coll, p, counts, every_dtype);
  }
}

const std::vector<int> kRanks{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13};
// 1 element; odd counts; counts around a 256-byte slot (64 f32) per channel and rank.
const std::vector<std::uint64_t> kCounts{1, 3, 63, 64, 65, 131, 1000};

}  // namespace

TEST_CASE("reduce_scatter: ring and direct, P = 1..10 and 13, every dtype and op, in place") {
  ccoll::testing::Sweep sweep;
  check_sizes<ReduceScatter, algo::Ring>({1, 2, 3, 4}, kCounts, true);
  check_sizes<ReduceScatter, algo::Ring>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<ReduceScatter, algo::Direct>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<ReduceScatter, algo::Direct>({3}, kCounts, true);
}

TEST_CASE("all_gather: ring and direct, P = 1..10 and 13, every dtype, in place") {
  ccoll::testing::Sweep sweep;
  check_sizes<AllGather, algo::Ring>({1, 2, 3, 4}, kCounts, true);
  check_sizes<AllGather, algo::Ring>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<AllGather, algo::Direct>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<AllGather, algo::Direct>({3}, kCounts, true);
}

TEST_CASE("broadcast: chain, direct, tree, dbtree, P = 1..10 and 13, roots 0, P/2, P-1, in place") {
  ccoll::testing::Sweep sweep;
  check_sizes<Broadcast, algo::Ring>({1, 2, 3, 4}, kCounts, true);
  check_sizes<Broadcast, algo::Ring>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Broadcast, algo::Direct>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Broadcast, algo::Direct>({3}, kCounts, true);
  check_sizes<Broadcast, algo::Tree>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Broadcast, algo::DoubleBinaryTree>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Broadcast, algo::DoubleBinaryTree>({4}, kCounts, true);
}

TEST_CASE("reduce: chain, direct, tree, dbtree, P = 1..10 and 13, every dtype and op, roots") {
  ccoll::testing::Sweep sweep;
  check_sizes<Reduce, algo::Ring>({1, 2, 3, 4}, kCounts, true);
  check_sizes<Reduce, algo::Ring>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Reduce, algo::Direct>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Reduce, algo::Direct>({3}, kCounts, true);
  check_sizes<Reduce, algo::Tree>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Reduce, algo::DoubleBinaryTree>(kRanks, {1, 65, 1000}, false, &sweep);
  check_sizes<Reduce, algo::Tree>({5}, kCounts, true);
}

TEST_CASE("collectives: auto, from the default table and from one that switches plans by size") {
  // The default table: small and large counts at measured (2, 3) and other (1, 5) rank counts;
  // the thresholds themselves are crossed by the table below.
  const std::vector<std::uint64_t> counts{1, 20000};
  check_sizes<ReduceScatter, algo::BySize>({1, 2, 3, 5}, counts, false);
  check_sizes<AllGather, algo::BySize>({1, 2, 3, 5}, counts, false);
  check_sizes<Broadcast, algo::BySize>({1, 2, 3, 5}, counts, false);
  check_sizes<Reduce, algo::BySize>({1, 2, 3, 5}, counts, false);
  // Every plan kind of every collective in one object per collective: the communicator's
  // connections cover the plans of every size (by_size.hpp).
  using C = plan::Collective;
  algo::TuningTable t;
  for (C c : {C::reduce_scatter, C::all_gather, C::broadcast, C::reduce}) {
    t.rules.push_back(algo::SizeRule{"direct", 256, 1, 100, protocol::Id::low_latency, c});
    t.rules.push_back(algo::SizeRule{"ring", 4096, 1, 100, protocol::Id::simple, c});
    t.rules.push_back(algo::SizeRule{plan::has_root(c) ? "dbtree" : "direct", UINT64_MAX, 1, 100,
                                     protocol::Id::simple, c});
  }
  const algo::BySize policy(t);
  for (int p : {2, 3, 6}) {
    using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;
    ReduceScatter<transport::HostThreads, algo::BySize, Overlapped> rs(small_config(p), policy);
    check_every_case(rs, p, {1, 10, 100, 1000}, false);
    AllGather<transport::HostThreads, algo::BySize, Overlapped> ag(small_config(p), policy);
    check_every_case(ag, p, {1, 10, 100, 1000}, false);
    Broadcast<transport::HostThreads, algo::BySize, Overlapped> bc(small_config(p), policy);
    check_every_case(bc, p, {1, 10, 100, 1000, 5000}, false);
    Reduce<transport::HostThreads, algo::BySize, Overlapped> rd(small_config(p), policy);
    check_every_case(rd, p, {1, 10, 100, 1000, 5000}, false);
  }
}

TEST_CASE("collectives: FIFO depths 2 and 5, one channel and four") {
  for (std::uint32_t nslots : {2u, 5u})
    for (std::uint32_t nchannels : {1u, 4u}) {
      Config c = small_config(5);
      c.nslots = nslots;
      c.nchannels = nchannels;
      ReduceScatter<transport::HostThreads, algo::Ring> rs(c);
      check_every_case(rs, 5, {1, 200}, false);
      AllGather<transport::HostThreads, algo::Ring> ag(c);
      check_every_case(ag, 5, {1, 200}, false);
      Broadcast<transport::HostThreads, algo::Ring> bc(c);
      check_every_case(bc, 5, {1, 200}, false);
      Reduce<transport::HostThreads, algo::Direct> rd(c);
      check_every_case(rd, 5, {1, 200}, false);
    }
}

TEST_CASE("collectives: a configuration no plan can run names the setting, not a probe's count") {
  // The communicator probes counts that are multiples of the ranks (plan_cache.hpp); when none
  // plans, the error reported is the one that is not about the probe's count.
  for (const int p : {3, 4, 5}) {
    CAPTURE(p);
    Config c = small_config(p);
    c.nslots = 1;  // a ring needs two slots per connection
    const auto message = [](auto make) -> std::string {
      try {
        make();
      } catch (const Error& e) {
        return e.what();
      }
      return "no error";
    };
    for (const std::string& m :
         {message([&] { ReduceScatter<transport::HostThreads, algo::Ring> rs(c); }),
          message([&] { AllGather<transport::HostThreads, algo::Ring> ag(c); })}) {
      INFO(m);
      CHECK(m.find("nslots") != std::string::npos);
      CHECK(m.find("expected a multiple") == std::string::npos);
    }
  }
}

TEST_CASE("collectives: bad arguments throw on every rank and write no buffer") {
  const int p = 4;
  SUBCASE("a root out of range on one rank") {
    Broadcast<transport::HostThreads, algo::Ring> bc(small_config(p));
    std::vector<std::vector<float>> out(p, std::vector<float>(10, -1.0f));
    std::vector<float> in(10, 5.0f);
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      try {
        bc.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), 10, DataType::f32,
                       r == 2 ? 7 : 0);
      } catch (const Error& e) {
        return std::string(to_string(e.code())) + ": " + e.what();
      }
      return "no error";
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].find("root") != std::string::npos);
      CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(10, -1.0f));
    }
  }
  SUBCASE("roots that differ across ranks") {
    Reduce<transport::HostThreads, algo::Direct> rd(small_config(p));
    std::vector<std::vector<float>> out(p, std::vector<float>(10, -1.0f));
    std::vector<float> in(10, 5.0f);
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      try {
        rd.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), 10, DataType::f32,
                       ReduceOp::sum, r == 3 ? 1 : 0);
      } catch (const Error& e) {
        return e.code() == ErrorCode::Mismatch ? std::string(e.what()) : "wrong code";
      }
      return "no error";
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].find("root") != std::string::npos);
      CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(10, -1.0f));
    }
  }
  SUBCASE("reduce-scatter: output overlapping the input other than in place") {
    ReduceScatter<transport::HostThreads, algo::Ring> rs(small_config(p));
    std::vector<std::vector<float>> buf(p, std::vector<float>(4 * 8 + 8, 1.0f));
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      float* b = buf[static_cast<std::size_t>(r)].data();
      try {
        // In place would be b + r * 8; b + r * 8 + 1 overlaps the input partially.
        rs.rank(r).run(b, b + r * 8 + (r == 1 ? 1 : 0), 8, DataType::f32, ReduceOp::sum);
      } catch (const Error& e) {
        return std::string(to_string(e.code())) + ": " + e.what();
      }
      return "no error";
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].find("overlap") != std::string::npos);
      CHECK(buf[static_cast<std::size_t>(r)] == std::vector<float>(4 * 8 + 8, 1.0f));
    }
  }
  SUBCASE("all-gather: counts that differ across ranks") {
    AllGather<transport::HostThreads, algo::Ring> ag(small_config(p));
    std::vector<std::vector<float>> out(p, std::vector<float>(4 * 9, -1.0f));
    std::vector<float> in(9, 5.0f);
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      try {
        ag.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), r == 0 ? 9 : 8,
                       DataType::f32);
      } catch (const Error& e) {
        return e.code() == ErrorCode::Mismatch ? std::string(e.what()) : "wrong code";
      }
      return "no error";
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].find("count differs") != std::string::npos);
      CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(4 * 9, -1.0f));
    }
  }
  SUBCASE("broadcast: a null receive buffer") {
    Broadcast<transport::HostThreads, algo::Direct> bc(small_config(p));
    std::vector<float> in(10, 5.0f);
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      std::vector<float> out(10, -1.0f);
      try {
        bc.rank(r).run(in.data(), r == 2 ? nullptr : out.data(), 10, DataType::f32, 0);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return "no error";
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].find("recvbuff") != std::string::npos);
    }
  }
  SUBCASE("counts whose bytes wrap past 2^64: refused, not taken for small calls") {
    // (2^62 + 1) x 4 bytes wraps to 4 and 2^61 x 8 to 0: small enough for a fast box, which no
    // plan's size check guards.
    const std::size_t wraps_f32 = (std::size_t{1} << 62) + 1;
    const std::size_t wraps_f64 = std::size_t{1} << 61;
    Broadcast<transport::HostThreads, algo::Direct> bc(small_config(p));
    Reduce<transport::HostThreads, algo::Direct> rd(small_config(p));
    Allreduce<transport::HostThreads, algo::Ring> ar(small_config(p));
    std::vector<std::vector<double>> buf(p, std::vector<double>(4, -1.0));
    const std::vector<double> in(4, 5.0);
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      double* out = buf[static_cast<std::size_t>(r)].data();
      std::string seen;
      const auto refused = [&](const auto& call) {
        try {
          call();
        } catch (const Error& e) {
          return e.code() == ErrorCode::InvalidArgument &&
                 std::string(e.what()).find("overflow") != std::string::npos;
        }
        return false;
      };
      if (!refused([&] { bc.rank(r).run(in.data(), out, wraps_f32, DataType::f32, 0); }))
        seen += "broadcast ran; ";
      if (!refused(
              [&] { rd.rank(r).run(in.data(), out, wraps_f32, DataType::f32, ReduceOp::sum, 0); }))
        seen += "reduce ran; ";
      if (!refused(
              [&] { ar.rank(r).run(in.data(), out, wraps_f64, DataType::f64, ReduceOp::sum); }))
        seen += "allreduce ran; ";
      return seen;
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].empty());
      CHECK(buf[static_cast<std::size_t>(r)] == std::vector<double>(4, -1.0));
    }
  }
  SUBCASE("the communicator still works after a refused call") {
    Broadcast<transport::HostThreads, algo::Ring> bc(small_config(p));
    std::vector<float> in(10, 5.0f);
    on_threads(p, [&](int r) -> std::string {
      std::vector<float> out(10);
      try {
        bc.rank(r).run(in.data(), out.data(), 10, DataType::f32, -1);
      } catch (const Error&) {
      }
      return "";
    });
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      return check_collective_call<float, ReduceOp::sum>(
          plan::Collective::broadcast, p, r, 10, false, 1,
          [&](const void* s, void* o) { bc.rank(r).run(s, o, 10, DataType::f32, 1); });
    });
    for (int r = 0; r < p; ++r) CHECK(outcome[static_cast<std::size_t>(r)] == "");
  }
}

TEST_CASE(
    "collectives, in band: a bad argument on any rank stops every rank at once, writes no output, "
    "and its next call is never taken for this one") {
  // Small calls run in band. A rank whose own arguments are bad agrees first and, its peers
  // having started their steps, aborts the communicator before it returns: the peers stop long
  // before their timeout whichever rank is bad (rank 0 included), report its error, write no
  // output, and never take its next call's messages for this call's (LowLatency messages carry
  // count, datatype and op, not the call).
  using namespace std::chrono_literals;
  const int p = 3;
  const std::size_t n = 8;
  for (const char* proto : {"simple", "ll"})
    for (int bad = 0; bad < p; ++bad)
      for (const plan::Collective coll :
           {plan::Collective::reduce_scatter, plan::Collective::all_gather,
            plan::Collective::allreduce}) {
        CAPTURE(proto);
        CAPTURE(bad);
        CAPTURE(plan::collective_name(coll));
        Config c = small_config(p);
        c.protocol = proto;
        c.timeout = 20000ms;
        ReduceScatter<transport::HostThreads, algo::Ring> rs(c);
        AllGather<transport::HostThreads, algo::Ring> ag(c);
        Allreduce<transport::HostThreads, algo::Ring> ar(c);
        const std::size_t out_n = coll == plan::Collective::all_gather ? p * n : n;
        const std::size_t in_n = coll == plan::Collective::reduce_scatter ? p * n : n;
        std::vector<std::vector<float>> out(p, std::vector<float>(out_n, -1.0f));
        const std::vector<float> in(in_n, 1.0f);
        const auto t0 = std::chrono::steady_clock::now();
        const auto outcome = on_threads(p, [&](int r) -> std::string {
          auto call = [&](const float* send) {
            float* o = out[static_cast<std::size_t>(r)].data();
            if (coll == plan::Collective::reduce_scatter)
              rs.rank(r).run(send, o, n, DataType::f32, ReduceOp::sum);
            else if (coll == plan::Collective::all_gather)
              ag.rank(r).run(send, o, n, DataType::f32);
            else
              ar.rank(r).run(send, o, n, DataType::f32, ReduceOp::sum);
          };
          std::string first = "no error";
          try {
            call(r == bad ? nullptr : in.data());
          } catch (const Error& e) {
            first = e.code() == ErrorCode::InvalidArgument
                        ? std::string(e.what())
                        : "code " + std::to_string(int(e.code()));
          }
          try {
            call(in.data());  // the next call: the communicator is aborted
          } catch (const Error&) {
            return first;
          }
          return first + "; the next call ran";
        });
        CHECK(std::chrono::steady_clock::now() - t0 < 5s);
        for (int r = 0; r < p; ++r) {
          const std::string& o = outcome[static_cast<std::size_t>(r)];
          INFO("rank " << r << ": " << o);
          CHECK(o.find("sendbuff") != std::string::npos);
          CHECK(o.find("next call ran") == std::string::npos);
          if (coll != plan::Collective::allreduce)  // small allreduces are not staged
            CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(out_n, -1.0f));
        }
      }
}

TEST_CASE(
    "collectives: reduce-scatter and all-gather blocks over kStagedBlockBytes agree first, small "
    "ones in band") {
  // A count mismatch leaves the communicator usable where the call agreed first (blocks of more
  // than kStagedBlockBytes) and aborts it where it ran in band; neither writes an output.
  const int p = 3;
  const std::size_t big = runtime::kStagedBlockBytes / sizeof(float) + 2;  // n - 1 too
  for (const std::size_t n : {std::size_t{8}, big}) {
    CAPTURE(n);
    AllGather<transport::HostThreads, algo::Ring> ag(small_config(p));
    std::vector<std::vector<float>> out(p, std::vector<float>(p * n, -1.0f));
    const std::vector<float> in(n, 5.0f);
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      float* o = out[static_cast<std::size_t>(r)].data();
      try {
        ag.rank(r).run(in.data(), o, r == 1 ? n - 1 : n, DataType::f32);
        return "no error";
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Mismatch) return e.what();
      }
      if (out[static_cast<std::size_t>(r)] != std::vector<float>(p * n, -1.0f))
        return "the output was written";
      try {
        ag.rank(r).run(in.data(), o, n, DataType::f32);
      } catch (const Error&) {
        return n == big ? "the communicator was aborted" : "";
      }
      return n == big ? "" : "the communicator was not aborted";
    });
    for (const auto& o : outcome) CHECK(o == "");
  }
}

TEST_CASE("collectives: a call that every rank refuses alike leaves the communicator usable") {
  // Small calls run in band, eager ones too: a rank whose own arguments are bad agrees first, so
  // when every rank's are, no steps ran anywhere.
  const int p = 3;
  for (const bool eager : {false, true}) {
    CAPTURE(eager);
    Config c = small_config(p);
    if (eager) c.eager_rooted_bytes = 4096;
    Broadcast<transport::HostThreads, algo::Direct> bc(c);
    AllGather<transport::HostThreads, algo::Ring> ag(c);
    std::vector<float> in(10, 5.0f);
    const auto refused = on_threads(p, [&](int r) -> std::string {
      std::vector<float> out(3 * 10);
      try {
        bc.rank(r).run(in.data(), out.data(), 10, DataType::f32, -1);
        return "broadcast: no error";
      } catch (const Error&) {
      }
      try {
        ag.rank(r).run(nullptr, out.data(), 10, DataType::f32);
        return "all-gather: no error";
      } catch (const Error&) {
      }
      return "";
    });
    for (const auto& o : refused) CHECK(o == "");
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      std::string wrong = check_collective_call<float, ReduceOp::sum>(
          plan::Collective::broadcast, p, r, 10, false, 1,
          [&](const void* s, void* o) { bc.rank(r).run(s, o, 10, DataType::f32, 1); });
      if (!wrong.empty()) return wrong;
      return check_collective_call<float, ReduceOp::sum>(
          plan::Collective::all_gather, p, r, 10, false, 0,
          [&](const void* s, void* o) { ag.rank(r).run(s, o, 10, DataType::f32); });
    });
    for (int r = 0; r < p; ++r) CHECK(outcome[static_cast<std::size_t>(r)] == "");
  }
}

TEST_CASE(
    "collectives: a refused call fails as refused on every rank, a late rank and a different "
    "collective included") {
  // Rank 1's arguments are bad while rank 2 arrives late (after check_peers has found rank 1's
  // refusal and aborted the communicator), or rank 1 calls another collective: every rank throws
  // InvalidArgument, long before the timeout, rank 1 with its own reason, and nobody's output is
  // written; every rank's next call reports the abort (Aborted).
  using namespace std::chrono_literals;
  const int p = 3;
  for (const std::size_t n : {std::size_t{4}, std::size_t{300}})  // through the boxes, and staged
    for (const bool other_collective : {false, true}) {
      CAPTURE(n);
      CAPTURE(other_collective);
      Config c = small_config(p);
      c.timeout = 20000ms;
      Broadcast<transport::HostThreads, algo::Direct> bc(c);
      std::vector<std::vector<float>> out(p, std::vector<float>(n, -1.0f));
      const std::vector<float> in(n, 3.0f);
      const auto t0 = std::chrono::steady_clock::now();
      const auto outcome = on_threads(p, [&](int r) -> std::string {
        if (r == 2) std::this_thread::sleep_for(300ms);
        float* o = out[static_cast<std::size_t>(r)].data();
        try {
          if (r != 1)
            bc.rank(r).run(in.data(), o, n, DataType::f32, 0);
          else if (other_collective)
            bc.executor().run(r, in.data(), o, n, DataType::f32, ReduceOp::sum,
                              runtime::CallShape{plan::Collective::reduce, 0});
          else
            bc.rank(r).run(in.data(), nullptr, n, DataType::f32, 0);
          return "no error";
        } catch (const Error& e) {
          if (e.code() != ErrorCode::InvalidArgument)
            return "code " + std::to_string(int(e.code()));
          std::string first = e.what();
          // The next call, with good arguments: the communicator is aborted, which is what it
          // reports, not the refused call's InvalidArgument.
          try {
            bc.rank(r).run(in.data(), o, n, DataType::f32, 0);
            return first + "; the next call ran";
          } catch (const Error& next) {
            if (next.code() != ErrorCode::Aborted)
              return first + "; the next call: code " + std::to_string(int(next.code()));
          }
          return first;
        }
      });
      CHECK(std::chrono::steady_clock::now() - t0 < 5s);
      for (int r = 0; r < p; ++r) {
        const std::string& o = outcome[static_cast<std::size_t>(r)];
        INFO("rank " << r << ": " << o);
        CHECK(o.find("code ") == std::string::npos);
        CHECK(o.find("next call") == std::string::npos);
        CHECK(o != "no error");
        if (r == 1)
          CHECK(o.find(other_collective ? "a reduce call" : "recvbuff") != std::string::npos);
        CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(n, -1.0f));
      }
    }
}

TEST_CASE("collectives: a topology without the collective's plans is refused when built") {
  try {
    ReduceScatter<transport::HostThreads, algo::Tree> rs(small_config(4));
    FAIL("constructed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK(std::string(e.what()).find("plans no reduce_scatter") != std::string::npos);
  }
}

TEST_CASE("collectives: calls alternate roots and counts; each (count, root) plan is cached") {
  const int p = 6;
  Reduce<transport::HostThreads, algo::Ring> rd(small_config(p));
  const auto outcome = on_threads(p, [&](int rank) -> std::string {
    for (int rep = 0; rep < 3; ++rep)
      for (int root = 0; root < p; ++root)
        for (std::uint64_t n : {5u, 77u}) {
          std::string wrong = check_collective_call<double, ReduceOp::max>(
              plan::Collective::reduce, p, rank, n, rep == 1, root, [&](const void* s, void* o) {
                rd.rank(rank).run(s, o, n, DataType::f64, ReduceOp::max, root);
              });
          if (!wrong.empty()) return wrong;
        }
    return "";
  });
  for (int r = 0; r < p; ++r) CHECK(outcome[static_cast<std::size_t>(r)] == "");
}

namespace {

Config eager_config(int p) {
  Config c = small_config(p);
  c.eager_rooted_bytes = 64u << 10;
  return c;
}

// An eager call is compared at the latest when its rank's pending comparisons fill the control
// plane's descriptors: the call after kMaxUnverifiedCalls more.
constexpr int kCallsToReport = static_cast<int>(runtime::AreaControlPlane::kMaxUnverifiedCalls) + 1;

// Every rank makes up to kCallsToReport calls with its own arguments (call(rank, i)) and returns
// what it threw first: an eager call that disagrees must be reported on every rank by then.
std::vector<std::string> calls_until_error(int p, const std::function<void(int, int)>& call) {
  return on_threads(p, [&](int r) -> std::string {
    for (int i = 0; i < kCallsToReport; ++i) {
      try {
        call(r, i);
      } catch (const Error& e) {
        return std::string(e.code() == ErrorCode::Mismatch ? "Mismatch" : to_string(e.code())) +
               ": " + e.what() + " [call " + std::to_string(i + 1) + "]";
      }
    }
    return "no error";
  });
}

// The call (1, 2, ...) at which calls_until_error()'s rank threw (0: none).
int call_that_threw(const std::string& outcome) {
  const auto at = outcome.rfind(" [call ");
  return at == std::string::npos ? 0 : std::stoi(outcome.substr(at + 7));
}

}  // namespace

TEST_CASE("eager broadcast and reduce: every plan, roots, counts and FIFO depth, many calls") {
  // Roots and leaves run ahead of the others by up to the FIFO's depth (a few calls here).
  for (int p : {1, 2, 3, 4, 5, 8}) {
    Broadcast<transport::HostThreads, algo::Ring> chain(eager_config(p));
    check_every_case(chain, p, {1, 65, 1000}, p == 3);
    Broadcast<transport::HostThreads, algo::DoubleBinaryTree> dbtree(eager_config(p));
    check_every_case(dbtree, p, {1, 65}, false);
    Reduce<transport::HostThreads, algo::Direct> direct(eager_config(p));
    check_every_case(direct, p, {1, 65, 1000}, p == 3);
    Reduce<transport::HostThreads, algo::Tree> tree(eager_config(p));
    check_every_case(tree, p, {1, 65}, false);
  }
  // Calls above the limit agree first, on the same communicator.
  Config c = eager_config(4);
  c.eager_rooted_bytes = 64;
  Reduce<transport::HostThreads, algo::Ring> rd(c);
  const auto outcome = on_threads(4, [&](int rank) -> std::string {
    for (int rep = 0; rep < 20; ++rep)
      for (std::uint64_t n : {3u, 16u, 17u, 200u}) {
        const int root = (rep + static_cast<int>(n)) % 4;
        std::string wrong = check_collective_call<float, ReduceOp::sum>(
            plan::Collective::reduce, 4, rank, n, rep % 2 == 1, root, [&](const void* s, void* o) {
              rd.rank(rank).run(s, o, n, DataType::f32, ReduceOp::sum, root);
            });
        if (!wrong.empty()) return wrong;
      }
    return "";
  });
  for (int r = 0; r < 4; ++r) CHECK(outcome[static_cast<std::size_t>(r)] == "");
}

TEST_CASE(
    "eager broadcast and reduce: a disagreement is reported on every rank within a few calls") {
  const int p = 4;
  SUBCASE("broadcast: counts that differ") {
    Broadcast<transport::HostThreads, algo::Direct> bc(eager_config(p));
    std::vector<std::vector<float>> buf(p, std::vector<float>(16, 1.0f));
    const auto outcome = calls_until_error(p, [&](int r, int) {
      bc.rank(r).run(buf[static_cast<std::size_t>(r)].data(),
                     buf[static_cast<std::size_t>(r)].data(), r == 3 ? 8 : 10, DataType::f32, 0);
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
      CHECK(outcome[static_cast<std::size_t>(r)].find("rank 3") != std::string::npos);
      // These calls fit a fast box: rank 3 compares the root's arguments in its box at call 1
      // and raises the abort, which the others meet at their next call, the root having run at
      // most a ring of boxes ahead (runtime/fast_box.hpp).
      CHECK(call_that_threw(outcome[static_cast<std::size_t>(r)]) >= 1);
      CHECK(call_that_threw(outcome[static_cast<std::size_t>(r)]) <=
            static_cast<int>(runtime::kFastBoxDepth) + 2);
    }
  }
  SUBCASE("broadcast: a rank whose own box matched is told within 64 of its next calls") {
    // Call 1: ranks 0 and 1 name root 0, rank 2 names itself; then every rank names root 1. Rank
    // 1 took rank 0's box, whose arguments are its own, and no rank waits for anyone after call
    // 1: ranks 0 and 2 compare their call 1 when 63 calls are pending (their call 64), and rank
    // 1, which may publish call 65 only once every rank acknowledged call 1, stops there.
    const int q = 3;
    Broadcast<transport::HostThreads, algo::Direct> bc(eager_config(q));
    std::vector<int> threw_at(q, 0);
    on_threads(q, [&](int r) -> std::string {
      std::vector<float> b(2, static_cast<float>(r));
      for (int i = 1; i <= 90; ++i) {
        if (r != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // rank 1 leads
        try {
          bc.rank(r).run(b.data(), b.data(), 2, DataType::f32, i == 1 ? (r == 2 ? 2 : 0) : 1);
        } catch (const Error& e) {
          threw_at[static_cast<std::size_t>(r)] = e.code() == ErrorCode::Mismatch ? i : -i;
          return "";
        }
      }
      return "";
    });
    for (int r = 0; r < q; ++r) {
      INFO("rank " << r << " threw at call " << threw_at[static_cast<std::size_t>(r)]);
      CHECK(threw_at[static_cast<std::size_t>(r)] >= 1);
      CHECK(threw_at[static_cast<std::size_t>(r)] <= kCallsToReport + 1);
    }
  }
  SUBCASE("broadcast: each rank its own root, so both only send; then calls that agree") {
    // Call 1 leaves each rank's box untaken; at call 2 rank 1 finds rank 0's box of call 1.
    const auto outcome = [&] {
      Broadcast<transport::HostThreads, algo::Direct> bc(eager_config(2));
      return calls_until_error(2, [&](int r, int i) {
        std::vector<float> b(2, 1.0f);
        bc.rank(r).run(b.data(), b.data(), 2, DataType::f32, i == 0 ? r : 0);
      });
    }();
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
    }
    CHECK(outcome[1].find("call 1") != std::string::npos);  // the call whose arguments differed
  }
  SUBCASE("reduce: roots that differ, so that no rank waits for a message that comes") {
    Reduce<transport::HostThreads, algo::Direct> rd(eager_config(p));
    std::vector<float> in(10, 1.0f);
    std::vector<std::vector<float>> out(p, std::vector<float>(10, -1.0f));
    const auto outcome = calls_until_error(p, [&](int r, int) {
      rd.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), 10, DataType::f32,
                     ReduceOp::sum, r == 3 ? 1 : 0);
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
    }
  }
  SUBCASE("broadcast: one rank's count above the eager limit, then a retry that agrees") {
    // Rank 1 agrees first and finds the mismatch while the others have sent eagerly: the
    // communicator must be aborted, or rank 1's retry would take the first call's messages.
    // (Counts above a fast box's payload: the plans' eager path.)
    Config c = eager_config(p);
    c.eager_rooted_bytes = 256;
    Broadcast<transport::HostThreads, algo::Direct> bc(c);
    std::vector<std::vector<float>> buf(p, std::vector<float>(100, 1.0f));
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      std::string seen;
      for (int i = 0; i < 2; ++i) {
        try {
          float* b = buf[static_cast<std::size_t>(r)].data();
          bc.rank(r).run(b, b, r == 1 && i == 0 ? 100 : 50, DataType::f32, 0);
          seen += "ok ";
        } catch (const Error& e) {
          seen += e.code() == ErrorCode::Mismatch ? "Mismatch " : "other ";
        }
        // The others have not compared the first call by their second (they compare every few
        // calls); they stop at the abort rank 1 raises.
        if (r != 1 && i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return seen;
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      if (r == 1)
        CHECK(outcome[1] == "Mismatch Mismatch ");
      else
        CHECK(outcome[static_cast<std::size_t>(r)].find("Mismatch") != std::string::npos);
    }
  }
  SUBCASE("broadcast: a root out of range on one rank") {
    Broadcast<transport::HostThreads, algo::Ring> bc(eager_config(p));
    std::vector<float> in(10, 5.0f);
    std::vector<std::vector<float>> out(p, std::vector<float>(10, -1.0f));
    const auto outcome = calls_until_error(p, [&](int r, int) {
      bc.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), 10, DataType::f32,
                     r == 2 ? 7 : 0);
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)] != "no error");
      CHECK(outcome[static_cast<std::size_t>(r)].find("rank 2") != std::string::npos);
    }
  }
}

TEST_CASE("eager broadcast and reduce: a root and a leaf run many calls ahead of the others") {
  // Rank 0 (a broadcast's root, a reduce's leaf) makes all its calls while rank 1 starts late.
  // It returns from kMaxUnverifiedCalls calls before rank 1 has made one (under agreement first,
  // or comparing at the next call, it would wait for rank 1's arguments to its first call), and
  // then waits in the next: its comparisons would otherwise overrun the control plane's
  // descriptors. Its later calls reuse every descriptor while it runs ahead; each call's data
  // must still reach rank 1's call of the same number.
  const int p = 2;
  const int ahead = static_cast<int>(runtime::AreaControlPlane::kMaxUnverifiedCalls);
  const int calls = 3 * static_cast<int>(runtime::kCallDescriptors);
  Config c = eager_config(p);
  c.slot_bytes = 4096;  // one message per call: the FIFO holds rank 0's calls ahead
  c.nslots = static_cast<std::uint32_t>(ahead + 1);
  c.timeout = std::chrono::milliseconds(5000);
  const std::size_t n = 100;
  auto check = [&](auto& coll, auto call) {
    std::atomic<int> returned{0};
    int returned_before_rank1 = -1;
    const auto outcome = on_threads(p, [&](int r) -> std::string {
      if (r == 0) {
        for (int i = 0; i < calls; ++i) {
          call(coll, 0, i);
          returned.store(i + 1);
        }
        return "";
      }
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (returned.load() < ahead)
        if (std::chrono::steady_clock::now() > give_up)
          return "rank 0 returned from " + std::to_string(returned.load()) + " calls alone";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      returned_before_rank1 = returned.load();
      for (int i = 0; i < calls; ++i) call(coll, 1, i);
      return "";
    });
    for (int r = 0; r < p; ++r) CHECK(outcome[static_cast<std::size_t>(r)] == "");
    CHECK(returned_before_rank1 == ahead);
  };
  // buf[r][i]: rank r's buffer of call i.
  std::vector<std::vector<std::vector<float>>> buf(
      p, std::vector<std::vector<float>>(static_cast<std::size_t>(calls)));
  SUBCASE("broadcast from rank 0") {
    Broadcast<transport::HostThreads, algo::Direct> bc(c);
    for (int i = 0; i < calls; ++i) {
      buf[0][static_cast<std::size_t>(i)].assign(n, static_cast<float>(i) + 0.5f);
      buf[1][static_cast<std::size_t>(i)].assign(n, -1.0f);
    }
    check(bc, [&](auto& coll, int r, int i) {
      float* b = buf[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)].data();
      coll.rank(r).run(b, b, n, DataType::f32, 0);
    });
    for (int i = 0; i < calls; ++i)
      CHECK(buf[1][static_cast<std::size_t>(i)] ==
            std::vector<float>(n, static_cast<float>(i) + 0.5f));
  }
  SUBCASE("reduce to rank 1") {
    Reduce<transport::HostThreads, algo::Direct> rd(c);
    for (int i = 0; i < calls; ++i) {
      buf[0][static_cast<std::size_t>(i)].assign(n, static_cast<float>(i));
      buf[1][static_cast<std::size_t>(i)].assign(n, 1.5f);
    }
    check(rd, [&](auto& coll, int r, int i) {
      float* b = buf[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)].data();
      coll.rank(r).run(b, b, n, DataType::f32, ReduceOp::sum, 1);
    });
    for (int i = 0; i < calls; ++i)
      CHECK(buf[1][static_cast<std::size_t>(i)] ==
            std::vector<float>(n, static_cast<float>(i) + 1.5f));
  }
}

TEST_CASE(
    "fast boxes: broadcasts and reduces of at most 96 bytes, P = 2..9, roots, dtypes, many "
    "calls, eager and not") {
  // P <= kFastBoxMaxRanks run through the boxes, P = 9 through its plans; more calls than a ring
  // holds, with roots, counts and in-place changing call by call.
  for (int p = 2; p <= runtime::kFastBoxMaxRanks + 1; ++p)
    for (const bool eager : {true, false}) {
      CAPTURE(p);
      CAPTURE(eager);
      Config c = small_config(p);
      if (eager) c.eager_rooted_bytes = runtime::kFastBoxPayload;
      Broadcast<transport::HostThreads, algo::Direct> bc(c);
      Reduce<transport::HostThreads, algo::Tree> rd(c);
      const auto outcome = on_threads(p, [&](int rank) -> std::string {
        for (int i = 0; i < 2 * static_cast<int>(runtime::kFastBoxDepth) + 3; ++i) {
          const std::uint64_t n = 1 + static_cast<std::uint64_t>(i) % 24;
          const int root = (i / 3) % p;
          const bool in_place = i % 2 == 1;
          std::string wrong = check_collective_call<float, ReduceOp::sum>(
              plan::Collective::broadcast, p, rank, n, in_place, root,
              [&](const void* s, void* o) { bc.rank(rank).run(s, o, n, DataType::f32, root); });
          if (wrong.empty() && i % 4 == 0)
            wrong = check_collective_call<Half, ReduceOp::avg>(
                plan::Collective::reduce, p, rank, 2 * n, in_place, root,
                [&](const void* s, void* o) {
                  rd.rank(rank).run(s, o, 2 * n, DataType::f16, ReduceOp::avg, root);
                });
          else if (wrong.empty() && i % 4 == 1)
            wrong = check_collective_call<std::int64_t, ReduceOp::max>(
                plan::Collective::reduce, p, rank, (n + 1) / 2, in_place, root,
                [&](const void* s, void* o) {
                  rd.rank(rank).run(s, o, (n + 1) / 2, DataType::i64, ReduceOp::max, root);
                });
          else if (wrong.empty())
            wrong = check_collective_call<float, ReduceOp::prod>(
                plan::Collective::reduce, p, rank, n, in_place, root, [&](const void* s, void* o) {
                  rd.rank(rank).run(s, o, n, DataType::f32, ReduceOp::prod, root);
                });
          if (!wrong.empty()) return "call " + std::to_string(i) + ": " + wrong;
        }
        return "";
      });
      for (int r = 0; r < p; ++r) CHECK(outcome[static_cast<std::size_t>(r)] == "");
    }
}

TEST_CASE("fast boxes: only broadcast and reduce communicators of 2 to 8 ranks carry the rings") {
  for (int p = 1; p <= runtime::kFastBoxMaxRanks + 1; ++p) {
    CAPTURE(p);
    const bool rings = p >= 2 && p <= runtime::kFastBoxMaxRanks;
    auto box_bytes = [](auto& coll) {
      return runtime::area_layout(coll.executor().communicator()).box_bytes;
    };
    Broadcast<transport::HostThreads, algo::Direct> bc(small_config(p));
    Reduce<transport::HostThreads, algo::Tree> rd(small_config(p));
    Allreduce<transport::HostThreads, algo::Ring> ar(small_config(p));
    ReduceScatter<transport::HostThreads, algo::Ring> rs(small_config(p));
    AllGather<transport::HostThreads, algo::Ring> ag(small_config(p));
    CHECK((box_bytes(bc) != 0) == rings);
    CHECK((box_bytes(rd) != 0) == rings);
    CHECK(box_bytes(ar) == 0);
    CHECK(box_bytes(rs) == 0);
    CHECK(box_bytes(ag) == 0);
  }
}

TEST_CASE(
    "fast boxes, eager: a receiver with eager calls pending acknowledges no box call past them") {
  // Rank 1 receives three eager broadcasts through the plans (compared later: fewer than
  // kEagerComparePeriod), then one through a box, which it has compared with its own arguments.
  // Its acknowledgement must stay below the oldest pending call: the peers would otherwise reuse
  // that call's descriptors before rank 1 compared it. Rank 1 decides this alone: deterministic.
  const int p = 2;
  Broadcast<transport::HostThreads, algo::Direct> bc(eager_config(p));
  runtime::AreaControlPlane& plane = bc.executor().communicator().control_plane();
  std::uint64_t ack_after_box = ~std::uint64_t{0};
  const auto outcome = on_threads(p, [&](int rank) -> std::string {
    auto call = [&](std::uint64_t n) {
      return check_collective_call<float, ReduceOp::sum>(
          plan::Collective::broadcast, p, rank, n, false, 0,
          [&](const void* s, void* o) { bc.rank(rank).run(s, o, n, DataType::f32, 0); });
    };
    for (int i = 0; i < 3; ++i)
      if (std::string w = call(50); !w.empty()) return "plan call: " + w;  // 200 B
    if (std::string w = call(2); !w.empty()) return "box call: " + w;      // 8 B
    if (rank == 1) ack_after_box = plane.acknowledged(1);
    // A call that is not eager compares everything pending.
    if (std::string w = call(32768); !w.empty()) return "last call: " + w;
    return "";
  });
  CHECK(outcome[0] == "");
  CHECK(outcome[1] == "");
  CHECK(ack_after_box < 1);
  CHECK(plane.acknowledged(1) == 5);
}

TEST_CASE(
    "fast boxes, eager: calls through the boxes after eager calls through the plans, whose "
    "comparison is still pending, keep those calls' descriptors until they are compared") {
  // Three eager calls through the plans stay pending (fewer than kEagerComparePeriod); the box
  // calls after them must not acknowledge past them, or the peers would reuse their descriptors
  // (kCallDescriptors calls later) before this rank compared them (at the latest once
  // max_unverified_calls() calls have passed): it would compare later calls' arguments instead.
  const std::uint64_t plan_n = 50;                // 200 B: eager, through the plans
  const std::uint64_t box_n = 2;                  // 8 B: a fast box
  const std::uint64_t late_n = (128u << 10) / 4;  // 128 KiB: not eager
  const int box_calls = static_cast<int>(runtime::kCallDescriptors) + 16;
  for (int p = 2; p <= 3; ++p)
    for (const bool broadcast : {true, false}) {
      CAPTURE(p);
      CAPTURE(broadcast);
      Broadcast<transport::HostThreads, algo::Direct> bc(eager_config(p));
      Reduce<transport::HostThreads, algo::Tree> rd(eager_config(p));
      const plan::Collective kind =
          broadcast ? plan::Collective::broadcast : plan::Collective::reduce;
      const auto outcome = on_threads(p, [&](int rank) -> std::string {
        auto call = [&](std::uint64_t n, int root) {
          return check_collective_call<float, ReduceOp::sum>(
              kind, p, rank, n, false, root, [&](const void* s, void* o) {
                if (broadcast)
                  bc.rank(rank).run(s, o, n, DataType::f32, root);
                else
                  rd.rank(rank).run(s, o, n, DataType::f32, ReduceOp::sum, root);
              });
        };
        for (int i = 0; i < 3; ++i)
          if (std::string w = call(plan_n, 0); !w.empty()) return "plan call: " + w;
        for (int i = 0; i < box_calls; ++i)
          if (std::string w = call(box_n, i % p); !w.empty())
            return "box call " + std::to_string(i) + ": " + w;
        if (std::string w = call(late_n, 1); !w.empty()) return "last call: " + w;
        return "";
      });
      for (int r = 0; r < p; ++r) CHECK(outcome[static_cast<std::size_t>(r)] == "");
    }
}

TEST_CASE(
    "fast boxes, eager: a disagreement writes no buffer from the message, every rank reports "
    "it") {
  const int p = 4;
  SUBCASE("broadcast: one rank's count differs; it throws at the call and keeps its buffer") {
    Broadcast<transport::HostThreads, algo::Direct> bc(eager_config(p));
    std::vector<float> in(16, 5.0f);
    std::vector<std::vector<float>> out(p, std::vector<float>(16, -1.0f));
    const auto outcome = calls_until_error(p, [&](int r, int) {
      bc.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), r == 3 ? 8 : 10,
                     DataType::f32, 0);
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
      CHECK(outcome[static_cast<std::size_t>(r)].find("rank 3") != std::string::npos);
      // The receiver that differs finds it at the call; the others meet the abort at one of
      // their next calls (a sender may have written a few more boxes by then).
      if (r == 3)
        CHECK(call_that_threw(outcome[3]) == 1);
      else
        CHECK(call_that_threw(outcome[static_cast<std::size_t>(r)]) >= 2);
    }
    CHECK(out[3] == std::vector<float>(16, -1.0f));
  }
  SUBCASE("reduce: the root finds a leaf's datatype differs and writes nothing") {
    Reduce<transport::HostThreads, algo::Direct> rd(eager_config(p));
    std::vector<float> in(16, 1.0f);
    std::vector<std::vector<float>> out(p, std::vector<float>(16, -1.0f));
    const auto outcome = calls_until_error(p, [&](int r, int) {
      rd.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), 4,
                     r == 2 ? DataType::i32 : DataType::f32, ReduceOp::sum, 0);
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
      if (r == 0)
        CHECK(call_that_threw(outcome[0]) == 1);
      else
        CHECK(call_that_threw(outcome[static_cast<std::size_t>(r)]) >= 2);
    }
    CHECK(out[0] == std::vector<float>(16, -1.0f));
  }
  SUBCASE("broadcast: a rank names itself the root; nobody waits, and it is still reported") {
    // Rank 3 sends to every rank and receives nothing; ranks 1 and 2 take rank 0's boxes. Rank
    // 3's boxes (and rank 0's to rank 3) are never taken, so their senders compare descriptors.
    Broadcast<transport::HostThreads, algo::Direct> bc(eager_config(p));
    std::vector<float> in(8, 5.0f);
    std::vector<std::vector<float>> out(p, std::vector<float>(8, -1.0f));
    const auto outcome = calls_until_error(p, [&](int r, int) {
      bc.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), 8, DataType::f32,
                     r == 3 ? 3 : 0);
    });
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
    }
  }
  SUBCASE("reduce, P = 2: each rank names the other the root, so both only send") {
    Reduce<transport::HostThreads, algo::Direct> rd(eager_config(2));
    std::vector<float> in(8, 1.0f);
    std::vector<std::vector<float>> out(2, std::vector<float>(8, -1.0f));
    const auto outcome = calls_until_error(2, [&](int r, int) {
      rd.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), 8, DataType::f32,
                     ReduceOp::sum, 1 - r);
    });
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
      CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(8, -1.0f));
    }
  }
  SUBCASE("broadcast: the root's count needs its plan, a leaf's fits a box") {
    // The two ranks take different paths; the waiting one learns of the disagreement from the
    // descriptors (runtime/area_control_plane.hpp's check_peers), long before its timeout.
    using namespace std::chrono_literals;
    Config c = eager_config(p);
    c.timeout = 20s;
    Broadcast<transport::HostThreads, algo::Direct> bc(c);
    std::vector<float> in(100, 5.0f);
    std::vector<std::vector<float>> out(p, std::vector<float>(100, -1.0f));
    const auto start = std::chrono::steady_clock::now();
    const auto outcome = calls_until_error(p, [&](int r, int) {
      bc.rank(r).run(in.data(), out[static_cast<std::size_t>(r)].data(), r == 0 ? 100 : 10,
                     DataType::f32, 0);
    });
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r << ": " << outcome[static_cast<std::size_t>(r)]);
      CHECK(outcome[static_cast<std::size_t>(r)].rfind("Mismatch", 0) == 0);
      if (r != 0) CHECK(out[static_cast<std::size_t>(r)] == std::vector<float>(100, -1.0f));
    }
  }
}

TEST_CASE(
    "collectives: random sequences of every collective through `auto` cross the boxes, eager "
    "calls, in-band agreement and plans of every size on one set of objects") {
  // CCOLL_TEST_SOAK=N runs N times as many sequences, each with another seed.
  const int soak = ccoll::testing::soak_factor();
  std::uint32_t seed = 1;
  for (int round = 0; round < soak; ++round)
    for (int p : {2, 3, 5})
      for (int variant = 0; variant < 3; ++variant) {
        // Small FIFOs; the defaults with 3 slots; the defaults with eager calls up to 4 KiB.
        Config c = variant == 0 ? small_config(p) : Config{};
        c.nranks = p;
        c.timeout = std::chrono::milliseconds(20000);
        if (variant == 1) c.nslots = 3;
        if (variant == 2) c.eager_rooted_bytes = 4096;
        ccoll::testing::AutoCollectives<transport::HostThreads> colls([&](int) { return c; },
                                                                      false);
        const auto calls = ccoll::testing::random_calls(seed++, p, 40, false);
        const auto outcome =
            on_threads(p, [&](int rank) { return colls.run_sequence(calls, p, rank); });
        for (int r = 0; r < p; ++r) {
          INFO("P=" << p << " variant " << variant << " seed " << seed - 1 << " rank " << r);
          CHECK(outcome[static_cast<std::size_t>(r)] == "");
        }
      }
}
}  // namespace collectives_test
