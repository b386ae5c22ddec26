// CUDA fp8_linear: one cuBLASLt FP8 GEMM (ops/common/cuda/cublaslt_gemm.h), its bias and GELU
// as the epilogue, the scales and the amax as descriptor pointers. Where cuBLASLt has no
// algorithm for the call, the error names the shape and types: no fallback to a wider GEMM.
#include "ops/common/cuda/cublaslt_gemm.h"
#include "ops/fp8_linear/backends.h"

namespace blockscope::ops::cuda {

void fp8_linear(Context& ctx, const Tensor& x, const Tensor& scale_x_inv, const Tensor& w, const Tensor& scale_w_inv,
                const Tensor& bias, Tensor& y, const Fp8LinearOptions& options) {
  cublaslt::RowMajorGemm g;
  g.name = kernel_names::fp8_gemm(bias.defined(), options.gelu);
  g.dtype = x.dtype();
  g.b_dtype = w.dtype();
  g.d_dtype = y.dtype();
  if (bias.defined()) g.bias_dtype = bias.dtype();
  g.k = w.size(1);
  g.n = w.size(0);
  g.m = x.numel() / g.k;
  g.a = x.data();
  g.lda = g.k;
  g.b = w.data();
  g.ldb = g.k;
  g.trans_b = true;  // [N, K]: cuBLASLt's "TN"
  g.d = y.data();
  g.ldd = g.n;
  g.epilogue = bias.defined() ? (options.gelu ? cublaslt::Epilogue::gelu_bias : cublaslt::Epilogue::bias)
                              : (options.gelu ? cublaslt::Epilogue::gelu : cublaslt::Epilogue::none);
  g.bias = bias.defined() ? bias.data() : nullptr;
  g.scale_a = scale_x_inv.data_as<const float>();
  g.scale_b = scale_w_inv.data_as<const float>();
  g.scale_d = options.out_scale.defined() ? options.out_scale.data_as<const float>() : nullptr;
  g.amax_d = options.out_amax.defined() ? options.out_amax.data_as<float>() : nullptr;
  g.fast_accum = options.fast_accum;
  cublaslt::gemm(ctx, g);
}

}  // namespace blockscope::ops::cuda
