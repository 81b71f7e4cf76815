// ccoll_perf/runner.cpp: the per-rank measurement loop.
#include "runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "controls.hpp"
#include "perf_data.hpp"

namespace ccoll_perf {

namespace {

void* allocate(std::uint64_t bytes) {
  const std::size_t rounded = static_cast<std::size_t>((bytes + 4095) / 4096 * 4096);
  void* p = std::aligned_alloc(4096, rounded == 0 ? 4096 : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Recognisable garbage written into the output before each size, so that an executor that skips
// writing some elements is caught by the check (the inputs never produce this pattern except,
// rarely, for uint8).
constexpr unsigned char kPoison = 0x7b;

}  // namespace

RankBuffers::RankBuffers(std::uint64_t max_count, ccoll::DataType d, ccoll::ReduceOp op, int rank,
                         int nranks, bool with_expected)
    : max_count_(max_count),
      dtype_(d),
      op_(op),
      rank_(rank),
      nranks_(nranks),
      with_expected_(with_expected) {
  const std::uint64_t bytes = max_count * ccoll::size_of(d);
  fill(allocate(bytes), allocate(bytes));
}

RankBuffers::RankBuffers(std::uint64_t max_count, ccoll::DataType d, ccoll::ReduceOp op, int rank,
                         int nranks, bool with_expected, std::span<std::byte> memory)
    : max_count_(max_count),
      dtype_(d),
      op_(op),
      rank_(rank),
      nranks_(nranks),
      with_expected_(with_expected),
      owns_buffers_(false) {
  const std::uint64_t bytes = max_count * ccoll::size_of(d);
  const std::size_t recv_offset = memory.size() / 2 / 4096 * 4096;  // page-aligned
  if (recv_offset < bytes || memory.size() - recv_offset < bytes)
    throw std::invalid_argument("buffers of " + std::to_string(bytes) +
                                " bytes do not fit twice, page-aligned, in " +
                                std::to_string(memory.size()));
  fill(memory.data(), memory.data() + recv_offset);
}

void RankBuffers::fill(void* send, void* recv) {
  const std::uint64_t bytes = max_count_ * ccoll::size_of(dtype_);
  send_ = send;
  recv_ = recv;
  fill_input(send_, max_count_, dtype_, op_, rank_);
  std::memset(recv_, kPoison, bytes);  // first touch by the owning rank
  expect({});
}

const void* RankBuffers::expected(const std::vector<bool>& active) const {
  if (!with_expected_) return nullptr;
  std::vector<int> contributors;
  for (int r = 0; r < nranks_; ++r)
    if (active.empty() ||
        (static_cast<std::size_t>(r) < active.size() && active[static_cast<std::size_t>(r)]))
      contributors.push_back(r);
  if (std::find(contributors.begin(), contributors.end(), rank_) == contributors.end())
    return nullptr;
  for (const Reference& known : references_)
    if (known.contributors == contributors) return known.data;
  Reference made{std::move(contributors), allocate(max_count_ * ccoll::size_of(dtype_))};
  fill_expected(made.data, max_count_, dtype_, op_, made.contributors);
  references_.push_back(std::move(made));
  return references_.back().data;
}

RankBuffers::~RankBuffers() {
  if (owns_buffers_) {
    std::free(send_);
    std::free(recv_);
  }
  for (const Reference& r : references_) std::free(r.data);
}

std::uint64_t max_count(const std::vector<std::uint64_t>& sizes, ccoll::DataType d) {
  std::uint64_t m = 0;
  for (auto s : sizes) m = std::max(m, elements_for(s, d));
  return m;
}

namespace {

struct Timed {
  double time_s = 0;  // max over ranks of the mean per call
  long wrong = -1;
};

// The ranks a sweep's collective serves: its active ranks (relays neither contribute nor
// receive), in rank order.
struct Members {
  int count = 0;   // A: the active ranks
  int index = -1;  // this rank's block index among them; -1: a relay
  std::vector<int> ranks;
};

Members members_of(const SweepSpec& spec, int rank, int nranks) {
  Members m;
  for (int r = 0; r < nranks; ++r) {
    const auto u = static_cast<std::size_t>(r);
    if (!spec.active.empty() && (u >= spec.active.size() || !spec.active[u])) continue;
    if (r == rank) m.index = m.count;
    m.ranks.push_back(r);
    ++m.count;
  }
  return m;
}

// Elements of this rank's result that are wrong, for the sweep's collective (count: the whole
// buffer, a multiple of the active ranks where the collective has blocks, as plan/collective.hpp
// defines them: the k-th active rank owns block k). A relay has no result and counts nothing.
long count_wrong_result(const SweepSpec& spec, const RankCollective& coll, const RankBuffers& b,
                        std::uint64_t count, int rank, int nranks) {
  using C = ccoll::plan::Collective;
  const Members members = members_of(spec, rank, nranks);
  if (members.index < 0 || members.count == 0) return 0;
  const void* got = coll.result(b.send(), b.recv());
  const void* expected = b.expected(spec.active);  // the members' allreduce (prefix)
  const std::uint64_t block = count / static_cast<std::uint64_t>(members.count);
  const int root = spec.call.root;
  switch (spec.call.collective) {
    case C::allreduce:
      return expected ? count_wrong(got, expected, count, spec.dtype, spec.op) : 0;
    case C::reduce_scatter:
      return expected ? count_wrong(got,
                                    static_cast<const std::byte*>(expected) +
                                        block * static_cast<std::uint64_t>(members.index) *
                                            ccoll::size_of(spec.dtype),
                                    block, spec.dtype, spec.op)
                      : 0;
    case C::reduce:
      return rank == root && expected ? count_wrong(got, expected, count, spec.dtype, spec.op) : 0;
    case C::all_gather:
      return count_wrong_moved(got, count, spec.dtype, spec.op, [&](std::uint64_t i) {
        return std::pair<int, std::uint64_t>{members.ranks[static_cast<std::size_t>(i / block)],
                                             i % block};
      });
    case C::broadcast:
      return count_wrong_moved(got, count, spec.dtype, spec.op, [root](std::uint64_t i) {
        return std::pair<int, std::uint64_t>{root, i};
      });
  }
  return 0;
}

// One block: poison, warmup, barrier, n timed calls, max over ranks; with `check`, one more call
// into a freshly poisoned output, checked (as nccl-tests checks): a result the timed calls left
// behind cannot hide a call that skips writing some elements.
Timed time_block(const SweepSpec& spec, RankCollective& coll, Control& control,
                 const RankBuffers& buffers, std::uint64_t count, bool check) {
  const std::size_t elem = ccoll::size_of(spec.dtype);
  std::memset(buffers.recv(), kPoison, count * elem);
  control.barrier();
  for (int i = 0; i < spec.warmup; ++i) {
    coll.run(buffers.send(), buffers.recv(), count, spec.dtype, spec.op);
  }
  control.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < spec.iters; ++i) {
    coll.run(buffers.send(), buffers.recv(), count, spec.dtype, spec.op);
  }
  const auto t1 = std::chrono::steady_clock::now();
  Timed t;
  t.time_s = control.max(std::chrono::duration<double>(t1 - t0).count() / spec.iters);
  if (check) {
    std::memset(buffers.recv(), kPoison, count * elem);
    control.barrier();
    coll.run(buffers.send(), buffers.recv(), count, spec.dtype, spec.op);
    t.wrong = control.sum(
        count_wrong_result(spec, coll, buffers, count, control.rank(), control.nranks()));
  }
  return t;
}

// Calls of `count` elements, untimed, until every rank has made them for kSettleSeconds: a
// process's ranks may start on one core, and the scheduler spreads them only tens of milliseconds
// later (2 ranks on 2 vCPUs: the first sizes ran 5-60x slower in about half the runs), which
// would otherwise be timed as the first sizes' cost. Ranks agree to stop through the control
// channel, so every rank makes the same calls.
void settle(const SweepSpec& spec, RankCollective& coll, Control& control,
            const RankBuffers& buffers, std::uint64_t count) {
  constexpr double kSettleSeconds = 0.1;
  constexpr int kCallsPerCheck = 4;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < kCallsPerCheck; ++i)
      coll.run(buffers.send(), buffers.recv(), count, spec.dtype, spec.op);
    const double ran = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (control.max(ran) >= kSettleSeconds) return;
  }
}

}  // namespace

