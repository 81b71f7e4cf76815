// `ccoll`: plan, simulate and schedule allreduces from the command line.
#include <cstdio>
#include <cstring>
#include <exception>

#include "commands.hpp"

namespace {
void usage() {
  std::fputs(
      "usage: ccoll <command> [options]\n"
      "  plan       build a logical topology / plan on a physical topology (--help for options)\n"
      "  simulate   predict a plan's time on a physical topology\n"
      "  schedule   gradient-level schedules (WFBP, MG-WFBP, ASC-WFBP, optimal, ...)\n"
      "  fit        alpha, beta (and gamma) from nccl-tests output or a ccoll_perf JSON report\n",
      stderr);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  try {
    if (std::strcmp(argv[1], "plan") == 0) return ccoll::cli::cmd_plan(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "simulate") == 0) return ccoll::cli::cmd_simulate(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "schedule") == 0) return ccoll::cli::cmd_schedule(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "fit") == 0) return ccoll::cli::cmd_fit(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "ccoll: unknown command '%s'\n", argv[1]);
  usage();
  return 2;
}
