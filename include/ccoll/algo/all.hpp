// ccoll/algo/all.hpp: every logical topology and the table that names them, which is what
// algo/registry.hpp holds (it includes every algorithm header); kept as a name for "everything
// under algo/".
#pragma once

#include "ccoll/algo/registry.hpp"
