// Tests of the step interpreter's block data path (runtime/block_loops.hpp) on a host model of a
// thread block (simulated_block_group.hpp): the pack split as a property over alignments and
// counts, the element loops of every shape against the one-thread host path, float accumulation
// of 16-bit floats, and whole plans (ring, double binary tree, one-shot, recursive doubling, a star
// tree, relays from a physical topology) run with k-thread blocks per program, compared bit for bit
// with the same plans run one host thread per program and with the exact reference. Then every
// collective's plans, run on the buffers CudaVirtualRanks hands its kernel
// (transport/cuda/call_buffers.hpp), against the collectives' reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "allreduce_reference.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/plan/all_gather.hpp"
#include "ccoll/plan/double_binary_tree.hpp"
#include "ccoll/plan/one_shot.hpp"
#include "ccoll/plan/plan.hpp"
#include "ccoll/plan/recursive_doubling.hpp"
#include "ccoll/plan/reduce_scatter.hpp"
#include "ccoll/plan/ring.hpp"
#include "ccoll/plan/rooted.hpp"
#include "ccoll/plan/rooted_trees.hpp"
#include "ccoll/plan/tree.hpp"
#include "ccoll/plan/verifier.hpp"
#include "ccoll/runtime/interpreter.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/connection.hpp"
#include "ccoll/transport/cuda/call_buffers.hpp"
#include "collective_reference.hpp"
#include "simulated_block_group.hpp"
#include "sweep.hpp"

namespace block_group_test {
using namespace ccoll;
using testing::SimulatedBlock;
using testing::SimulatedBlockGroup;

namespace {

constexpr std::uint32_t kBlockSizes[] = {1, 3, 4, 32};

// A buffer of n elements starting `shift` elements past a 16-byte boundary.
template <class T>
struct Buffer {
  std::vector<T> storage;
  T* data = nullptr;
  Buffer(std::uint64_t n, std::uint64_t shift, T fill)
      : storage(n + shift + 16 / sizeof(T) + 1, fill) {
    const auto mis = reinterpret_cast<std::uintptr_t>(storage.data()) & 15u;
    data = storage.data() + (16 - mis) % 16 / sizeof(T) + shift;
  }
};

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::bit_cast<testing::Bytes<T>>(a) == std::bit_cast<testing::Bytes<T>>(b);
}

// Values whose sums, products and averages are exact in every dtype (tests/allreduce_reference.hpp)
// or, with `exact` false, arbitrary ones, for which only the bits of the two paths are compared.
template <class T>
T input_value(bool exact, ReduceOp op, int rank, int p, std::uint64_t i, std::mt19937& rng) {
  if (exact) return testing::value<T>(op, rank, p, i);
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
                std::is_floating_point_v<T>) {
    const float f = static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 64.0f;
    return T(f);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int>(rng() % 2000001) - 1000000);
  } else {
    return static_cast<T>(rng());
  }
}

// ---- Whole plans ----

// Connection memory as an executor lays it out: slots on 128-byte lines, counters on their own.
struct alignas(128) Line {
  std::byte bytes[128];
};

// Every (rank, channel) program of `p` run concurrently: with `block_threads` == 0 one HostGroup
// thread per program, else one simulated block of that many threads per program. Returns the
// scalar elements and packs the blocks moved.
struct RunTotals {
  std::uint64_t scalar_elems = 0;
  std::uint64_t packs = 0;
};

