#include "host_side.hpp"

#include <algorithm>
#include <barrier>
#include <stdexcept>
#include <thread>

#include "../collective_reference.hpp"
#include "../expected_algorithms.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/physical/presets.hpp"
#include "ccoll/protocol/protocol.hpp"
#include "ccoll/transport/host_threads.hpp"

namespace gpu_test {

std::string algorithm_table_mismatch() {
  const auto& table = ccoll::algo::algorithm_table();
  std::string missing;
  std::string unexpected;
  for (const auto& e : ccoll_test::kExpectedAlgorithms)
    if (std::none_of(table.begin(), table.end(),
                     [&](const ccoll::algo::Algorithm& a) { return a.name == e.name; }))
      (missing += ' ') += e.name;
  for (const auto& a : table)
    if (std::none_of(ccoll_test::kExpectedAlgorithms.begin(), ccoll_test::kExpectedAlgorithms.end(),
                     [&](const ccoll_test::ExpectedAlgorithm& e) { return a.name == e.name; }))
      (unexpected += ' ') += a.name;
  std::string s;
  if (!missing.empty()) s += "missing:" + missing;
  if (!unexpected.empty()) s += std::string(s.empty() ? "" : "; ") + "unexpected:" + unexpected;
  return s;
}

Source registered(const std::string& name, int nranks) {
  ccoll::algo::AlgorithmRequest req;
  req.nranks = nranks;
  const ccoll::algo::Registered reg =
      ccoll::algo::make_algorithm(ccoll::algo::find_algorithm(name).algorithm, req);
  return [reg](const ccoll::plan::PlanRequest& r) { return reg.build(r); };
}

Source registered_on(const std::string& name, const std::string& preset, int* nranks) {
  const auto topology =
      std::make_shared<const ccoll::physical::PhysicalTopology>(ccoll::physical::preset(preset));
  ccoll::algo::AlgorithmRequest req;
  req.topology = topology.get();
  const ccoll::algo::Registered reg =
      ccoll::algo::make_algorithm(ccoll::algo::find_algorithm(name).algorithm, req);
  ccoll::plan::PlanRequest probe;
  probe.count = 4096;
  *nranks = reg.build(probe).nranks;
  return [reg, topology](const ccoll::plan::PlanRequest& r) { return reg.build(r); };
}

Source low_latency_below(const Source& source, std::uint64_t below) {
  return [source, below](const ccoll::plan::PlanRequest& r) {
    return r.count < below ? ccoll::protocol::build_for(ccoll::protocol::Id::low_latency, r, source)
                           : source(r);
  };
}

Source ring_without_rank1() {
  return [](const ccoll::plan::PlanRequest& r) {
    ccoll::plan::Plan p = registered("ring", r.nranks)(r);
    p.channels[0].programs[1].steps.clear();
    return p;
  };
}

std::vector<std::vector<std::byte>> run_on_host(const Source& source, const ccoll::Config& config,
                                                const std::vector<std::vector<std::byte>>& in,
                                                std::size_t count, ccoll::DataType dtype,
                                                ccoll::ReduceOp op) {
  ccoll::transport::HostThreads::Executor ex(config, source, "gpu-test");
  std::vector<std::vector<std::byte>> out(in.size(), std::vector<std::byte>(in[0].size()));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(in.size());
  for (std::size_t r = 0; r < in.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        ex.run(static_cast<int>(r), in[r].data(), out[r].data(), count, dtype, op);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw std::runtime_error("host-threads reference run: " + e);
  return out;
}

Source for_collective(const Source& source, ccoll::plan::Collective c) {
  return [source, c](const ccoll::plan::PlanRequest& r) {
    ccoll::plan::PlanRequest req = r;
    req.collective = c;
    return source(req);
  };
}

namespace {

// Rank `rank`'s buffers as regions: one around both when they share an allocation (in place),
// else one around each; `kGuard` elements on either side.
RankBuffers regions_of(ccoll::plan::Collective c, int nranks, std::size_t count, std::size_t elem,
                       bool in_place, const void* send, void* recv) {
  const auto p = static_cast<std::size_t>(nranks);
  const std::size_t in_bytes =
      (c == ccoll::plan::Collective::reduce_scatter ? p : 1) * count * elem;
  const std::size_t out_bytes = (c == ccoll::plan::Collective::all_gather ? p : 1) * count * elem;
  const std::size_t guard = ccoll::testing::kGuard * elem;
  auto* s = static_cast<std::byte*>(const_cast<void*>(send));
  auto* r = static_cast<std::byte*>(recv);
  RankBuffers b;
  if (in_place && s != nullptr && r != nullptr) {
    std::byte* lo = std::min(s, r) - guard;
    std::byte* hi = std::max(s + in_bytes, r + out_bytes) + guard;
    b.regions.push_back({lo, static_cast<std::size_t>(hi - lo)});
    b.send_region = b.recv_region = 0;
    b.send_at = static_cast<std::size_t>(s - lo);
    b.recv_at = static_cast<std::size_t>(r - lo);
    return b;
  }
  if (s != nullptr) {
    b.send_region = static_cast<int>(b.regions.size());
    b.regions.push_back({s - guard, in_bytes + 2 * guard});
    b.send_at = guard;
  }
  if (r != nullptr) {
    b.recv_region = static_cast<int>(b.regions.size());
    b.regions.push_back({r - guard, out_bytes + 2 * guard});
    b.recv_at = guard;
  }
  return b;
}

}  // namespace

std::string check_collective(ccoll::plan::Collective c, int nranks, std::size_t count,
                             ccoll::DataType dtype, ccoll::ReduceOp op, bool in_place, int root,
                             const std::function<void(const std::vector<RankBuffers>&)>& run) {
  const auto np = static_cast<std::size_t>(nranks);
  std::vector<RankBuffers> buffers(np);
  std::vector<std::string> errors(np);
  std::string failure;
  std::barrier<> meet(nranks + 1);  // the ranks and this thread, which makes the call
  std::vector<std::thread> ranks;
  ranks.reserve(np);
  for (int r = 0; r < nranks; ++r)
    ranks.emplace_back([&, r] {
      ccoll::dispatch_data_type(dtype, [&](auto t) {
        ccoll::dispatch_reduce_op(op, [&](auto tag) {
          errors[static_cast<std::size_t>(r)] =
              ccoll::testing::check_collective_call<decltype(t), decltype(tag)::value>(
                  c, nranks, r, count, in_place, root, [&](const void* s, void* q) {
                    buffers[static_cast<std::size_t>(r)] =
                        regions_of(c, nranks, count, sizeof(decltype(t)), in_place, s, q);
                    meet.arrive_and_wait();  // every rank's buffers are ready
                    meet.arrive_and_wait();  // the call was made
                  });
        });
      });
    });
  meet.arrive_and_wait();
  try {
    run(buffers);
  } catch (const std::exception& e) {
    failure = std::string("the call threw: ") + e.what();
  }
  meet.arrive_and_wait();
  for (auto& t : ranks) t.join();
  if (!failure.empty()) return failure;
  std::string all;
  for (const auto& e : errors)
    if (!e.empty()) all += (all.empty() ? "" : "; ") + e;
  return all;
}

}  // namespace gpu_test
