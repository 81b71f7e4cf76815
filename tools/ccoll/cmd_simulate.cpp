// ccoll simulate: placeholder until its issue lands; refuses to run rather than print made-up output.
#include <cstdio>

#include "commands.hpp"

int ccoll::cli::cmd_simulate(int, char**) {
  std::fputs("ccoll simulate: not built yet\n", stderr);
  return 2;
}
