// The device implementations behind the public norm ops: ops/norm/cpu.cpp and ops/norm/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/norm/norm.h"

namespace blockscope::ops::cpu {
void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y);
void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y);
void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y);
}  // namespace blockscope::ops::cuda

// The names this op's kernels are recorded under (the profiler's kernel table, the tests'
// kernel checks), one list for both backends: the CPU records its work under the CUDA kernel's
// name, so the tables of the two devices line up.
namespace blockscope::ops::kernel_names {
inline constexpr char kLayerNorm[] = "layer_norm_kernel";
inline constexpr char kRmsNorm[] = "rms_norm_kernel";
}  // namespace blockscope::ops::kernel_names
