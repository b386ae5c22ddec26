// The device implementations behind the public elementwise ops: ops/elementwise/cpu.cpp and ops/elementwise/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

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
