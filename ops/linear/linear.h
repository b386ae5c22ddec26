// linear and matmul_add: Y = X · Wᵀ + b (PyTorch nn.Linear) or Y = X · W + b (GPT-2 Conv1D,
// and the series' matmul + add). The weight layout is a transpose flag, never a copy.
#pragma once

#include "ops/common/paths.h"
#include "runtime/context.h"

namespace blockscope::ops {

enum class WeightLayout {
  out_in,  // W is [out, in] (nn.Linear): Y = X · Wᵀ
  in_out,  // W is [in, out] (Conv1D, plain matmul): Y = X · W
};

// Epilogue applied after the bias: none, or tanh-GELU (cuBLASLt GELU_BIAS).
enum class LinearActivation { none, gelu_tanh };

// x: [..., in] (rows may be a strided view only if each row is contiguous), w: as `layout`,
// bias: [out] or undefined, y: [..., out] contiguous, same dtype as x.
// Kernels (CUDA): naive = GEMM + bias kernel (+ GELU kernel); epilogue = 1 GEMM;
// addmm = bias broadcast copy + GEMM(beta = 1) (+ GELU kernel). On the naive and epilogue paths a
// skinny GEMM (≤ 16 rows, out_in) may run the weight-streaming kernel in the GEMM's place
// (ops/linear/skinny_gemm.h: the rule and BLOCKSCOPE_LINEAR_WEIGHT_STREAMING).
void linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, LinearPath path,
            WeightLayout layout = WeightLayout::out_in, LinearActivation act = LinearActivation::none);

// The series' Part 1 module: out = a · b + c with a [m, k], b [k, n], c [n].
inline void matmul_add(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out, LinearPath path) {
  linear(ctx, a, b, c, out, path, WeightLayout::in_out);
}

// FLOPs and minimum bytes of a linear (for the profiler).
double linear_flops(int64_t rows, int64_t in, int64_t out);

}  // namespace blockscope::ops
