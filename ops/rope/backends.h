// The device implementations behind the public rope op: ops/rope/cpu.cpp and ops/rope/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/rope/rope.h"

namespace blockscope::ops::cpu {
// positions: per-sequence starting positions (defined), or none and position_offset for all.
void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset, IndexView positions);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
// positions: per-sequence starting positions (defined), or none and position_offset for all.
void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset, IndexView positions);
}  // namespace blockscope::ops::cuda

// The names this op's kernels are recorded under (the profiler's kernel table, the tests'
// kernel checks), one list for both backends: the CPU records its work under the CUDA kernel's
// name, so the tables of the two devices line up.
namespace blockscope::ops::kernel_names {
inline constexpr char kRope[] = "rope_kernel";
}  // namespace blockscope::ops::kernel_names
