// FP8 conversions (runtime/fp8.h): integer arithmetic on the float's bits, one rounding.
#include "runtime/fp8.h"

#include <cmath>
#include <limits>

#include "runtime/dtype.h"  // float_bits

namespace blockscope {
namespace {

// A format's shape: mantissa bits M, exponent bias, the largest finite code (no sign).
struct Fp8Shape {
  int mantissa_bits;
  int bias;
  uint8_t max_finite_code;
};

Fp8Shape shape_of(Fp8Format format) {
  return format == Fp8Format::e4m3 ? Fp8Shape{3, 7, 0x7E} : Fp8Shape{2, 15, 0x7B};
}

}  // namespace

uint8_t fp8_max_finite_code(Fp8Format format) { return shape_of(format).max_finite_code; }

float fp8_max_finite(Fp8Format format) { return fp8_to_float(fp8_max_finite_code(format), format); }

uint8_t float_to_fp8(float value, Fp8Format format) {
  const Fp8Shape s = shape_of(format);
  const uint32_t bits = float_bits(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 31) << 7);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return 0x7F;  // NaN: the canonical NaN code of both formats
  if (magnitude == 0x7F800000u) return static_cast<uint8_t>(s.max_finite_code | sign);  // saturates
  // Float subnormals (below 2^-126) are far below half of either format's smallest subnormal.
  if (magnitude < 0x00800000u) return sign;
  const int exponent = static_cast<int>(magnitude >> 23) - 127;  // value = 1.f × 2^exponent
  const int min_exponent = 1 - s.bias;                            // of the smallest normal
  if (exponent > 16) return static_cast<uint8_t>(s.max_finite_code | sign);  // past either format's range
  // The 24-bit significand, rounded to a multiple of the format's spacing at this magnitude:
  // 2^(max(exponent, min_exponent) - M), i.e. `shift` bits of the significand dropped.
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const int shift = 23 - s.mantissa_bits + (exponent < min_exponent ? min_exponent - exponent : 0);
  if (shift > 24) return sign;  // below half the smallest subnormal
  uint32_t kept = significand >> shift;
  const uint32_t dropped = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (dropped > half || (dropped == half && (kept & 1u) != 0)) ++kept;  // to nearest, ties to even
  // kept counts spacings: in the subnormal range it is the code itself (2^M is the smallest
  // normal's code); above, the code is the biased exponent's field plus the fraction, and a
  // round-up to 2^(M+1) carries into the exponent field as it should.
  const uint32_t code = exponent < min_exponent
                            ? kept
                            : (static_cast<uint32_t>(exponent + s.bias) << s.mantissa_bits) +
                                  (kept - (1u << s.mantissa_bits));
  if (code > s.max_finite_code) return static_cast<uint8_t>(s.max_finite_code | sign);
  return static_cast<uint8_t>(code | sign);
}

float fp8_to_float(uint8_t code, Fp8Format format) {
  const Fp8Shape s = shape_of(format);
  const bool negative = (code & 0x80) != 0;
  const int magnitude = code & 0x7F;
  const int field = magnitude >> s.mantissa_bits, fraction = magnitude & ((1 << s.mantissa_bits) - 1);
  float value;
  if (format == Fp8Format::e4m3 && magnitude == 0x7F) {
    return std::numeric_limits<float>::quiet_NaN();
  } else if (format == Fp8Format::e5m2 && field == 31) {
    if (fraction != 0) return std::numeric_limits<float>::quiet_NaN();
    value = std::numeric_limits<float>::infinity();
  } else if (field == 0) {  // subnormal: fraction × 2^(1 - bias - M)
    value = std::ldexp(static_cast<float>(fraction), 1 - s.bias - s.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<float>((1 << s.mantissa_bits) + fraction), field - s.bias - s.mantissa_bits);
  }
  return negative ? -value : value;
}

}  // namespace blockscope
