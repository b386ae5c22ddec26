// The float64 references' two hot loops, made fast enough for whole blocks (issue 43: `check
// configs/blocks/gpt2-small.yaml` took over 10 minutes on 2 cores in plain loops): a blocked
// float64 GEMM (packed 4 x 8 register tiles, K in blocks that stay in cache) and the
// attention's per-head work, both spread over threads. Still float64 throughout, still
// written from the definitions and sharing nothing with ops/; only the order of the f64 sums
// differs from the plain loops (K in blocks of kKBlock), which moves a result by a few units
// of 2^-53 — far below any bound the references are used with.
#pragma once

#include <cstdint>
#include <functional>

namespace blockscope::reference {

// Threads the references use (0 or less: every core this process may run on). The CLI's
// `check` passes --threads; tests leave the default.
void set_reference_threads(int threads);
int reference_threads();

// fn(begin, end) over [0, n) split into chunks on reference_threads() threads. Workers stop
// taking chunks after a signal (SIGINT ...); the caller then throws the interruption.
void parallel_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t begin, int64_t end)>& fn);

// C[M, N] = A[M, K] · B + bias, row-major; B is [K, N], or [N, K] when `b_nk`; bias [N] or
// null. With `absolute`, |A| · |B| + |bias| (the magnitude every summation order is bounded
// by). Answers an interrupt within a block of rows.
void gemm64(int64_t M, int64_t N, int64_t K, const double* A, const double* B, bool b_nk, const double* bias,
            bool absolute, double* C);

// Σ_p a[p] · b[p] over n contiguous elements (four partial sums, then added).
double dot64(const double* a, const double* b, int64_t n);

}  // namespace blockscope::reference
