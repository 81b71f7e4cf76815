// ccoll/ccoll.hpp: everything a user of the collectives API needs, in one include.
//
// The public allreduce (Allreduce, Config), the host transports, the stateless logical topologies,
// the schedules, and the core vocabulary (DataType, ReduceOp, Error). Stateful topologies
// (algo/packed_forest.hpp), the algorithm registry (algo/registry.hpp), plan builders, the
// verifier and the simulator have their own headers.
#pragma once

#include "ccoll/algo/concepts.hpp"
#include "ccoll/algo/direct.hpp"
#include "ccoll/algo/double_binary_tree.hpp"
#include "ccoll/algo/ring.hpp"
#include "ccoll/algo/tree.hpp"
#include "ccoll/allreduce.hpp"
#include "ccoll/collective.hpp"
#include "ccoll/core/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/schedule/pipelined.hpp"
#include "ccoll/transport/host_threads.hpp"
#include "ccoll/transport/shared_memory.hpp"
