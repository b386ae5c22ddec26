// The device implementations behind fp8_weight_linear (ops/fp8_weight_linear/fp8_weight_linear.h):
// cpu.cpp and cuda.cu, called by run_op after validation with the same arguments.
#pragma once

#include "ops/fp8_weight_linear/fp8_weight_linear.h"

namespace blockscope::ops::cpu {
void fp8_weight_linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& bias,
                       Tensor& y, bool gelu);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void fp8_weight_linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& bias,
                       Tensor& y, bool gelu);
}  // namespace blockscope::ops::cuda

// The kernel's names, one list for both backends, by epilogue.
namespace blockscope::ops::kernel_names {
inline constexpr char kFp8WeightGemm[] = "fp8_weight_gemm";
inline constexpr char kFp8WeightGemmBias[] = "fp8_weight_gemm_bias";
inline constexpr char kFp8WeightGemmGelu[] = "fp8_weight_gemm_gelu";
inline constexpr char kFp8WeightGemmBiasGelu[] = "fp8_weight_gemm_bias_gelu";
inline const char* fp8_weight_gemm(bool bias, bool gelu) {
  return bias ? (gelu ? kFp8WeightGemmBiasGelu : kFp8WeightGemmBias) : (gelu ? kFp8WeightGemmGelu : kFp8WeightGemm);
}
}  // namespace blockscope::ops::kernel_names
