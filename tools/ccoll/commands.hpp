// Sub-commands of the `ccoll` CLI; each lives in its own file (cmd_<name>.cpp).
#pragma once

namespace ccoll::cli {
int cmd_plan(int argc, char** argv);      // ccoll plan ...      (tools/ccoll/cmd_plan.cpp)
int cmd_simulate(int argc, char** argv);  // ccoll simulate ...  (tools/ccoll/cmd_simulate.cpp)
int cmd_schedule(int argc, char** argv);  // ccoll schedule ...  (tools/ccoll/cmd_schedule.cpp)
int cmd_fit(int argc, char** argv);       // ccoll fit ...       (tools/ccoll/cmd_fit.cpp)
}  // namespace ccoll::cli
