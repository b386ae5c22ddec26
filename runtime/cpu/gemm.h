// CPU GEMMs. One library per build (CMake BLOCKSCOPE_CPU_GEMM): oneDNN, OpenBLAS, or a built-in
// cache-blocked kernel parallelised with OpenMP. Row-major throughout.
//
// Two entry points:
//   sgemm         f32 BLAS-style C = alpha·op(A)·op(B) + beta·C (oneDNN's dnnl_sgemm, OpenBLAS's
//                 cblas_sgemm, or the built-in kernel);
//   fused_matmul  a batched matmul with its epilogue (bias, tanh-GELU, beta) in one oneDNN
//                 matmul primitive, on the operands' own dtypes (bf16 natively on AVX512_BF16 /
//                 AMX CPUs) -- the CPU twin of a cuBLASLt epilogue. Builds without oneDNN, and
//                 dtypes oneDNN has no kernel for on this CPU, report false and the caller
//                 widens to f32 and uses sgemm.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace blockscope::cpu {

// C[m, n] = alpha * op(A) * op(B) + beta * C, where op(A) is [m, k] (A stored [m, k] with
// leading dimension lda, or [k, m] when trans_a) and op(B) is [k, n] (B stored [k, n], or
// [n, k] when trans_b). When beta == 0, C is not read (NaN in C does not propagate).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same with the built-in kernel only (tests compare it with the library's).
void sgemm_builtin(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// One operand of a fused matmul: `batch` row-major matrices `batch_stride` elements apart,
// rows `ld` elements apart. `trans` reads the stored matrix transposed (A stored [k, m], B
// stored [n, k]).
struct MatmulOperand {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool trans = false;
};

// For every b < batch, with op(A[b]) [m, k], op(B[b]) [k, n], C[b] [m, n]:
//   C[b] = act(alpha · op(A[b]) · op(B[b]) + bias + beta · C[b])
// accumulated and finished in f32, rounded once into C's dtype. bias is [n] (broadcast over
// rows and batches) or null; act is tanh-GELU or the identity. alpha != 1 with a bias is not
// supported (oneDNN would scale the bias too). When beta == 0, C is not read.
struct Matmul {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MatmulOperand a, b;
  void* c = nullptr;
  DType c_dtype = DType::f32;
  int64_t ldc = 0;
  int64_t c_batch_stride = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  const void* bias = nullptr;
  DType bias_dtype = DType::f32;
  bool gelu_tanh = false;
  // B's storage when it is read-only (a loaded weight), else null. Such a B may run from a copy
  // packed once into oneDNN's blocked layout, kept with the storage, where that measured faster
  // for this shape (the plan, below).
  Storage* b_read_only = nullptr;
};

// Runs `mm` as one oneDNN matmul primitive, cached per shape, strides, dtypes and epilogue, and
// returns true. Returns false -- having done nothing -- when the build has no oneDNN or oneDNN
// has no kernel for these dtypes on this CPU (f16 without AVX512-FP16, say).
bool fused_matmul(const Matmul& mm);

// How fused_matmul runs a read-only B of this shape: the weights as stored ("plain"), or a copy
// packed once into the layout oneDNN prefers ("packed"). Decided on the first call with a
// read-only B by timing both (best of 3 each, into scratch), unless BLOCKSCOPE_CPU_WEIGHTS is
// "plain" or "packed"; "plain" too where oneDNN's preferred layout is the stored one.
struct MatmulPlan {
  std::string layout;                  // "plain", "packed"; "" before the first call with a read-only B
  double plain_us = 0, packed_us = 0;  // the timings it was chosen by (0: not timed)
  // "timed", "BLOCKSCOPE_CPU_WEIGHTS=packed", "the stored layout is the one oneDNN picks"
  std::string reason;
};
MatmulPlan matmul_plan(const Matmul& mm);
// Whether this build may keep packed copies of read-only weights (oneDNN builds): what a
// workload's memory estimate must leave room for.
bool packs_weights();
// Tests: microseconds added to each timing of one candidate ("plain" or "packed"), to show a
// slow candidate is never chosen. Plans made so far are forgotten.
void set_matmul_plan_penalty_for_tests(const std::string& layout, double microseconds);

// The fused-matmul primitive cache (oneDNN builds; zeros otherwise).
struct MatmulCacheStats {
  int64_t primitives = 0;   // shapes with a primitive
  int64_t unsupported = 0;  // shapes oneDNN has no kernel for (remembered, not retried)
  int64_t hits = 0, misses = 0;
};
MatmulCacheStats matmul_cache_stats();

// What fused_matmul's primitive for `mm` runs, as oneDNN names it ("brg:avx512_core_bf16"),
// or "" when it would return false. Creates (and caches) the primitive.
const char* matmul_implementation(const Matmul& mm);

// "onednn", "openblas" or "builtin".
const char* gemm_library();

// Sets every CPU thread pool the backend uses to n threads: OpenMP's (the ops' loops, the
// built-in GEMM, and oneDNN, which runs on the same OpenMP team) and OpenBLAS's own pool,
// which omp_set_num_threads does not reach.
void set_thread_count(int n);

// The thread count a run uses when it asks for none (the CLI's and the benchmarks' default):
// OMP_NUM_THREADS when it is set to a positive number; else the physical cores this process
// may run on (its affinity mask, hyperthread siblings counted once) less one, and at least 1.
// The core left free is for the system and whatever else shares the machine: on a 2-core VM
// with one other busy process, two threads made a profile's steps vary by 27–46 % and run
// slower than one thread, which held within a few per cent (bench/NOTES.md has the figures).
struct DefaultThreads {
  int count = 1;
  int cores = 1;           // physical cores in the affinity mask
  std::string reason;      // "OMP_NUM_THREADS=4", "2 cores less one for the system"
};
DefaultThreads default_thread_count();

}  // namespace blockscope::cpu
