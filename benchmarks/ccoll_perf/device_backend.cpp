// ccoll_perf/device_backend.cpp: the registry of device transports (device_backend.hpp).
#include "device_backend.hpp"

#include <algorithm>
#include <utility>

namespace ccoll_perf {

namespace {
// A function-local static, so that registrations from other files' initializers find it built
// whatever order those initializers run in.
std::vector<DeviceTransportEntry>& entries() {
  static std::vector<DeviceTransportEntry> e;
  return e;
}
}  // namespace

bool register_device_transport(DeviceTransportEntry entry) {
  entries().push_back(std::move(entry));
  return true;
}

const DeviceTransportEntry* find_device_transport(std::string_view name) {
  const auto& e = entries();
  const auto it = std::find_if(e.begin(), e.end(), [&](const auto& x) { return x.name == name; });
  return it == e.end() ? nullptr : &*it;
}

}  // namespace ccoll_perf
