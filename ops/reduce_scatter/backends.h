// The device implementations behind reduce_scatter (cpu.cpp, cuda.cu), called by run_op after
// validation. The CUDA one is declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/reduce_scatter/reduce_scatter.h"

namespace blockscope::ops::cpu {
void reduce_scatter(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void reduce_scatter(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm);
}  // namespace blockscope::ops::cuda

namespace blockscope::ops::kernel_names {
inline constexpr char kReduceScatter[] = "reduce_scatter_sum";
}  // namespace blockscope::ops::kernel_names
