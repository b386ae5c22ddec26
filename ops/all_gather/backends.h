// The device implementations behind all_gather (cpu.cpp, cuda.cu), called by run_op after
// validation. The CUDA one is declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/all_gather/all_gather.h"

namespace blockscope::ops::cpu {
void all_gather(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void all_gather(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm);
}  // namespace blockscope::ops::cuda

namespace blockscope::ops::kernel_names {
inline constexpr char kAllGather[] = "all_gather";
}  // namespace blockscope::ops::kernel_names
