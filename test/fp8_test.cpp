// FP8 codes and their conversions (runtime/fp8.h), against
//   - a float64 decoding written here from the formats' definitions (OCP 8-bit floating point:
//     sign, biased exponent, mantissa; subnormals at the smallest exponent), every one of the
//     256 codes of both formats, and values worked out by hand;
//   - the rounding rule itself: every midpoint between neighbouring codes (a tie goes to the
//     even code), the floats just either side of it, saturation, underflow, signed zeros, NaN;
//   - the CUDA toolkit's own conversion (__nv_cvt_float_to_fp8 with __NV_SATFINITE, and its
//     FP8 -> half decoding), bit for bit over 1.6 million floats that put every rounding position
//     to the test, where the toolkit's headers are present (CUDA and SIM builds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/fp8.h"

#ifdef BLOCKSCOPE_TEST_CUDA_FP8_HEADERS
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace blockscope {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

const char* name(Fp8Format f) { return f == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The format's definition, in float64: 1 sign bit, E exponent bits (bias 2^(E-1) - 1), M
// mantissa bits; exponent field 0 holds the subnormals. e4m3 has no infinities and one NaN per
// sign (all ones); e5m2 reserves the all-ones exponent for infinities and NaNs, as IEEE 754.
double reference_decode(uint8_t code, Fp8Format f) {
  const int e_bits = f == Fp8Format::e4m3 ? 4 : 5, m_bits = 8 - 1 - e_bits;
  const int bias = (1 << (e_bits - 1)) - 1;
  const int field = (code >> m_bits) & ((1 << e_bits) - 1), mantissa = code & ((1 << m_bits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if (f == Fp8Format::e4m3 && field == 15 && mantissa == 7) return std::nan("");
  if (f == Fp8Format::e5m2 && field == 31) return mantissa == 0 ? sign * HUGE_VAL : std::nan("");
  if (field == 0) return sign * mantissa / double(1 << m_bits) * std::pow(2.0, 1 - bias);
  return sign * (1.0 + mantissa / double(1 << m_bits)) * std::pow(2.0, field - bias);
}

// The finite, non-negative codes of a format in increasing order of value.
std::vector<uint8_t> finite_positive_codes(Fp8Format f) {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 0x80; ++c)
    if (std::isfinite(reference_decode(static_cast<uint8_t>(c), f))) codes.push_back(static_cast<uint8_t>(c));
  return codes;
}

TEST(Fp8, EveryCodeDecodesAsTheFormatDefinesIt) {
  for (Fp8Format f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const double want = reference_decode(static_cast<uint8_t>(c), f);
      const float got = fp8_to_float(static_cast<uint8_t>(c), f);
      SCOPED_TRACE(std::string(name(f)) + " code " + std::to_string(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got));
      } else {
        EXPECT_EQ(static_cast<double>(got), want);
        EXPECT_EQ(std::signbit(got), (c & 0x80) != 0);  // -0 included
      }
    }
  }
}

TEST(Fp8, ValuesWorkedOutByHand) {
  // e4m3: 0.0111.000 = 1; 0.1111.110 = 1.75 · 2^8 = 448 (largest); 0.0001.000 = 2^-6
  // (smallest normal); 0.0000.001 = 2^-3 · 2^-6 = 2^-9 (smallest subnormal); 1.1000.100 = -1.5 · 2
  EXPECT_EQ(fp8_to_float(0x38, Fp8Format::e4m3), 1.0f);
  EXPECT_EQ(fp8_to_float(0x7E, Fp8Format::e4m3), 448.0f);
  EXPECT_EQ(fp8_to_float(0x08, Fp8Format::e4m3), 0.015625f);
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::e4m3), 0.001953125f);
  EXPECT_EQ(fp8_to_float(0xC4, Fp8Format::e4m3), -3.0f);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7F, Fp8Format::e4m3)));
  EXPECT_TRUE(std::isnan(fp8_to_float(0xFF, Fp8Format::e4m3)));
  // e5m2: 0.01111.00 = 1; 0.11110.11 = 1.75 · 2^15 = 57344; 0.11111.00 = inf; 0.00000.01 = 2^-16
  EXPECT_EQ(fp8_to_float(0x3C, Fp8Format::e5m2), 1.0f);
  EXPECT_EQ(fp8_to_float(0x7B, Fp8Format::e5m2), 57344.0f);
  EXPECT_EQ(fp8_to_float(0xFC, Fp8Format::e5m2), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::e5m2), 1.52587890625e-05f);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7D, Fp8Format::e5m2)));
  EXPECT_EQ(fp8_max_finite(Fp8Format::e4m3), 448.0f);
  EXPECT_EQ(fp8_max_finite(Fp8Format::e5m2), 57344.0f);
  // Encoding: 1.1 lies between 1.0 (0x38) and 1.125 (0x39), nearer 1.125; 300 between 288 (0x79)
  // and 320 (0x7A), nearer 288; 0.3 in e5m2 between 0.25 (0x34) and 0.3125 (0x35), nearer 0.3125.
  EXPECT_EQ(float_to_fp8(1.1f, Fp8Format::e4m3), 0x39);
  EXPECT_EQ(float_to_fp8(300.0f, Fp8Format::e4m3), 0x79);
  EXPECT_EQ(float_to_fp8(-300.0f, Fp8Format::e4m3), 0xF9);
  EXPECT_EQ(float_to_fp8(0.3f, Fp8Format::e5m2), 0x35);
}

