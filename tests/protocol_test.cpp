// Tests of the low-latency protocol (protocol/low_latency.hpp) beside Simple: the line format;
// every registered algorithm that plans on abstract ranks, P = 2..8, on the host-threads transport
// with Config::protocol "simple" and "ll", bitwise against each other and against the reference,
// in place, unaligned, chunked over several slots; the block path (a simulated thread block) in
// LowLatency; a connection that alternates protocols from call to call; the tuning table's
// "protocol" key and the fingerprint.
#include <doctest/doctest.h>

#include <barrier>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "allreduce_reference.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/algo/tuning_table_json.hpp"
#include "ccoll/ccoll.hpp"
#include "ccoll/protocol/low_latency.hpp"
#include "ccoll/protocol/simple.hpp"
#include "ccoll/transport/cuda/block_tables.hpp"
#include "simulated_block_group.hpp"

namespace protocol_test {
using namespace ccoll;
using namespace std::chrono_literals;

namespace {

using Overlapped = schedule::Pipelined<schedule::Overlap::ReduceBroadcast>;
using Bytes = std::vector<unsigned char>;

// Exact values (tests/allreduce_reference.hpp: every order of folding gives the same bits), or
// arbitrary ones whose sums round, for which only the two protocols' bits are compared.
template <class T>
T input(bool exact, ReduceOp op, int rank, int p, std::uint64_t i) {
  if (exact) return testing::value<T>(op, rank, p, i);
  std::uint64_t h =
      (static_cast<std::uint64_t>(rank) * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull);
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  const int v = static_cast<int>(h % 20001) - 10000;
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
                std::is_floating_point_v<T>)
    return T(static_cast<float>(v) / 37.0f);
  else
    return static_cast<T>(v);
}

template <class T, ReduceOp Op>
T reference(int p, std::uint64_t i) {
  T acc = testing::value<T>(Op, 0, p, i);
  for (int r = 1; r < p; ++r) acc = combine<Op>(acc, testing::value<T>(Op, r, p, i));
  return finalize<Op>(acc, p);
}

struct Case {
  DataType dtype;
  ReduceOp op;
  std::uint64_t count;
  bool in_place;
  bool exact;
};

// The cases of one communicator: every dtype x op for P <= 3, fewer above (keeps it fast); counts
// from 1 to several LL slots (64-byte payload per LL slot below); odd counts run on buffers one
// element past their allocation's alignment.
std::vector<Case> cases(int p) {
  const DataType dtypes[] = {DataType::f32, DataType::f64, DataType::f16, DataType::bf16,
                             DataType::i32};
  std::vector<Case> cs;
  int k = 0;
  for (DataType d : dtypes)
    for (ReduceOp op : kAllReduceOps) {
      if (p > 3 && !((d == DataType::f32 && op == ReduceOp::sum) ||
                     (d == DataType::f16 && op == ReduceOp::avg) ||
                     (d == DataType::i32 && op == ReduceOp::max)))
        continue;
      for (std::uint64_t n : {1, 3, 16, 67, 701}) {
        ++k;
        cs.push_back(Case{d, op, n, k % 3 == 0, true});
        if (op == ReduceOp::sum || op == ReduceOp::avg)
          cs.push_back(Case{d, op, n, k % 2 == 0, false});
      }
    }
  return cs;
}

// Runs every case on P threads; returns, per case, every rank's output bytes; "" or an error.
template <class AR>
std::vector<std::vector<Bytes>> run_cases(AR& ar, int p, const std::vector<Case>& cs,
                                          std::string& error) {
  std::vector<std::vector<Bytes>> outs(cs.size(), std::vector<Bytes>(static_cast<std::size_t>(p)));
  std::vector<std::string> errors(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      try {
        for (std::size_t c = 0; c < cs.size(); ++c) {
          const Case& k = cs[c];
          dispatch_data_type(k.dtype, [&](auto t) {
            using T = decltype(t);
            const std::size_t shift = k.count % 2;  // odd counts: misaligned buffers
            std::vector<T> in(k.count + 1), out(k.count + 1, T{});
            for (std::uint64_t i = 0; i < k.count; ++i)
              in[shift + i] = input<T>(k.exact, k.op, r, p, i);
            T* o = out.data() + shift;
            if (k.in_place) std::memcpy(o, in.data() + shift, k.count * sizeof(T));
            ar.rank(r).run(k.in_place ? o : in.data() + shift, o, k.count, k.dtype, k.op);
            Bytes& b = outs[c][static_cast<std::size_t>(r)];
            b.resize(k.count * sizeof(T));
            std::memcpy(b.data(), o, b.size());
          });
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) error = e;
  return outs;
}

// "" or which element of which case differs from the reference.
std::string check_reference(const std::vector<Case>& cs,
                            const std::vector<std::vector<Bytes>>& outs, int p) {
  for (std::size_t c = 0; c < cs.size(); ++c) {
    const Case& k = cs[c];
    if (!k.exact) continue;
    std::string wrong;
    dispatch_data_type(k.dtype, [&](auto t) {
      using T = decltype(t);
      dispatch_reduce_op(k.op, [&](auto o) {
        constexpr ReduceOp kOp = decltype(o)::value;
        for (int r = 0; r < p && wrong.empty(); ++r)
          for (std::uint64_t i = 0; i < k.count && wrong.empty(); ++i) {
            T got;
            std::memcpy(&got, outs[c][static_cast<std::size_t>(r)].data() + i * sizeof(T),
                        sizeof(T));
            const T ref = reference<T, kOp>(p, i);
            if (std::bit_cast<testing::Bytes<T>>(got) != std::bit_cast<testing::Bytes<T>>(ref))
              wrong = "rank " + std::to_string(r) + " element " + std::to_string(i);
          }
      });
    });
    if (!wrong.empty())
      return std::string(to_string(k.dtype)) + " " + std::string(to_string(k.op)) +
             " n=" + std::to_string(k.count) + ": " + wrong;
  }
  return "";
}

Config thread_config(int p, const char* protocol) {
  Config c;
  c.nranks = p;
  c.slot_bytes = 128;  // LL: 56 payload bytes per slot, so larger counts take several slots
  c.nslots = 2;
  c.timeout = 20s;
  c.protocol = protocol;
  return c;
}

template <class S>
std::string compare_protocols(const algo::AlgorithmSpec& spec, int p) {
  algo::AlgorithmRequest req;
  req.nranks = p;
  const std::vector<Case> cs = cases(p);
  std::vector<std::vector<Bytes>> results[2];
  const char* protocols[2] = {"simple", "ll"};
  plan::Plan plans[2];
  for (int k = 0; k < 2; ++k) {
    // Simple with half the slot bytes and LL with 16 more (its trailer's lines): the same payload
    // per slot, hence the same plans (chunk boundaries decide fold orders), so only the protocol
    // differs.
    Config c = thread_config(p, protocols[k]);
    c.slot_bytes = k == 0 ? c.slot_bytes / 2 : c.slot_bytes + 16;
    Allreduce<transport::HostThreads, algo::Registered, S> ar(
        c, algo::make_algorithm(spec.algorithm, req));
    std::string error;
    results[k] = run_cases(ar, p, cs, error);
    if (!error.empty()) return std::string(protocols[k]) + ": " + error;
    const std::string wrong = check_reference(cs, results[k], p);
    if (!wrong.empty()) return std::string(protocols[k]) + " vs reference: " + wrong;
    // LL plans are named so; their chunks fit half a slot.
    plans[k] = ar.plan(701, DataType::f32);
    if (protocol::is_low_latency(plans[k]) != (k == 1))
      return "plan " + plans[k].algorithm + " misnamed";
  }
  if (plans[0].ports.size() != plans[1].ports.size() || plans[0].slot_elems != plans[1].slot_elems)
    return "the two protocols ran different plans";
  for (std::size_t c = 0; c < cs.size(); ++c)
    for (int r = 0; r < p; ++r)
      if (results[0][c][static_cast<std::size_t>(r)] != results[1][c][static_cast<std::size_t>(r)])
        return "ll differs from simple: " + std::string(to_string(cs[c].dtype)) + " " +
               std::string(to_string(cs[c].op)) + " n=" + std::to_string(cs[c].count) + " rank " +
               std::to_string(r);
  return "";
}

}  // namespace

TEST_CASE("LL line format: flags never 0, one line per 4 bytes, torn-free round trip") {
  using LL = protocol::LowLatency;
  CHECK(LL::flag(0) == 1);
  CHECK(LL::flag(0xfffffffeull) == 0xffffffffu);
  CHECK(LL::flag(0xffffffffull) == 1);  // wraps past 2^32 - 1 messages, never to 0
  CHECK(LL::data_lines(0) == 0);
  CHECK(LL::lines(0) == 2);  // an empty message is its trailer: it still announces itself
  CHECK(LL::lines(4) == 3);
  CHECK(LL::lines(5) == 4);
  CHECK(protocol::payload_bytes(protocol::Id::low_latency, 1024) == 504);
  CHECK(protocol::payload_bytes(protocol::Id::low_latency, 32) == 8);
  CHECK(protocol::payload_bytes(protocol::Id::low_latency, 16) == 0);  // no room for a trailer
  CHECK(protocol::Simple::payload(1024) == 1024);
  alignas(8) std::uint64_t line = 0;
  std::uint32_t data = 0;
  CHECK_FALSE(LL::load<sync::Scope::system>(&line, LL::flag(0), &data, true));
  LL::store<sync::Scope::system>(&line, 0xdeadbeefu, LL::flag(41), true);
  CHECK(line == ((std::uint64_t{42} << 32) | 0xdeadbeefu));
  CHECK(LL::load<sync::Scope::system>(&line, LL::flag(41), &data, true));
  CHECK(data == 0xdeadbeefu);
  CHECK_FALSE(LL::load<sync::Scope::system>(&line, LL::flag(42), &data, false));
  // Waits end at the deadline or on an abort, never hang.
  CHECK(LL::wait<sync::Scope::system>(&line, LL::flag(42), &data, true, nullptr,
                                      sync::now_ns() + 2'000'000) == sync::WaitResult::Timeout);
  std::uint32_t abort_word = 1;
  CHECK(LL::wait<sync::Scope::system>(&line, LL::flag(42), &data, true, &abort_word, 0) ==
        sync::WaitResult::Aborted);
}

TEST_CASE("LL trailer: a message arrives only with its flag and the receiver's signature") {
  using LL = protocol::LowLatency;
  constexpr auto S = sync::Scope::system;
  const std::uint64_t sig = LL::signature(1000, static_cast<std::uint32_t>(DataType::f32),
                                          static_cast<std::uint32_t>(ReduceOp::sum));
  // Every field counts: another count, datatype or op is another signature.
  CHECK(sig != LL::signature(1001, static_cast<std::uint32_t>(DataType::f32),
                             static_cast<std::uint32_t>(ReduceOp::sum)));
  CHECK(sig != LL::signature(1000, static_cast<std::uint32_t>(DataType::f64),
                             static_cast<std::uint32_t>(ReduceOp::sum)));
  CHECK(sig != LL::signature(1000, static_cast<std::uint32_t>(DataType::f32),
                             static_cast<std::uint32_t>(ReduceOp::max)));
  CHECK(sig != LL::signature(1000 + (std::uint64_t{1} << 32),
                             static_cast<std::uint32_t>(DataType::f32),
                             static_cast<std::uint32_t>(ReduceOp::sum)));
  for (const bool packed : {false, true}) {
    for (const std::uint64_t bytes : {0ull, 3ull, 4ull, 12ull}) {
      CAPTURE(packed);
      CAPTURE(bytes);
      alignas(8) std::uint64_t lines[8] = {};
      std::uint64_t* t = LL::trailer(lines, packed, bytes);
      const std::uint32_t f = LL::flag(7);
      CHECK_FALSE(LL::arrived<S>(t, sig, f));
      // The trailer of a call with other arguments: the flag is there, the message is not.
      LL::store_trailer<S>(t, sig ^ 1, f, true);
      CHECK_FALSE(LL::arrived<S>(t, sig, f));
      CHECK(LL::wait_arrival<S>(t, sig, f, nullptr, sync::now_ns() + 1'000'000) ==
            sync::WaitResult::Timeout);
      // An earlier message's trailer (its flag) is not this one either.
      LL::store_trailer<S>(t, sig, LL::flag(3), true);
      CHECK_FALSE(LL::arrived<S>(t, sig, f));
      LL::store_trailer<S>(t, sig, f, true);
      CHECK(LL::arrived<S>(t, sig, f));
      CHECK(LL::wait_arrival<S>(t, sig, f, nullptr, 0) == sync::WaitResult::Ok);
      if (packed) {
        // Packed: the trailer opens the slot and the payload follows it.
        CHECK(t == lines);
        CHECK(LL::kPackedPayloadOffset == 2 * sizeof(std::uint64_t));
      } else {
        // Flagged lines: the trailer follows the data lines and the lines after it are untouched.
        CHECK(t == lines + LL::data_lines(bytes));
        CHECK(lines[LL::data_lines(bytes) + 2] == 0);
        if (bytes > 0) CHECK(lines[0] == 0);
      }
    }
  }
}

TEST_CASE("LL packed: an earlier message's payload is never taken for a trailer") {
  // A slot's trailer lines only ever hold trailers: a longer message's payload that spells out the
  // next message's trailer, signature and flag included, lies after them.
  using LL = protocol::LowLatency;
  constexpr auto S = sync::Scope::system;
  const std::uint64_t sig = LL::signature(4, static_cast<std::uint32_t>(DataType::i32),
                                          static_cast<std::uint32_t>(ReduceOp::sum));
  alignas(64) std::uint64_t slot[16] = {};
  const std::uint32_t earlier = LL::flag(10), next = LL::flag(14);  // nslots = 4 apart
  // Message 10: 64 bytes of payload, every word the trailer message 14 would carry.
  for (std::uint64_t i = 0; i < 8; ++i)
    slot[LL::kPackedPayloadOffset / 8 + i] =
        LL::line(static_cast<std::uint32_t>(i % 2 == 0 ? sig : sig >> 32), next);
  LL::store_trailer<S>(slot, LL::signature(16, 3, 0), earlier, true);
  // Message 14 (4 i32): the trailer is looked for at the slot's start, whatever the sizes.
  CHECK_FALSE(LL::arrived<S>(LL::trailer(slot, true, 16), sig, next));
  // A trailer after the payload, as in the flagged encoding, would have been found in it.
  CHECK(LL::arrived<S>(LL::trailer(slot, false, 16), sig, next));
  LL::store_trailer<S>(LL::trailer(slot, true, 16), sig, next, true);
  CHECK(LL::arrived<S>(LL::trailer(slot, true, 16), sig, next));
}

TEST_CASE("threads: every algorithm x both protocols x P = 2..8: LL bitwise equal to Simple") {
  for (const algo::Algorithm& a : algo::algorithms()) {
    // `auto` chooses the protocol per size itself, so forcing one changes its plans' chunking; the
    // algorithms it chooses among are compared here one by one, and its mix of protocols is
    // tested below ("threads auto").
    if (a.needs_topology || a.name == "auto") continue;
    const algo::AlgorithmSpec spec = algo::find_algorithm(a.name);
    for (int p = 2; p <= 8; ++p) {
      if (p > 4 && p != 8 && p != 7) continue;  // 2, 3, 4, 7, 8: powers of two and not
      INFO("algorithm " << a.name << " P=" << p);
      const std::string wrong = spec.overlap ? compare_protocols<Overlapped>(spec, p)
                                             : compare_protocols<schedule::Phased>(spec, p);
      CHECK(wrong == "");
    }
  }
}

TEST_CASE("threads LL: no tail counter is written; heads advance; LL slots are separate") {
  Allreduce<transport::HostThreads, algo::OneShot> ar(thread_config(3, "ll"));
  std::vector<float> out[3];
  std::vector<std::thread> threads;
  threads.reserve(3);
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> in(40, static_cast<float>(r + 1));
      out[r].assign(40, 0.0f);
      for (int call = 0; call < 5; ++call)
        ar.rank(r).run(in.data(), out[r].data(), in.size(), DataType::f32, ReduceOp::sum);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r)
    for (float v : out[r]) REQUIRE(v == 6.0f);
  const auto pp = ar.executor().communicator().prepared_plan(40, 4);
  REQUIRE_FALSE(pp->connections.empty());
  for (const sync::ConnectionRef& c : pp->connections) {
    CHECK(c.has_low_latency());
    CHECK(c.ll_slots != c.slots);
    CHECK(c.ll_slot_bytes == c.slot_bytes);  // a host area's LL slots are as large as its slots
    CHECK(*c.tail == 0);                     // LowLatency signals arrival through the lines only
    CHECK(*c.head > 0);                      // ... and frees slots as Simple does
  }
}

TEST_CASE("threads LL packed: non-temporal slot and output stores, then the trailer") {
  // Calls checked before their steps may stream their slots (Config::stream_slot_bytes): the
  // payload then goes out with non-temporal stores, which the trailer's release must follow.
  for (const char* name : {"oneshot", "ring"}) {
    for (int p : {2, 3}) {
      INFO(name << " P=" << p);
      Config c = thread_config(p, "ll");
      c.in_band_agreement_bytes = 0;
      c.stream_slot_bytes = 16;
      c.stream_output_bytes = 16;
      c.tune_slot_stores = false;  // every call streams
      algo::AlgorithmRequest req;
      req.nranks = p;
      Allreduce<transport::HostThreads, algo::Registered, schedule::Phased> ar(
          c, algo::make_algorithm(algo::find_algorithm(name).algorithm, req));
      std::string error;
      const std::vector<Case> cs = cases(p);
      const auto outs = run_cases(ar, p, cs, error);
      CHECK(error == "");
      CHECK(check_reference(cs, outs, p) == "");
      CHECK(protocol::is_low_latency(ar.plan(701, DataType::f32)));
    }
  }
}

TEST_CASE("LL plans whose messages exceed an LL slot's payload are refused") {
  // A plan named LowLatency but chunked for whole slots would write past its LL slot.
  Config c = thread_config(2, "");
  algo::AlgorithmRequest req;
  req.nranks = 2;
  const algo::Registered ring = algo::make_algorithm(algo::find_algorithm("ring").algorithm, req);
  const algo::Registered oversized("ring+ll", [ring](const plan::PlanRequest& r) {
    plan::Plan pl = ring.build(r);
    protocol::mark(pl, protocol::Id::low_latency);
    return pl;
  });
  Allreduce<transport::HostThreads, algo::Registered, schedule::Phased> ar(c, oversized);
  CHECK_THROWS_WITH_AS(ar.plan(1000, DataType::f32), doctest::Contains("LowLatency messages of"),
                       Error);
}

TEST_CASE("threads auto: a table mixing protocols per size; connections alternate protocols") {
  // LL for small messages, Simple above: the same connections carry both from call to call, and
  // integer payloads that look like flags must never be taken for LL lines.
  const algo::TuningTable table = algo::tuning_table_from_json(R"({"rules": [
    {"algorithm": "oneshot", "max_bytes": 256, "protocol": "ll"},
    {"algorithm": "oneshot"}]})");
  const algo::BySize policy(table);
  for (int p : {2, 3}) {
    Config c = thread_config(p, "");
    c.slot_bytes = 1024;
    Allreduce<transport::HostThreads, algo::BySize> ar(c, policy);
    CHECK(protocol::is_low_latency(ar.plan(64, DataType::i32)));
    CHECK_FALSE(protocol::is_low_latency(ar.plan(65, DataType::i32)));
    std::vector<std::string> wrong(static_cast<std::size_t>(p));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r)
      threads.emplace_back([&, r] {
        for (int call = 0; call < 40; ++call) {
          const std::size_t n = call % 2 == 0 ? 200 : 1 + static_cast<std::size_t>(call) % 64;
          // Small integers: the message numbers of these connections (the LL flags) among them.
          std::vector<std::int32_t> in(n), out(n, -1);
          for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::int32_t>((i + call) % 50);
          ar.rank(r).run(in.data(), out.data(), n, DataType::i32, ReduceOp::sum);
          for (std::size_t i = 0; i < n; ++i)
            if (out[i] != p * static_cast<std::int32_t>((i + call) % 50))
              wrong[static_cast<std::size_t>(r)] =
                  "call " + std::to_string(call) + " element " + std::to_string(i);
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& w : wrong) CHECK(w == "");
  }
}

