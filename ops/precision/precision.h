// The FP8 casts and the scaling kernels around an FP8 GEMM (the profiler's `precision` family).
// FP8 is a storage type (runtime/dtype.h): these ops move values between the compute types
// (f32, f16, bf16) and FP8 with a per-tensor scale, as Transformer Engine's recipes do:
//
//   quantize    y = fp8(f32(x · scale))   rounded to nearest even, saturating to ±max (satfinite)
//   dequantize  y = f32(x) · scale_inv    rounded to y's compute type
//   amax        amax = max |x|            what a recipe derives the next scale from
//
// `scale`, `scale_inv` and `amax` are f32 tensors of one element on the op's device, so a
// recipe runs without the host reading them back (and inside a CUDA graph). A NaN in x makes
// amax NaN; max over no elements is 0.
#pragma once

#include "runtime/context.h"

namespace blockscope::ops {

// FLOPs per element, the profiler's and the catalogue's: a multiply (quantize, dequantize); an
// absolute value and a compare (amax, and quantize's fused amax).
inline constexpr double kQuantizeFlopsPerElement = 1.0;
inline constexpr double kDequantizeFlopsPerElement = 1.0;
inline constexpr double kAmaxFlopsPerElement = 1.0;

// x [...] f32/f16/bf16 -> y [...] fp8_e4m3 or fp8_e5m2, both contiguous, same shape; scale f32
// [1]. With `amax` (f32 [1]; undefined: none) the same kernel also makes amax = max(amax,
// max |x|): the running maximum a delayed-scaling recipe keeps in its history. 1 kernel.
void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax = Tensor());

// x [...] fp8 -> y [...] f32/f16/bf16, both contiguous, same shape; scale_inv f32 [1]. 1 kernel.
void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y);

// x [...] f32/f16/bf16, contiguous -> amax f32 [1] = max |x|. CUDA: a memset and 1 kernel
// (the blocks' maxima meet in an atomic max); CPU: 1 kernel.
void amax(Context& ctx, const Tensor& x, Tensor& amax);

}  // namespace blockscope::ops
