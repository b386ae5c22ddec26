// The device implementations behind kv_cache_write: ops/kv_cache/cpu.cpp and ops/kv_cache/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/kv_cache/kv_cache.h"

namespace blockscope::ops::cpu {
void kv_cache_write(Context& ctx, const Tensor& k_new, const Tensor& v_new, KvCache& cache, IndexView starts,
                    IndexView counts);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void kv_cache_write(Context& ctx, const Tensor& k_new, const Tensor& v_new, KvCache& cache, IndexView starts,
                    IndexView counts);
}  // namespace blockscope::ops::cuda

namespace blockscope::ops::kernel_names {
inline constexpr char kKvCacheWrite[] = "kv_cache_write_kernel";
}  // namespace blockscope::ops::kernel_names
