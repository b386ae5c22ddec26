// The FP8-weight dot products of cpu_kernels.h. The vector versions are compiled for their
// instruction sets with target attributes (the rest of the build targets baseline x86-64) and
// chosen by what the CPU reports at run time.
#include "ops/fp8_weight_linear/cpu_kernels.h"

#include <algorithm>
#include <array>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/fp8.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BLOCKSCOPE_FP8_WEIGHT_X86 1
#include <immintrin.h>
// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_* placeholders that
// _mm512_cvtph_ps and _mm512_reduce_add_ps start from): a false positive, fixed in GCC 13.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define BS_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define BS_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

namespace blockscope::ops::cpu::fp8_weight {

namespace {

// The codes' values over f16's: 2^8 for e4m3 (its exponent bias is 7, f16's 15), 1 for e5m2.
constexpr float kE4m3Unit = 256.0f;
float unit(bool e5m2) { return e5m2 ? 1.0f : kE4m3Unit; }

// Every code's value divided by unit(): what the vector versions' f16 widening gives.
const std::array<float, 256>& unit_values(bool e5m2) {
  static const std::array<std::array<float, 256>, 2> tables = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int code = 0; code < 256; ++code) {
      t[0][code] = fp8_to_float(static_cast<uint8_t>(code), Fp8Format::e4m3) / kE4m3Unit;
      t[1][code] = fp8_to_float(static_cast<uint8_t>(code), Fp8Format::e5m2);
    }
    return t;
  }();
  return tables[e5m2 ? 1 : 0];
}

// Σ over [from, k) of x_row[j] · unit value of w_row[j]: the tail after the vector steps.
float tail_dot(const float* x_row, const uint8_t* w_row, int64_t from, int64_t k, const std::array<float, 256>& values) {
  float s = 0.0f;
  for (int64_t j = from; j < k; ++j) s += x_row[j] * values[w_row[j]];
  return s;
}

// One block of kOuts weight rows (w_rows) against mb ≤ kMaxRows rows of x, into out[m · ldt + g].
// Each version below follows this shape; the scalar one is the plain form.
template <int kOuts>
void block_scalar(const float* x, int mb, int64_t k, const uint8_t* const* w_rows, bool e5m2, float* out,
                  int64_t ldt) {
  const std::array<float, 256>& values = unit_values(e5m2);
  for (int m = 0; m < mb; ++m)
    for (int g = 0; g < kOuts; ++g) out[m * ldt + g] = tail_dot(x + m * k, w_rows[g], 0, k, values) * unit(e5m2);
}

#ifdef BLOCKSCOPE_FP8_WEIGHT_X86

// 16 codes' bits as f16 (see cpu_kernels.h), in the 16-bit lanes of c (zero-extended codes).
template <bool kE5m2>
BS_TARGET_AVX2 inline __m256i f16_bits_256(__m256i c) {
  if constexpr (kE5m2) {
    return _mm256_slli_epi16(c, 8);
  } else {
    const __m256i magnitude = _mm256_and_si256(c, _mm256_set1_epi16(0x7F));
    const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x80)), 8);
    const __m256i nan = _mm256_and_si256(_mm256_cmpeq_epi16(magnitude, _mm256_set1_epi16(0x7F)),
                                         _mm256_set1_epi16(0x7C00));
    return _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(magnitude, 7), sign), nan);
  }
}

// The same for 8 codes in the 16-bit lanes of a 128-bit c.
template <bool kE5m2>
BS_TARGET_AVX2 inline __m128i f16_bits_128(__m128i c) {
  if constexpr (kE5m2) {
    return _mm_slli_epi16(c, 8);
  } else {
    const __m128i magnitude = _mm_and_si128(c, _mm_set1_epi16(0x7F));
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(c, _mm_set1_epi16(0x80)), 8);
    const __m128i nan = _mm_and_si128(_mm_cmpeq_epi16(magnitude, _mm_set1_epi16(0x7F)), _mm_set1_epi16(0x7C00));
    return _mm_or_si128(_mm_or_si128(_mm_slli_epi16(magnitude, 7), sign), nan);
  }
}

template <bool kE5m2>
BS_TARGET_AVX512 inline __m512 widen16(const uint8_t* p) {
  const __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_cvtph_ps(f16_bits_256<kE5m2>(c));
}

template <bool kE5m2>
BS_TARGET_AVX2 inline __m256 widen8(const uint8_t* p) {
  const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_cvtph_ps(f16_bits_128<kE5m2>(c));
}

BS_TARGET_AVX2 inline float sum8(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

template <bool kE5m2, int kRows, int kOuts>
BS_TARGET_AVX512 void block_avx512(const float* x, int64_t k, const uint8_t* const* w_rows, float* out, int64_t ldt) {
  __m512 acc[kRows][kOuts];
  for (int m = 0; m < kRows; ++m)
    for (int g = 0; g < kOuts; ++g) acc[m][g] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    __m512 w[kOuts];
    for (int g = 0; g < kOuts; ++g) w[g] = widen16<kE5m2>(w_rows[g] + j);
    for (int m = 0; m < kRows; ++m) {
      const __m512 xv = _mm512_loadu_ps(x + m * k + j);
      for (int g = 0; g < kOuts; ++g) acc[m][g] = _mm512_fmadd_ps(xv, w[g], acc[m][g]);
    }
  }
  const std::array<float, 256>& values = unit_values(kE5m2);
  for (int m = 0; m < kRows; ++m)
    for (int g = 0; g < kOuts; ++g)
      out[m * ldt + g] = (_mm512_reduce_add_ps(acc[m][g]) + tail_dot(x + m * k, w_rows[g], j, k, values)) * unit(kE5m2);
}

