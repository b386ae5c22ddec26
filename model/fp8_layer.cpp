#include "model/fp8_layer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/fp8_linear/fp8_linear.h"
#include "ops/fp8_weight_linear/fp8_weight_linear.h"
#include "ops/precision/precision.h"
#include "ops/precision/scale_rule.h"
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

Fp8Weight::Fp8Weight(Context& ctx, const Tensor& given, const PrecisionConfig& precision, ops::WeightLayout layout) {
  Tensor weight = given;
  if (layout == ops::WeightLayout::in_out) {  // [in, out] -> [out, in], once
    BS_CHECK_INPUT(given.dim() == 2, "Fp8Weight: the weight ", given.str(), " must be 2-D");
    weight = ctx.empty({given.size(1), given.size(0)}, given.dtype());
    ops::copy(ctx, given.transpose(0, 1), weight);
  }
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
  if (precision.recipe == Fp8Recipe::delayed) saturation_ = f32_filled(ctx, 3, 0.0f);
}

void add_saturation(Fp8SaturationCounts& out, const std::string& name, const Fp8Input& input) {
  if (input.saturation().defined()) out.emplace_back(name, input.saturation());
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
    ops::fp8_scale_update(ctx, history_, scale_, scale_inv_, scale_update(precision_, true), saturation_);
}

void fp8_gemm(Context& ctx, const Fp8Input& x, const Fp8Weight& w, const Tensor& bias, Tensor& y, bool gelu,
              const PrecisionConfig& precision) {
  ops::Fp8LinearOptions options;
  options.gelu = gelu;
  options.fast_accum = precision.fast_accum;
  ops::fp8_linear(ctx, x.codes(), x.scale_inv(), w.codes(), w.scale_inv(), bias, y, options);
}

Fp8Mlp::Fp8Mlp(Context& ctx, const ops::MlpWeights& w, int64_t rows, DType dtype, const PrecisionConfig& precision)
    : precision_(precision), gated_(w.gated), activation_(w.activation), fc_bias_(w.fc_bias), proj_bias_(w.proj_bias) {
  const Tensor& last = w.gated ? w.down_weight : w.proj_weight;
  const bool out_in = w.layout == ops::WeightLayout::out_in;
  const int64_t d_model = out_in ? last.size(0) : last.size(1), d_ff = out_in ? last.size(1) : last.size(0);
  if (w.gated) {
    weights_ = {Fp8Weight(ctx, w.gate_weight, precision, w.layout), Fp8Weight(ctx, w.up_weight, precision, w.layout),
                Fp8Weight(ctx, w.down_weight, precision, w.layout)};
    gate_ = ctx.empty({rows, d_ff}, dtype);
    up_ = ctx.empty({rows, d_ff}, dtype);
  } else {
    weights_ = {Fp8Weight(ctx, w.fc_weight, precision, w.layout), Fp8Weight(ctx, w.proj_weight, precision, w.layout)};
  }
  x_ = Fp8Input(ctx, {rows, d_model}, precision);
  hidden_codes_ = Fp8Input(ctx, {rows, d_ff}, precision);
  hidden_ = ctx.empty({rows, d_ff}, dtype);
}

void Fp8Mlp::forward(Context& ctx, const Tensor& x, Tensor& y) {
  x_.quantize(ctx, x);
  if (gated_) {
    fp8_gemm(ctx, x_, weights_[0], Tensor(), gate_, false, precision_);
    fp8_gemm(ctx, x_, weights_[1], Tensor(), up_, false, precision_);
    ops::gated_activation(ctx, gate_, up_, hidden_, activation_);
  } else {
    const bool gelu_epilogue = activation_ == ops::Activation::gelu_tanh;
    fp8_gemm(ctx, x_, weights_[0], fc_bias_, hidden_, gelu_epilogue, precision_);
    if (!gelu_epilogue) ops::activation(ctx, hidden_, hidden_, activation_);
  }
  x_.finish_step(ctx);
  hidden_codes_.quantize(ctx, hidden_);
  fp8_gemm(ctx, hidden_codes_, weights_.back(), gated_ ? Tensor() : proj_bias_, y, false, precision_);
  hidden_codes_.finish_step(ctx);
}

void Fp8Mlp::add_saturation_counts(Fp8SaturationCounts& out, const std::string& prefix) const {
  add_saturation(out, prefix + "input", x_);
  add_saturation(out, prefix + "hidden", hidden_codes_);
}

Fp8Layer::Fp8Layer(Context& ctx, const Tensor& weight, int64_t rows, const PrecisionConfig& precision)
    : precision_(precision), weight_(ctx, weight, precision), input_(ctx, {rows, weight.size(1)}, precision) {}

void Fp8Layer::forward(Context& ctx, const Tensor& x, const Tensor& bias, Tensor& y, bool gelu) {
  input_.quantize(ctx, x);
  fp8_gemm(ctx, input_, weight_, bias, y, gelu, precision_);
  input_.finish_step(ctx);
}

// ---- weight-only FP8 -----------------------------------------------------------------------------

