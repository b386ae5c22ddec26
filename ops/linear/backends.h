// The device implementations behind the public linear ops: ops/linear/cpu.cpp and ops/linear/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/linear/batched_matmul.h"
#include "ops/common/kernel_names.h"
#include "ops/linear/linear.h"

namespace blockscope::ops::cpu {
void linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, LinearPath path,
            WeightLayout layout, LinearActivation act);
void batched_matmul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha,
                    int64_t b_group, const char* kernel_name);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, LinearPath path,
            WeightLayout layout, LinearActivation act);
void batched_matmul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha,
                    int64_t b_group, const char* kernel_name);
}  // namespace blockscope::ops::cuda

// The names this op's kernels are recorded under (the profiler's kernel table, the tests'
// kernel checks), one list for both backends: the CPU records its work under the CUDA kernel's
// name, so the tables of the two devices line up.
namespace blockscope::ops::kernel_names {
inline constexpr char kBiasAdd[] = "bias_add_kernel";
// The GEMM with its cuBLASLt epilogue (the plain one is kGemm, ops/common/kernel_names.h).
inline constexpr char kGemmBias[] = "gemm_bias";
inline constexpr char kGemmGelu[] = "gemm_gelu";
inline constexpr char kGemmBiasGelu[] = "gemm_bias_gelu";
inline constexpr char kBiasBroadcastCopy[] = "bias_broadcast_copy_kernel";
// CUDA's weight-streaming kernel for skinny GEMMs (ops/linear/skinny_gemm.h has when it runs): the
// product alone (naive path, before bias_add_kernel), or with the epilogue path's bias / GELU.
inline constexpr char kWeightStreaming[] = "linear_weight_streaming";
inline constexpr char kWeightStreamingBias[] = "linear_weight_streaming_bias";
inline constexpr char kWeightStreamingGelu[] = "linear_weight_streaming_gelu";
inline constexpr char kWeightStreamingBiasGelu[] = "linear_weight_streaming_bias_gelu";

// The epilogue path's one kernel: cuBLASLt's GEMM, or (streaming) the weight-streaming kernel,
// with the bias and GELU it applies.
inline const char* gemm_with_epilogue(bool bias, bool gelu, bool streaming = false) {
  const char* const names[2][2][2] = {{{kGemm, kGemmGelu}, {kGemmBias, kGemmBiasGelu}},
                                      {{kWeightStreaming, kWeightStreamingGelu},
                                       {kWeightStreamingBias, kWeightStreamingBiasGelu}}};
  return names[streaming][bias][gelu];
}
}  // namespace blockscope::ops::kernel_names
