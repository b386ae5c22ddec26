#include "model/fp8_layer.h"

#include <vector>

#include "ops/fp8_linear/fp8_linear.h"
#include "ops/precision/precision.h"
#include "runtime/error.h"

namespace blockscope {

namespace {

Tensor f32_filled(Context& ctx, int64_t n, float value) {
  Tensor t = ctx.empty({n}, DType::f32);
  from_floats(t, std::vector<float>(static_cast<size_t>(n), value));
  return t;
}

ops::ScaleUpdate scale_update(const PrecisionConfig& precision, bool roll) {
  return {precision.gemm, precision.amax_algo, precision.margin, roll};
}

}  // namespace

Fp8Weight::Fp8Weight(Context& ctx, const Tensor& weight, const PrecisionConfig& precision) {
  BS_CHECK(precision.fp8(), "Fp8Weight: precision.gemm is ", dtype_name(precision.gemm), ", not an FP8 type");
  BS_CHECK_INPUT(weight.dim() == 2, "Fp8Weight: the weight ", weight.str(), " must be [out, in]");
  // The weight has the run's dtype, the FP8 GEMM's output type (a --dtype may have changed it).
  BS_CHECK_INPUT(weight.dtype() == DType::bf16 || weight.dtype() == DType::f16, "precision.gemm ",
                 dtype_name(precision.gemm), ": the FP8 GEMM writes bf16 or f16; the run's dtype is ",
                 dtype_name(weight.dtype()));
  codes_ = ctx.empty(weight.shape(), precision.gemm);
  scale_inv_ = f32_filled(ctx, 1, 1.0f);
  Tensor scale = f32_filled(ctx, 1, 1.0f), amax = f32_filled(ctx, 1, 0.0f);
  ops::amax(ctx, weight, amax);
  ops::fp8_scale_update(ctx, amax, scale, scale_inv_, scale_update(precision, false));
  ops::quantize(ctx, weight, scale, codes_);
}

Fp8Input::Fp8Input(Context& ctx, const Shape& shape, const PrecisionConfig& precision) : precision_(precision) {
  codes_ = ctx.empty(shape, precision.gemm);
  scale_ = f32_filled(ctx, 1, 1.0f);  // delayed scaling's first step: scale 1, a zero history
  scale_inv_ = f32_filled(ctx, 1, 1.0f);
  history_ = f32_filled(ctx, precision.recipe == Fp8Recipe::delayed ? precision.amax_history : 1, 0.0f);
}

void Fp8Input::quantize(Context& ctx, const Tensor& x) {
  if (precision_.recipe == Fp8Recipe::current) {
    ops::amax(ctx, x, history_);
    ops::fp8_scale_update(ctx, history_, scale_, scale_inv_, scale_update(precision_, false));
    ops::quantize(ctx, x, scale_, codes_);
  } else {
    ops::quantize(ctx, x, scale_, codes_, history_.slice(0, 0, 1));
  }
}

void Fp8Input::finish_step(Context& ctx) {
  if (precision_.recipe == Fp8Recipe::delayed)
    ops::fp8_scale_update(ctx, history_, scale_, scale_inv_, scale_update(precision_, true));
}

void fp8_gemm(Context& ctx, const Fp8Input& x, const Fp8Weight& w, const Tensor& bias, Tensor& y, bool gelu,
              const PrecisionConfig& precision) {
  ops::Fp8LinearOptions options;
  options.gelu = gelu;
  options.fast_accum = precision.fast_accum;
  ops::fp8_linear(ctx, x.codes(), x.scale_inv(), w.codes(), w.scale_inv(), bias, y, options);
}

Fp8Layer::Fp8Layer(Context& ctx, const Tensor& weight, int64_t rows, const PrecisionConfig& precision)
    : precision_(precision), weight_(ctx, weight, precision), input_(ctx, {rows, weight.size(1)}, precision) {}

void Fp8Layer::forward(Context& ctx, const Tensor& x, const Tensor& bias, Tensor& y, bool gelu) {
  input_.quantize(ctx, x);
  fp8_gemm(ctx, input_, weight_, bias, y, gelu, precision_);
  input_.finish_step(ctx);
}

}  // namespace blockscope