template <class T, ReduceOp Op>
RunTotals run_plan(const plan::Plan& p, const std::vector<const T*>& in, const std::vector<T*>& out,
                   std::uint32_t block_threads) {
  const std::size_t nconn = p.connections.size();
  const std::uint64_t slot_lines =
      (p.slot_elems * sizeof(T) + runtime::kBlockSlotSlack + sizeof(Line) - 1) / sizeof(Line);
  std::vector<Line> slots(slot_lines * p.nslots * nconn + 1);
  std::vector<sync::ConnectionCounters> counters(nconn);
  std::vector<sync::ConnectionRef> refs(nconn);
  const std::vector<std::uint64_t> base(nconn + 1, 0);
  for (std::size_t i = 0; i < nconn; ++i) {
    counters[i].tail = counters[i].head = 0;
    refs[i].slots = slots[i * p.nslots * slot_lines].bytes;
    refs[i].tail = &counters[i].tail;
    refs[i].head = &counters[i].head;
    refs[i].slot_bytes = slot_lines * sizeof(Line);
    refs[i].nslots = p.nslots;
    refs[i].from = p.connections[i].from;
    refs[i].to = p.connections[i].to;
  }
  std::uint32_t abort_word = 0;
  std::vector<runtime::ProgramContext<T>> contexts;
  for (std::uint32_t c = 0; c < p.channels.size(); ++c)
    for (plan::Rank r = 0; r < p.nranks; ++r) {
      const auto& steps = p.channels[c].programs[static_cast<std::size_t>(r)].steps;
      if (steps.empty()) continue;
      runtime::ProgramContext<T> ctx;
      ctx.steps = steps.data();
      ctx.nsteps = static_cast<std::uint32_t>(steps.size());
      ctx.ports = p.ports.data();
      ctx.connections = refs.data();
      ctx.base = base.data();
      ctx.input = in[static_cast<std::size_t>(r)];
      ctx.output = out[static_cast<std::size_t>(r)];
      ctx.nactive = p.nactive();
      ctx.rank = r;
      ctx.channel = c;
      ctx.abort = &abort_word;
      contexts.push_back(ctx);
    }
  const std::uint64_t deadline = sync::now_ns() + 60'000'000'000ull;
  std::vector<int> ok(contexts.size(), 0);
  std::vector<std::unique_ptr<SimulatedBlock>> blocks;
  std::vector<std::thread> threads;
  for (std::size_t b = 0; b < contexts.size(); ++b) {
    if (block_threads == 0) {
      threads.emplace_back([&, b] {
        ok[b] = runtime::run_program<T, Op>(runtime::HostGroup{}, contexts[b], deadline, nullptr);
      });
      continue;
    }
    blocks.push_back(std::make_unique<SimulatedBlock>(block_threads));
    SimulatedBlock& block = *blocks.back();
    for (std::uint32_t i = 0; i < block_threads; ++i)
      threads.emplace_back([&, b, i] {
        const SimulatedBlockGroup g(block, i);
        const bool done = runtime::run_program<T, Op>(g, contexts[b], deadline, nullptr);
        if (g.leader()) ok[b] = done;
      });
  }
  for (auto& t : threads) t.join();
  for (std::size_t b = 0; b < contexts.size(); ++b) {
    CAPTURE(b);
    REQUIRE(ok[b] == 1);
  }
  RunTotals totals;
  for (const auto& block : blocks) {
    totals.scalar_elems += block->scalar_elems.load();
    totals.packs += block->packs.load();
  }
  return totals;
}

struct PlanCase {
  std::uint64_t count;
  std::uint32_t block_threads;
  bool in_place;
  std::uint64_t shift;  // elements past a 16-byte boundary of inputs and outputs
  bool exact;
};

