// The device implementations behind the public activation ops: ops/activation/cpu.cpp and ops/activation/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/activation/activation.h"

namespace blockscope::ops::cpu {
void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act);
void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act);
void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act);
}  // namespace blockscope::ops::cuda
