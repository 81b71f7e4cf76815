// libFuzzer target: physical::topology_from_nccl_xml on arbitrary text. The documented failure is
// physical::TopologyError; any other exception, a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ccoll/physical/nccl_xml_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto t = ccoll::physical::topology_from_nccl_xml(text);
    (void)t.node_count();
  } catch (const ccoll::physical::TopologyError& e) {
    if (std::string(e.what()).size() > 400) __builtin_trap();  // messages stay bounded
  }
  return 0;
}