TEST_CASE("tuning table: the protocol key, its errors, and the digest") {
  const algo::TuningTable t = algo::tuning_table_from_json(R"({"rules": [
    {"algorithm": "oneshot", "max_bytes": 1024, "protocol": "ll"},
    {"algorithm": "direct", "protocol": "simple"}]})");
  REQUIRE(t.rules.size() == 2);
  CHECK(t.rules[0].protocol == protocol::Id::low_latency);
  CHECK(t.rules[1].protocol == protocol::Id::simple);
  auto error_of = [](const std::string& json) {
    try {
      (void)algo::tuning_table_from_json(json);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string bad = error_of(
      R"({"rules": [{"algorithm": "oneshot"}, {"algorithm": "direct", "protocol": "ll128"}]})");
  CHECK(bad.find("tuning.rules[1].protocol") != std::string::npos);
  CHECK(bad.find("ll128") != std::string::npos);
  CHECK(error_of(R"({"rules": [{"algorithm": "direct", "protocol": 1}]})")
            .find("tuning.rules[0].protocol") != std::string::npos);
  // The protocol is part of the table's digest, hence of the policy's name and the fingerprint.
  algo::TuningTable simple_twin = t;
  simple_twin.rules[0].protocol = protocol::Id::simple;
  const algo::BySize with_ll(t), without(simple_twin);
  CHECK(with_ll.name != without.name);
  // A LowLatency rule's plan is named so and chunked for half slots.
  plan::PlanRequest req;
  req.nranks = 4;
  req.count = 256;
  req.elem_size = 4;
  req.slot_bytes = 256;
  const plan::Plan pl = with_ll.build(req);
  CHECK(pl.algorithm == "oneshot+ll");
  CHECK(pl.slot_elems * 4 <= 128);
  CHECK_FALSE(protocol::is_low_latency(without.build(req)));
}

TEST_CASE("Config::protocol: forced, named in the fingerprint, bad values refused") {
  const auto fingerprint = [](const char* protocol) {
    Allreduce<transport::HostThreads, algo::Ring> ar(thread_config(2, protocol));
    return ar.executor().communicator().fingerprint();
  };
  const std::uint64_t none = fingerprint(""), simple = fingerprint("simple"),
                      ll = fingerprint("ll");
  CHECK(ll != simple);
  CHECK(ll != none);
  try {
    Allreduce<transport::HostThreads, algo::Ring> ar(thread_config(2, "fast"));
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("Config::protocol") != std::string::npos);
  }
  // "simple" overrides a table's LL rule; "ll" forces any algorithm into LL.
  const algo::BySize all_ll(
      algo::tuning_table_from_json(R"({"rules": [{"algorithm": "oneshot", "protocol": "ll"}]})"));
  Allreduce<transport::HostThreads, algo::BySize> forced_simple(thread_config(2, "simple"), all_ll);
  CHECK_FALSE(protocol::is_low_latency(forced_simple.plan(10, DataType::f32)));
  Allreduce<transport::HostThreads, algo::Ring> forced_ll(thread_config(2, "ll"));
  const plan::Plan ring = forced_ll.plan(1000, DataType::f32);
  CHECK(ring.algorithm == "ring+ll");
  CHECK(ring.slot_elems * 4 <= 64);
  // One rank: no connections, the step only copies.
  Allreduce<transport::HostThreads, algo::Ring> one(thread_config(1, "ll"));
  const std::vector<double> in = {1.5, -2.0, 3.25, 7.0, 0.5};
  std::vector<double> out(in.size(), 0.0);
  one.rank(0).run(in.data(), out.data(), in.size(), DataType::f64, ReduceOp::sum);
  CHECK(out == in);
  // `ll` over a table that already chose LL keeps its plan (chunked once for half slots, less the
  // trailer: 128 / 2 - 8 bytes).
  Allreduce<transport::HostThreads, algo::BySize> ll_twice(thread_config(2, "ll"), all_ll);
  CHECK(ll_twice.plan(1000, DataType::f32).slot_elems * 4 == 56);
}

