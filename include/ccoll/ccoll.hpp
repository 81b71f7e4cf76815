// ccoll/ccoll.hpp: everything a user of the allreduce API needs, in one include.
//
// The public allreduce (Allreduce, Config, the transport, topology and schedule policies) and the
// core vocabulary (DataType, ReduceOp, Error). Plan builders, the verifier and the simulator have
// their own headers under plan/, topology/ and model/.
#pragma once

#include "ccoll/allreduce.hpp"
#include "ccoll/config.hpp"
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/schedule/pipelined.hpp"
#include "ccoll/topology/concepts.hpp"
#include "ccoll/topology/direct.hpp"
#include "ccoll/topology/ring.hpp"
#include "ccoll/transport.hpp"