// Runs `build`'s plan for T and Op on blocks and on host threads; checks that both give the same
// bits everywhere (relays' untouched outputs included) and, for exact inputs, the reference.
template <class T, ReduceOp Op>
void check_plan(const std::function<plan::Plan(const plan::PlanRequest&)>& build,
                const PlanCase& pc) {
  plan::PlanRequest req;
  req.count = pc.count;
  req.elem_size = sizeof(T);
  req.slot_bytes = pc.count > 10000 ? 64u << 10 : 1024;
  req.nslots = 2;
  const plan::Plan p = build(req);
  const auto report = plan::verify(p);
  INFO(report.error);
  REQUIRE(report.ok);
  const int np = p.nranks;
  const std::uint64_t n = pc.count;
  std::mt19937 rng(static_cast<std::uint32_t>(n * 7 + sizeof(T)));
  const T fill = T(static_cast<std::uint8_t>(77));
  std::vector<std::vector<T>> values(static_cast<std::size_t>(np), std::vector<T>(n));
  for (int r = 0; r < np; ++r)
    for (std::uint64_t i = 0; i < n; ++i)
      values[static_cast<std::size_t>(r)][i] = input_value<T>(pc.exact, Op, r, np, i, rng);
  // Per path (0: host threads, 1: blocks) and rank: input and output buffers.
  std::vector<std::vector<Buffer<T>>> ins(2), outs(2);
  std::vector<std::vector<const T*>> in_ptrs(2);
  std::vector<std::vector<T*>> out_ptrs(2);
  for (int path = 0; path < 2; ++path)
    for (int r = 0; r < np; ++r) {
      const auto& v = values[static_cast<std::size_t>(r)];
      outs[static_cast<std::size_t>(path)].emplace_back(n, pc.shift, fill);
      T* o = outs[static_cast<std::size_t>(path)].back().data;
      if (pc.in_place) {
        std::copy(v.begin(), v.end(), o);
        in_ptrs[static_cast<std::size_t>(path)].push_back(o);
      } else {
        ins[static_cast<std::size_t>(path)].emplace_back(n, pc.shift, fill);
        T* i = ins[static_cast<std::size_t>(path)].back().data;
        std::copy(v.begin(), v.end(), i);
        in_ptrs[static_cast<std::size_t>(path)].push_back(i);
      }
      out_ptrs[static_cast<std::size_t>(path)].push_back(o);
    }
  run_plan<T, Op>(p, in_ptrs[0], out_ptrs[0], 0);
  const RunTotals totals = run_plan<T, Op>(p, in_ptrs[1], out_ptrs[1], pc.block_threads);
  // Buffers are 16-byte aligned and every message sits at its chunk's offset modulo 16 bytes in
  // its slot (runtime::kBlockSlotSlack): every step's body moves in packs, only heads and tails
  // are scalar.
  if (pc.shift == 0 && n > 10000) CHECK(totals.packs * (16 / sizeof(T)) > 4 * totals.scalar_elems);
  for (int r = 0; r < np; ++r) {
    CAPTURE(r);
    const T* host = out_ptrs[0][static_cast<std::size_t>(r)];
    const T* block = out_ptrs[1][static_cast<std::size_t>(r)];
    std::uint64_t differ = 0, wrong = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      differ += same_bits(host[i], block[i]) ? 0 : 1;
      if (!pc.exact || !p.active[static_cast<std::size_t>(r)]) continue;
      T ref = values[0][i];
      for (int q = 1; q < np; ++q)
        if (p.active[static_cast<std::size_t>(q)])
          ref = combine<Op>(ref, values[static_cast<std::size_t>(q)][i]);
      ref = finalize<Op>(ref, p.nactive());
      wrong += same_bits(ref, block[i]) ? 0 : 1;
    }
    CHECK(differ == 0);
    CHECK(wrong == 0);
  }
}

using Builder = std::function<plan::Plan(const plan::PlanRequest&)>;

// Every dtype x op the block path has to get right, each with its own (count, block size, in
// place, alignment, exact values) so that each builder covers every value of each.
void check_builder(const std::string& name, const Builder& build) {
  constexpr std::uint64_t kCounts[] = {1, 7, 1001, 100003};
  int idx = 0;
  testing::Sweep sweep;
  for (DataType d :
       {DataType::f32, DataType::f16, DataType::bf16, DataType::i32, DataType::f64, DataType::u8})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      // Two variants per pair: the second flips in place and alignment and takes the next size.
      for (int variant = 0; variant < 2; ++variant) {
        if (!sweep.take()) continue;
        PlanCase pc{};
        pc.block_threads = kBlockSizes[(idx + variant) % 4];
        pc.count = kCounts[(idx / 4 + idx + variant) % 4];
        pc.in_place = (idx / 2 + variant) % 2 == 1;
        pc.shift = (idx % 3 == 1 ? 1 : 0) ^ static_cast<std::uint64_t>(variant);
        pc.exact = idx % 5 != 4;
        CAPTURE(name);
        CAPTURE(to_string(d));
        CAPTURE(to_string(op));
        CAPTURE(pc.count);
        CAPTURE(pc.block_threads);
        CAPTURE(pc.in_place);
        CAPTURE(pc.shift);
        CAPTURE(pc.exact);
        dispatch_data_type(d, [&](auto t) {
          using T = decltype(t);
          if constexpr (!std::is_same_v<T, std::int64_t>)
            dispatch_reduce_op(op, [&](auto o) { check_plan<T, decltype(o)::value>(build, pc); });
        });
      }
      ++idx;
    }
}

// ---- Element loops ----

// One element_loop call: its operands and results, separately for the host path (0) and the
// block path (1), at the same alignments.
template <class T>
struct LoopCase {
  std::uint32_t nsrc = 0, ndst = 0;
  std::uint64_t n = 0;
  std::vector<Buffer<T>> buffers[2];
  std::vector<const T*> srcs[2];
  std::vector<T*> dsts[2];
};

