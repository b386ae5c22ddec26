// A workload's FP8 GEMMs (docs/FP8.md), as modules:
//   Fp8Weight  a weight [out, in] quantized once, per tensor from its own amax;
//   Fp8Input   an activation quantized at each step by the config's recipe, its state (scale,
//              amax history) kept across steps -- one per tensor, shared by the GEMMs that
//              read it (a gated MLP's gate and up read one x, cast once);
//   Fp8Layer   the two for one linear layer;
//   Fp8Mlp     an MLP's GEMMs (plain: fc, proj; gated: gate, up, down) around its activation.
// Per step, current scaling: amax(x), fp8_scale_update, quantize(x), then the GEMMs (4 kernels
// before them on CUDA, the amax's memset among them); delayed: quantize(x) with the history's
// scale, recording this step's amax into it, the GEMMs, then fp8_scale_update with roll.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "ops/linear/linear.h"
#include "ops/mlp/mlp.h"
#include "runtime/context.h"

namespace blockscope {

class Fp8Weight {
 public:
  Fp8Weight() = default;
  // weight of the run's dtype (bf16 or f16: the FP8 GEMM's output type), [out, in] or, for
  // in_out (GPT-2's Conv1D), [in, out]: then copied transposed first (cuBLASLt's FP8 GEMMs take
  // the weight [out, in] only), once.
  Fp8Weight(Context& ctx, const Tensor& weight, const PrecisionConfig& precision,
            ops::WeightLayout layout = ops::WeightLayout::out_in);
  bool defined() const { return codes_.defined(); }
  const Tensor& codes() const { return codes_; }
  const Tensor& scale_inv() const { return scale_inv_; }

 private:
  Tensor codes_, scale_inv_;
};

class Fp8Input {
 public:
  Fp8Input() = default;
  // Every x this input quantizes has `shape`.
  Fp8Input(Context& ctx, const Shape& shape, const PrecisionConfig& precision);
  // Before the GEMMs that read x: its codes and scale_inv for them.
  void quantize(Context& ctx, const Tensor& x);
  // After them: delayed scaling's scale update and roll (nothing for current scaling).
  void finish_step(Context& ctx);
  const Tensor& codes() const { return codes_; }
  const Tensor& scale_inv() const { return scale_inv_; }
  // Delayed scaling: f32 [3] {casts, casts that saturated, the largest ratio} counted by each
  // step's scale update (ops::fp8_scale_update); undefined for current scaling, whose scale comes
  // from the step's own amax and so never saturates.
  const Tensor& saturation() const { return saturation_; }

 private:
  PrecisionConfig precision_;
  Tensor codes_, scale_, scale_inv_, history_, saturation_;
};

// The saturation counts of a module's FP8 inputs under their names (delayed scaling only): what
// a profile reports (Workload::fp8_saturation).
using Fp8SaturationCounts = std::vector<std::pair<std::string, Tensor>>;
// Appends input's counts under `name` (nothing for current scaling).
void add_saturation(Fp8SaturationCounts& out, const std::string& name, const Fp8Input& input);

// y [rows, out] = x · Wᵀ (+ bias [out]) (then tanh-GELU) on x's codes: one ops::fp8_linear.
void fp8_gemm(Context& ctx, const Fp8Input& x, const Fp8Weight& w, const Tensor& bias, Tensor& y, bool gelu,
              const PrecisionConfig& precision);

class Fp8Mlp {
 public:
  Fp8Mlp() = default;
  // weights: the MLP's (out_in or in_out, as weights.layout says); rows: the tokens of every x.
  Fp8Mlp(Context& ctx, const ops::MlpWeights& weights, int64_t rows, DType dtype, const PrecisionConfig& precision);
  // y [rows, d_model] = the MLP of x [rows, d_model]: x cast once (a gated MLP's gate and up
  // GEMMs read the same codes), the activation in the run's dtype (GPT-2's tanh-GELU in the
  // first GEMM's epilogue), the hidden activation cast for the last GEMM.
  void forward(Context& ctx, const Tensor& x, Tensor& y);
  bool defined() const { return !weights_.empty(); }
  // Its two inputs' saturation counts: `prefix` + "input", + "hidden".
  void add_saturation_counts(Fp8SaturationCounts& out, const std::string& prefix) const;

