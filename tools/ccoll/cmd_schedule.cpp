// ccoll schedule: placeholder until its issue lands; refuses to run rather than print made-up
// output.
#include <cstdio>

#include "commands.hpp"

int ccoll::cli::cmd_schedule(int, char**) {
  std::fputs("ccoll schedule: not built yet\n", stderr);
  return 2;
}
