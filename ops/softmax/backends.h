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

// The names this op's kernels are recorded under (the profiler's kernel table, the tests'
// kernel checks), one list for both backends: the CPU records its work under the CUDA kernel's
// name, so the tables of the two devices line up.
namespace blockscope::ops::kernel_names {
inline constexpr char kSoftmax[] = "softmax_kernel";
inline constexpr char kSoftmaxCausalScale[] = "softmax_causal_scale_kernel";
}  // namespace blockscope::ops::kernel_names