// Element loops of every shape (1-5 sources, 1-3 destinations; the first destination also the
// first or the third source, as in place), pointers at random offsets from 16-byte alignment,
// random counts: the block path (one block of `threads` members running all cases in sequence)
// must write the same bits as the host path.
template <class T, ReduceOp Op, bool Fin>
void check_loops(std::uint32_t threads, std::uint32_t seed) {
  constexpr std::uint64_t kE = 16 / sizeof(T);
  std::mt19937 rng(seed);
  std::vector<std::unique_ptr<LoopCase<T>>> cases;
  for (std::uint32_t nsrc = 1; nsrc <= 5; ++nsrc)
    for (std::uint32_t ndst = 1; ndst <= 3; ++ndst)
      for (std::uint32_t alias = 0; alias < 3; ++alias) {
        if (alias == 2 && nsrc < 3) continue;
        auto lc = std::make_unique<LoopCase<T>>();
        lc->nsrc = nsrc;
        lc->ndst = ndst;
        lc->n = rng() % 3 == 0 ? rng() % 16 : rng() % 5000;
        // Mostly one common misalignment (the pack path), sometimes a different one per pointer.
        const bool common = rng() % 4 != 0;
        const std::uint64_t shift0 = rng() % kE;
        std::vector<std::uint64_t> shifts;
        for (std::uint32_t k = 0; k < nsrc + ndst; ++k)
          shifts.push_back(common ? shift0 : rng() % kE);
        std::vector<std::vector<T>> values(nsrc, std::vector<T>(lc->n));
        for (auto& v : values)
          for (auto& x : v) x = input_value<T>(false, Op, 0, 1, 0, rng);
        for (int path = 0; path < 2; ++path) {
          auto& buffers = lc->buffers[path];
          for (std::uint32_t k = 0; k < nsrc + ndst; ++k)
            buffers.emplace_back(lc->n, shifts[k], T(static_cast<std::uint8_t>(9)));
          for (std::uint32_t k = 0; k < nsrc; ++k) {
            std::copy(values[k].begin(), values[k].end(), buffers[k].data);
            lc->srcs[path].push_back(buffers[k].data);
          }
          for (std::uint32_t k = 0; k < ndst; ++k) lc->dsts[path].push_back(buffers[nsrc + k].data);
          // In place: the first destination is the first or the third operand's buffer.
          if (alias > 0) lc->dsts[path][0] = buffers[alias == 1 ? 0 : 2].data;
        }
        cases.push_back(std::move(lc));
      }
  for (auto& lc : cases)
    runtime::detail::element_loop<T, Op, Fin>(runtime::HostGroup{}, lc->dsts[0].data(), lc->ndst,
                                              lc->srcs[0].data(), lc->nsrc, lc->n, 3);
  SimulatedBlock block(threads);
  testing::run_block(block, [&](const SimulatedBlockGroup& g) {
    for (auto& lc : cases) {
      runtime::detail::element_loop<T, Op, Fin>(g, lc->dsts[1].data(), lc->ndst, lc->srcs[1].data(),
                                                lc->nsrc, lc->n, 3);
      g.sync();
    }
  });
  CHECK(block.packs.load() > 0);
  for (auto& lc : cases) {
    CAPTURE(lc->nsrc);
    CAPTURE(lc->ndst);
    CAPTURE(lc->n);
    std::uint64_t differ = 0;
    for (std::uint32_t k = 0; k < lc->ndst; ++k)
      for (std::uint64_t i = 0; i < lc->n; ++i)
        differ += same_bits(lc->dsts[0][k][i], lc->dsts[1][k][i]) ? 0 : 1;
    CHECK(differ == 0);
  }
}

}  // namespace