namespace {

// The element count a sweep's size runs with (0: none): reduce-scatter and all-gather take a
// whole number of blocks (nccl-tests rounds down too).
std::uint64_t sweep_count(const SweepSpec& spec, std::uint64_t size, int nranks) {
  std::uint64_t count = elements_for(size, spec.dtype);
  const auto blocks = static_cast<std::uint64_t>(members_of(spec, -1, nranks).count);
  if (ccoll::plan::has_blocks(spec.call.collective))
    count = blocks == 0 ? 0 : count / blocks * blocks;
  return count;
}

Row sweep_row(const SweepSpec& spec, const Control& control, std::uint64_t count,
              const Timed& best) {
  const int nactive = members_of(spec, -1, control.nranks()).count;
  return make_row(spec.transport, spec.algo, nactive, count * ccoll::size_of(spec.dtype), count,
                  spec.dtype, spec.op, best.time_s, best.wrong, spec.call.collective);
}

}  // namespace

void run_sweep(const SweepSpec& spec, RankCollective& coll, Control& control,
               const RankBuffers& buffers, const std::function<void(const Row&)>& on_row,
               const PairedPeer* peer) {
  const std::size_t elem = ccoll::size_of(spec.dtype);
  const int rounds = std::max(1, spec.rounds);
  // A peer library runs on every rank: it reduces every rank's input where our plan has relays,
  // and is checked against that.
  SweepSpec peer_spec = spec;
  peer_spec.active.clear();
  bool settled = false;
  std::uint64_t last_count = 0;  // sizes of the same whole elements (-f 1.1) make one row
  for (const std::uint64_t size : spec.sizes) {
    const std::uint64_t count = sweep_count(spec, size, control.nranks());
    const std::uint64_t peer_count = sweep_count(peer_spec, size, control.nranks());
    if (count == 0 || (peer != nullptr && peer_count == 0) || count == last_count) continue;
    last_count = count;
    if (!settled) settle(spec, coll, control, buffers, count);
    settled = true;
    // Each round times the peer, then ours, back to back; the best round of each is kept, so
    // that a burst of load from other jobs hits both or is discarded from both.
    Timed best, peer_best;
    for (int r = 0; r < rounds; ++r) {
      const bool last = r == rounds - 1;
      if (peer != nullptr) {
        const Timed t =
            time_block(peer_spec, *peer->coll, control, buffers, peer_count, spec.check && last);
        if (r == 0 || t.time_s < peer_best.time_s) peer_best.time_s = t.time_s;
        if (last) peer_best.wrong = t.wrong;
      }
      const Timed t = time_block(spec, coll, control, buffers, count, spec.check && last);
      if (r == 0 || t.time_s < best.time_s) best.time_s = t.time_s;
      if (last) best.wrong = t.wrong;
    }
    if (control.rank() != 0) continue;
    Row row = sweep_row(spec, control, count, best);
    if (peer != nullptr) {
      Row peer_row =
          make_row(peer->transport, peer->algo, control.nranks(), peer_count * elem, peer_count,
                   spec.dtype, spec.op, peer_best.time_s, peer_best.wrong, spec.call.collective);
      peer_row.paired_with = spec.algo;
      row.peer_busbw_GBps = peer_row.busbw_GBps;
      row.peer_wrong = peer_row.wrong;
      if (peer->on_row) peer->on_row(peer_row);
    }
    on_row(row);
  }
}

