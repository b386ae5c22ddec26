// Row kernels of cpu_math.h. target_clones compiles each function for x86-64-v3 (AVX2, FMA;
// one clone: "avx2,fma" as one string would make two) and for the
// baseline (SSE2) and resolves the call once at load time (an ifunc), so no -march flag is
// needed and the binaries run on any x86-64. The loops are written for the vectoriser; this
// file is compiled with -fno-trapping-math (CMakeLists.txt), without which GCC 12 keeps the
// exp's clamps as branches and vectorises nothing.
#include "ops/common/cpu_math.h"

#include <limits>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BLOCKSCOPE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define BLOCKSCOPE_CPU_CLONES
#endif

namespace blockscope::ops::cpu {

BLOCKSCOPE_CPU_CLONES float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

BLOCKSCOPE_CPU_CLONES float exp_shifted_sum(float* x, int64_t n, float shift) {
  constexpr int64_t kSumBlock = 64;
  float sum = 0.0f;
  for (int64_t j0 = 0; j0 < n; j0 += kSumBlock) {
    const int64_t j1 = std::min(n, j0 + kSumBlock);
    float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
    for (int64_t j = j0; j < j1; ++j) {
      const float e = exp_f32(x[j] - shift);
      x[j] = e;
      block_sum += e;
    }
    sum += block_sum;
  }
  return sum;
}

BLOCKSCOPE_CPU_CLONES void scale_row(float* x, int64_t n, float factor) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= factor;
}

}  // namespace blockscope::ops::cpu