Fp8RowWeight::Fp8RowWeight(Context& ctx, const Tensor& weight, DType format, ops::WeightLayout layout,
                           const std::string& name) {
  BS_CHECK(is_fp8(format), "Fp8RowWeight: ", dtype_name(format), " is not an FP8 type");
  BS_CHECK_INPUT(weight.dim() == 2, "precision.weights: the weight ", name, " ", weight.str(), " must be 2-D");
  const bool in_out = layout == ops::WeightLayout::in_out;
  const int64_t out = weight.size(in_out ? 1 : 0), in = weight.size(in_out ? 0 : 1);
  const std::vector<float> values = to_floats(weight);  // as stored: [out, in], or [in, out]
  const auto at = [&](int64_t r, int64_t c) {
    return values[static_cast<size_t>(in_out ? c * out + r : r * in + c)];
  };
  const float max_finite = static_cast<float>(dtype_max_finite(format));
  std::vector<float> scaled(static_cast<size_t>(out * in)), factors(static_cast<size_t>(out));
  int64_t bad_row = -1;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < out; ++r) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t c = 0; c < in; ++c) {
      const float v = at(r, c);
      finite = finite && std::isfinite(v);
      amax = std::max(amax, std::fabs(v));
    }
    if (!finite) {
#pragma omp critical
      bad_row = bad_row < 0 ? r : std::min(bad_row, r);
      continue;
    }
    // The scale rule of the recipes (ops/precision/scale_rule.h): a row of zeros keeps scale 1.
    const float scale = ops::scale_rule::next_scale(amax, 1.0f, max_finite, 0);
    for (int64_t c = 0; c < in; ++c) scaled[static_cast<size_t>(r * in + c)] = at(r, c) * scale;
    factors[static_cast<size_t>(r)] = 1.0f / scale;
  }
  if (bad_row >= 0) {
    int64_t c = 0;
    while (std::isfinite(at(bad_row, c))) ++c;
    const int64_t stored_r = in_out ? c : bad_row, stored_c = in_out ? bad_row : c;
    throw InputError("precision.weights: the weight " + name + " " + weight.str() + " holds " +
                     std::to_string(at(bad_row, c)) + " at [" + std::to_string(stored_r) + ", " +
                     std::to_string(stored_c) + "]; FP8 codes are made from finite weights");
  }
  codes_ = ctx.empty({out, in}, format);
  from_floats(codes_, scaled);  // rounded to nearest even, saturating (runtime/fp8.h)
  scale_ = ctx.empty({out}, DType::f32);
  from_floats(scale_, factors);
}

void fp8_weight_gemm(Context& ctx, const Tensor& x, const Fp8RowWeight& w, const Tensor& bias, Tensor& y, bool gelu) {
  ops::fp8_weight_linear(ctx, x, w.codes(), w.scale(), bias, y, gelu);
}

std::vector<Fp8RowWeight> fp8_mlp_weights(Context& ctx, const ops::MlpWeights& w, DType format,
                                          const std::string& name) {
  const auto row_weight = [&](const Tensor& weight, const char* role) {
    return Fp8RowWeight(ctx, weight, format, w.layout, name + role);
  };
  if (w.gated) return {row_weight(w.gate_weight, "gate"), row_weight(w.up_weight, "up"), row_weight(w.down_weight, "down")};
  return {row_weight(w.fc_weight, "fc"), row_weight(w.proj_weight, "proj")};
}

Fp8WeightMlp::Fp8WeightMlp(Context& ctx, const ops::MlpWeights& w, std::vector<Fp8RowWeight> codes, int64_t rows,
                           DType dtype)
    : gated_(w.gated), activation_(w.activation), fc_bias_(w.fc_bias), proj_bias_(w.proj_bias),
      weights_(std::move(codes)) {
  BS_CHECK(weights_.size() == (gated_ ? 3u : 2u), "Fp8WeightMlp: ", weights_.size(), " weights for a ",
           gated_ ? "gated" : "plain", " MLP");
  const int64_t d_ff = weights_.back().codes().size(1);  // down / proj [d_model, d_ff]
  if (gated_) {
    gate_ = ctx.empty({rows, d_ff}, dtype);
    up_ = ctx.empty({rows, d_ff}, dtype);
  }
  hidden_ = ctx.empty({rows, d_ff}, dtype);
}

void Fp8WeightMlp::forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (gated_) {
    fp8_weight_gemm(ctx, x, weights_[0], Tensor(), gate_);
    fp8_weight_gemm(ctx, x, weights_[1], Tensor(), up_);
    ops::gated_activation(ctx, gate_, up_, hidden_, activation_);
  } else {
    const bool gelu_epilogue = activation_ == ops::Activation::gelu_tanh;
    fp8_weight_gemm(ctx, x, weights_[0], fc_bias_, hidden_, gelu_epilogue);
    if (!gelu_epilogue) ops::activation(ctx, hidden_, hidden_, activation_);
  }
  fp8_weight_gemm(ctx, hidden_, weights_.back(), gated_ ? Tensor() : proj_bias_, y);
}

}  // namespace blockscope