TEST(Fp8, EveryCodeEncodesBackToItself) {
  for (Fp8Format f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const float v = fp8_to_float(static_cast<uint8_t>(c), f);
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(float_to_fp8(v, f), c) << name(f) << " code " << c << " = " << v;
    }
  }
}

// Between neighbouring codes a and b: the midpoint goes to the even code (the one whose last
// mantissa bit is 0), the float just below it to a, just above to b. Both signs.
TEST(Fp8, MidpointsTieToEvenAndTheirNeighboursRoundToTheNearer) {
  for (Fp8Format f : kFormats) {
    const std::vector<uint8_t> codes = finite_positive_codes(f);
    for (size_t i = 0; i + 1 < codes.size(); ++i) {
      const uint8_t a = codes[i], b = codes[i + 1];
      const double mid = (reference_decode(a, f) + reference_decode(b, f)) / 2;
      const float m = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(m), mid) << "a midpoint of FP8 values is a float";
      const uint8_t even = (a & 1) == 0 ? a : b;
      SCOPED_TRACE(std::string(name(f)) + " between codes " + std::to_string(a) + " and " + std::to_string(b));
      EXPECT_EQ(float_to_fp8(m, f), even);
      EXPECT_EQ(float_to_fp8(std::nextafter(m, 0.0f), f), a);
      EXPECT_EQ(float_to_fp8(std::nextafter(m, 1e30f), f), b);
      EXPECT_EQ(float_to_fp8(-m, f), even | 0x80);
      EXPECT_EQ(float_to_fp8(std::nextafter(-m, 0.0f), f), a | 0x80);
      EXPECT_EQ(float_to_fp8(std::nextafter(-m, -1e30f), f), b | 0x80);
    }
  }
}

TEST(Fp8, SaturationUnderflowZerosAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  // e4m3: past 448 + 16 (half a spacing) every magnitude saturates to 448; at 464 exactly the tie
  // goes to 448 (the code above, 0x7F, is NaN and never a rounding result).
  EXPECT_EQ(float_to_fp8(464.0f, Fp8Format::e4m3), 0x7E);
  EXPECT_EQ(float_to_fp8(std::nextafter(464.0f, inf), Fp8Format::e4m3), 0x7E);
  EXPECT_EQ(float_to_fp8(1e30f, Fp8Format::e4m3), 0x7E);
  EXPECT_EQ(float_to_fp8(inf, Fp8Format::e4m3), 0x7E);
  EXPECT_EQ(float_to_fp8(-inf, Fp8Format::e4m3), 0xFE);
  EXPECT_EQ(float_to_fp8(std::numeric_limits<float>::max(), Fp8Format::e4m3), 0x7E);
  // e5m2: 61440 is the tie between 57344 and 65536 (infinity's code): even is 0x7C, out of range,
  // so it saturates to 0x7B, as does infinity.
  EXPECT_EQ(float_to_fp8(61440.0f, Fp8Format::e5m2), 0x7B);
  EXPECT_EQ(float_to_fp8(std::nextafter(61440.0f, 0.0f), Fp8Format::e5m2), 0x7B);
  EXPECT_EQ(float_to_fp8(inf, Fp8Format::e5m2), 0x7B);
  EXPECT_EQ(float_to_fp8(-inf, Fp8Format::e5m2), 0xFB);
  // Half the smallest subnormal (2^-10 for e4m3, 2^-17 for e5m2) and less: a zero of its sign.
  EXPECT_EQ(float_to_fp8(std::ldexp(1.0f, -10), Fp8Format::e4m3), 0x00);
  EXPECT_EQ(float_to_fp8(std::nextafter(std::ldexp(1.0f, -10), 1.0f), Fp8Format::e4m3), 0x01);
  EXPECT_EQ(float_to_fp8(-std::ldexp(1.0f, -10), Fp8Format::e4m3), 0x80);
  EXPECT_EQ(float_to_fp8(std::ldexp(1.0f, -17), Fp8Format::e5m2), 0x00);
  EXPECT_EQ(float_to_fp8(std::nextafter(std::ldexp(1.0f, -17), 1.0f), Fp8Format::e5m2), 0x01);
  EXPECT_EQ(float_to_fp8(std::numeric_limits<float>::denorm_min(), Fp8Format::e4m3), 0x00);
  EXPECT_EQ(float_to_fp8(-std::numeric_limits<float>::denorm_min(), Fp8Format::e5m2), 0x80);
  EXPECT_EQ(float_to_fp8(0.0f, Fp8Format::e4m3), 0x00);
  EXPECT_EQ(float_to_fp8(-0.0f, Fp8Format::e4m3), 0x80);
  // A subnormal that rounds up into the smallest normal: 2^-6 - 2^-11 (e4m3), above 2^-6 - 2^-10,
  // the midpoint of 7 · 2^-9 (0x07) and 2^-6, gives code 0x08.
  EXPECT_EQ(float_to_fp8(std::ldexp(1.0f, -6) - std::ldexp(1.0f, -11), Fp8Format::e4m3), 0x08);
  // NaN, whatever its sign and payload: the canonical code 0x7F (e4m3's NaN, an e5m2 NaN).
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFA00000u}) {
    EXPECT_EQ(float_to_fp8(from_bits(nan), Fp8Format::e4m3), 0x7F);
    EXPECT_EQ(float_to_fp8(from_bits(nan), Fp8Format::e5m2), 0x7F);
  }
}