// A simulated block that runs LowLatency steps only, as the GPU's LowLatency kernels do
// (transport/cuda/block_group.cuh, LowLatencyBlockGroup): no Simple path is compiled.
struct LowLatencyOnlyGroup : testing::SimulatedBlockGroup {
  using testing::SimulatedBlockGroup::SimulatedBlockGroup;
  static constexpr bool kRunsSimple = false;
};
static_assert(!runtime::kRunsSimple<LowLatencyOnlyGroup>);
static_assert(runtime::kFlaggedLowLatency<LowLatencyOnlyGroup, sync::ConnectionRef>);

TEST_CASE("block groups run LowLatency steps: simulated blocks of 1..8 threads, bitwise") {
  // The GPU's data path on the host: a block's members poll and write lines in parallel, from the
  // operands their leader resolved. Both groups: one that runs either protocol as the context
  // says, on LL slots as large as Simple ones (the host areas), and one that runs only
  // LowLatency, on LL slots sized to the plan's largest message (a GPU plan's).
  for (const bool only_ll : {false, true})
    for (const char* name : {"ring", "oneshot", "recdoubling", "dbtree", "tree", "direct"}) {
      for (int p : {2, 3, 5, 8}) {
        algo::AlgorithmRequest areq;
        areq.nranks = p;
        const algo::Registered topo =
            algo::make_algorithm(algo::find_algorithm(name).algorithm, areq);
        for (std::uint64_t n : {1, 7, 300}) {
          plan::PlanRequest req;
          req.nranks = p;
          req.count = n;
          req.elem_size = 2;
          req.slot_bytes = 256;
          req.nslots = 2;
          const plan::Plan pl =
              protocol::build_for(protocol::Id::low_latency, req, [&](plan::PlanRequest r) {
                schedule::Phased::configure(r);
                return topo.build(r);
              });
          plan::verify_or_throw(pl);
          const std::size_t nconn = pl.connections.size();
          const std::uint64_t ll_slot =
              only_ll ? transport::cuda::low_latency_slot_bytes(pl, 2) : 256;
          REQUIRE(ll_slot <= 256);
          REQUIRE(ll_slot % 16 == 0);
          std::vector<std::uint64_t> ll(nconn * pl.nslots * ll_slot / 8 + 1, 0);
          std::vector<sync::ConnectionCounters> counters(nconn);
          std::vector<sync::ConnectionRef> refs(nconn);
          for (std::size_t i = 0; i < nconn; ++i) {
            counters[i].tail = counters[i].head = 0;
            refs[i].slots = nullptr;  // LowLatency never touches the Simple slots
            refs[i].ll_slots =
                reinterpret_cast<std::byte*>(ll.data() + i * pl.nslots * ll_slot / 8);
            refs[i].tail = &counters[i].tail;
            refs[i].head = &counters[i].head;
            refs[i].slot_bytes = 256;
            refs[i].ll_slot_bytes = ll_slot;
            refs[i].nslots = pl.nslots;
            refs[i].from = pl.connections[i].from;
            refs[i].to = pl.connections[i].to;
          }
          const std::vector<std::uint64_t> base(nconn + 1, 0);
          std::vector<std::vector<Half>> in(static_cast<std::size_t>(p)), out(in.size());
          for (int r = 0; r < p; ++r) {
            for (std::uint64_t i = 0; i < n; ++i)
              in[static_cast<std::size_t>(r)].push_back(
                  testing::value<Half>(ReduceOp::sum, r, p, i));
            out[static_cast<std::size_t>(r)].assign(n, Half(-1.0f));
          }
          std::uint32_t abort_word = 0;
          for (std::uint32_t threads_per_block : {1u, 3u, 8u}) {
            std::vector<runtime::ProgramContext<Half>> ctxs;
            for (std::uint32_t c = 0; c < pl.channels.size(); ++c)
              for (int r = 0; r < p; ++r) {
                const auto& steps = pl.channels[c].programs[static_cast<std::size_t>(r)].steps;
                if (steps.empty()) continue;
                runtime::ProgramContext<Half> ctx;
                ctx.steps = steps.data();
                ctx.nsteps = static_cast<std::uint32_t>(steps.size());
                ctx.ports = pl.ports.data();
                ctx.connections = refs.data();
                ctx.base = base.data();
                ctx.input = in[static_cast<std::size_t>(r)].data();
                ctx.output = out[static_cast<std::size_t>(r)].data();
                ctx.nactive = p;
                ctx.rank = r;
                ctx.channel = c;
                ctx.abort = &abort_word;
                // The LowLatency-only group ignores the flag: it has no other path.
                ctx.low_latency = !only_ll;
                ctxs.push_back(ctx);
              }
            const std::uint64_t deadline = sync::now_ns() + 20'000'000'000ull;
            std::vector<int> ok(ctxs.size(), 0);
            std::vector<std::unique_ptr<testing::SimulatedBlock>> blocks;
            std::vector<std::thread> threads;
            for (std::size_t b = 0; b < ctxs.size(); ++b) {
              blocks.push_back(std::make_unique<testing::SimulatedBlock>(threads_per_block));
              testing::SimulatedBlock& block = *blocks.back();
              for (std::uint32_t i = 0; i < threads_per_block; ++i)
                threads.emplace_back([&, b, i] {
                  bool done = false;
                  if (only_ll) {
                    const LowLatencyOnlyGroup g(block, i);
                    done = runtime::run_program<Half, ReduceOp::sum>(g, ctxs[b], deadline, nullptr);
                  } else {
                    const testing::SimulatedBlockGroup g(block, i);
                    done = runtime::run_program<Half, ReduceOp::sum>(g, ctxs[b], deadline, nullptr);
                  }
                  if (i == 0) ok[b] = done ? 1 : 0;
                });
            }
            for (auto& t : threads) t.join();
            INFO(name << " P=" << p << " n=" << n << " threads=" << threads_per_block
                      << " only_ll=" << only_ll);
            for (int x : ok) REQUIRE(x == 1);
            for (int r = 0; r < p; ++r)
              for (std::uint64_t i = 0; i < n; ++i) {
                const Half ref = reference<Half, ReduceOp::sum>(p, i);
                REQUIRE(std::bit_cast<std::uint16_t>(out[static_cast<std::size_t>(r)][i]) ==
                        std::bit_cast<std::uint16_t>(ref));
              }
            // Nothing was written outside the LL slots, and none of them was a Simple slot.
            CHECK(ll.back() == 0);
            // Each block size starts from fresh connections.
            for (auto& c : counters) c.tail = c.head = 0;
            std::fill(ll.begin(), ll.end(), 0);
            for (auto& o : out) std::fill(o.begin(), o.end(), Half(-1.0f));
          }
        }
      }
    }
}

