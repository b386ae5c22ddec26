// CUDA flash attention (forward): the launch policy. The kernels are in
// ops/attention/flash_kernels.cuh (device code only); this file picks one per call (the
// tensor-core kernel for f16/bf16 at head_dim 64 and 128 with 16-byte aligned rows, else the
// FP32-core kernel), splits the keys of short queries over blocks with their f32 workspaces, and
// merges the splits with the shared split_combine_kernel (ops/common/cuda/split_combine.cuh).
#include <cmath>
#include <cstdint>

#include "ops/attention/backends.h"
#include "ops/attention/flash_kernels.cuh"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/split_combine.cuh"
#include "ops/common/kernel_names.h"
#include "runtime/cuda/cuda_backend.h"

namespace blockscope::ops::cuda {

using kernels::FlashParams;

namespace {

FlashParams flash_params(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, bool causal, float scale) {
  FlashParams p{};
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.out = out.data();
  p.q_batch_stride = q.stride(0), p.q_head_stride = q.stride(1), p.q_row_stride = q.stride(2);
  p.k_batch_stride = k.stride(0), p.k_head_stride = k.stride(1), p.k_row_stride = k.stride(2);
  p.v_batch_stride = v.stride(0), p.v_head_stride = v.stride(1), p.v_row_stride = v.stride(2);
  p.o_batch_stride = out.stride(0), p.o_head_stride = out.stride(1), p.o_row_stride = out.stride(2);
  p.sq = static_cast<int>(q.size(2));
  p.sk = static_cast<int>(k.size(2));
  p.group = static_cast<int>(q.size(1) / k.size(1));
  p.causal = causal ? 1 : 0;
  p.scale_log2 = scale * kernels::kLog2e;
  p.splits = 1;
  p.heads = static_cast<int>(q.size(1));
  p.batch = static_cast<int>(q.size(0));
  return p;
}

// Key splits (flash-decoding) for short queries: only when the queries fit one tile (decode,
// Sq <= 64), so the workspaces stay O(splits·Sq·D), never O(Sq·Sk); then enough blocks to fill
// every SM twice, at least 2 key tiles per split, at most 16 splits.
int key_splits(int64_t query_tiles, int64_t heads_and_batch, int64_t key_tiles, int sm_count) {
  if (query_tiles != 1) return 1;
  int splits = 1;
  while (splits < 16 && heads_and_batch * splits < 2 * sm_count && key_tiles >= 2 * (splits * 2)) splits *= 2;
  return splits;
}

template <typename T, int D>
void launch_tensor_core(Context& ctx, FlashParams p, const Tensor& q) {
  auto* kernel = kernels::flash_attention_kernel<T, D>;
  const size_t smem = static_cast<size_t>(kernels::kFlashRows + 2 * kernels::kFlashKeys) * D * sizeof(T);
  // Up to 48 KiB needs no opt-in; set it anyway (it is per device, so on every launch: a cheap
  // host call), so a change of tile sizes cannot silently exceed the default limit.
  const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  BS_CHECK(opt_in == cudaSuccess, "flash attention: cudaFuncSetAttribute(", smem, " bytes) failed: ",
           cudaGetErrorString(opt_in));
  const int64_t query_tiles = (p.sq + kernels::kFlashRows - 1) / kernels::kFlashRows;
  const int64_t key_tiles = (p.sk + kernels::kFlashKeys - 1) / kernels::kFlashKeys;
  p.splits = key_splits(query_tiles, q.size(1) * q.size(0), key_tiles,
                        cuda_backend(ctx).properties().multiProcessorCount);
  Tensor partial_out, partial_lse;  // freed (stream-ordered) after the combine kernel is queued
  if (p.splits > 1) {
    partial_out = ctx.empty({p.splits, q.size(0), q.size(1), p.sq, D}, DType::f32);
    partial_lse = ctx.empty({p.splits, q.size(0), q.size(1), p.sq}, DType::f32);
    p.partial_out = partial_out.data_as<float>();
    p.partial_lse = partial_lse.data_as<float>();
  }
  const dim3 grid(static_cast<unsigned>(query_tiles * p.splits), static_cast<unsigned>(q.size(1)),
                  static_cast<unsigned>(q.size(0)));
  launch(ctx, kernel_names::kFlashAttention, kernel, grid, dim3(kernels::kFlashThreads), smem, p);
  if (p.splits > 1) {
    kernels::SplitCombineParams combine{};
    combine.partial_out = p.partial_out;
    combine.partial_lse = p.partial_lse;
    combine.out = p.out;
    combine.batch_stride = p.o_batch_stride, combine.head_stride = p.o_head_stride, combine.row_stride = p.o_row_stride;
    combine.rows = q.size(0) * q.size(1) * p.sq;
    combine.heads = p.heads, combine.queries = p.sq, combine.d = D, combine.splits = p.splits;
    launch(ctx, kernel_names::kSplitCombine, kernels::split_combine_kernel<T>,
           dim3(kernels::split_combine_blocks(combine.rows)), dim3(kernels::split_combine_threads(D)), 0, combine);
  }
}

template <typename T>
void launch_simple(Context& ctx, const FlashParams& p, const Tensor& q) {
  const dim3 grid(static_cast<unsigned>((p.sq + kernels::kSimpleRows - 1) / kernels::kSimpleRows),
                  static_cast<unsigned>(q.size(1)), static_cast<unsigned>(q.size(0)));
  launch(ctx, kernel_names::kFlashAttention, kernels::flash_attention_simple_kernel<T>, grid,
         dim3(kernels::kSimpleThreads), 0, p, static_cast<int>(q.size(3)));
}

}  // namespace

void attention_flash(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, bool causal,
                     float scale) {
  const int64_t d = q.size(3);
  BS_CHECK_INPUT(d <= kernels::kSimpleMaxDim, "attention: flash on CUDA supports head_dim up to ",
                 kernels::kSimpleMaxDim, "; q ", q.str(), " has ", d);
  BS_CHECK_INPUT(q.size(2) <= INT32_MAX && k.size(2) <= INT32_MAX, "attention: sequence lengths of q ", q.str(),
                 " and k ", k.str(), " must fit in 32 bits");
  const FlashParams p = flash_params(q, k, v, out, causal, scale);
  // The tensor-core kernel reads 16-byte chunks: rows must start 16-byte aligned.
  const bool chunked = cuda::aligned16(q.data()) && cuda::aligned16(k.data()) &&
                       cuda::aligned16(v.data()) && q.stride(2) % 8 == 0 && k.stride(2) % 8 == 0 &&
                       v.stride(2) % 8 == 0 && q.stride(1) % 8 == 0 && k.stride(1) % 8 == 0 &&
                       v.stride(1) % 8 == 0 && q.stride(0) % 8 == 0 && k.stride(0) % 8 == 0 && v.stride(0) % 8 == 0;
  switch (q.dtype()) {
    case DType::f32: return launch_simple<float>(ctx, p, q);
    case DType::f16:
      if (chunked && d == 64) return launch_tensor_core<__half, 64>(ctx, p, q);
      if (chunked && d == 128) return launch_tensor_core<__half, 128>(ctx, p, q);
      return launch_simple<__half>(ctx, p, q);
    case DType::bf16:
      if (chunked && d == 64) return launch_tensor_core<__nv_bfloat16, 64>(ctx, p, q);
      if (chunked && d == 128) return launch_tensor_core<__nv_bfloat16, 128>(ctx, p, q);
      return launch_simple<__nv_bfloat16>(ctx, p, q);
    case DType::fp8_e4m3:  // refused before (the storage rule, runtime/dtype.h)
    case DType::fp8_e5m2: break;
  }
  BS_CHECK(false, "attention_flash: no kernel for ", q.str());
}

}  // namespace blockscope::ops::cuda
