// ccoll_perf/ccoll_collectives.cpp: the ccoll::Config of a run and ccoll's Allreduce on the
// transport it names, made by that transport's entry (transport_registry.hpp,
// allreduce_collective.hpp).
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "perf_prepare.hpp"
#include "runner.hpp"
#include "transport_registry.hpp"

namespace ccoll_perf {

ccoll::Config make_config(const Options& knobs, int rank, int nranks, const std::string& session) {
  ccoll::Config cfg;
  cfg.rank = rank;
  cfg.nranks = nranks;
  cfg.session = session;
  if (knobs.slot_bytes != 0) cfg.slot_bytes = knobs.slot_bytes;
  if (knobs.nslots != 0) cfg.nslots = knobs.nslots;
  cfg.nchannels = knobs.nchannels;
  cfg.nchunks = knobs.nchunks;
  if (knobs.stream_slot_bytes) cfg.stream_slot_bytes = *knobs.stream_slot_bytes;
  if (knobs.slot_stores == Options::SlotStores::streamed) cfg.tune_slot_stores = false;
  if (knobs.slot_stores == Options::SlotStores::cached) cfg.stream_slot_bytes = 0;
  if (knobs.timeout_ms) cfg.timeout = std::chrono::milliseconds(*knobs.timeout_ms);
  cfg.protocol = knobs.protocol;
  if (knobs.in_band_agreement_bytes) cfg.in_band_agreement_bytes = *knobs.in_band_agreement_bytes;
  if (knobs.eager_rooted_bytes) cfg.eager_rooted_bytes = *knobs.eager_rooted_bytes;
  return cfg;
}

std::unique_ptr<Collective> make_collective(std::string_view transport,
                                            const PreparedAlgorithm& algo,
                                            const ccoll::Config& config,
                                            const CollectiveCall& call) {
  const TransportEntry& t = transport_entry(transport);
  if (t.make == nullptr) {
    // Every rank of a GPU transport is in one process: device_backend.hpp, not a rank view.
    throw std::invalid_argument("--transport " + std::string(t.name) +
                                ": runs through a device transport (device_backend.hpp)");
  }
  return t.make(algo, config, call);
}

}  // namespace ccoll_perf
