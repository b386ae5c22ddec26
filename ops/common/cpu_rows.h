// CPU helpers shared by the op implementations: move contiguous runs of any storage dtype to and
// from f32 (the CPU backend computes in f32), with the dtype switch hoisted out of the loop.
// The 16-bit conversions are the vectorised, bit-exact row kernels of cpu_math.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/common/cpu_math.h"
#include "ops/common/rows.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace blockscope::ops::cpu {

// dst[0, n) = float(src[0, n)), src of `dtype`.
inline void load_row(DType dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::f16: f16_to_f32(static_cast<const f16*>(src), dst, n); break;
    case DType::bf16: bf16_to_f32(static_cast<const bf16*>(src), dst, n); break;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp8_to_float(static_cast<const uint8_t*>(src)[i], fp8_format(dtype));
      break;
  }
}

// dst[0, n) = src[0, n) rounded to `dtype` (round to nearest even).
inline void store_row(DType dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::f16: f32_to_f16(src, static_cast<f16*>(dst), n); break;
    case DType::bf16: f32_to_bf16(src, static_cast<bf16*>(dst), n); break;
    case DType::fp8_e4m3:  // saturating (satfinite), as cuBLASLt's FP8 outputs
    case DType::fp8_e5m2:
      for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(dst)[i] = float_to_fp8(src[i], fp8_format(dtype));
      break;
  }
}

// Address of element `index` of a contiguous buffer of `dtype`.
inline const void* element_at(DType dtype, const void* base, int64_t index) {
  return static_cast<const char*>(base) + index * static_cast<int64_t>(dtype_size(dtype));
}
inline void* element_at(DType dtype, void* base, int64_t index) {
  return static_cast<char*>(base) + index * static_cast<int64_t>(dtype_size(dtype));
}

// The first rows · cols elements of a contiguous tensor of any dtype (FP8 codes included), as
// f32 values [rows, cols], exactly widened; rows split over the threads.
inline std::vector<float> contiguous_as_f32(const Tensor& t, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
#pragma omp parallel for if (rows * cols >= kParallelMinElements) schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    load_row(t.dtype(), element_at(t.dtype(), t.data(), r * cols), out.data() + r * cols, cols);
  return out;
}

}  // namespace blockscope::ops::cpu