template <bool kE5m2, int kRows, int kOuts>
BS_TARGET_AVX2 void block_avx2(const float* x, int64_t k, const uint8_t* const* w_rows, float* out, int64_t ldt) {
  __m256 acc[kRows][kOuts];
  for (int m = 0; m < kRows; ++m)
    for (int g = 0; g < kOuts; ++g) acc[m][g] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    __m256 w[kOuts];
    for (int g = 0; g < kOuts; ++g) w[g] = widen8<kE5m2>(w_rows[g] + j);
    for (int m = 0; m < kRows; ++m) {
      const __m256 xv = _mm256_loadu_ps(x + m * k + j);
      for (int g = 0; g < kOuts; ++g) acc[m][g] = _mm256_fmadd_ps(xv, w[g], acc[m][g]);
    }
  }
  const std::array<float, 256>& values = unit_values(kE5m2);
  for (int m = 0; m < kRows; ++m)
    for (int g = 0; g < kOuts; ++g)
      out[m * ldt + g] = (sum8(acc[m][g]) + tail_dot(x + m * k, w_rows[g], j, k, values)) * unit(kE5m2);
}

// Weight rows per block: as many sums as the registers hold beside the widened rows (4 × 4 + 4 + 1
// of AVX-512's 32 zmm; 4 × 2 + 2 + 1 of AVX2's 16 ymm).
constexpr int kAvx512Outs = 4, kAvx2Outs = 2;
#endif

constexpr int kMaxRows = 4;  // x rows per block; more rows take more blocks over the same weights

// The block of `outs` weight rows (the ISA's width, or 1 for the last few) against mb x rows.
template <Isa kIsa, bool kE5m2, int kOuts>
void run_block(const float* x, int mb, int64_t k, const uint8_t* const* w_rows, float* out, int64_t ldt) {
#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
  if constexpr (kIsa == Isa::avx512) {
    switch (mb) {
      case 1: return block_avx512<kE5m2, 1, kOuts>(x, k, w_rows, out, ldt);
      case 2: return block_avx512<kE5m2, 2, kOuts>(x, k, w_rows, out, ldt);
      case 3: return block_avx512<kE5m2, 3, kOuts>(x, k, w_rows, out, ldt);
      default: return block_avx512<kE5m2, 4, kOuts>(x, k, w_rows, out, ldt);
    }
  } else if constexpr (kIsa == Isa::avx2) {
    switch (mb) {
      case 1: return block_avx2<kE5m2, 1, kOuts>(x, k, w_rows, out, ldt);
      case 2: return block_avx2<kE5m2, 2, kOuts>(x, k, w_rows, out, ldt);
      case 3: return block_avx2<kE5m2, 3, kOuts>(x, k, w_rows, out, ldt);
      default: return block_avx2<kE5m2, 4, kOuts>(x, k, w_rows, out, ldt);
    }
  }
#endif
  block_scalar<kOuts>(x, mb, k, w_rows, kE5m2, out, ldt);
}

template <Isa kIsa, bool kE5m2, int kOuts>
void dot_rows_on(const float* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, float* t,
                 int64_t ldt) {
  int64_t o = o0;
  const auto blocks = [&](auto outs_tag) {
    constexpr int kN = decltype(outs_tag)::value;
    for (; o + kN <= o1; o += kN) {
      const uint8_t* w_rows[kN];
      for (int g = 0; g < kN; ++g) w_rows[g] = w + (o + g) * k;
      for (int64_t m0 = 0; m0 < rows; m0 += kMaxRows) {
        const int mb = static_cast<int>(std::min<int64_t>(kMaxRows, rows - m0));
        run_block<kIsa, kE5m2, kN>(x + m0 * k, mb, k, w_rows, t + m0 * ldt + o, ldt);
      }
    }
  };
  blocks(std::integral_constant<int, kOuts>{});
  blocks(std::integral_constant<int, 1>{});  // the last rows, one at a time
}

template <Isa kIsa, int kOuts>
void dot_rows_isa(const float* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, bool e5m2,
                  float* t, int64_t ldt) {
  if (e5m2) {
    dot_rows_on<kIsa, true, kOuts>(x, rows, w, k, o0, o1, t, ldt);
  } else {
    dot_rows_on<kIsa, false, kOuts>(x, rows, w, k, o0, o1, t, ldt);
  }
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::scalar: return "scalar";
  }
  return "?";
}

const std::vector<Isa>& isas_on_this_cpu() {
  static const std::vector<Isa> isas = [] {
    std::vector<Isa> found;
#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (avx2 && __builtin_cpu_supports("avx512f")) found.push_back(Isa::avx512);
    if (avx2) found.push_back(Isa::avx2);
#endif
    found.push_back(Isa::scalar);
    return found;
  }();
  return isas;
}

void dot_rows(Isa isa, const float* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, bool e5m2,
              float* t, int64_t ldt) {
  const std::vector<Isa>& available = isas_on_this_cpu();
  BS_CHECK(std::find(available.begin(), available.end(), isa) != available.end(), "fp8_weight::dot_rows: ",
           isa_name(isa), " does not run on this CPU");
#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
  if (isa == Isa::avx512) return dot_rows_isa<Isa::avx512, kAvx512Outs>(x, rows, w, k, o0, o1, e5m2, t, ldt);
  if (isa == Isa::avx2) return dot_rows_isa<Isa::avx2, kAvx2Outs>(x, rows, w, k, o0, o1, e5m2, t, ldt);
#endif
  dot_rows_isa<Isa::scalar, 1>(x, rows, w, k, o0, o1, e5m2, t, ldt);
}

}  // namespace blockscope::ops::cpu::fp8_weight
