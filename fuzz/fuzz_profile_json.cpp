// libFuzzer target: the layer-profile loader (gradient::profile_from_json_text, the text path of
// load_profile) on arbitrary text. The documented failure is ccoll::Error; any other exception (a
// nlohmann::json one included), a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ccoll/gradient/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto p = ccoll::gradient::profile_from_json_text(text);
    if (p.total_bytes() > (std::uint64_t{1} << 53)) __builtin_trap();
    const auto back = ccoll::gradient::profile_from_json(ccoll::gradient::to_json(p));
    if (back.num_layers() != p.num_layers()) __builtin_trap();
  } catch (const ccoll::Error& e) {
    if (std::string(e.what()).size() > 600) __builtin_trap();  // messages stay bounded
  }
  return 0;
}