TEST_CASE("pack_split: head up to the boundary, whole packs, tail; scalar when misaligned") {
  const auto check = [](auto t) {
    using T = decltype(t);
    constexpr std::uint64_t kE = runtime::detail::Pack<T>::kElems;
    alignas(16) static T memory[4][256];
    std::uint64_t vector_cases = 0;
    for (std::uint64_t a = 0; a < kE; ++a)
      for (std::uint64_t b = 0; b < kE; ++b)
        for (std::uint64_t n = 0; n < 3 * kE + 5; ++n) {
          const T* srcs[2] = {memory[0] + a, memory[1] + a};
          T* dsts[2] = {memory[2] + a, memory[3] + b};
          const auto s = runtime::detail::pack_split<T>(dsts, 2, srcs, 2, n);
          CAPTURE(a);
          CAPTURE(b);
          CAPTURE(n);
          REQUIRE(s.head + s.packs * kE + s.tail == n);
          if (a != b) {  // the pointers disagree: no packs at all
            REQUIRE(s.head == n);
            continue;
          }
          REQUIRE(s.head == std::min(n, (kE - a) % kE));
          REQUIRE(s.tail < kE);
          if (s.packs > 0) {
            ++vector_cases;
            for (const T* p : {srcs[0], srcs[1], static_cast<const T*>(dsts[0])})
              REQUIRE(reinterpret_cast<std::uintptr_t>(p + s.head) % 16 == 0);
          }
          // The split takes every whole pack there is.
          REQUIRE(s.tail < kE);
          REQUIRE((s.head < n ? (n - s.head) / kE : 0) == s.packs);
        }
    CHECK(vector_cases > 0);
    // A single pointer that is aligned: everything but the tail is packs.
    const T* one[1] = {memory[0]};
    T* none[1] = {memory[1]};
    const auto s = runtime::detail::pack_split<T>(none, 1, one, 1, 10 * kE + kE - 1);
    CHECK(s.head == 0);
    CHECK(s.packs == 10);
    CHECK(s.tail == kE - 1);
  };
  check(float{});
  check(double{});
  check(Half{});
  check(BFloat16{});
  check(std::int32_t{});
  check(std::uint8_t{});
}

TEST_CASE("16-bit floats: three or more operands accumulate in float and round once") {
  // In f16, 2048 + 1 rounds back to 2048 (the spacing there is 2); in float 2048 + 1 + 1 = 2050.
  const Half big(2048.0f), one(1.0f);
  const auto run = [&](bool on_block, std::uint32_t nsrc, bool fin) {
    std::vector<Half> a(37, big), b(37, one), c(37, one), d(37, Half{});
    const Half* srcs[3] = {a.data(), b.data(), c.data()};
    Half* dsts[1] = {d.data()};
    const auto loop = [&](const auto& g) {
      if (fin)
        runtime::detail::element_loop<Half, ReduceOp::avg, true>(g, dsts, 1, srcs, nsrc, 37, 3);
      else
        runtime::detail::element_loop<Half, ReduceOp::sum, false>(g, dsts, 1, srcs, nsrc, 37, 3);
    };
    if (on_block) {
      SimulatedBlock block(3);
      testing::run_block(block, loop);
    } else {
      loop(runtime::HostGroup{});
    }
    return d;
  };
  for (const bool on_block : {false, true}) {
    CAPTURE(on_block);
    const auto sum3 = run(on_block, 3, false);
    const auto sum2 = run(on_block, 2, false);
    const auto avg3 = run(on_block, 3, true);
    for (std::size_t i = 0; i < sum3.size(); ++i) {
      CHECK(static_cast<float>(sum3[i]) == 2050.0f);
      CHECK(static_cast<float>(sum2[i]) == 2048.0f);  // two operands: one rounding anyway
      // avg: the division by 3 happens in float too, before the one rounding.
      CHECK(avg3[i].bits == Half(2050.0f / 3.0f).bits);
    }
  }
}

TEST_CASE("element loops: the block path writes the host path's bits, every shape and alignment") {
  std::uint32_t seed = 1;
  for (std::uint32_t threads : kBlockSizes) {
    CAPTURE(threads);
    check_loops<float, ReduceOp::sum, false>(threads, seed++);
    check_loops<float, ReduceOp::avg, true>(threads, seed++);
    check_loops<Half, ReduceOp::sum, false>(threads, seed++);
    check_loops<BFloat16, ReduceOp::avg, true>(threads, seed++);
    check_loops<double, ReduceOp::max, false>(threads, seed++);
    check_loops<std::uint8_t, ReduceOp::sum, false>(threads, seed++);
    check_loops<std::int32_t, ReduceOp::avg, true>(threads, seed++);
  }
}

TEST_CASE("plans on simulated blocks: ring and double binary tree") {
  check_builder("ring", [](plan::PlanRequest r) {
    r.nranks = 4;
    r.nchannels = 2;
    return plan::build_ring(r);
  });
  check_builder("dbtree", [](plan::PlanRequest r) {
    r.nranks = 4;
    return plan::build_double_binary_tree(r);
  });
}

