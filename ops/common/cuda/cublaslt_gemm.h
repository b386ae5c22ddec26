// GEMMs through cuBLASLt, described in row-major terms.
//
// blockscope tensors are row-major; cuBLASLt is column-major. A row-major [r, c] matrix with
// leading dimension ld is the column-major [c, r] matrix (its transpose) with the same ld, so
//   D = alpha · A · op(B) + beta · D        (row-major, A [m, k], op(B) [k, n], D [m, n])
// is computed as the column-major product
//   Dᵀ = alpha · op(B)ᵀ · Aᵀ + beta · Dᵀ    (cuBLAS m = n, n = m, k = k)
// with B as cuBLAS's first operand: op = N when B is row-major [k, n] (WeightLayout::in_out),
// T when B is row-major [n, k] (trans_b: nn.Linear's [out, in] weight, the series' "tn").
// The bias of the BIAS / GELU_BIAS epilogues runs along cuBLAS's m, i.e. our n (out features).
//
// Descriptors and the chosen algorithm are cached per backend (an attachment of the context's
// CudaBackend), keyed by every shape, stride,
// alignment, dtype, epilogue and compute-type detail (not by pointers). Compute is f32
// (CUBLAS_COMPUTE_32F); f32 data may use TF32 tensor cores only when
// GemmSettings::allow_tf32 is set (the config's run.allow_tf32).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "ops/common/kernel_names.h"
#include "runtime/context.h"
#include "runtime/dtype.h"

namespace blockscope {
class CudaBackend;
}

namespace blockscope::ops::cuda::cublaslt {

enum class Epilogue {
  none,       // CUBLASLT_EPILOGUE_DEFAULT
  bias,       // + bias[n]
  gelu_bias,  // tanh-GELU(. + bias[n])
  gelu,       // tanh-GELU(.)
};

const char* epilogue_name(Epilogue epilogue);

// Per-backend GEMM settings: settings(ctx).
struct GemmSettings {
  // f32 GEMMs may run on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32). Off: full fp32.
  bool allow_tf32 = false;
  // Time the top `autotune_candidates` heuristic algorithms once per new shape and keep the
  // fastest, instead of taking the heuristic's first choice. Off by default; never during a
  // CUDA graph capture (timing synchronises), where the first choice is used. A plan cached
  // before autotune was turned on, or during a capture, is re-planned (and timed) by the first
  // call that may autotune.
  bool autotune = false;
  int autotune_candidates = 8;
  int autotune_iterations = 5;
  // Test and diagnostic knob: epilogue_available() answers false for every BIAS / GELU /
  // GELU_BIAS epilogue, as when cuBLASLt's heuristic has no algorithm for it, so the fallback
  // (DEFAULT epilogue + our bias/GELU kernels) can be exercised and compared on any GPU.
  bool force_epilogue_fallback = false;
};

// The GEMM settings of the context's GPU (kept with its backend, shared by every context of
// that backend).
GemmSettings& settings(Context& ctx);

// One (strided-batched) row-major GEMM: for every batch entry i < batch,
//   D_i = alpha · A_i · op(B_i) + beta · D_i  [+ epilogue]
// A_i = a + i·stride_a: [m, k], rows lda elements apart.
// B_i = b + i·stride_b: [k, n] (rows ldb apart), or [n, k] when trans_b.
// D_i = d + i·stride_d: [m, n], rows ldd apart. With beta != 0, D is read first (addmm).
// bias: [n] of the same dtype, for Epilogue::bias and gelu_bias.
//
// FP8 (dtype fp8_e4m3 or fp8_e5m2; docs/FP8.md): cuBLASLt's FP8 contract, for which the
// caller answers (fp8_linear validates it): B is the [n, k] weight (trans_b: cuBLASLt's "TN"
// layout rule), k and the leading dimensions multiples of 16 bytes, not both operands e5m2;
//   D = scale_d · epilogue(alpha · scale_a · scale_b · A · Bᵀ [+ bias])
// with scale_a, scale_b (and scale_d, for an FP8 D only) device pointers to one f32 each (null:
// 1), amax_d (optional) receiving max |epilogue(...)| before scale_d; f32 accumulation, or
// the tensor cores' faster, less precise one with fast_accum. D is f32, f16, bf16 or FP8 (not
// e5m2 unless an operand is); the bias is bf16 for an f32, bf16 or FP8 D, f16 for an f16 D.
struct RowMajorGemm {
  const char* name = kernel_names::kGemm;  // label in the kernel table
  DType dtype = DType::f32;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  bool trans_b = false;
  void* d = nullptr;
  int64_t ldd = 0, stride_d = 0;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  Epilogue epilogue = Epilogue::none;
  const void* bias = nullptr;
  // Where they differ from `dtype` (A's): B's, D's and the bias's types (FP8 GEMMs only).
  std::optional<DType> b_dtype, d_dtype, bias_dtype;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  const float* scale_d = nullptr;
  float* amax_d = nullptr;
  bool fast_accum = false;

  DType b_type() const { return b_dtype.value_or(dtype); }
  DType d_type() const { return d_dtype.value_or(dtype); }
  DType bias_type() const { return bias_dtype.value_or(d_type()); }
  bool fp8() const { return is_fp8(dtype); }
};

// Runs `gemm` on the context's stream, recorded as one kernel named gemm.name. Base pointers,
// leading dimensions and batch strides may be anything element-aligned: their real alignment
// (up to 16 bytes) is passed to the heuristic, which then picks kernels that accept it; when it
// has none, the error names the shape and the alignments.
void gemm(Context& ctx, const RowMajorGemm& gemm);

// Whether `gemm` can run with its epilogue (always true for Epilogue::none). False when
// cuBLASLt's heuristic has no algorithm for it (NOT_SUPPORTED or no result: seen for some
// output widths in bf16; asked once per shape, the answer cached) or when
// GemmSettings::force_epilogue_fallback is set. Then the caller runs the DEFAULT epilogue and
// applies bias / GELU with its own kernels; the first refusal per shape is said on stderr.
bool epilogue_available(Context& ctx, const RowMajorGemm& gemm);

// Number of cached (descriptor, algorithm) entries in the backend of ctx (tests).
size_t cached_plans(Context& ctx);
// How many of them were made with autotuning (GemmSettings::autotune on, outside a capture;
// tests: a plan made before autotune was turned on is re-planned, not kept).
size_t autotuned_plans(Context& ctx);


}  // namespace blockscope::ops::cuda::cublaslt