void run_interleaved_sweep(const std::vector<InterleavedCollective>& runs, Control& control,
                           const std::function<void(std::size_t, const Row&)>& on_row) {
  if (runs.empty()) return;
  const SweepSpec& first = runs.front().spec;
  const int rounds = std::max(1, first.rounds);
  bool settled = false;
  std::vector<std::uint64_t> last_counts;  // sizes of the same whole elements make one row
  for (const std::uint64_t size : first.sizes) {
    // Each collective's own count: a blocked collective takes whole blocks of its active ranks.
    std::vector<std::uint64_t> counts(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i)
      counts[i] = sweep_count(runs[i].spec, size, control.nranks());
    if (std::find(counts.begin(), counts.end(), std::uint64_t{0}) != counts.end() ||
        counts == last_counts)
      continue;
    last_counts = counts;
    if (!settled) settle(first, *runs.front().coll, control, *runs.front().buffers, counts[0]);
    settled = true;
    std::vector<Timed> best(runs.size());
    for (int r = 0; r < rounds; ++r) {
      const bool last = r == rounds - 1;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const SweepSpec& spec = runs[i].spec;
        const Timed t = time_block(spec, *runs[i].coll, control, *runs[i].buffers, counts[i],
                                   spec.check && last);
        if (r == 0 || t.time_s < best[i].time_s) best[i].time_s = t.time_s;
        if (last) best[i].wrong = t.wrong;
      }
    }
    if (control.rank() != 0) continue;
    for (std::size_t i = 0; i < runs.size(); ++i)
      on_row(i, sweep_row(runs[i].spec, control, counts[i], best[i]));
  }
}

void run_threads_interleaved(const std::vector<SweepSpec>& specs,
                             const std::vector<Collective*>& colls, int nranks,
                             const std::function<void(std::size_t, const Row&)>& on_row,
                             const std::function<void(int, const std::string&)>& on_error) {
  if (specs.empty()) return;
  const std::uint64_t max_elems = max_count(specs.front().sizes, specs.front().dtype);
  ThreadsShared shared(nranks);
  auto body = [&](int rank) {
    try {
      const SweepSpec& first = specs.front();
      RankBuffers buffers(max_elems, first.dtype, first.op, rank, nranks, first.check);
      std::vector<std::unique_ptr<RankCollective>> views;
      std::vector<InterleavedCollective> runs;
      for (std::size_t i = 0; i < specs.size(); ++i) {
        buffers.expect(specs[i].active);
        views.push_back(colls[i]->rank(rank));
        runs.push_back(InterleavedCollective{specs[i], views.back().get(), &buffers});
      }
      ThreadsControl control(shared, rank);
      run_interleaved_sweep(runs, control, on_row);
    } catch (const std::exception& e) {
      on_error(rank, e.what());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < nranks; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
}

void run_threads_sweep(const SweepSpec& spec, Collective& coll, int nranks,
                       const std::function<void(const Row&)>& on_row,
                       const std::function<void(int, const std::string&)>& on_error) {
  // One collective interleaved with none: its rounds back to back, as run_sweep times them.
  run_threads_interleaved(
      {spec}, {&coll}, nranks, [&](std::size_t, const Row& r) { on_row(r); }, on_error);
}

}  // namespace ccoll_perf