// Floats that exercise every rounding position: each sign and exponent, the leading 9 mantissa
// bits (the kept bits, the rounding bit and the extra ones the subnormal range drops) and the
// trailing 14 either empty, a lone last bit, just under, at and over their half, or full.
std::vector<float> rounding_probe_floats() {
  std::vector<float> out;
  const uint32_t tails[] = {0, 1, 0x1FFF, 0x2000, 0x2001, 0x3FFF};
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exponent = 0; exponent < 256; ++exponent)
      for (uint32_t lead = 0; lead < 512; ++lead)
        for (uint32_t tail : tails) out.push_back(from_bits(sign << 31 | exponent << 23 | lead << 14 | tail));
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 200000; ++i) out.push_back(from_bits(static_cast<uint32_t>(rng())));
  return out;
}

#ifdef BLOCKSCOPE_TEST_CUDA_FP8_HEADERS
TEST(Fp8, BitForBitWithTheCudaToolkitsConversions) {
  const std::vector<float> probes = rounding_probe_floats();
  for (Fp8Format f : kFormats) {
    const __nv_fp8_interpretation_t kind = f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
    size_t mismatches = 0;
    for (float x : probes) {
      const uint8_t want = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind), got = float_to_fp8(x, f);
      if (want != got && ++mismatches <= 5) {
        uint32_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        ADD_FAILURE() << name(f) << ": float bits 0x" << std::hex << bits << " (" << x << "): toolkit 0x"
                      << int(want) << ", ours 0x" << int(got);
      }
    }
    EXPECT_EQ(mismatches, 0u) << name(f) << " over " << probes.size() << " floats";
    for (int c = 0; c < 256; ++c) {  // decoding, through the toolkit's FP8 -> half
      const __half_raw raw = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), kind);
      const float want = __half2float(__half(raw)), got = fp8_to_float(static_cast<uint8_t>(c), f);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << name(f) << " code " << c;
      } else {
        EXPECT_EQ(want, got) << name(f) << " code " << c;
      }
    }
  }
}
#else
TEST(Fp8, BitForBitWithTheCudaToolkitsConversions) {
  GTEST_SKIP() << "this build has no CUDA toolkit headers (cuda_fp8.h): the CPU's FP8 conversions are "
                  "checked against the formats' definition only";
}
#endif

// The probes also go through the rule directly: the result is the nearest code (ties to even),
// saturated, by a search over the 256 codes in float64.
TEST(Fp8, EveryProbeIsTheNearestCodeBySearch) {
  const std::vector<float> probes = rounding_probe_floats();
  for (Fp8Format f : kFormats) {
    const std::vector<uint8_t> codes = finite_positive_codes(f);
    const double max = reference_decode(codes.back(), f);
    size_t mismatches = 0;
    for (size_t i = 0; i < probes.size(); i += 7) {  // a seventh of them: the search is slow
      const float x = probes[i];
      if (std::isnan(x)) continue;
      const double magnitude = std::fabs(static_cast<double>(x));
      uint8_t best = codes.back();
      if (magnitude < max) {
        double best_distance = HUGE_VAL;
        for (uint8_t c : codes) {
          const double d = std::fabs(reference_decode(c, f) - magnitude);
          if (d < best_distance || (d == best_distance && (c & 1) == 0)) best = c, best_distance = d;
        }
      }
      const uint8_t want = static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
      if (float_to_fp8(x, f) != want && ++mismatches <= 5) {
        ADD_FAILURE() << name(f) << ": " << x << " -> " << int(float_to_fp8(x, f)) << ", nearest " << int(want);
      }
    }
    EXPECT_EQ(mismatches, 0u) << name(f);
  }
}

}  // namespace
}  // namespace blockscope
