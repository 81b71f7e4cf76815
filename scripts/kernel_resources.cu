// scripts/kernel_resources.cu: the main kernels of ccoll's CUDA executors, instantiated for
// scripts/kernel_resources, which compiles this file with `ptxas -v` and checks each kernel's
// registers, stack and spills (no GPU needed). f32 sum is the plainest instantiation; bf16 avg
// accumulates in fp32 and scales: the most registers of the element loop (127 per thread before
// its unroll was fitted to the launch bounds). Each launch kernel has a LowLatency form (`,ll` in
// the table) with no Simple loop.
#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"
#include "ccoll/transport/cuda/p2p_kernel.cuh"
#include "ccoll/transport/cuda/virtual_ranks_kernel.cuh"

namespace ccoll::transport::cuda {

template <class T, ReduceOp Op>
void instantiate() {
  // Taking the kernels' addresses instantiates them.
  [[maybe_unused]] volatile auto a = &virtual_ranks_kernel<T, Op, false>;
  [[maybe_unused]] volatile auto l = &virtual_ranks_kernel<T, Op, true>;
  [[maybe_unused]] volatile auto b = &session_kernel<T, Op>;
  [[maybe_unused]] volatile auto c = &p2p_kernel<T, Op, false>;
  [[maybe_unused]] volatile auto m = &p2p_kernel<T, Op, true>;
  [[maybe_unused]] volatile auto d = &p2p_session_kernel<T, Op>;
}

template void instantiate<float, ReduceOp::sum>();
template void instantiate<BFloat16, ReduceOp::avg>();

}  // namespace ccoll::transport::cuda
