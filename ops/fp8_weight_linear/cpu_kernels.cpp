// The FP8-weight dot products of cpu_kernels.h. The vector versions are compiled for their
// instruction sets with target attributes (the rest of the build targets baseline x86-64) and
// chosen by what the CPU reports at run time.
#include "ops/fp8_weight_linear/cpu_kernels.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/fp8.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BLOCKSCOPE_FP8_WEIGHT_X86 1
#include <cpuid.h>
#include <immintrin.h>
// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_* placeholders that
// _mm512_cvtph_ps and _mm512_reduce_add_ps start from): a false positive, fixed in GCC 13.
// (Pushed here, popped at the end of this file: a unity build's next file keeps the warnings.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define BLOCKSCOPE_FP8_WEIGHT_DIAGNOSTICS_PUSHED 1
#endif
#define BS_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))
#define BS_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BS_TARGET_AVX512_BF16 __attribute__((target("avx512bf16,avx512f,avx512vl,avx2,fma,f16c")))
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

// One block of kOuts weight rows (w_rows) against mb rows of x, into out[m · ldt + g]. Each
// version below follows this shape; the scalar one is the plain form.
template <int kOuts>
void block_scalar(const float* x, int mb, int64_t k, const uint8_t* const* w_rows, bool e5m2, float* out,
                  int64_t ldt) {
  const std::array<float, 256>& values = unit_values(e5m2);
  for (int m = 0; m < mb; ++m)
    for (int g = 0; g < kOuts; ++g) out[m * ldt + g] = tail_dot(x + m * k, w_rows[g], 0, k, values) * unit(e5m2);
}

#ifdef BLOCKSCOPE_FP8_WEIGHT_X86

// The codes' bits as f16 (see cpu_kernels.h), from the codes sign-extended to 16 bits (sx: the
// code in bits 0-7, its sign copied into bits 8-15). e5m2: sx << 8. e4m3: sx << 7 puts exponent
// and mantissa in bits 7-13 and the sign in bit 15 (and a copy in bit 14, cleared); a NaN code
// (the low 7 bits all set) gets bit 14 too, making f16's NaN exponent. AVX-512VL: one ternary
// logic op selects bit 14 from the NaN mask and the rest from the shifted code.
template <bool kE5m2>
BS_TARGET_AVX512 inline __m256i f16_bits_256(__m256i sx) {
  if constexpr (kE5m2) {
    return _mm256_slli_epi16(sx, 8);
  } else {
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_or_si256(sx, _mm256_set1_epi16(static_cast<short>(0xFF80))),
                                           _mm256_set1_epi16(-1));
    constexpr int kSelectByC = 0xE4;  // C ? A : B, bit by bit
    return _mm256_ternarylogic_epi32(_mm256_slli_epi16(sx, 7), nan, _mm256_set1_epi16(static_cast<short>(0xBFFF)),
                                     kSelectByC);
  }
}

// The same for 8 codes in a 128-bit sx, with AVX2's logic ops.
template <bool kE5m2>
BS_TARGET_AVX2 inline __m128i f16_bits_128(__m128i sx) {
  if constexpr (kE5m2) {
    return _mm_slli_epi16(sx, 8);
  } else {
    const __m128i nan = _mm_cmpeq_epi16(_mm_or_si128(sx, _mm_set1_epi16(static_cast<short>(0xFF80))), _mm_set1_epi16(-1));
    return _mm_or_si128(_mm_and_si128(_mm_slli_epi16(sx, 7), _mm_set1_epi16(static_cast<short>(0xBFFF))),
                        _mm_and_si128(nan, _mm_set1_epi16(0x4000)));
  }
}

template <bool kE5m2>
BS_TARGET_AVX512 inline __m512 widen16(const uint8_t* p) {
  const __m256i sx = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_cvtph_ps(f16_bits_256<kE5m2>(sx));
}

template <bool kE5m2>
BS_TARGET_AVX2 inline __m256 widen8(const uint8_t* p) {
  const __m128i sx = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_cvtph_ps(f16_bits_128<kE5m2>(sx));
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

// A bf16 x element's value.
inline float bf16_value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float v;
  std::memcpy(&v, &wide, sizeof(v));
  return v;
}

