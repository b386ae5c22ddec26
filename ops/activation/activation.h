// Pointwise activations and the gated (GeGLU / SwiGLU) act(gate) · up.
#pragma once

#include "ops/common/activations.h"
#include "ops/common/paths.h"
#include "runtime/context.h"

namespace blockscope::ops {

// y = act(x); x and y same shape and dtype, contiguous. y may alias x (in place). 1 kernel.
void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act);

// y = act(gate) · up, fused in one kernel. gate, up, y: [rows, F] (gate/up may be column
// slices of one [rows, 2F] tensor: each row contiguous, row stride given by the tensor).
void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act);

// Rough FLOPs per element of act (the profiler's rate columns and the catalogue); the gated
// form adds the product with up.
double activation_flops_per_element(Activation act);

// Scalar definitions shared by CPU code (the CUDA kernels have their own device copies).
float activation_value(Activation act, float x);

}  // namespace blockscope::ops
