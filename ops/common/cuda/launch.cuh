// The launch helper every custom kernel goes through, and wrappers for library work
// (cuBLASLt calls, device-to-device copies) so that everything on the stream is recorded.
//
//   launch(ctx, "softmax_kernel", softmax_kernel<T>, grid, block, smem, args...)
//
// opens a profiler::KernelScope named after the kernel; when a recorder is attached fills the
// KernelEvent's grid, block, registers, static/dynamic shared memory and theoretical occupancy
// (function attributes cached per kernel); launches on the context's stream; and turns a launch
// failure into a blockscope::Error naming the kernel, the op (the context's scope path) and
// the launch configuration. Only for .cu files (it uses <<<>>>); on the simulated GPU nvcc-sim
// compiles the same source.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "profiler/recorder.h"
#include "profiler/scope.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/cuda/cuda_backend.h"
#include "ops/common/cuda/launch_support.h"

namespace blockscope::ops::cuda {

// As launch(), and the kernel event's Implementation column says what ran where the name alone
// does not ("bf16, 16-byte loads"); nullptr leaves it empty.
template <typename... Params, typename... Args>
void launch_described(Context& ctx, const char* name, const char* implementation, void (*kernel)(Params...),
                      dim3 grid, dim3 block, size_t dynamic_smem, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count mismatch");
  CudaBackend& backend = cuda_backend(ctx);
  profiler::KernelScope scope(ctx, name);
  if (profiler::KernelEvent* event = scope.event()) {
    describe_launch(*event, reinterpret_cast<const void*>(kernel), grid, block, dynamic_smem,
                    backend.device().index);
    if (implementation != nullptr) event->implementation = implementation;
  }
  kernel<<<grid, block, dynamic_smem, backend.stream()>>>(static_cast<Params>(std::forward<Args>(args))...);
  check_launch(ctx, name, grid, block, dynamic_smem);
}

template <typename... Params, typename... Args>
void launch(Context& ctx, const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
            size_t dynamic_smem, Args&&... args) {
  launch_described(ctx, name, nullptr, kernel, grid, block, dynamic_smem, std::forward<Args>(args)...);
}

// The 2-D launch of a kernel that walks `rows` rows of `chunks` chunks each (rope_kernel,
// kv_cache_write_kernel): x threads along a row's chunks (up to 256), the rest of a 256-thread
// block and grid x along the rows (the kernel loops over rows grid-stride; at most 16 blocks per
// SM), grid y over the chunks. `op` names the caller when a row has too many chunks for grid y.
struct RowChunkLaunch {
  dim3 grid, block;
};
inline RowChunkLaunch row_chunk_launch(int64_t rows, int64_t chunks, int sm_count, const char* op) {
  const unsigned tx = static_cast<unsigned>(std::min<int64_t>(chunks, 256));
  const unsigned ty = std::max(1u, 256u / tx);
  const int64_t gy = (chunks + tx - 1) / tx;
  BS_CHECK(gy <= 65535, op, ": a row of ", chunks, " chunks is too long for the kernel's grid");
  const int64_t gx = std::min<int64_t>((rows + ty - 1) / ty, static_cast<int64_t>(sm_count) * 16);
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(tx, ty)};
}

}  // namespace blockscope::ops::cuda
