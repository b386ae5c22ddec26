// Weight-only FP8: a linear layer whose weight is stored as FP8 codes with one f32 dequantisation
// factor per output row, the activations staying in the run's dtype (docs/FP8.md):
//   y[m, n] = act(w_scale[n] · Σ_k x[m, k] · fp8(w[n, k]) + bias[n])      accumulated in f32
// The point is the bytes: a decode step (M = batch rows) streams every weight once, so FP8
// codes move half of bf16's weight bytes. Unlike fp8_linear (cuBLASLt's FP8 tensor cores, both
// operands FP8), nothing is quantized per call: the weight's codes are made once (per row, from
// its own amax) and x is read as it is. The codes are widened exactly in the kernels' inner loops:
//   CPU   M ≤ kFp8WeightSkinnyRows: a skinny kernel streaming the codes (AVX-512 or AVX2 with
//         F16C where the CPU has them: 16 or 8 codes widened per step through f16); larger M:
//         the weight dequantized to f32 in panels of rows, each panel one sgemm;
//   CUDA  the linear's weight-streaming kernel (ops/linear/weight_streaming.cuh) reading codes,
//         16 rows of x per pass (grid.y = ⌈M / 16⌉ passes, each streaming the weight again: the
//         kernel is for decode's M; a prefill at large M on a GPU belongs to precision.gemm).
#pragma once

#include "runtime/context.h"

namespace blockscope::ops {

// Rows up to which the CPU runs the skinny kernel (decode's batch); beyond, panels and sgemm.
inline constexpr int64_t kFp8WeightSkinnyRows = 16;

// x [..., K] contiguous of a compute dtype (f32, f16, bf16); w [N, K] FP8 codes (fp8_e4m3 or
// fp8_e5m2), contiguous; w_scale f32 [N]: row n's dequantisation factor; bias [N] of x's dtype
// or undefined; y [..., N] contiguous of x's dtype. gelu: tanh-GELU after the bias. 1 kernel.
void fp8_weight_linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& bias,
                       Tensor& y, bool gelu = false);

}  // namespace blockscope::ops
