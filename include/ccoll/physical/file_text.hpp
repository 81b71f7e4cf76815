// ccoll/physical/file_text.hpp: reading a topology file whole, for the loaders of its formats.
//
// The loaders parse text (topology_from_nccl_xml, topology_from_nvidia_smi), so that tests and
// fuzzers feed them strings; their file forms read the file here and name the topology after it.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "ccoll/physical/graph.hpp"

namespace ccoll::physical {

// The whole of `path`; TopologyError "cannot open <kind> file" when it cannot be read.
inline std::string topology_file_text(const std::string& path, std::string_view kind) {
  std::ifstream in(path);
  if (!in) throw TopologyError("cannot open " + std::string(kind) + " file \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The topology's name for a file: its last path component.
inline std::string topology_name_of_file(const std::string& path) {
  return path.substr(path.find_last_of('/') + 1);
}

}  // namespace ccoll::physical
