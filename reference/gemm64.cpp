#include "reference/gemm64.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/interrupt.h"

// As ops/common/cpu_math.cpp: each hot function compiled for x86-64-v4, v3 (AVX2 + FMA) and
// the baseline, one picked at load time, so the binary runs on any x86-64.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(BLOCKSCOPE_NO_CPU_CLONES)
#define BLOCKSCOPE_REF_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BLOCKSCOPE_REF_CLONES
#endif

// The 4-double vectors below stay inside this file's functions; GCC's note that passing them
// by value changes the ABI without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace blockscope::reference {
namespace {

std::atomic<int> g_threads{0};

int usable_cores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Register tile: 4 rows of A times 8 columns of B, 8 vectors of 4 doubles as accumulators.
constexpr int64_t kRows = 4, kCols = 8;
constexpr int64_t kKBlock = 256;  // a 4 x 256 A panel (8 KiB) and an 8 x 256 B panel (16 KiB) stay in L1/L2
constexpr int64_t kRowBlock = 64;  // rows per task: each streams B once per K block

typedef double v4d __attribute__((vector_size(32)));

__attribute__((always_inline)) inline v4d load4(const double* p) {
  v4d v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
__attribute__((always_inline)) inline void store4(double* p, v4d v) { std::memcpy(p, &v, sizeof(v)); }

// C tile (rows x cols valid of 4 x 8) += Σ_k a[k][0..4) ⊗ b[k][0..8) over kc.
__attribute__((always_inline)) inline void tile(int64_t kc, const double* a, const double* b, double* c, int64_t ldc,
                                                int64_t rows, int64_t cols) {
  v4d c00 = {0, 0, 0, 0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  for (int64_t k = 0; k < kc; ++k) {
    const v4d b0 = load4(b + k * kCols), b1 = load4(b + k * kCols + 4);
    const double* ak = a + k * kRows;
    c00 += ak[0] * b0;
    c01 += ak[0] * b1;
    c10 += ak[1] * b0;
    c11 += ak[1] * b1;
    c20 += ak[2] * b0;
    c21 += ak[2] * b1;
    c30 += ak[3] * b0;
    c31 += ak[3] * b1;
  }
  double out[kRows][kCols];
  store4(&out[0][0], c00);
  store4(&out[0][4], c01);
  store4(&out[1][0], c10);
  store4(&out[1][4], c11);
  store4(&out[2][0], c20);
  store4(&out[2][4], c21);
  store4(&out[3][0], c30);
  store4(&out[3][4], c31);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] += out[r][j];
}

// Rows [r0, r1) of C += A · B over every K block; `packed_b` holds B as column panels of 8,
// [panel][k][8], zero-padded.
BLOCKSCOPE_REF_CLONES void gemm_rows(int64_t r0, int64_t r1, int64_t N, int64_t K, const double* A, bool absolute,
                                     const double* packed_b, double* C) {
  const int64_t panels = (N + kCols - 1) / kCols;
  std::vector<double> packed_a(static_cast<size_t>(((r1 - r0 + kRows - 1) / kRows) * kRows * kKBlock));
  for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
    const int64_t kc = std::min(kKBlock, K - k0);
    // A's rows as panels of 4, [panel][k][4], zero-padded.
    for (int64_t r = r0; r < r1; r += kRows) {
      double* panel = packed_a.data() + ((r - r0) / kRows) * kRows * kc;
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t i = 0; i < kRows; ++i) {
          const double v = r + i < r1 ? A[(r + i) * K + k0 + k] : 0.0;
          panel[k * kRows + i] = absolute ? std::fabs(v) : v;
        }
    }
    for (int64_t p = 0; p < panels; ++p) {
      const double* b = packed_b + (p * K + k0) * kCols;
      const int64_t cols = std::min(kCols, N - p * kCols);
      for (int64_t r = r0; r < r1; r += kRows) {
        tile(kc, packed_a.data() + ((r - r0) / kRows) * kRows * kc, b, C + r * N + p * kCols, N,
             std::min(kRows, r1 - r), cols);
      }
    }
  }
}

BLOCKSCOPE_REF_CLONES double dot_impl(const double* a, const double* b, int64_t n) {
  v4d s0 = {0, 0, 0, 0}, s1 = s0;
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) {
    s0 += load4(a + p) * load4(b + p);
    s1 += load4(a + p + 4) * load4(b + p + 4);
  }
  const v4d s = s0 + s1;
  double sum = (s[0] + s[1]) + (s[2] + s[3]);
  for (; p < n; ++p) sum += a[p] * b[p];
  return sum;
}

}  // namespace

void set_reference_threads(int threads) { g_threads = threads; }

int reference_threads() {
  const int threads = g_threads.load();
  return threads > 0 ? threads : usable_cores();
}

void parallel_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(1, chunk);
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int threads = static_cast<int>(std::min<int64_t>(reference_threads(), chunks));
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto work = [&] {
    try {
      for (;;) {
        // A signal: no new chunk; the caller throws the interruption once every worker is back.
        if (interrupt_signal() != 0) return;
        const int64_t c = next.fetch_add(1);
        if (c >= chunks) return;
        fn(c * chunk, std::min(n, (c + 1) * chunk));
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = chunks;
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  if (failure) std::rethrow_exception(failure);
  check_interrupted("while computing the float64 reference");
}

void gemm64(int64_t M, int64_t N, int64_t K, const double* A, const double* B, bool b_nk, const double* bias,
            bool absolute, double* C) {
  if (M <= 0 || N <= 0) return;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < N; ++j) C[r * N + j] = bias != nullptr ? (absolute ? std::fabs(bias[j]) : bias[j]) : 0.0;
  if (K <= 0) return;
  const int64_t panels = (N + kCols - 1) / kCols;
  std::vector<double> packed_b(static_cast<size_t>(panels * K * kCols), 0.0);
  parallel_chunks(panels, 8, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < kCols && p * kCols + j < N; ++j) {
          const int64_t col = p * kCols + j;
          const double v = b_nk ? B[col * K + k] : B[k * N + col];
          packed_b[static_cast<size_t>((p * K + k) * kCols + j)] = absolute ? std::fabs(v) : v;
        }
  });
  parallel_chunks(M, kRowBlock, [&](int64_t r0, int64_t r1) { gemm_rows(r0, r1, N, K, A, absolute, packed_b.data(), C); });
}

double dot64(const double* a, const double* b, int64_t n) { return dot_impl(a, b, n); }

}  // namespace blockscope::reference
