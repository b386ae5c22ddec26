// The device implementations behind the public rope op: ops/rope/cpu.cpp and ops/rope/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/rope/rope.h"

namespace blockscope::ops::cpu {
void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset);
}  // namespace blockscope::ops::cuda
