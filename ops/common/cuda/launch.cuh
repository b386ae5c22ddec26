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

#include <cstddef>
#include <utility>

#include "profiler/recorder.h"
#include "profiler/scope.h"
#include "runtime/context.h"
#include "runtime/cuda/cuda_backend.h"
#include "ops/common/cuda/launch_support.h"

namespace blockscope::ops::cuda {

template <typename... Params, typename... Args>
void launch(Context& ctx, const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
            size_t dynamic_smem, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count mismatch");
  CudaBackend& backend = cuda_backend(ctx);
  profiler::KernelScope scope(ctx, name);
  if (profiler::KernelEvent* event = scope.event()) {
    describe_launch(*event, reinterpret_cast<const void*>(kernel), grid, block, dynamic_smem,
                    backend.device().index);
  }
  kernel<<<grid, block, dynamic_smem, backend.stream()>>>(static_cast<Params>(std::forward<Args>(args))...);
  check_launch(ctx, name, grid, block, dynamic_smem);
}

}  // namespace blockscope::ops::cuda
