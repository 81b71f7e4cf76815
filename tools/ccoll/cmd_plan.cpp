// ccoll plan: build a plan on a physical topology and print its trees and predicted time.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "topology_args.hpp"

int ccoll::cli::cmd_plan(int argc, char** argv) {
  return run_plan(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
