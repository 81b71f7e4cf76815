// libFuzzer target: the topology JSON loader (physical::topology_from_json_text, the text path of
// load_topology_json) on arbitrary text. The documented failure is physical::TopologyError; any
// other exception (a nlohmann::json one included), a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ccoll/physical/json_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto t = ccoll::physical::topology_from_json_text(text);
    // What it read must be written back and read again to the same graph.
    const auto back = ccoll::physical::topology_from_json(ccoll::physical::topology_to_json(t));
    if (back.node_count() != t.node_count()) __builtin_trap();
  } catch (const ccoll::physical::TopologyError& e) {
    if (std::string(e.what()).size() > 600) __builtin_trap();  // messages stay bounded
  }
  return 0;
}