TEST_CASE("plans on simulated blocks: a ring whose chunks start on 16-byte boundaries uses packs") {
  // 2^17 elements over 4 ranks and 2 channels in power-of-two chunks: every step is aligned.
  PlanCase pc{};
  pc.count = 1u << 17;
  pc.exact = true;
  for (const std::uint32_t threads : kBlockSizes) {
    CAPTURE(threads);
    pc.block_threads = threads;
    pc.in_place = threads % 2 == 1;
    const Builder ring = [](plan::PlanRequest r) {
      r.nranks = 4;
      r.nchannels = 2;
      return plan::build_ring(r);
    };
    check_plan<float, ReduceOp::sum>(ring, pc);
    check_plan<Half, ReduceOp::avg>(ring, pc);
  }
}

TEST_CASE("plans on simulated blocks: binary trees' 1x3, 3x1 and 3x3 steps, with packs") {
  // A tree's broadcast to two children (1 source, output + 2 sends), its reduce from two children
  // (own input + 2 receives, 1 send) and its root (3 sources, output + 2 sends) have compile-time
  // operand counts on a block (runtime/block_loops.hpp); 2^17 elements in power-of-two chunks make
  // every step's pointers 16-byte aligned, so the pack path runs them. A thinned sweep
  // (tests/sweep.hpp) skips some block sizes, never the shape checks; each tree starts the sizes
  // at another one, so that a quarter of the sweep still runs every size.
  testing::Sweep sweep;
  std::size_t tree_index = 0;
  for (const bool overlap : {true, false}) {
    const Builder tree = [overlap](plan::PlanRequest r) {
      r.nranks = 7;
      r.overlap = overlap;
      return plan::build_tree(r);
    };
    const Builder dbtree = [](plan::PlanRequest r) {
      r.nranks = 8;
      return plan::build_double_binary_tree(r);
    };
    for (const Builder* build : {&tree, &dbtree}) {
      PlanCase pc{};
      pc.count = 1u << 17;
      pc.exact = true;
      // The shapes are there: (sources, destinations) of every step.
      plan::PlanRequest req;
      req.count = pc.count;
      req.slot_bytes = 64u << 10;
      req.nslots = 2;
      std::set<std::pair<std::uint32_t, std::uint32_t>> shapes;
      for (const auto& ch : (*build)(req).channels)
        for (const auto& prog : ch.programs)
          for (const auto& st : prog.steps)
            shapes.emplace(st.recv_count + (st.src != plan::Source::None ? 1u : 0u),
                           st.send_count + (st.write_output ? 1u : 0u));
      CHECK(shapes.count({3, 1}) == 1);
      CHECK(shapes.count({1, 3}) == 1);
      if (build == &tree && overlap) CHECK(shapes.count({3, 3}) == 1);
      ++tree_index;
      for (std::size_t k = 0; k < std::size(kBlockSizes); ++k) {
        const std::uint32_t threads = kBlockSizes[(k + tree_index) % std::size(kBlockSizes)];
        if (!sweep.take()) continue;
        CAPTURE(overlap);
        CAPTURE(threads);
        pc.block_threads = threads;
        pc.in_place = threads % 2 == 0;
        check_plan<float, ReduceOp::sum>(*build, pc);
        check_plan<Half, ReduceOp::avg>(*build, pc);
        check_plan<double, ReduceOp::max>(*build, pc);
      }
    }
  }
}

TEST_CASE("plans on simulated blocks: one-shot, recursive doubling, a star tree") {
  // One-shot folds all P inputs in one step, the own one in the middle (in place: the aliasing
  // case of general_pass); the star's root receives three children at once.
  check_builder("oneshot", [](plan::PlanRequest r) {
    r.nranks = 4;
    return plan::build_one_shot(r);
  });
  check_builder("recdoubling", [](plan::PlanRequest r) {
    r.nranks = 3;
    return plan::build_recursive_doubling(r);
  });
  check_builder("star", [](plan::PlanRequest r) {
    r.nranks = 4;
    r.overlap = false;
    plan::TreeSpec star;
    star.root = 0;
    star.reduce_parent = {-1, 0, 0, 0};
    return plan::build_trees(r, {star});
  });
}

