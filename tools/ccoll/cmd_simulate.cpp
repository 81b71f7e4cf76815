// ccoll simulate: predict allreduce times on a physical topology with the discrete-event simulator.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "topology_args.hpp"

int ccoll::cli::cmd_simulate(int argc, char** argv) {
  return run_simulate(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
