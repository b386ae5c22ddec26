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

 private:
  PrecisionConfig precision_;
  Tensor codes_, scale_, scale_inv_, history_;
};

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

 private:
  PrecisionConfig precision_;
  Fp8Weight weight_;
  Fp8Input input_;
};

}  // namespace blockscope
