// Element types: f32, f16 (IEEE binary16) and bf16 (bfloat16), with exact conversions.
// Host-side storage types are plain 16-bit structs; CUDA code reinterprets them as __half and
// __nv_bfloat16 (same bit layout). Conversions round to nearest even and keep NaN and Inf.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace blockscope {

enum class DType { f32, f16, bf16 };

// Every element type, in enum order: what configs, tests and tools enumerate.
inline constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

inline size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

// Parses "f32" | "f16" | "bf16" (also "float32", "float16", "bfloat16"); false if unknown.
bool parse_dtype(const std::string& text, DType* out);

// Unit roundoff of the storage type: 2^-24 for f32, 2^-11 for f16, 2^-8 for bf16.
double dtype_epsilon(DType dtype);

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

// Round a float through a storage type and back (what storing and reloading does).
inline float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::f32: return value;
    case DType::f16: return f16_to_float(float_to_f16(value));
    case DType::bf16: return bf16_to_float(float_to_bf16(value));
  }
  return value;
}

// Load/store one element of `dtype` at `ptr` as float.
inline float load_as_float(DType dtype, const void* ptr) {
  switch (dtype) {
    case DType::f32: return *static_cast<const float*>(ptr);
    case DType::f16: return f16_to_float(*static_cast<const f16*>(ptr));
    case DType::bf16: return bf16_to_float(*static_cast<const bf16*>(ptr));
  }
  return 0.0f;
}
inline void store_from_float(DType dtype, void* ptr, float value) {
  switch (dtype) {
    case DType::f32: *static_cast<float*>(ptr) = value; break;
    case DType::f16: *static_cast<f16*>(ptr) = float_to_f16(value); break;
    case DType::bf16: *static_cast<bf16*>(ptr) = float_to_bf16(value); break;
  }
}

}  // namespace blockscope
