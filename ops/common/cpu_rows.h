// CPU helpers shared by the op implementations: move contiguous runs of any storage dtype to and
// from f32 (the CPU backend computes in f32), with the dtype switch hoisted out of the loop.
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/dtype.h"

namespace blockscope::ops::cpu {

// dst[0, n) = float(src[0, n)), src of `dtype`.
inline void load_row(DType dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::f16: {
      const f16* s = static_cast<const f16*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(s[i]);
      break;
    }
    case DType::bf16: {
      const bf16* s = static_cast<const bf16*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
      break;
    }
  }
}

// dst[0, n) = src[0, n) rounded to `dtype` (round to nearest even).
inline void store_row(DType dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::f16: {
      f16* d = static_cast<f16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(src[i]);
      break;
    }
    case DType::bf16: {
      bf16* d = static_cast<bf16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
      break;
    }
  }
}

// Address of element `index` of a contiguous buffer of `dtype`.
inline const void* element_at(DType dtype, const void* base, int64_t index) {
  return static_cast<const char*>(base) + index * static_cast<int64_t>(dtype_size(dtype));
}
inline void* element_at(DType dtype, void* base, int64_t index) {
  return static_cast<char*>(base) + index * static_cast<int64_t>(dtype_size(dtype));
}

}  // namespace blockscope::ops::cpu
