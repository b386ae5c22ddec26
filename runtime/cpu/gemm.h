// CPU single-precision GEMM: OpenBLAS's cblas_sgemm where built with it, otherwise a built-in
// cache-blocked kernel parallelised with OpenMP. Row-major throughout.
#pragma once

#include <cstdint>

namespace blockscope::cpu {

// C[m, n] = alpha * op(A) * op(B) + beta * C, where op(A) is [m, k] (A stored [m, k] with
// leading dimension lda, or [k, m] when trans_a) and op(B) is [k, n] (B stored [k, n], or
// [n, k] when trans_b). When beta == 0, C is not read (NaN in C does not propagate).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same with the built-in kernel only (tests compare it with the BLAS one).
void sgemm_builtin(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// "openblas" or "builtin".
const char* gemm_library();

// Sets every CPU thread pool the backend uses to n threads: OpenMP's (the ops' loops, the
// built-in GEMM) and OpenBLAS's own pool, which omp_set_num_threads does not reach.
void set_thread_count(int n);

}  // namespace blockscope::cpu
