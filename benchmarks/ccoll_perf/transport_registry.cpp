// ccoll_perf/transport_registry.cpp: the table of transports (transport_registry.hpp). Each entry
// comes from its transport's file; naming every one here makes the table complete wherever this
// file is linked.
#include "transport_registry.hpp"

#include <algorithm>
#include <stdexcept>

#include "cli_args.hpp"

namespace ccoll_perf {

TransportEntry threads_transport();       // transport_threads.cpp
TransportEntry shm_transport();           // transport_shm.cpp
TransportEntry mpi_transport();           // transport_mpi.cpp
TransportEntry mpi_hybrid_transport();    // transport_mpi.cpp
TransportEntry cuda_virtual_transport();  // transport_cuda.cpp
TransportEntry cuda_p2p_transport();      // transport_cuda.cpp

const std::vector<TransportEntry>& transports() {
  static const std::vector<TransportEntry> table{threads_transport(),      shm_transport(),
                                                 mpi_transport(),          mpi_hybrid_transport(),
                                                 cuda_virtual_transport(), cuda_p2p_transport()};
  return table;
}

const TransportEntry* find_transport(std::string_view name) {
  const auto& t = transports();
  const auto it = std::find_if(t.begin(), t.end(), [&](const auto& e) { return e.name == name; });
  return it == t.end() ? nullptr : &*it;
}

const TransportEntry& transport_entry(std::string_view name) {
  const TransportEntry* t = find_transport(name);
  if (t == nullptr) throw std::invalid_argument("unknown transport '" + std::string(name) + "'");
  return *t;
}

bool is_device(std::string_view name) {
  const TransportEntry* t = find_transport(name);
  return t != nullptr && t->ranks == RankPlacement::device;
}

namespace {
// "a", "a or b", "a, b or c".
std::string join_or(const std::vector<std::string>& items) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i)
    s.append(i == 0 ? "" : i + 1 == items.size() ? " or " : ", ").append(items[i]);
  return s;
}
}  // namespace

std::string transport_names() {
  std::vector<std::string> names;
  for (const auto& t : transports()) names.emplace_back(t.name);
  return join_or(names);
}

std::string transport_help() {
  std::vector<std::string> host;
  std::vector<std::string> device;
  for (const auto& t : transports()) {
    std::string item(t.name);
    item.append(" (").append(t.help).append(")");
    (t.ranks == RankPlacement::device ? device : host).push_back(std::move(item));
  }
  std::string s = join_or(host);
  if (!host.empty() && !device.empty()) s += ", ";
  return s + join_or(device);
}

void check_transport_built(const TransportEntry& t) {
  if (t.unavailable.empty()) return;
  std::string message = "--transport ";
  message.append(t.name).append(": ").append(t.unavailable);
  throw ccoll::cli::UsageError(message);
}

}  // namespace ccoll_perf