 private:
  PrecisionConfig precision_;
  bool gated_ = false;
  ops::Activation activation_ = ops::Activation::gelu_tanh;
  Tensor fc_bias_, proj_bias_;
  std::vector<Fp8Weight> weights_;  // gated: gate, up, down; plain: fc, proj
  Fp8Input x_, hidden_codes_;
  Tensor gate_, up_, hidden_;
};

class Fp8Layer {
 public:
  Fp8Layer() = default;
  Fp8Layer(Context& ctx, const Tensor& weight, int64_t rows, const PrecisionConfig& precision);
  // y [rows, out] = x [rows, in] · Wᵀ (+ bias) (then tanh-GELU): the input's step around one GEMM.
  void forward(Context& ctx, const Tensor& x, const Tensor& bias, Tensor& y, bool gelu = false);
  bool defined() const { return weight_.defined(); }
  // Its input's saturation counts, under "input".
  void add_saturation_counts(Fp8SaturationCounts& out) const { add_saturation(out, "input", input_); }

 private:
  PrecisionConfig precision_;
  Fp8Weight weight_;
  Fp8Input input_;
};

// ---- weight-only FP8 (precision.weights) -------------------------------------------------------

// A weight as FP8 codes [out, in] with one f32 dequantisation factor per row: row r scaled by
// max_finite / amax(row r) before the cast (scale 1 for a row of zeros), its factor the inverse.
// Made once on the host from the weight's values (GPT-2's [in, out] ones read transposed); a
// non-finite weight is refused by name.
class Fp8RowWeight {
 public:
  Fp8RowWeight() = default;
  Fp8RowWeight(Context& ctx, const Tensor& weight, DType format, ops::WeightLayout layout, const std::string& name);
  bool defined() const { return codes_.defined(); }
  const Tensor& codes() const { return codes_; }
  const Tensor& scale() const { return scale_; }
  size_t nbytes() const { return codes_.nbytes() + scale_.nbytes(); }

 private:
  Tensor codes_, scale_;
};

// y [rows, out] = x · (codes · scale)ᵀ (+ bias) (then tanh-GELU): one ops::fp8_weight_linear.
void fp8_weight_gemm(Context& ctx, const Tensor& x, const Fp8RowWeight& w, const Tensor& bias, Tensor& y,
                     bool gelu = false);

// An MLP's weights as FP8 codes (Fp8RowWeight each): gated gate, up, down; plain fc, proj. name:
// the layer's weight prefix, for errors ("h.0.mlp.").
std::vector<Fp8RowWeight> fp8_mlp_weights(Context& ctx, const ops::MlpWeights& weights, DType format,
                                          const std::string& name);

// An MLP on weight-only FP8 weights: plain fc (+ bias, tanh-GELU in its epilogue, else the
// activation op), proj; gated gate, up, the gated activation, down -- the activations in the run's
// dtype throughout.
class Fp8WeightMlp {
 public:
  Fp8WeightMlp() = default;
  // weights: the MLP's as loaded (its kind, activation, biases); codes: fp8_mlp_weights of them
  // (shared with other MLPs on the same weights); rows: the tokens of every x.
  Fp8WeightMlp(Context& ctx, const ops::MlpWeights& weights, std::vector<Fp8RowWeight> codes, int64_t rows,
               DType dtype);
  void forward(Context& ctx, const Tensor& x, Tensor& y);
  bool defined() const { return !weights_.empty(); }
  const std::vector<Fp8RowWeight>& weights() const { return weights_; }

 private:
  bool gated_ = false;
  ops::Activation activation_ = ops::Activation::gelu_tanh;
  Tensor fc_bias_, proj_bias_;
  std::vector<Fp8RowWeight> weights_;  // gated: gate, up, down; plain: fc, proj
  Tensor gate_, up_, hidden_;
};

}  // namespace blockscope