TEST_CASE(
    "block groups, LowLatency: a member's missing line fails the whole block at the deadline") {
  // One step: receive 64 floats on one connection, add the input, write the output. The message's
  // trailer has arrived but only member 0's lines have: members 1..3 give up at the deadline, and
  // the block must fail as one, through any() from the members' own verdicts (the leader itself
  // had everything it read).
  using LL = protocol::LowLatency;
  constexpr std::uint64_t n = 64;
  constexpr std::uint32_t threads = 4;
  plan::Step step;
  step.offset = 0;
  step.count = n;
  step.recv_begin = 0;
  step.recv_count = 1;
  step.src = plan::Source::Input;
  step.src_position = 1;
  step.write_output = true;
  step.final = true;
  const std::vector<plan::Port> ports = {plan::Port{0, 0}};
  std::vector<std::uint64_t> lines(LL::lines(n * sizeof(float)) + 2, 0);
  sync::ConnectionCounters counters{};
  sync::ConnectionRef c;
  c.ll_slots = reinterpret_cast<std::byte*>(lines.data());
  c.ll_slot_bytes = lines.size() * 8;
  c.tail = &counters.tail;
  c.head = &counters.head;
  c.nslots = 1;
  c.from = 1;
  c.to = 0;
  const std::uint64_t signature = LL::signature(n, 0, 0);
  const std::uint32_t flag = LL::flag(0);
  LL::store_trailer<sync::Scope::system>(LL::trailer(lines.data(), false, n * sizeof(float)),
                                         signature, flag, true);
  for (std::uint64_t u = 0; u < n; u += threads)  // member 0's units
    LL::store<sync::Scope::system>(lines.data() + u, std::bit_cast<std::uint32_t>(1.0f), flag,
                                   false);
  const std::uint64_t base = 0;
  const std::vector<float> in(n, 2.0f);
  std::vector<float> out(n, -1.0f);
  std::uint32_t abort_word = 0;
  runtime::ProgramContext<float> ctx;
  ctx.steps = &step;
  ctx.nsteps = 1;
  ctx.ports = ports.data();
  ctx.connections = &c;
  ctx.base = &base;
  ctx.input = in.data();
  ctx.output = out.data();
  ctx.nactive = 2;
  ctx.abort = &abort_word;
  ctx.low_latency = true;
  ctx.ll_signature = signature;
  for (const bool only_ll : {false, true}) {
    CAPTURE(only_ll);
    testing::SimulatedBlock block(threads);
    std::vector<int> done(threads, -1);
    runtime::StepFailure failure;
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t deadline = sync::now_ns() + 100'000'000ull;  // 100 ms
    std::vector<std::thread> members;
    for (std::uint32_t i = 0; i < threads; ++i)
      members.emplace_back([&, i] {
        bool ok = false;
        if (only_ll) {
          const LowLatencyOnlyGroup g(block, i);
          ok = runtime::run_program<float, ReduceOp::sum>(g, ctx, deadline, &failure);
        } else {
          const testing::SimulatedBlockGroup g(block, i);
          ok = runtime::run_program<float, ReduceOp::sum>(g, ctx, deadline, &failure);
        }
        done[i] = ok ? 1 : 0;
      });
    for (auto& m : members) m.join();
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (std::uint32_t i = 0; i < threads; ++i) CHECK(done[i] == 0);  // every member failed
    CHECK(failure.result == sync::WaitResult::Timeout);
    CHECK(failure.peer == 1);  // the sender of the message that did not come
    CHECK(waited >= 0.09);
    CHECK(counters.head == 0);  // the slot was not freed
  }
}
}  // namespace protocol_test
