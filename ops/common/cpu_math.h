// Vectorisable f32 math for the CPU kernels' hot loops, and row kernels built on it that are
// compiled for AVX-512, AVX2+FMA and baseline x86-64, picked at run time (cpu_math.cpp), so the
// binaries still run on any x86-64 while using the widest vectors the machine has.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/dtype.h"

namespace blockscope::ops::cpu {

namespace detail {
// Bit casts. __builtin_bit_cast (GCC ≥ 11, Clang) keeps the loops vectorisable; a memcpy
// through a local does not with GCC 12 (the local's address escapes into the loop body).
#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define BLOCKSCOPE_HAVE_BIT_CAST 1
#endif
#endif
inline int32_t float_as_int(float v) {
#ifdef BLOCKSCOPE_HAVE_BIT_CAST
  return __builtin_bit_cast(int32_t, v);
#else
  int32_t i;
  std::memcpy(&i, &v, sizeof i);
  return i;
#endif
}
inline float int_as_float(uint32_t i) {
#ifdef BLOCKSCOPE_HAVE_BIT_CAST
  return __builtin_bit_cast(float, i);
#else
  float v;
  std::memcpy(&v, &i, sizeof v);
  return v;
#endif
}
}  // namespace detail

// exp(x) in f32 without a library call and without branches, so that a loop of it vectorises
// (GCC turns it into packed min/max/mul/add/shift on SSE2, AVX2 or AVX-512).
//
// Method: n = round(x · log2 e) (by adding 1.5·2²³), r = x − n·ln 2 in two parts (Cody–Waite;
// ln2_hi has 9 significant bits so n·ln2_hi is exact for |n| ≤ 2¹⁵), |r| ≤ ln2/2 ≈ 0.347;
// exp(r) by its Taylor polynomial of degree 7 (truncation < 5.2e-9 relative, i.e. < 0.1 ulp);
// then the result is multiplied by 2^n as two normal powers 2^(n/2)·2^(n − n/2), so that
// results down in the subnormal range and up to FLT_MAX come out right with no special case.
//
// Error bound: measured against double-precision std::exp over every 7th float in
// [−87.3, 88.72] (6.4e8 inputs): at most 1.22 ulp on the baseline (no-FMA) build and 0.93 ulp
// with FMA contraction; test/cpu_math_test.cpp asserts ≤ 2 ulp over a wide sweep. Edges:
// x < −103.97 (exp below half the smallest subnormal) and −inf give 0; x > 88.7228 and +inf
// give +inf; NaN gives NaN. Subnormal results (x < −87.34) are within one subnormal step.
inline float exp_f32(float x) {
  // Clamp with comparisons that map onto maxps/minps; a NaN x passes through both.
  const float lo = x < -104.0f ? -104.0f : x;
  const float xc = lo > 88.8f ? 88.8f : lo;
  const float round_magic = 12582912.0f;                     // 1.5 · 2²³
  const float t = xc * 1.44269504088896341f + round_magic;
  const float n = t - round_magic;
  const int32_t ni = detail::float_as_int(t) - detail::float_as_int(round_magic);
  float r = xc - n * 0.693359375f;      // ln2_hi
  r = r - n * -2.12194440e-4f;          // ln2_lo (ln2 = ln2_hi + ln2_lo)
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t n1 = ni >> 1, n2 = ni - n1;  // both in [−52, 64] for finite xc
  const float s1 = detail::int_as_float(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = detail::int_as_float(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}

// GPT-2's GELU ("gelu_new"), 0.5·x·(1 + tanh(u)) with u = √(2/π)·(x + 0.044715·x³), evaluated
// as x / (1 + e^(−2u)) — the same function, since 1 + tanh(u) = 2 / (1 + e^(−2u)) — so that it
// needs only exp_f32 and vectorises. For x < 0 this form also avoids the cancellation in
// 1 + tanh(u) (at x = −4 that sum is 3.6e-5 and tanh's rounding alone would cost ~10⁴ ulp).
// Large |x|: x³ or e^(−2u) overflows and the result is x for x > 0 and −0 for x < 0, which is
// what the exact value rounds to; NaN and −inf give NaN (as the tanh form does).
inline float gelu_tanh_f32(float x) {
  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);  // √(2/π) · (…)
  return x / (1.0f + exp_f32(-2.0f * u));
}

// SiLU, x·σ(x) = x / (1 + e^(−x)). Below x = −88.7, where e^(−x) overflows, the result is −0
// (the exact value is under 3e-37 in magnitude).
inline float silu_f32(float x) { return x / (1.0f + exp_f32(-x)); }

// Row kernels (cpu_math.cpp), each with AVX-512 and AVX2+FMA clones chosen at run time.

// max of x[0, n); −inf when n == 0.
float row_max(const float* x, int64_t n);

// x[j] = exp_f32(x[j] − shift) for j in [0, n); returns the sum of the new values, summed in
// blocks of 64 (and 8 lanes within a block), so rounding grows with 64/8 + n/64 terms rather
// than with n.
float exp_shifted_sum(float* x, int64_t n, float shift);

// x[j] *= factor for j in [0, n).
void scale_row(float* x, int64_t n, float factor);

// x[j] = gelu_tanh_f32(x[j]), and x[j] = silu_f32(x[j]), for j in [0, n).
void gelu_tanh_row(float* x, int64_t n);
void silu_row(float* x, int64_t n);

// Small tile products for flash attention where no BLAS is built in (the built-in sgemm
// allocates per call and has no tuned kernel):
// s[r·lds + c] = scale · Σ_p q[r·d + p] · kt[p·ldk + c] for r < rows, c < cols, with the sum
// over p taken in blocks of 8 (partial sums, then their sum: far less rounding than one running
// sum over d), and o[r·d + p] += Σ_c probs[r·ldp + c] · v[c·d + p].
void tile_scores(const float* q, const float* kt, int64_t ldk, int64_t rows, int64_t cols, int64_t d, float scale,
                 float* s, int64_t lds);
void tile_accumulate(const float* probs, int64_t ldp, const float* v, int64_t rows, int64_t cols, int64_t d,
                     float* o);

// Row conversions between the 16-bit storage types and f32, bit for bit the same as
// bf16_to_float / float_to_bf16 / f16_to_float / float_to_f16 of runtime/dtype.h (round to
// nearest even, NaN and Inf kept; test/cpu_math_test.cpp compares them on every 16-bit pattern
// and on a sweep of f32 patterns), but written without branches so that they vectorise.
void bf16_to_f32(const bf16* src, float* dst, int64_t n);
void f32_to_bf16(const float* src, bf16* dst, int64_t n);
void f16_to_f32(const f16* src, float* dst, int64_t n);
void f32_to_f16(const float* src, f16* dst, int64_t n);

}  // namespace blockscope::ops::cpu
