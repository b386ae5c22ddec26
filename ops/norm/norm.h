// LayerNorm and RMSNorm over the last dimension (statistics in f32). 1 kernel each.
#pragma once

#include "runtime/context.h"

namespace blockscope::ops {

// FLOPs per element of x (the profiler's and the catalogue's): LayerNorm's two reductions,
// the centring, the normalising multiply and the affine pair; RMSNorm's square-sum and two
// multiplies.
inline constexpr double kLayerNormFlopsPerElement = 7.0;
inline constexpr double kRmsNormFlopsPerElement = 4.0;

// y = (x - mean) / sqrt(var + eps) · weight + bias. x, y: [..., N]; weight, bias: [N]
// (bias may be undefined). Biased variance, as torch.nn.LayerNorm.
void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y);

// y = x / sqrt(mean(x²) + eps) · weight (Llama's RMSNorm: normalise in f32, then scale).
void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y);

}  // namespace blockscope::ops
