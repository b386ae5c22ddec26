// The FP8 casts and the scaling kernels around an FP8 GEMM (the profiler's `precision` family).
// FP8 is a storage type (runtime/dtype.h): these ops move values between the compute types
// (f32, f16, bf16) and FP8 with a per-tensor scale, as Transformer Engine's recipes do:
//
//   quantize    y = fp8(f32(x · scale))   rounded to nearest even, saturating to ±max (satfinite)
//   dequantize  y = f32(x) · scale_inv    rounded to y's compute type
//   amax        amax = max |x|            what a recipe derives the next scale from
//   fp8_scale_update   scale = fp8_max / amax / 2^margin from an amax history (the recipe's step)
//
// `scale`, `scale_inv` and `amax` are f32 tensors of one element on the op's device, so a
// recipe runs without the host reading them back (and inside a CUDA graph). A NaN in x makes
// amax NaN; max over no elements is 0.
#pragma once

#include <string>

#include "runtime/context.h"

namespace blockscope::ops {

// FLOPs per element, the profiler's and the catalogue's: a multiply (quantize, dequantize); an
// absolute value and a compare (amax, and quantize's fused amax).
inline constexpr double kQuantizeFlopsPerElement = 1.0;
inline constexpr double kDequantizeFlopsPerElement = 1.0;
inline constexpr double kAmaxFlopsPerElement = 1.0;

// The longest amax history fp8_scale_update takes (one block of threads reduces and rolls it).
inline constexpr int64_t kMaxAmaxHistory = 1024;

// How a recipe reads its amax history (Transformer Engine's DelayedScaling amax_compute_algo).
enum class AmaxAlgo { max, most_recent };
const char* amax_algo_name(AmaxAlgo algo);
bool parse_amax_algo(const std::string& text, AmaxAlgo* out);

struct ScaleUpdate {
  DType format = DType::fp8_e4m3;  // whose largest value the scale maps the amax to
  AmaxAlgo algo = AmaxAlgo::max;
  int margin = 0;     // scale = fp8_max / amax / 2^margin: headroom of 2^margin
  bool roll = false;  // after: entry i + 1 = entry i, entry 0 = 0 (the next step accumulates into it)
};

// x [...] f32/f16/bf16 -> y [...] fp8_e4m3 or fp8_e5m2, both contiguous, same shape; scale f32
// [1]. With `amax` (f32 [1]; undefined: none) the same kernel also makes amax = max(amax,
// max |x|): the running maximum a delayed-scaling recipe keeps in its history. 1 kernel.
void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax = Tensor());

// x [...] fp8 -> y [...] f32/f16/bf16, both contiguous, same shape; scale_inv f32 [1]. 1 kernel.
void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y);

// x [...] f32/f16/bf16, contiguous -> amax f32 [1] = max |x|. CUDA: a memset and 1 kernel
// (the blocks' maxima meet in an atomic max); CPU: 1 kernel.
void amax(Context& ctx, const Tensor& x, Tensor& amax);

// A per-tensor recipe's scale step. amax_history f32 [H], 1 <= H <= kMaxAmaxHistory, entry 0
// the newest; scale and scale_inv f32 [1]. amax = the history's maximum (AmaxAlgo::max) or
// entry 0 (most_recent); when it is finite and above 0, scale = format's largest / amax /
// 2^margin (FLT_MAX where that overflows), else the scale is kept (a NaN or an all-zero
// history changes nothing); scale_inv = 1 / scale. Then, with `roll`, the history shifts by one.
// Current scaling is H = 1 without roll (the amax op's output as the history). With `saturation`
// (f32 [3], undefined: none), first scale_rule::count_saturation of entry 0 -- the step's amax --
// against the scale before the update: delayed scaling's check of the cast it just ran, which
// clipped where amax · scale passed the format's clip threshold (in current scaling the scale is
// made from the step's own amax, so there is nothing to count).
// 1 kernel.
void fp8_scale_update(Context& ctx, Tensor& amax_history, Tensor& scale, Tensor& scale_inv, const ScaleUpdate& update,
                      const Tensor& saturation = Tensor());

}  // namespace blockscope::ops
