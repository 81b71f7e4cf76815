// ccoll/physical/load.hpp: a physical topology from a file or a preset name, the one loader that
// the tools, the benchmark and user code share.
//
// A file is read by its first non-blank character: '{' or '[' the JSON format
// (physical/json_loader.hpp), '<' NCCL's topology dump (physical/nccl_xml_loader.hpp), anything
// else the matrix of `nvidia-smi topo -m` (physical/nvidia_smi_loader.hpp); docs/formats.md
// documents all three. A name that is not a readable file is looked up among the presets
// (physical/presets.hpp). Needs nlohmann-json.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ccoll/physical/graph.hpp"
#include "ccoll/physical/json_loader.hpp"
#include "ccoll/physical/nccl_xml_loader.hpp"
#include "ccoll/physical/nvidia_smi_loader.hpp"
#include "ccoll/physical/presets.hpp"

namespace ccoll::physical {

// Parses the text of a topology file; `where` names it in errors and becomes the default name.
inline PhysicalTopology topology_from_file_text(const std::string& text, const std::string& where) {
  const auto first = text.find_first_not_of(" \t\r\n");
  const char c = first == std::string::npos ? '\0' : text[first];
  PhysicalTopology t;
  if (first == std::string::npos)
    throw TopologyError(where +
                        ": empty (expected topology JSON, NCCL topology XML or the text of "
                        "nvidia-smi topo -m)");
  if (c == '<') {
    t = topology_from_nccl_xml(text);
  } else if (c == '{' || c == '[') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      // nlohmann quotes the whole last token: a long string made a message as long as the file.
      throw TopologyError(where + ": not valid JSON: " + json_detail::bounded(e.what()));
    }
    try {
      t = topology_from_json(j, topology_name_of_file(where));
    } catch (const TopologyError& e) {
      throw TopologyError(where + ": " + e.what());
    }
    if (!j.contains("name")) t.name = where;
    return t;
  } else {
    t = topology_from_nvidia_smi(text);
  }
  t.name = topology_name_of_file(where);
  return t;
}

// A readable file, else a preset; validated.
inline PhysicalTopology load(const std::string& file_or_preset) {
  PhysicalTopology t;
  if (std::ifstream in(file_or_preset); in) {
    std::stringstream ss;
    ss << in.rdbuf();
    t = topology_from_file_text(ss.str(), file_or_preset);
  } else {
    try {
      t = preset(file_or_preset);
    } catch (const TopologyError& e) {
      throw TopologyError("topology \"" + file_or_preset +
                          "\" is neither a readable file nor a preset (" + e.what() + ")");
    }
  }
  t.validate();
  return t;
}

}  // namespace ccoll::physical
