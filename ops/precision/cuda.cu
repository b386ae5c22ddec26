// CUDA precision ops: grid-stride kernels. quantize and amax read 16-byte packs (8 bf16/f16 or
// 4 f32 elements; quantize then writes their 8 or 4 codes in one store) where x starts 16-byte
// aligned, single elements for the tail and otherwise. The FP8 codes are cuda_fp8.h's
// (cvt.rn.satfinite on sm_89 and later; its host code on older GPUs and the simulated GPU), the
// codes runtime/fp8.h gives on the CPU. amax: each block's NaN-propagating maximum meets the
// others in an atomicMax on the f32 bits -- |x| is never negative, and non-negative floats (NaN
// above infinity) order as their bits do.
#include <cuda_fp8.h>

#include "ops/common/cuda/launch.cuh"
#include "ops/common/kernel_names.h"
#include "ops/common/cuda/vector_io.cuh"
#include "ops/precision/backends.h"
#include "ops/precision/scale_rule.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_check.h"

namespace blockscope::ops::cuda::kernels {

constexpr int kPrecisionThreads = 256;

using scale_rule::max_keeping_nan;

// The warp's max_keeping_nan of v, in every lane.
__device__ __forceinline__ float warp_max_keeping_nan(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = max_keeping_nan(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ __nv_fp8_interpretation_t fp8_kind(bool e5m2) { return e5m2 ? __NV_E5M2 : __NV_E4M3; }

// The block's max_keeping_nan of v, merged into *amax (f32 bits) by thread 0.
__device__ __forceinline__ void block_amax_into(float v, float* amax) {
  __shared__ float scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max_keeping_nan(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_max_keeping_nan(lane < warps ? scratch[lane] : 0.0f);
    if (lane == 0) atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(v));
  }
}

// The codes of one pack (4 or 8 elements) as one 4- or 8-byte word: what a thread stores at once.
template <int kSize>
struct CodeWord;
template <>
struct CodeWord<4> {
  using type = unsigned int;
};
template <>
struct CodeWord<8> {
  using type = uint2;
};

// y[i] = fp8(f32(x[i] · scale)); with amax: *amax = max(*amax, max |x|). `packed`: x starts
// 16-byte aligned (y, from the same allocator and offset, then word-aligned).
template <typename T, bool kAmax>
__global__ void quantize_kernel(const T* x, const float* scale, unsigned char* y, int64_t n, bool e5m2, float* amax,
                                bool packed) {
  constexpr int P = Pack<T>::size;
  using Word = typename CodeWord<P>::type;
  const float s = *scale;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float local = 0.0f;
  int64_t done = 0;
  if (packed) {
    const int64_t packs = n / P;
    for (int64_t p = first; p < packs; p += stride) {
      const Pack<T> in = load_pack(x + p * P);
      union {
        Word word;
        unsigned char codes[P];
      } out;
#pragma unroll
      for (int e = 0; e < P; ++e) {
        const float v = to_float(in.v[e]);
        out.codes[e] = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, fp8_kind(e5m2));
        if (kAmax) local = max_keeping_nan(local, fabsf(v));
      }
      *reinterpret_cast<Word*>(y + p * P) = out.word;
    }
    done = packs * P;
  }
  for (int64_t i = done + first; i < n; i += stride) {
    const float v = to_float(x[i]);
    y[i] = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, fp8_kind(e5m2));
    if (kAmax) local = max_keeping_nan(local, fabsf(v));
  }
  if (kAmax) block_amax_into(local, amax);
}

// y[i] = f32(x[i]) · scale_inv, rounded to T.
template <typename T>
__global__ void dequantize_kernel(const unsigned char* x, const float* scale_inv, T* y, int64_t n, bool e5m2) {
  const float s = *scale_inv;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const __half h(__nv_cvt_fp8_to_halfraw(x[i], fp8_kind(e5m2)));  // exact: every FP8 value is a half
    y[i] = from_float<T>(__half2float(h) * s);
  }
}

// *amax = max(*amax, max |x|): *amax is zeroed first by the host. `packed`: x 16-byte aligned.
template <typename T>
__global__ void amax_kernel(const T* x, int64_t n, float* amax, bool packed) {
  constexpr int P = Pack<T>::size;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float local = 0.0f;
  int64_t done = 0;
  if (packed) {
    const int64_t packs = n / P;
    for (int64_t p = first; p < packs; p += stride) {
      const Pack<T> in = load_pack(x + p * P);
#pragma unroll
      for (int e = 0; e < P; ++e) local = max_keeping_nan(local, fabsf(to_float(in.v[e])));
    }
    done = packs * P;
  }
  for (int64_t i = done + first; i < n; i += stride) local = max_keeping_nan(local, fabsf(to_float(x[i])));
  block_amax_into(local, amax);
}

