// The device implementations behind the public elementwise ops: ops/elementwise/cpu.cpp and ops/elementwise/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/common/kernel_names.h"
#include "ops/elementwise/elementwise.h"

namespace blockscope::ops::cpu {
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
void mul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
void scale(Context& ctx, const Tensor& x, float factor, Tensor& out);
void copy(Context& ctx, const Tensor& src, Tensor& dst);
void masked_fill_causal(Context& ctx, const Tensor& scores, float value, Tensor& out);
void masked_fill_causal_(Context& ctx, Tensor& scores, float value);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
void mul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
void scale(Context& ctx, const Tensor& x, float factor, Tensor& out);
void copy(Context& ctx, const Tensor& src, Tensor& dst);
void masked_fill_causal(Context& ctx, const Tensor& scores, float value, Tensor& out);
void masked_fill_causal_(Context& ctx, Tensor& scores, float value);
}  // namespace blockscope::ops::cuda

// The names this op's kernels are recorded under (the profiler's kernel table, the tests'
// kernel checks), one list for both backends: the CPU records its work under the CUDA kernel's
// name, so the tables of the two devices line up.
namespace blockscope::ops::kernel_names {
inline constexpr char kAdd[] = "add_kernel";
inline constexpr char kMul[] = "mul_kernel";
inline constexpr char kScale[] = "scale_kernel";
inline constexpr char kCopy[] = "copy_kernel";
inline constexpr char kMaskedFillCausal[] = "masked_fill_causal_kernel";
}  // namespace blockscope::ops::kernel_names