TEST_CASE("plans on simulated blocks: relays of a direct plan on a ring of four GPUs") {
  const auto topology = physical::gpu_ring(4);
  algo::AlgorithmRequest areq;
  areq.topology = &topology;
  areq.host_relays = false;
  const auto reg = algo::make_algorithm(algo::find_algorithm("direct").algorithm, areq);
  REQUIRE(reg.nranks() > 4);  // the diagonals go through relays
  check_builder("direct-relayed", [&reg](plan::PlanRequest r) {
    r.nranks = reg.nranks();
    return reg.build(r);
  });
  // The same relays run inside the ranks on their GPUs (plan/placement.hpp): a block each, beside
  // the rank's own blocks.
  areq.host_relays = true;
  const auto placed = algo::make_algorithm(algo::find_algorithm("direct").algorithm, areq);
  REQUIRE(placed.nranks() == 4);
  REQUIRE(placed.hosted_relays == reg.nranks() - 4);
  check_builder("direct-relays-placed", [&placed](plan::PlanRequest r) {
    r.nranks = placed.nranks();
    return placed.build(r);
  });
}

// ---- The collectives through the virtual ranks' buffer mapping ----

namespace {

using Builder = std::function<plan::Plan(const plan::PlanRequest&)>;

// One call of collective `c` by every rank of `p`, each rank's buffers prepared and checked by
// tests/collective_reference.hpp (NCCL's arguments, in place or not, guards around them), the
// plan run as CudaVirtualRanks runs it: cuda::checked_buffers maps every rank's buffers, and each
// (rank, channel) program runs on a block with its rank's mapped input and output.
template <class T, ReduceOp Op>
void check_mapped_call(plan::Collective c, const Builder& build, int p, std::uint64_t count,
                       bool in_place, int root, std::uint32_t block_threads) {
  const auto np = static_cast<std::size_t>(p);
  std::vector<const void*> sends(np);
  std::vector<void*> recvs(np);
  std::vector<std::string> errors(np);
  std::barrier<> meet(p + 1);  // the ranks and this thread, which runs the plan
  std::vector<std::thread> ranks;
  ranks.reserve(np);
  for (int r = 0; r < p; ++r)
    ranks.emplace_back([&, r] {
      errors[static_cast<std::size_t>(r)] = testing::check_collective_call<T, Op>(
          c, p, r, count, in_place, root, [&](const void* s, void* q) {
            sends[static_cast<std::size_t>(r)] = s;
            recvs[static_cast<std::size_t>(r)] = q;
            meet.arrive_and_wait();  // every rank's buffers are ready
            meet.arrive_and_wait();  // the plan ran
          });
    });
  meet.arrive_and_wait();
  const runtime::CallShape shape{c, root};
  const transport::cuda::CallBuffers mapped =
      transport::cuda::checked_buffers(p, sends, recvs, count, data_type_of<T>(), Op, shape);
  plan::PlanRequest req;
  req.nranks = p;
  req.count = plan::has_blocks(c) ? count * np : count;
  req.elem_size = sizeof(T);
  req.nchannels = 2;
  req.slot_bytes = 256;
  req.nslots = 2;
  req.collective = c;
  req.root = root;
  const plan::Plan plan = build(req);
  REQUIRE(plan::verify(plan).ok);
  std::vector<const T*> in(np);
  std::vector<T*> out(np);
  for (std::size_t r = 0; r < np; ++r) {
    in[r] = static_cast<const T*>(mapped.rank[r].input);
    out[r] = static_cast<T*>(mapped.rank[r].output);
  }
  run_plan<T, Op>(plan, in, out, block_threads);
  meet.arrive_and_wait();
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
}

struct MappedPlan {
  const char* name;
  plan::Collective collective;
  Builder build;
};

}  // namespace

