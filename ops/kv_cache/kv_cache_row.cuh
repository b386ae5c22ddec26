// Device code's address of a cached row: the twin of KvCache::row_offset (kv_cache.h), for the
// kernels that write the cache (ops/kv_cache/cuda.cu) and read it (ops/decode_attention/cuda.cu).
#pragma once

#include <cstdint>

namespace blockscope::ops::cuda::kernels {

// Elements from the start of the pages [pages, Hkv, page_size, D] to row `position` of sequence
// b, kv head h: row position % page_size of page block_table[b · table_width + position /
// page_size]. The division is 32-bit (the hosts check table_width · page_size < 2^31); the
// offset 64-bit.
__device__ __forceinline__ int64_t kv_cache_row_offset(const int32_t* __restrict__ block_table, int64_t table_width,
                                                       uint32_t page_size, int64_t kv_heads, int64_t dim, uint32_t b,
                                                       uint32_t h, uint32_t position) {
  const uint32_t slot = position / page_size, within = position - slot * page_size;
  const int64_t page = block_table[static_cast<int64_t>(b) * table_width + slot];
  return ((page * kv_heads + h) * static_cast<int64_t>(page_size) + within) * dim;
}

}  // namespace blockscope::ops::cuda::kernels
