// Row kernels of cpu_math.h. target_clones compiles each function three times — x86-64-v4
// (AVX-512), x86-64-v3 (AVX2 + FMA; "avx2,fma" as one clone string would make two separate
// clones) and the baseline (SSE2) — and an ifunc picks one once at load time, so no -march flag
// is needed and the binaries run on any x86-64. The v4 clone is 25% faster than v3 on
// exp_shifted_sum (0.48 vs 0.64 ns per element on the 2026-12 AMD EPYC VM). The loops are
// written for the vectoriser; this file is compiled with -fno-trapping-math (CMakeLists.txt),
// without which GCC 12 keeps the exp's clamps as branches and vectorises nothing.
//
// Testing each clone on one machine: the binaries run the best clone the CPU has; build
// test/cpu_math_test.cpp against this file with -DBLOCKSCOPE_NO_CPU_CLONES and
// -march=x86-64-v3 (or no -march, for the baseline) to run the others' code.
#include "ops/common/cpu_math.h"

#include <limits>

// -DBLOCKSCOPE_NO_CPU_CLONES: one version, for whatever -march the file is compiled with.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(BLOCKSCOPE_NO_CPU_CLONES)
#define BLOCKSCOPE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
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

BLOCKSCOPE_CPU_CLONES void gelu_tanh_row(float* x, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] = gelu_tanh_f32(x[j]);
}

BLOCKSCOPE_CPU_CLONES void silu_row(float* x, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] = silu_f32(x[j]);
}

BLOCKSCOPE_CPU_CLONES void tile_scores(const float* q, const float* kt, int64_t ldk, int64_t rows, int64_t cols,
                                       int64_t d, float scale, float* s, int64_t lds) {
  constexpr int64_t kColumns = 64, kDepthBlock = 8;
  float total[kColumns], partial[kColumns];
  for (int64_t c0 = 0; c0 < cols; c0 += kColumns) {
    const int64_t width = std::min(kColumns, cols - c0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* q_row = q + r * d;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) total[c] = 0.0f;
      for (int64_t p0 = 0; p0 < d; p0 += kDepthBlock) {
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) partial[c] = 0.0f;
        for (int64_t p = p0; p < std::min(d, p0 + kDepthBlock); ++p) {
          const float qv = q_row[p];
          const float* k_row = kt + p * ldk + c0;
#pragma omp simd
          for (int64_t c = 0; c < width; ++c) partial[c] += qv * k_row[c];
        }
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) total[c] += partial[c];
      }
      float* s_row = s + r * lds + c0;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) s_row[c] = scale * total[c];
    }
  }
}

BLOCKSCOPE_CPU_CLONES void tile_accumulate(const float* probs, int64_t ldp, const float* v, int64_t rows, int64_t cols,
                                           int64_t d, float* o) {
  for (int64_t r = 0; r < rows; ++r) {
    float* o_row = o + r * d;
    for (int64_t c = 0; c < cols; ++c) {
      const float weight = probs[r * ldp + c];
      const float* v_row = v + c * d;
#pragma omp simd
      for (int64_t p = 0; p < d; ++p) o_row[p] += weight * v_row[p];
    }
  }
}

using detail::float_as_int;
using detail::int_as_float;

BLOCKSCOPE_CPU_CLONES void bf16_to_f32(const bf16* src, float* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = int_as_float(static_cast<uint32_t>(src[j].bits) << 16);
}

BLOCKSCOPE_CPU_CLONES void f32_to_bf16(const float* src, bf16* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t bits = static_cast<uint32_t>(float_as_int(src[j]));
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;  // nearest even; Inf stays Inf
    const uint32_t quiet_nan = (bits >> 16) | 0x0040u;                       // NaN: quiet, sign kept
    const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
    dst[j].bits = static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
  }
}

BLOCKSCOPE_CPU_CLONES void f16_to_f32(const f16* src, float* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t h = src[j].bits;
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t magnitude = h & 0x7fffu;
    // Normal: rebias the exponent (112 = 127 − 15). Inf/NaN: exponent 31 → 255, payload kept.
    const uint32_t normal = (magnitude << 13) + (112u << 23);
    const uint32_t special = (magnitude << 13) | 0x7f800000u;
    // Zero and subnormal: mantissa · 2⁻²⁴, exactly, as (2⁻¹⁴ + m·2⁻²⁴) − 2⁻¹⁴ in f32.
    const uint32_t small = static_cast<uint32_t>(
        float_as_int(int_as_float((magnitude << 13) + (113u << 23)) - int_as_float(113u << 23)));
    const uint32_t bits = magnitude >= 0x7c00u ? special : (magnitude >= 0x0400u ? normal : small);
    dst[j] = int_as_float(sign | bits);
  }
}

BLOCKSCOPE_CPU_CLONES void f32_to_f16(const float* src, f16* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t bits = static_cast<uint32_t>(float_as_int(src[j]));
    const uint32_t sign = (bits >> 16) & 0x8000u;
    const uint32_t abs = bits & 0x7fffffffu;
    // Inf or NaN (a NaN stays quiet with the top 9 bits of its payload).
    const uint32_t special = 0x7c00u | (abs > 0x7f800000u ? 0x0200u | ((abs >> 13) & 0x3ffu) : 0u);
    // Normal half (f32 exponent −14..15): rebias, round to nearest even on the 13 dropped bits;
    // a carry out of the mantissa correctly gives the next exponent or Inf.
    const uint32_t normal = (abs - (112u << 23) + 0x0fffu + ((abs >> 13) & 1u)) >> 13;
    // Below the normal range: adding 0.5f makes the f32 adder round |x| to a multiple of 2⁻²⁴
    // (nearest even), which is the subnormal half's mantissa (0x400 = the smallest normal).
    const uint32_t small = static_cast<uint32_t>(float_as_int(int_as_float(abs) + 0.5f)) - 0x3f000000u;
    const uint32_t half = abs >= 0x7f800000u ? special
                          : abs >= 0x47800000u ? 0x7c00u  // exponent > 15: overflow to Inf
                          : abs >= 0x38800000u ? normal
                                               : small;
    dst[j].bits = static_cast<uint16_t>(sign | half);
  }
}

}  // namespace blockscope::ops::cpu
