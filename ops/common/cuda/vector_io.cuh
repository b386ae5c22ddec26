// Device helpers shared by the custom kernels: element types, f32 conversions and 16-byte
// vector loads/stores.
//
// Storage is f32, f16 or bf16; arithmetic is always f32. The host structs blockscope::f16 and
// blockscope::bf16 have the bits of __half and __nv_bfloat16, so tensors are reinterpreted,
// never converted, on their way into a kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "runtime/dtype.h"
#include "runtime/error.h"

namespace blockscope::ops::cuda::kernels {

// ---- f32 conversions ----------------------------------------------------------------------
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// ---- 16-byte packs --------------------------------------------------------------------------
// A pack is what one 16-byte load brings: 4 f32 or 8 f16/bf16 elements.
template <typename T>
struct alignas(16) Pack {
  static constexpr int size = 16 / sizeof(T);
  T v[size];
};

// One 128-bit load or store (LDG.128/STG.128); the caller guarantees 16-byte alignment (a
// misaligned pack faults on a GPU, and on the simulated GPU).
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* ptr) {
  Pack<T> pack;
  *reinterpret_cast<uint4*>(pack.v) = *reinterpret_cast<const uint4*>(ptr);
  return pack;
}

template <typename T>
__device__ __forceinline__ void store_pack(T* ptr, const Pack<T>& pack) {
  *reinterpret_cast<uint4*>(ptr) = *reinterpret_cast<const uint4*>(pack.v);
}

// ---- Dynamic shared memory ------------------------------------------------------------------
// The block's dynamic shared memory (the launch's dynamic_smem bytes), 16-byte aligned.
__device__ __forceinline__ void* dynamic_shared_memory() {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  return dynamic_smem;
}

// ---- Warp and block reductions (f32) --------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 floats of shared memory; the call ends with a barrier so it can be reused.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();
  return v;
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

// True when `ptr` may be read with 16-byte loads.
inline bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Elements per 16-byte pack for a dtype (4 for f32, 8 for f16 and bf16).
inline int64_t pack_elems(DType dtype) { return 16 / static_cast<int64_t>(dtype_size(dtype)); }

// Calls f(T{}) with T the device element type of `dtype` (float, __half, __nv_bfloat16):
// one template instantiation per dtype, chosen at run time.
template <typename F>
void dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::fp8_e4m3:  // no kernel computes in FP8 (the storage rule, runtime/dtype.h)
    case DType::fp8_e5m2: break;
  }
  BS_CHECK(false, "dispatch_dtype: no compute kernel for ", dtype_name(dtype));
}

// Blocks for a grid-stride loop over `work` items: enough to fill the GPU several times over,
// never more than needed, never zero.
inline unsigned grid_for(int64_t work, int threads, int sm_count) {
  const int64_t needed = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count) * 32;
  const int64_t blocks = needed < cap ? needed : cap;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

}  // namespace blockscope::ops::cuda