template <bool kE5m2, int kRows, int kOuts>
BS_TARGET_AVX512_BF16 void block_bf16(const uint16_t* x, int64_t k, const uint8_t* const* w_rows, float* out,
                                      int64_t ldt) {
  __m512 acc[kRows][kOuts];
  for (int m = 0; m < kRows; ++m)
    for (int g = 0; g < kOuts; ++g) acc[m][g] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= k; j += 32) {
    __m512bh w[kOuts];
    for (int g = 0; g < kOuts; ++g)  // lanes 0-15: codes j..j+15, 16-31: j+16..j+31, as x's
      w[g] = _mm512_cvtne2ps_pbh(widen16<kE5m2>(w_rows[g] + j + 16), widen16<kE5m2>(w_rows[g] + j));
    for (int m = 0; m < kRows; ++m) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + m * k + j));
      for (int g = 0; g < kOuts; ++g) acc[m][g] = _mm512_dpbf16_ps(acc[m][g], xv, w[g]);
    }
  }
  const std::array<float, 256>& values = unit_values(kE5m2);
  for (int m = 0; m < kRows; ++m) {
    for (int g = 0; g < kOuts; ++g) {
      float tail = 0.0f;
      for (int64_t i = j; i < k; ++i) tail += bf16_value(x[m * k + i]) * values[w_rows[g][i]];
      out[m * ldt + g] = (_mm512_reduce_add_ps(acc[m][g]) + tail) * unit(kE5m2);
    }
  }
}
#endif

// f(std::integral_constant<int, mb>) for a run-time 1 ≤ mb ≤ kRows: the blocks' row counts are
// template arguments, so their sums stay in registers.
template <int kRows, typename F>
void with_rows(int mb, F&& f) {
  if constexpr (kRows > 1) {
    if (mb < kRows) return with_rows<kRows - 1>(mb, f);
  }
  f(std::integral_constant<int, kRows>{});
}

// Rows o0..o1 of w in blocks of kOuts (then one at a time), each block against x's rows in
// chunks of up to kMaxRows: the block's weight rows are read from memory once, the later chunks
// finding them in the cache. block(rows_tag, outs_tag, x_chunk, w_rows, out) computes one block
// of decltype(rows_tag)::value x rows × decltype(outs_tag)::value weight rows into out.
template <int kMaxRows, int kOuts, typename X, typename Block>
void blocked_dots(const X* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, float* t,
                  int64_t ldt, Block block) {
  int64_t o = o0;
  const auto blocks = [&](auto outs_tag) {
    constexpr int kN = decltype(outs_tag)::value;
    for (; o + kN <= o1; o += kN) {
      const uint8_t* w_rows[kN];
      for (int g = 0; g < kN; ++g) w_rows[g] = w + (o + g) * k;
      for (int64_t m0 = 0; m0 < rows; m0 += kMaxRows) {
        const int mb = static_cast<int>(std::min<int64_t>(kMaxRows, rows - m0));
        with_rows<kMaxRows>(mb, [&](auto rows_tag) { block(rows_tag, outs_tag, x + m0 * k, w_rows, t + m0 * ldt + o); });
      }
    }
  };
  blocks(std::integral_constant<int, kOuts>{});
  blocks(std::integral_constant<int, 1>{});  // the last rows, one at a time
}

// The block shapes: as many f32 sums as the registers hold beside the widened weight rows and
// one x vector. AVX-512's 32 zmm: up to 2 x rows × 8 weight rows (16 + 8 + 1: more loads in
// flight for decode's batch 1), up to 4 × 4 (16 + 4 + 1), or up to 8 × 2 (16 + 2 + 1: a batch of
// 8 widens each code once, not twice); the bf16 version the same, with two more registers for
// the halves being packed. AVX2's 16 ymm: 4 × 2 (8 + 2 + 1).
template <typename X, typename Block>
void avx512_shaped_dots(const X* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, float* t,
                        int64_t ldt, Block block) {
  if (rows <= 2) return blocked_dots<2, 8>(x, rows, w, k, o0, o1, t, ldt, block);
  if (rows <= 4) return blocked_dots<4, 4>(x, rows, w, k, o0, o1, t, ldt, block);
  blocked_dots<8, 2>(x, rows, w, k, o0, o1, t, ldt, block);
}

template <Isa kIsa, bool kE5m2>
void dot_rows_shaped(const float* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, float* t,
                     int64_t ldt) {
  const auto block = [k, ldt](auto rows_tag, auto outs_tag, const float* xc, const uint8_t* const* w_rows, float* out) {
    constexpr int kRows = decltype(rows_tag)::value, kOuts = decltype(outs_tag)::value;
#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
    if constexpr (kIsa == Isa::avx512) return block_avx512<kE5m2, kRows, kOuts>(xc, k, w_rows, out, ldt);
    if constexpr (kIsa == Isa::avx2) return block_avx2<kE5m2, kRows, kOuts>(xc, k, w_rows, out, ldt);
#endif
    block_scalar<kOuts>(xc, kRows, k, w_rows, kE5m2, out, ldt);
  };
  if constexpr (kIsa == Isa::avx512) {
    avx512_shaped_dots(x, rows, w, k, o0, o1, t, ldt, block);
  } else if constexpr (kIsa == Isa::avx2) {
    blocked_dots<4, 2>(x, rows, w, k, o0, o1, t, ldt, block);
  } else {
    blocked_dots<4, 1>(x, rows, w, k, o0, o1, t, ldt, block);
  }
}

