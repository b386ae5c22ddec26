// The device implementations behind fp8_linear (ops/fp8_linear/fp8_linear.h): cpu.cpp and
// cuda.cu, called by run_op after validation with the same arguments.
#pragma once

#include "ops/fp8_linear/fp8_linear.h"

namespace blockscope::ops::cpu {
void fp8_linear(Context& ctx, const Tensor& x, const Tensor& scale_x_inv, const Tensor& w, const Tensor& scale_w_inv,
                const Tensor& bias, Tensor& y, const Fp8LinearOptions& options);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void fp8_linear(Context& ctx, const Tensor& x, const Tensor& scale_x_inv, const Tensor& w, const Tensor& scale_w_inv,
                const Tensor& bias, Tensor& y, const Fp8LinearOptions& options);
}  // namespace blockscope::ops::cuda

// The FP8 GEMM's kernel names, one list for both backends, by epilogue.
namespace blockscope::ops::kernel_names {
inline constexpr char kFp8Gemm[] = "fp8_gemm";
inline constexpr char kFp8GemmBias[] = "fp8_gemm_bias";
inline constexpr char kFp8GemmGelu[] = "fp8_gemm_gelu";
inline constexpr char kFp8GemmBiasGelu[] = "fp8_gemm_bias_gelu";
inline const char* fp8_gemm(bool bias, bool gelu) {
  return bias ? (gelu ? kFp8GemmBiasGelu : kFp8GemmBias) : (gelu ? kFp8GemmGelu : kFp8Gemm);
}
}  // namespace blockscope::ops::kernel_names