TEST_CASE("virtual ranks' buffer mapping: every collective's plans, NCCL's arguments, in place") {
  using C = plan::Collective;
  const MappedPlan plans[] = {
      {"ring reduce-scatter", C::reduce_scatter, &plan::build_ring_reduce_scatter},
      {"direct reduce-scatter", C::reduce_scatter, &plan::build_direct_reduce_scatter},
      {"ring all-gather", C::all_gather, &plan::build_ring_all_gather},
      {"direct all-gather", C::all_gather, &plan::build_direct_all_gather},
      {"chain broadcast", C::broadcast, &plan::build_chain_broadcast},
      {"dbtree broadcast", C::broadcast, &plan::build_dbtree_broadcast},
      {"direct reduce", C::reduce, &plan::build_direct_reduce},
      {"tree reduce", C::reduce, &plan::build_tree_reduce},
  };
  for (const auto& mp : plans)
    for (const int p : {1, 2, 3, 5})
      for (const std::uint64_t count : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{301}})
        for (const bool in_place : {false, true}) {
          const bool rooted = plan::has_root(mp.collective);
          for (const int root : rooted ? std::vector<int>{0, p - 1} : std::vector<int>{0}) {
            CAPTURE(mp.name);
            CAPTURE(p);
            CAPTURE(count);
            CAPTURE(in_place);
            CAPTURE(root);
            const std::uint32_t threads = count == 301 ? 4 : 0;
            if (plan::reduces(mp.collective)) {
              check_mapped_call<float, ReduceOp::sum>(mp.collective, mp.build, p, count, in_place,
                                                      root, threads);
              check_mapped_call<BFloat16, ReduceOp::avg>(mp.collective, mp.build, p, count,
                                                         in_place, root, 0);
            } else {
              check_mapped_call<std::int32_t, ReduceOp::sum>(mp.collective, mp.build, p, count,
                                                             in_place, root, threads);
            }
          }
        }
}

TEST_CASE("virtual ranks' buffer mapping: bad arguments name the rank; a shape names its root") {
  using transport::cuda::checked_buffers;
  std::vector<float> a(12), b(12), c(12);
  const std::vector<const void*> sends{a.data(), b.data(), c.data()};
  const std::vector<void*> recvs{a.data() + 4, b.data(), c.data()};
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::make_pair(e.code(), e.rank());
    }
    return std::make_pair(ErrorCode::System, -2);
  };
  // Reduce-scatter in place on rank 0 needs recvbuff = sendbuff + 0 * recvcount: a.data() + 4
  // overlaps the input elsewhere.
  CHECK(code_of([&] {
          checked_buffers(3, sends, recvs, 4, DataType::f32, ReduceOp::sum,
                          {plan::Collective::reduce_scatter, 0});
        }) == std::make_pair(ErrorCode::InvalidArgument, 0));
  // A broadcast root out of range, on every rank (the first names rank 0).
  CHECK(code_of([&] {
          checked_buffers(3, sends, std::vector<void*>{a.data(), b.data(), c.data()}, 4,
                          DataType::f32, ReduceOp::sum, {plan::Collective::broadcast, 3});
        }) == std::make_pair(ErrorCode::InvalidArgument, 0));
  // A broadcast's non-root may pass no input; the root may not.
  const std::vector<const void*> root_only{a.data(), nullptr, nullptr};
  const std::vector<void*> outs{a.data(), b.data(), c.data()};
  const auto mapped = checked_buffers(3, root_only, outs, 4, DataType::f32, ReduceOp::sum,
                                      {plan::Collective::broadcast, 0});
  CHECK(mapped.rank[0].input == a.data());
  CHECK(mapped.rank[2].output == c.data());
  CHECK(code_of([&] {
          checked_buffers(3, root_only, outs, 4, DataType::f32, ReduceOp::sum,
                          {plan::Collective::broadcast, 1});
        }) == std::make_pair(ErrorCode::InvalidArgument, 1));
  // The all-gather's output is index 0 of the plan's space; rank 2's input is block 2 of it.
  std::vector<float> d(12), e(12), f(12);
  const std::vector<void*> gather_outs{d.data(), e.data(), f.data()};
  const auto gathered = checked_buffers(3, sends, gather_outs, 4, DataType::f32, ReduceOp::sum,
                                        {plan::Collective::all_gather, 0});
  CHECK(static_cast<const float*>(gathered.rank[2].input) + 8 == c.data());
  CHECK(gathered.rank[1].output == e.data());
  // The default shape is the executor's collective, which must then have no root.
  using transport::cuda::call_shape;
  CHECK(call_shape(std::nullopt, plan::Collective::all_gather) ==
        runtime::CallShape{plan::Collective::all_gather, 0});
  CHECK(code_of([] { call_shape(std::nullopt, plan::Collective::reduce); }).first ==
        ErrorCode::InvalidArgument);
  CHECK(code_of([] {
          call_shape(runtime::CallShape{plan::Collective::broadcast, 0}, plan::Collective::reduce);
        }).first == ErrorCode::InvalidArgument);
}
}  // namespace block_group_test
