// The device implementations behind the public softmax ops: ops/softmax/cpu.cpp and ops/softmax/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/softmax/softmax.h"

namespace blockscope::ops::cpu {
void softmax(Context& ctx, const Tensor& x, Tensor& y);
void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void softmax(Context& ctx, const Tensor& x, Tensor& y);
void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y);
}  // namespace blockscope::ops::cuda
