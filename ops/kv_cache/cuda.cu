// CUDA kv_cache_write: one kernel copies the new keys and values into their pages.
//
// Work item: one (sequence b, kv head h, new row s) row of D elements, for k and v both. The
// row goes to position p = starts[b] + s, i.e. row p % page_size of page
// block_table[b][p / page_size] ([pages, Hkv, page_size, D] contiguous); rows s >= counts[b]
// (the padding of a ragged batch) are skipped. starts, counts and the block table are read from
// device memory (IndexView::device), never from the host copies, so the kernel is what a CUDA
// graph would replay. Validation (positions inside each sequence's capacity) ran on the host
// before this is called.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/common/cuda/fast_divmod.h"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/vector_io.cuh"
#include "ops/kv_cache/backends.h"
#include "ops/kv_cache/kv_cache_row.cuh"
#include "runtime/cuda/cuda_backend.h"

namespace blockscope::ops::cuda::kernels {

// Element strides of the [B, Hkv, S, D] source views (the head dim is contiguous).
struct KvSourceStrides {
  int64_t b, h, s;
};

// 2-D grid as rope_kernel's: blockIdx.x·blockDim.y + threadIdx.y walks rows (b·Hkv + h)·S + s
// (grid-stride), blockIdx.y·blockDim.x + threadIdx.x is the chunk of V = VEC ? Pack<T>::size : 1
// consecutive elements of the row. VEC: k_new, v_new and the pages are 16-byte aligned, every
// source stride and D a whole number of packs. Every destination element is written by one
// thread (distinct (b, s) never share a position: make_kv_cache hands each sequence its own
// pages), so there is nothing to synchronise.
template <typename T, bool VEC>
__global__ void kv_cache_write_kernel(const T* __restrict__ k_new, const T* __restrict__ v_new, KvSourceStrides ks,
                                      KvSourceStrides vs, T* __restrict__ k_pages, T* __restrict__ v_pages,
                                      const int32_t* __restrict__ starts, const int32_t* __restrict__ counts,
                                      const int32_t* __restrict__ block_table, int64_t table_width, uint32_t page_size,
                                      int64_t kv_heads, int64_t dim, FastDivmod seq_div, FastDivmod heads_div,
                                      uint32_t rows, uint32_t chunks) {
  constexpr int V = VEC ? Pack<T>::size : 1;
  const uint32_t chunk = blockIdx.y * blockDim.x + threadIdx.x;
  if (chunk >= chunks) return;
  const int64_t d = static_cast<int64_t>(chunk) * V;
  for (uint32_t row = blockIdx.x * blockDim.y + threadIdx.y; row < rows; row += gridDim.x * blockDim.y) {
    uint32_t bh, s, b, h;
    seq_div.divmod(row, bh, s);
    heads_div.divmod(bh, b, h);
    if (static_cast<int32_t>(s) >= counts[b]) continue;
    const int64_t to = kv_cache_row_offset(block_table, table_width, page_size, kv_heads, dim, b, h,
                                           static_cast<uint32_t>(starts[b]) + s) + d;
    const T* k_from = k_new + (static_cast<int64_t>(b) * ks.b + static_cast<int64_t>(h) * ks.h +
                               static_cast<int64_t>(s) * ks.s + d);
    const T* v_from = v_new + (static_cast<int64_t>(b) * vs.b + static_cast<int64_t>(h) * vs.h +
                               static_cast<int64_t>(s) * vs.s + d);
    if constexpr (VEC) {
      store_pack(k_pages + to, load_pack(k_from));
      store_pack(v_pages + to, load_pack(v_from));
    } else {
      k_pages[to] = *k_from;
      v_pages[to] = *v_from;
    }
  }
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

namespace {

bool source_packs(const Tensor& t, int64_t pack) {
  return cuda::aligned16(t.data()) && t.stride(0) % pack == 0 && t.stride(1) % pack == 0 && t.stride(2) % pack == 0;
}

}  // namespace

void kv_cache_write(Context& ctx, const Tensor& k_new, const Tensor& v_new, KvCache& cache, IndexView starts,
                    IndexView counts) {
  const KvCacheShape& shape = cache.shape;
  const int64_t batch = shape.batch(), kv_heads = shape.kv_heads, seq = k_new.size(2), dim = shape.head_dim;
  const int64_t rows = batch * kv_heads * seq;
  if (rows == 0 || dim == 0) return;
  BS_CHECK(starts.device != nullptr && counts.device != nullptr && cache.block_table.defined(),
           "kv_cache_write: starts, counts and the block table must be on the device");
  BS_CHECK(k_new.stride(3) == 1 && v_new.stride(3) == 1, "kv_cache_write: k_new ", k_new.str(), " and v_new ",
           v_new.str(), " must have a contiguous head dim");
  BS_CHECK(rows < (int64_t{1} << 31) && kernels::fits_fast_divmod(seq, rows) &&
               kernels::fits_fast_divmod(kv_heads, rows) &&
               cache.block_table.cols() * shape.page_size < (int64_t{1} << 31),
           "kv_cache_write: k_new ", k_new.str(), " or the cache is too large for the kernel's 32-bit indices");
  const kernels::KvSourceStrides ks{k_new.stride(0), k_new.stride(1), k_new.stride(2)};
  const kernels::KvSourceStrides vs{v_new.stride(0), v_new.stride(1), v_new.stride(2)};
  const int32_t* table = cache.block_table.row(0).device;
  const int sms = cuda_backend(ctx).properties().multiProcessorCount;
  cuda::dispatch_dtype(k_new.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t pack = 16 / static_cast<int64_t>(sizeof(T));
    const bool vec = dim % pack == 0 && source_packs(k_new, pack) && source_packs(v_new, pack) &&
                     cuda::aligned16(cache.k.data()) && cuda::aligned16(cache.v.data());
    const int64_t chunks = vec ? dim / pack : dim;
    const cuda::RowChunkLaunch launch_shape = cuda::row_chunk_launch(rows, chunks, sms, "kv_cache_write");
    const dim3 grid = launch_shape.grid, block = launch_shape.block;
    auto* kernel = vec ? kernels::kv_cache_write_kernel<T, true> : kernels::kv_cache_write_kernel<T, false>;
    cuda::launch(ctx, kernel_names::kKvCacheWrite, kernel, grid, block, 0, k_new.data_as<const T>(),
                 v_new.data_as<const T>(), ks, vs, cache.k.data_as<T>(), cache.v.data_as<T>(), starts.device,
                 counts.device, table, cache.block_table.cols(), static_cast<uint32_t>(shape.page_size), kv_heads, dim,
                 kernels::FastDivmod(static_cast<uint32_t>(seq)), kernels::FastDivmod(static_cast<uint32_t>(kv_heads)),
                 static_cast<uint32_t>(rows), static_cast<uint32_t>(chunks));
  });
}

}  // namespace blockscope::ops::cuda
