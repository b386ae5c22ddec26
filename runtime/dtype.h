// Element types: f32, f16 (IEEE binary16) and bf16 (bfloat16), with exact conversions, and the
// two OCP FP8 formats (runtime/fp8.h). Host-side storage types are plain 16-bit structs; CUDA
// code reinterprets them as __half and __nv_bfloat16 (same bit layout). Conversions round to
// nearest even and keep NaN and Inf; into FP8 they saturate (satfinite) as cuBLASLt does.
//
// The storage rule: ops compute in the compute types (f32, f16, bf16: kComputeDTypes) and take
// and give tensors of those types. FP8 is a storage type only: the ops that take FP8 tensors
// say so in their record (OpRecord::takes_fp8: quantize, dequantize, the FP8 GEMM), and every
// other op refuses one with an error naming the tensor (ops/common/dispatch.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/fp8.h"

namespace blockscope {

enum class DType { f32, f16, bf16, fp8_e4m3, fp8_e5m2 };

// Every element type, in enum order: what configs, tools and the tensor tests enumerate.
inline constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2};
// The types ops compute in, take and give (the storage rule above): what the op tests enumerate.
inline constexpr DType kComputeDTypes[] = {DType::f32, DType::f16, DType::bf16};

inline bool is_fp8(DType dtype) { return dtype == DType::fp8_e4m3 || dtype == DType::fp8_e5m2; }
inline Fp8Format fp8_format(DType dtype) { return dtype == DType::fp8_e5m2 ? Fp8Format::e5m2 : Fp8Format::e4m3; }

inline size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
  }
  return "?";
}

// Parses a dtype_name ("f32" | "f16" | "bf16" | "fp8_e4m3" | "fp8_e5m2") or an alias
// ("float32", "fp32", "float16", "fp16", "bfloat16"; PyTorch's "float8_e4m3fn", "float8_e5m2";
// "e4m3", "e5m2"); false if unknown.
bool parse_dtype(const std::string& text, DType* out);

// Unit roundoff of the storage type: 2^-24 for f32, 2^-11 for f16, 2^-8 for bf16, 2^-4 for
// fp8_e4m3 (3 mantissa bits), 2^-3 for fp8_e5m2 (2): the relative error of one rounding of a
// value in the normal range.
double dtype_epsilon(DType dtype);

// Largest finite value: FLT_MAX, 65504, about 3.39e38, 448, 57344.
double dtype_max_finite(DType dtype);

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline bf16 float_to_bf16(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet and keep the sign
    return bf16{static_cast<uint16_t>((bits >> 16) | 0x0040u)};
  }
  // Round to nearest even on the 16 dropped bits (Inf stays Inf: its low bits are zero).
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return bf16{static_cast<uint16_t>((bits + rounding) >> 16)};
}

inline float bf16_to_float(bf16 value) { return bits_float(static_cast<uint32_t>(value.bits) << 16); }

f16 float_to_f16(float value);
float f16_to_float(f16 value);

// Round a float through a storage type and back (what storing and reloading does; into FP8,
// saturating).
inline float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::f32: return value;
    case DType::f16: return f16_to_float(float_to_f16(value));
    case DType::bf16: return bf16_to_float(float_to_bf16(value));
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: return fp8_to_float(float_to_fp8(value, fp8_format(dtype)), fp8_format(dtype));
  }
  return value;
}

// Load/store one element of `dtype` at `ptr` as float.
inline float load_as_float(DType dtype, const void* ptr) {
  switch (dtype) {
    case DType::f32: return *static_cast<const float*>(ptr);
    case DType::f16: return f16_to_float(*static_cast<const f16*>(ptr));
    case DType::bf16: return bf16_to_float(*static_cast<const bf16*>(ptr));
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: return fp8_to_float(*static_cast<const uint8_t*>(ptr), fp8_format(dtype));
  }
  return 0.0f;
}
inline void store_from_float(DType dtype, void* ptr, float value) {
  switch (dtype) {
    case DType::f32: *static_cast<float*>(ptr) = value; break;
    case DType::f16: *static_cast<f16*>(ptr) = float_to_f16(value); break;
    case DType::bf16: *static_cast<bf16*>(ptr) = float_to_bf16(value); break;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: *static_cast<uint8_t*>(ptr) = float_to_fp8(value, fp8_format(dtype)); break;
  }
}

}  // namespace blockscope