// One block over the history (blockDim.x >= its length): the amax, the scale, then the roll --
// every entry read before any is written.
__global__ void scale_update_kernel(float* history, int length, float* scale, float* scale_inv, float fp8_max,
                                    int margin, bool take_max, bool roll, float* saturation, bool e5m2) {
  __shared__ float scratch[32];
  const int i = static_cast<int>(threadIdx.x), lane = i & 31, warp = i >> 5, warps = (blockDim.x + 31) >> 5;
  const float entry = i < length ? history[i] : 0.0f;
  const float v = warp_max_keeping_nan((take_max || i == 0) ? entry : 0.0f);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (i == 0) {
    if (saturation != nullptr) scale_rule::count_saturation(entry, *scale, fp8_max, e5m2, saturation);  // the step's amax
    float amax = scratch[0];
    for (int w = 1; w < warps; ++w) amax = max_keeping_nan(amax, scratch[w]);
    const float s = scale_rule::next_scale(amax, *scale, fp8_max, margin);
    *scale = s;
    *scale_inv = 1.0f / s;
  }
  if (roll && i < length) {  // every thread read its entry before the barrier above
    if (i + 1 < length) history[i + 1] = entry;
    if (i == 0) history[0] = 0.0f;
  }
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

namespace {

unsigned blocks_for(Context& ctx, int64_t n) {
  return grid_for(n, kernels::kPrecisionThreads, cuda_backend(ctx).properties().multiProcessorCount);
}

// The work items of a packed pass over n elements of T: its packs, or n element by element.
template <typename T>
int64_t work_items(int64_t n, bool packed) {
  return packed ? (n + kernels::Pack<T>::size - 1) / kernels::Pack<T>::size : n;
}

}  // namespace

void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax) {
  const int64_t n = x.numel();
  const bool e5m2 = y.dtype() == DType::fp8_e5m2;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // A pack's codes go out as one word: y must then start on that word's boundary too.
    const bool packed = aligned16(x.data()) &&
                        reinterpret_cast<uintptr_t>(y.data()) % static_cast<uintptr_t>(kernels::Pack<T>::size) == 0;
    const unsigned blocks = blocks_for(ctx, work_items<T>(n, packed));
    if (amax.defined()) {
      launch(ctx, kernel_names::kQuantizeAmax, kernels::quantize_kernel<T, true>, blocks, kernels::kPrecisionThreads, 0,
             x.data_as<const T>(), scale.data_as<const float>(), static_cast<unsigned char*>(y.data()), n, e5m2,
             amax.data_as<float>(), packed);
    } else {
      launch(ctx, kernel_names::kQuantize, kernels::quantize_kernel<T, false>, blocks, kernels::kPrecisionThreads, 0,
             x.data_as<const T>(), scale.data_as<const float>(), static_cast<unsigned char*>(y.data()), n, e5m2,
             static_cast<float*>(nullptr), packed);
    }
  });
}

void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y) {
  const int64_t n = x.numel();
  const bool e5m2 = x.dtype() == DType::fp8_e5m2;
  dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch(ctx, kernel_names::kDequantize, kernels::dequantize_kernel<T>, blocks_for(ctx, n), kernels::kPrecisionThreads,
           0, static_cast<const unsigned char*>(x.data()), scale_inv.data_as<const float>(), y.data_as<T>(), n, e5m2);
  });
}

void fp8_scale_update(Context& ctx, Tensor& amax_history, Tensor& scale, Tensor& scale_inv, const ScaleUpdate& update,
                      const Tensor& saturation) {
  const int length = static_cast<int>(amax_history.numel());
  const unsigned threads = static_cast<unsigned>((length + 31) / 32 * 32);
  launch(ctx, kernel_names::kScaleUpdate, kernels::scale_update_kernel, 1, threads, 0, amax_history.data_as<float>(),
         length, scale.data_as<float>(), scale_inv.data_as<float>(),
         static_cast<float>(dtype_max_finite(update.format)), update.margin, update.algo == AmaxAlgo::max, update.roll,
         saturation.defined() ? saturation.data_as<float>() : nullptr, update.format == DType::fp8_e5m2);
}

void amax(Context& ctx, const Tensor& x, Tensor& amax) {
  {
    profiler::KernelScope scope(ctx, kernel_names::kMemset);
    BS_CUDA_CHECK(cudaMemsetAsync(amax.data(), 0, sizeof(float), cuda_backend(ctx).stream()));
  }
  const int64_t n = x.numel();
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool packed = aligned16(x.data());
    launch(ctx, kernel_names::kAmax, kernels::amax_kernel<T>, blocks_for(ctx, work_items<T>(n, packed)),
           kernels::kPrecisionThreads, 0, x.data_as<const T>(), n, amax.data_as<float>(), packed);
  });
}

}  // namespace blockscope::ops::cuda
