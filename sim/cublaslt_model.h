// The GEMM the simulated cuBLASLt computes (sim/cublaslt.cpp is the API around it: handles,
// descriptors, attributes, validation, the heuristic): a validated problem in, D written as a
// GPU's f32 arithmetic would write it. Column-major: element (r, c) of an operand lives at
// r + c * ld (+ batch * stride), in elements; op(A) is m x k, op(B) k x n, C and D m x n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace blockscope::sim::cublaslt {

// The element types the subset takes (CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF).
enum class Elem { F32, F16, BF16 };
bool elem_of(uint32_t cuda_data_type, Elem* out);  // false for any other cudaDataType
size_t elem_size(Elem e);
const char* elem_name(Elem e);
// Element `index` of an array of `e`, exactly (FAST_TF32 operands: rounded to TF32 first).
double load_elem(const void* base, int64_t index, Elem e, bool tf32 = false);
// Stores v rounded once, to nearest even, to `e` (overflow: infinity; NaN stays NaN). Also the
// simulated NCCL's rounding of its f32 reductions.
void store_elem(void* base, int64_t index, Elem e, double v);

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
};


// `name` kept for the life of the process (the sim's queue takes names as const char*): one
// copy per distinct name.
const char* intern_name(const std::string& name);

// Kernel-like name of the GEMM, for the sim's launch records and the profiler's kernel table:
// sim_gemm_<in>[_<out>]_<ta><tb>[_batched][_bias][_relu|_gelu], e.g. sim_gemm_bf16_tn_bias_gelu.
std::string gemm_name(const Problem& p);

// One GEMM with its operands, queued on the sim's stream as an op and run when the queue gets
// there: D = epilogue(alpha * op(A) * op(B) + beta * C [+ bias]), per batch.
struct Gemm {
  Problem p;
  double alpha = 1.0, beta = 0.0;
  const void* A = nullptr;
  const void* B = nullptr;
  const void* C = nullptr;
  void* D = nullptr;
  const void* bias = nullptr;
  const char* name = "sim_gemm";  // outlives the queued op (interned by the caller)

  void operator()() const;

 private:
  void check_extent(const char* what, const void* ptr, uint64_t rows, uint64_t cols, int64_t ld, int64_t stride,
                    int32_t batch, Elem e) const;
};

}  // namespace blockscope::sim::cublaslt
