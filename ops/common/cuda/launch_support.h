// Host-side launch bookkeeping shared by ops/common/cuda/launch.cuh (kernels) and plain C++
// (cuBLASLt calls, device-to-device copies). No <<<>>> here, so .cpp files may include it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "profiler/recorder.h"
#include "runtime/context.h"

namespace blockscope::ops::cuda {

// Fills the launch configuration, registers, shared memory and theoretical occupancy of
// `event` (function attributes and occupancy cached per kernel, device and block shape).
void describe_launch(profiler::KernelEvent& event, const void* kernel, dim3 grid, dim3 block,
                     size_t dynamic_smem, int device);

// Throws if the last launch failed, naming `kernel`, the op (scope path) and the configuration.
void check_launch(Context& ctx, const char* kernel, dim3 grid, dim3 block, size_t dynamic_smem);

// cudaMemcpyAsync device to device on the context stream, recorded as kernel "Memcpy DtoD"
// (the name PyTorch traces use).
void memcpy_dtod(Context& ctx, void* dst, const void* src, size_t bytes);

}  // namespace blockscope::ops::cuda
