// The device implementations behind all_reduce: ops/all_reduce/cpu.cpp and ops/all_reduce/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The CUDA
// one is declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/all_reduce/all_reduce.h"

namespace blockscope::ops::cpu {
void all_reduce(Context& ctx, Tensor& t, Communicator& comm);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void all_reduce(Context& ctx, Tensor& t, Communicator& comm);
}  // namespace blockscope::ops::cuda

namespace blockscope::ops::kernel_names {
inline constexpr char kAllReduce[] = "all_reduce_sum";
}  // namespace blockscope::ops::kernel_names
