// The FP8 GEMM of a linear layer, through cuBLASLt's FP8 API on CUDA (docs/FP8.md):
//   t = (x · scale_x_inv) · (w · scale_w_inv)ᵀ [+ bias] [then tanh-GELU]      accumulated in f32
//   y = t rounded to y's type, or fp8(out_scale · t) when y is FP8 (saturating)
//   out_amax = max |t| (before out_scale) over t's non-NaN elements, when given: cuBLASLt's
//              AMAX_D as the simulated GPU computes it (a GPU's answer for a NaN: not yet seen;
//              the amax op, unlike it, keeps a NaN)
// x and w hold FP8 codes and their dequantisation factors (what the quantize op's scale
// inverts); the weight is nn.Linear's [out, in] -- cuBLASLt's FP8 layout rule ("TN": the
// weight transposed) is the natural one. The CPU runs the same arithmetic (codes widened to f32,
// an f32 GEMM) so configs and tests are portable; both devices refuse what cuBLASLt does.
#pragma once

#include "runtime/context.h"

namespace blockscope::ops {

struct Fp8LinearOptions {
  bool gelu = false;  // tanh-GELU after the bias (cuBLASLt's GELU / GELU_BIAS epilogue)
  // cuBLASLt's FAST_ACCUM: Hopper's tensor cores keep partial sums at reduced precision without
  // promoting them to f32 every few k-steps (faster, less exact). The CPU and the simulated GPU
  // accumulate in f32 either way.
  bool fast_accum = false;
  Tensor out_scale;  // f32 [1]: required when y is FP8, refused otherwise
  Tensor out_amax;   // f32 [1] or undefined: receives max |t|
};

// x [..., K] FP8 (contiguous), w [N, K] FP8 (contiguous), not both fp8_e5m2; scale_x_inv,
// scale_w_inv f32 [1]; bias [N] or undefined: f16 when y is f16, else bf16 (cuBLASLt's FP8
// rule); y [..., N] contiguous: f32, f16, bf16, fp8_e4m3, or fp8_e5m2 when x or w is e5m2. K
// and N multiples of 16 (16-byte rows, cuBLASLt's FP8 rule). 1 kernel.
void fp8_linear(Context& ctx, const Tensor& x, const Tensor& scale_x_inv, const Tensor& w, const Tensor& scale_w_inv,
                const Tensor& bias, Tensor& y, const Fp8LinearOptions& options = {});

}  // namespace blockscope::ops
