// ccoll_perf/perf_prepare.hpp: what a ccoll_perf run is made of, from its options
// (perf_options.hpp): the physical topology, the algorithms made from the library's registry on
// it (or on abstract ranks) and their rank count, the GPU transport's backend, the sizes swept,
// and the output files checked before anything runs.
//
// Every mistake found here is a usage error naming the flag, raised before a rank starts: a
// topology that does not load, an algorithm that cannot be planned on it, rank counts that
// disagree, a GPU transport without a backend in this build.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccoll/algo/gpu_tuning.hpp"
#include "ccoll/algo/registry.hpp"
#include "ccoll/algo/tuning_table_json.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/physical/graph.hpp"
#include "ccoll/physical/load.hpp"
#include "ccoll/plan/collective.hpp"
#include "device_backend.hpp"
#include "perf_options.hpp"
#include "transport_registry.hpp"

namespace ccoll_perf {

// The registered device backend of GPU transport `name` (device_backend.hpp), or a usage error:
// `found` is what find_device_transport(name) returned.
inline const DeviceTransportEntry& require_device_transport(std::string_view name,
                                                            const DeviceTransportEntry* found) {
  check_transport_built(transport_entry(name));
  if (found == nullptr) {
    throw UsageError("--transport " + std::string(name) +
                     ": not available in this build (ccoll_perf has no backend for it: a file "
                     "registering it beside benchmarks/ccoll_perf/cuda_virtual_backend.cu would "
                     "add one)");
  }
  return *found;
}

// One algorithm of a run, made: its name (the algo column), its registry entry and schedule, and
// the logical topology that ccoll::Allreduce<Transport, algo::Registered, Schedule> is built on.
struct PreparedAlgorithm {
  std::string name;
  ccoll::algo::AlgorithmSpec spec;
  ccoll::algo::Registered logical;
};

// -a auto on `table`: the BySize policy, as a registered algorithm.
inline ccoll::algo::Registered by_size_on(ccoll::algo::TuningTable table,
                                          const ccoll::algo::AlgorithmRequest& req) {
  ccoll::algo::Registered logical = ccoll::algo::registered_by_size(req, std::move(table));
  // Relays where the graph needs them, placed as make_algorithm places the registry's entries'.
  return req.topology == nullptr ? logical
                                 : ccoll::algo::on_graph(logical, *req.topology, req.host_relays);
}

// -a auto with --tuning FILE: the BySize policy on that table.
inline ccoll::algo::Registered tuned_by_size(const std::string& path,
                                             const ccoll::algo::AlgorithmRequest& req) {
  std::ifstream in(path);
  if (!in) throw UsageError("--tuning: cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return by_size_on(ccoll::algo::tuning_table_from_json(text.str()), req);
}

// -a NAME+ll: the algorithm's plans in the LowLatency protocol, as a one-rule tuning table for
// `collective` (so a run can time both protocols of one algorithm, as --tune does).
inline ccoll::algo::Registered low_latency_variant(const std::string& name,
                                                   ccoll::plan::Collective collective) {
  ccoll::algo::SizeRule rule;
  rule.algorithm = name.substr(0, name.size() - ll_suffix().size());
  rule.protocol = ccoll::protocol::Id::low_latency;
  rule.collective = collective;
  const ccoll::algo::BySize policy(ccoll::algo::TuningTable{{rule}});
  return ccoll::algo::Registered(
      name, [policy](const ccoll::plan::PlanRequest& r) { return policy.build(r); }, 0, {}, policy);
}

// The ranks of `logical`'s plans that contribute and receive on `nranks` ranks: every one on
// abstract ranks; on a graph, all but the relays (read from a plan built for `overlap`, the
// schedule the run uses, so a forest is solved once).
// Reduce-scatter and all-gather are refused with relays: the sweep cuts its buffers into a block
// per rank (runner.cpp), where a relay would have none.
inline std::vector<bool> active_ranks(
    const ccoll::algo::Registered& logical, int nranks, bool overlap,
    ccoll::plan::Collective collective = ccoll::plan::Collective::allreduce) {
  if (logical.nranks() == 0) return {};
  ccoll::plan::PlanRequest req;
  req.nranks = nranks;
  req.count = static_cast<std::uint64_t>(nranks) * 64;
  req.overlap = overlap;
  std::vector<bool> active = logical.build(req).active;
  if (ccoll::plan::has_blocks(collective) &&
      std::find(active.begin(), active.end(), false) != active.end())
    throw std::invalid_argument("-C " + std::string(ccoll::plan::collective_name(collective)) +
                                ": -a " + logical.name +
                                " plans relays (ranks without a block) on this topology; the "
                                "benchmark gives every rank a block");
  return active;
}

// What a run needs beyond its options: the physical topology (--topology), the algorithms made on
// it (or on nranks abstract ranks) and the rank count.
struct Prepared {
  std::shared_ptr<const ccoll::physical::PhysicalTopology> topology;  // null: abstract ranks
  int nranks = 0;
  std::vector<PreparedAlgorithm> algos;
};

// Elements for a message of `bytes`: whole elements only (nccl-tests rounds the same way).
inline std::uint64_t elements_for(std::uint64_t bytes, ccoll::DataType d) {
  return bytes / ccoll::size_of(d);
}

// Loads --topology and makes every -a algorithm. The rank count is -t's (or mpirun's), else the
// one the algorithms were planned for (a forest's: the graph's GPUs and relays), else 4. A given
// count that disagrees with an algorithm's is a usage error naming both (`ranks_from` names where
// the given count came from); so are algorithms planned for different counts. Planning itself
// (a forest's solve) happens on the first call of each schedule, not here.
// `measured`: the topology to plan on instead of loading --topology (ccoll_perf measures it under
// mpirun with --topology measure).
inline Prepared prepare_algorithms(
    const Options& o, const std::string& ranks_from = "-t/--nranks",
    std::shared_ptr<const ccoll::physical::PhysicalTopology> measured = nullptr) {
  Prepared p;
  if (measured) {
    p.topology = std::move(measured);
  } else if (!o.topology.empty()) {
    try {
      p.topology = std::make_shared<const ccoll::physical::PhysicalTopology>(
          ccoll::physical::load(o.topology));
    } catch (const std::exception& e) {
      throw UsageError("--topology: " + std::string(e.what()));
    }
  }
  const std::string on = p.topology ? " on topology '" + p.topology->name + "'" : "";
  int fixed = 0;
  std::string fixed_by;
  for (const auto& name : o.algos) {
    const bool low_latency = name.ends_with(ll_suffix());
    const ccoll::algo::AlgorithmSpec spec =
        find_algorithm(low_latency ? name.substr(0, name.size() - ll_suffix().size()) : name);
    const ccoll::algo::AlgorithmRequest req{p.topology.get(), o.nranks, o.split};
    std::optional<ccoll::algo::Registered> logical;
    try {
      if (low_latency)
        logical.emplace(low_latency_variant(name, o.collective));
      else if (spec.algorithm.name == "auto" && !o.tuning_path.empty())
        logical.emplace(tuned_by_size(o.tuning_path, req));
      else if (spec.algorithm.name == "auto" && is_device(o.transport))
        logical.emplace(by_size_on(ccoll::algo::gpu_tuning_table(), req));  // measured on a GPU
      else
        logical.emplace(ccoll::algo::make_algorithm(spec.algorithm, req));
    } catch (const std::exception& e) {
      std::string msg = "-a/--algo ";
      msg.append(name).append(on).append(": ").append(e.what());
      throw UsageError(msg);
    }
    if (const int n = logical->nranks(); n > 0) {
      if (o.nranks_given && n != o.nranks) {
        std::string msg = ranks_from;
        msg.append(" ")
            .append(std::to_string(o.nranks))
            .append(" disagrees with algorithm '")
            .append(name)
            .append("', planned for ")
            .append(std::to_string(n))
            .append(" ranks")
            .append(on);
        if (ranks_from == "-t/--nranks")
          msg.append(" (leave -t out: the topology sets the rank count)");
        else
          msg.append(" (start ").append(std::to_string(n)).append(")");
        throw UsageError(msg);
      }
      if (fixed != 0 && n != fixed) {
        std::string msg = "-a/--algo: '";
        msg.append(fixed_by)
            .append("' was planned for ")
            .append(std::to_string(fixed))
            .append(" ranks")
            .append(on)
            .append(", '")
            .append(name)
            .append("' for ")
            .append(std::to_string(n))
            .append(" (run them separately)");
        throw UsageError(msg);
      }
      fixed = n;
      fixed_by = name;
    }
    p.algos.push_back(PreparedAlgorithm{name, spec, std::move(*logical)});
  }
  p.nranks = fixed > 0 ? fixed : o.nranks;
  // What needs the rank count, known only now (a topology's, mpirun's).
  if (ccoll::plan::has_root(o.collective) && o.root >= p.nranks)
    throw UsageError("--root " + std::to_string(o.root) + ": expected a rank below the " +
                     std::to_string(p.nranks) + " ranks" + on);
  if (ccoll::plan::has_blocks(o.collective) &&
      elements_for(o.max_bytes, o.dtype) < static_cast<std::uint64_t>(p.nranks))
    throw UsageError(
        "-e/--maxbytes: " + std::to_string(o.max_bytes) + " B holds fewer than one " +
        std::string(ccoll::to_string(o.dtype)) + " per rank; -C " +
        std::string(ccoll::plan::collective_name(o.collective)) + " on " +
        std::to_string(p.nranks) + " ranks needs at least " +
        std::to_string(static_cast<std::uint64_t>(p.nranks) * ccoll::size_of(o.dtype)) +
        " B (smaller sizes are skipped)");
  return p;
}

// Checks that an output file (--json, --csv) can be written, before the run rather than after it:
// throws std::runtime_error naming the flag (main: exit status 1, as when the write fails). An
// existing file is opened for appending and left as it is; a new one is created and removed.
inline void check_output_path(std::string_view flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string what = std::string(flag) + ": cannot write '" + path + "'";
  if (fs::is_directory(path, ec)) throw std::runtime_error(what + ": it is a directory");
  const bool existed = fs::exists(path, ec);
  errno = 0;
  {
    std::ofstream f(path, std::ios::app);
    if (!f) {
      const int e = errno;
      throw std::runtime_error(what + (e ? std::string(": ") + std::strerror(e) : std::string()));
    }
  }
  if (!existed) fs::remove(path, ec);
}

// Message sizes min, min*f, min*f^2 ... <= max (each rounded down to whole bytes), as nccl-tests.
inline std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                             double factor) {
  std::vector<std::uint64_t> sizes;
  if (min_bytes == 0) min_bytes = 1;
  if (factor <= 1.0) {
    sizes.push_back(min_bytes);
    return sizes;
  }
  double s = static_cast<double>(min_bytes);
  while (s <= static_cast<double>(max_bytes) * (1 + 1e-12)) {
    const auto bytes = static_cast<std::uint64_t>(s);
    if (sizes.empty() || bytes != sizes.back()) sizes.push_back(bytes);
    s *= factor;
  }
  return sizes;
}

}  // namespace ccoll_perf
