#include "host_side.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "../expected_algorithms.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/physical/presets.hpp"
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

}  // namespace gpu_test