template <Isa kIsa>
void dot_rows_isa(const float* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, bool e5m2,
                  float* t, int64_t ldt) {
  if (e5m2) {
    dot_rows_shaped<kIsa, true>(x, rows, w, k, o0, o1, t, ldt);
  } else {
    dot_rows_shaped<kIsa, false>(x, rows, w, k, o0, o1, t, ldt);
  }
}

#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
template <bool kE5m2>
void dot_rows_bf16_shaped(const uint16_t* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1,
                          float* t, int64_t ldt) {
  avx512_shaped_dots(x, rows, w, k, o0, o1, t, ldt,
                     [k, ldt](auto rows_tag, auto outs_tag, const uint16_t* xc, const uint8_t* const* w_rows, float* out) {
                       block_bf16<kE5m2, decltype(rows_tag)::value, decltype(outs_tag)::value>(xc, k, w_rows, out, ldt);
                     });
}
#endif

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::scalar: return "scalar";
  }
  return "?";
}

namespace {

// What this CPU and its OS run, from CPUID and XCR0 directly (GCC and clang name these features
// differently in __builtin_cpu_supports, and clang 14 knows neither "f16c" nor "avx512bf16").
struct CpuFeatures {
  bool avx2 = false;      // AVX2, FMA and F16C, with the OS saving the ymm state
  bool avx512 = false;    // AVX-512F and VL, with the OS saving the zmm and mask state
  bool avx512_bf16 = false;
};

CpuFeatures cpu_features() {
  CpuFeatures f;
#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
  const bool osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  if (!osxsave) return f;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const bool ymm_state = (xcr0_low & 0x6) == 0x6, zmm_state = (xcr0_low & 0xE6) == 0xE6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return f;
  const unsigned subleaves = a;
  const bool avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1, avx512vl = (b >> 31) & 1;
  f.avx2 = ymm_state && avx2 && fma && f16c;
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512vl;
  if (f.avx512 && subleaves >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0) f.avx512_bf16 = (a >> 5) & 1;
#endif
  return f;
}

}  // namespace

const std::vector<Isa>& isas_on_this_cpu() {
  static const std::vector<Isa> isas = [] {
    const CpuFeatures f = cpu_features();
    std::vector<Isa> found;
    if (f.avx512) found.push_back(Isa::avx512);
    if (f.avx2) found.push_back(Isa::avx2);
    found.push_back(Isa::scalar);
    return found;
  }();
  return isas;
}

bool bf16_dot_on_this_cpu() {
  static const bool available = cpu_features().avx512_bf16;
  return available;
}

void dot_rows_bf16(const uint16_t* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, bool e5m2,
                   float* t, int64_t ldt) {
  BS_CHECK(bf16_dot_on_this_cpu(), "fp8_weight::dot_rows_bf16: this CPU has no AVX512_BF16");
#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
  if (e5m2) {
    dot_rows_bf16_shaped<true>(x, rows, w, k, o0, o1, t, ldt);
  } else {
    dot_rows_bf16_shaped<false>(x, rows, w, k, o0, o1, t, ldt);
  }
#endif
}

void dot_rows(Isa isa, const float* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, bool e5m2,
              float* t, int64_t ldt) {
  const std::vector<Isa>& available = isas_on_this_cpu();
  BS_CHECK(std::find(available.begin(), available.end(), isa) != available.end(), "fp8_weight::dot_rows: ",
           isa_name(isa), " does not run on this CPU");
#ifdef BLOCKSCOPE_FP8_WEIGHT_X86
  if (isa == Isa::avx512) return dot_rows_isa<Isa::avx512>(x, rows, w, k, o0, o1, e5m2, t, ldt);
  if (isa == Isa::avx2) return dot_rows_isa<Isa::avx2>(x, rows, w, k, o0, o1, e5m2, t, ldt);
#endif
  dot_rows_isa<Isa::scalar>(x, rows, w, k, o0, o1, e5m2, t, ldt);
}

}  // namespace blockscope::ops::cpu::fp8_weight

#ifdef BLOCKSCOPE_FP8_WEIGHT_DIAGNOSTICS_PUSHED
#pragma GCC diagnostic pop
#undef BLOCKSCOPE_FP8_WEIGHT_DIAGNOSTICS_PUSHED
#endif
#undef BLOCKSCOPE_FP8_WEIGHT_X86
#undef BS_TARGET_AVX512
#undef BS_TARGET_AVX2
#undef BS_TARGET_AVX512_BF16
