// CPU kv_cache_write: each (sequence, kv head, written row) is one row copy into its page.
#include <cstring>

#include "ops/common/rows.h"
#include "ops/kv_cache/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {

void kv_cache_write(Context& ctx, const Tensor& k_new, const Tensor& v_new, KvCache& cache, IndexView starts,
                    IndexView counts) {
  profiler::KernelScope kernel(ctx, kernel_names::kKvCacheWrite);
  const KvCacheShape& shape = cache.shape;
  const int64_t B = shape.batch(), Hkv = shape.kv_heads, S = k_new.size(2), D = shape.head_dim;
  const size_t esize = dtype_size(k_new.dtype()), row_bytes = static_cast<size_t>(D) * esize;
  const Tensor* sources[2] = {&k_new, &v_new};
  Tensor* targets[2] = {&cache.k, &cache.v};
#pragma omp parallel for collapse(2) if (B * Hkv * S * D >= kParallelMinElements) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hkv; ++h) {
      for (int64_t s = 0; s < counts[b]; ++s) {
        const int64_t pos = starts[b] + s;
        for (int which = 0; which < 2; ++which) {
          const Tensor& src = *sources[which];
          const char* from = static_cast<const char*>(src.data()) +
                             (b * src.stride(0) + h * src.stride(1) + s * src.stride(2)) * static_cast<int64_t>(esize);
          char* to = static_cast<char*>(targets[which]->data()) +
                     cache.row_offset(b, h, pos) * static_cast<int64_t>(esize);
          std::memcpy(to, from, row_bytes);
        }
      }
    }
  }
}

}  // namespace blockscope::ops::cpu
