// ccoll fit: alpha, beta (and gamma) from nccl-tests output or a ccoll_perf JSON report.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fit_args.hpp"

int ccoll::cli::cmd_fit(int argc, char** argv) {
  return run_fit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
