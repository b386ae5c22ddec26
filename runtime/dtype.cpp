#include "runtime/dtype.h"

#include <cmath>
#include <limits>

namespace blockscope {

bool parse_dtype(const std::string& text, DType* out) {
  if (text == "f32" || text == "float32" || text == "fp32") { *out = DType::f32; return true; }
  if (text == "f16" || text == "float16" || text == "fp16") { *out = DType::f16; return true; }
  if (text == "bf16" || text == "bfloat16") { *out = DType::bf16; return true; }
  if (text == "fp8_e4m3" || text == "float8_e4m3fn" || text == "e4m3") { *out = DType::fp8_e4m3; return true; }
  if (text == "fp8_e5m2" || text == "float8_e5m2" || text == "e5m2") { *out = DType::fp8_e5m2; return true; }
  return false;
}

double dtype_epsilon(DType dtype) {
  switch (dtype) {
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::fp8_e4m3: return std::ldexp(1.0, -4);
    case DType::fp8_e5m2: return std::ldexp(1.0, -3);
  }
  return 0.0;
}

double dtype_max_finite(DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<double>(std::numeric_limits<float>::max());
    case DType::f16: return 65504.0;
    case DType::bf16: return static_cast<double>(bf16_to_float(bf16{0x7f7f}));
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: return static_cast<double>(fp8_max_finite(fp8_format(dtype)));
  }
  return 0.0;
}

// binary32 -> binary16, round to nearest even, with subnormals, overflow to Inf, NaN kept.
f16 float_to_f16(float value) {
  const uint32_t bits = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    const uint16_t payload = abs > 0x7f800000u ? static_cast<uint16_t>(0x0200u | ((abs >> 13) & 0x3ffu)) : 0;
    return f16{static_cast<uint16_t>(sign | 0x7c00u | payload)};
  }
  const int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent > 15) return f16{static_cast<uint16_t>(sign | 0x7c00u)};  // overflow
  uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;                      // implicit leading 1
  if (exponent >= -14) {
    // Normal half: keep 10 of 23 mantissa bits, round on the 13 dropped.
    uint32_t half = (static_cast<uint32_t>(exponent + 15) << 10) | ((mantissa >> 13) & 0x3ffu);
    const uint32_t dropped = mantissa & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;  // may carry into Inf: correct
    return f16{static_cast<uint16_t>(sign | half)};
  }
  if (exponent < -25) return f16{sign};  // below half the smallest subnormal: signed zero
  // Subnormal half: value = mantissa * 2^(exponent-23); unit is 2^-24.
  const int shift = -exponent - 1;  // 14..24 bits dropped from the 24-bit mantissa
  uint32_t half = mantissa >> shift;
  const uint32_t dropped = mantissa & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (dropped > halfway || (dropped == halfway && (half & 1u))) ++half;
  return f16{static_cast<uint16_t>(sign | half)};
}

float f16_to_float(f16 value) {
  const uint32_t sign = static_cast<uint32_t>(value.bits & 0x8000u) << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // Inf/NaN
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace blockscope
