// ccoll schedule: gradient-level schedules (WFBP, MG-WFBP, ASC-WFBP, the optimum, baselines).
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "schedule_args.hpp"

int ccoll::cli::cmd_schedule(int argc, char** argv) {
  return run_schedule(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
