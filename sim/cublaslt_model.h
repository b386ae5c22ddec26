// The GEMM the simulated cuBLASLt computes (sim/cublaslt.cpp is the API around it: handles,
// descriptors, attributes, validation, the heuristic): a validated problem in, D written as a
// GPU's f32 arithmetic would write it. Column-major: element (r, c) of an operand lives at
// r + c * ld (+ batch * stride), in elements; op(A) is m x k, op(B) k x n, C and D m x n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace blockscope::sim::cublaslt {

// The element types the subset takes: CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF everywhere, and the
// FP8 types CUDA_R_8F_E4M3 and CUDA_R_8F_E5M2 in cublasLtMatmul only (cublaslt_fp8.cpp).
enum class Elem { F32, F16, BF16, E4M3, E5M2 };
// The 16- and 32-bit types (cublasGemmEx's and NCCL's); false for any other cudaDataType.
bool elem_of(uint32_t cuda_data_type, Elem* out);
// cublasLtMatmul's: elem_of's and the two FP8 types.
bool lt_elem_of(uint32_t cuda_data_type, Elem* out);
bool is_fp8(Elem e);
size_t elem_size(Elem e);  // bytes: 4, 2, 2, 1, 1
const char* elem_name(Elem e);
// Element `index` of an array of `e`, exactly (FAST_TF32 operands: rounded to TF32 first).
double load_elem(const void* base, int64_t index, Elem e, bool tf32 = false);
// Stores v rounded once, to nearest even, to `e`. 16/32-bit types: overflow gives infinity, NaN
// stays NaN (also the simulated NCCL's rounding of its f32 reductions). FP8 types: saturating
// (satfinite: overflow and infinities give the largest finite value of v's sign), NaN -> 0x7F.
void store_elem(void* base, int64_t index, Elem e, double v);

// FP8 codes (cublaslt_fp8.cpp), from the OCP 8-bit floating point formats as <cuda_fp8.h>
// implements them. E4M3: bias 7, no infinities, S.1111.111 is NaN, largest finite 448. E5M2:
// bias 15, IEEE-like (infinities and NaNs at exponent 31), largest finite 57344.
double fp8_to_double(uint8_t code, Elem e);
// Round to nearest even, saturating to the largest finite value; NaN -> 0x7F (as
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does).
uint8_t double_to_fp8(double v, Elem e);

// One matrix operand: its element type, leading dimension and batch stride, in elements.
struct Operand {
  Elem elem;
  int64_t ld;
  int64_t stride;
};

// What cublasLtMatmul was asked, once its descriptor and layouts are validated.
struct Problem {
  uint64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  bool ta = false, tb = false, tf32 = false;
  Operand a{}, b{}, c{}, d{};
  bool has_bias = false, relu = false, gelu = false;
  Elem bias_elem = Elem::F32;
  int64_t bias_batch_stride = 0;
  // FP8 matmul (A and B FP8; cublaslt_fp8.cpp): the scale factors and amax apply, and
  // FAST_ACCUM was asked for (accepted; the sum is the same f32 sum either way).
  bool fp8 = false, fast_accum = false;
};


// `name` kept for the life of the process (the sim's queue takes names as const char*): one
// copy per distinct name.
const char* intern_name(const std::string& name);

// Kernel-like name of the GEMM, for the sim's launch records and the profiler's kernel table:
// sim_gemm_<in>[_<out>]_<ta><tb>[_batched][_bias][_relu|_gelu], e.g. sim_gemm_bf16_tn_bias_gelu;
// FP8: <in> is A's type, then B's where it differs (sim_gemm_e4m3_e5m2_e5m2_tn: e4m3 x e5m2 ->
// e5m2), e.g. sim_gemm_e4m3_bf16_tn_bias.
std::string gemm_name(const Problem& p);

// One GEMM with its operands, queued on the sim's stream as an op and run when the queue gets
// there: D = epilogue(alpha * op(A) * op(B) + beta * C [+ bias]), per batch. FP8 (p.fp8):
//   T = epilogue(alpha * scale_a * scale_b * op(A) * op(B) + beta * scale_c * C [+ bias]),
//   *amax_d = max |T| over every element (when amax_d is set), D = scale_d * T (scale_d: FP8 D
//   only), a scale pointer that is null meaning 1. The scales are read, and amax written, when
//   the GEMM runs (they are device memory, in stream order).
struct Gemm {
  Problem p;
  double alpha = 1.0, beta = 0.0;
  const void* A = nullptr;
  const void* B = nullptr;
  const void* C = nullptr;
  void* D = nullptr;
  const void* bias = nullptr;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  const float* scale_c = nullptr;
  const float* scale_d = nullptr;
  float* amax_d = nullptr;
  const char* name = "sim_gemm";  // outlives the queued op (interned by the caller)

  void operator()() const;

 private:
  void check_extent(const char* what, const void* ptr, uint64_t rows, uint64_t cols, int64_t ld, int64_t stride,
                    int32_t batch, Elem e) const;
};

}  // namespace blockscope::sim::cublaslt
