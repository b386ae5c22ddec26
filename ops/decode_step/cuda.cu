// CUDA decode_step: the three small kernels a step graph starts and ends with. The tensors are
// copied as 16-bit units whatever their dtype (every dtype is 2 or 4 bytes wide): what moves is
// one [B, 1, d] row per step, a few KiB to a few hundred.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/common/cuda/launch.cuh"
#include "ops/decode_step/backends.h"
#include "runtime/cuda/cuda_backend.h"

namespace blockscope::ops::cuda::kernels {

__global__ void decode_step_reset_kernel(int32_t* step) { *step = 0; }

// t = *step (read only: the counter advances in decode_step_commit_kernel, after every block of
// this kernel has finished); row t of the [steps, batch] tables, and inputs[t] ([units]).
__global__ void decode_step_select_kernel(const int32_t* __restrict__ step, int32_t steps, int32_t batch,
                                          const int32_t* __restrict__ all_positions,
                                          const int32_t* __restrict__ all_lengths, int32_t* __restrict__ positions,
                                          int32_t* __restrict__ lengths, const uint16_t* __restrict__ inputs,
                                          uint16_t* __restrict__ x, int64_t units) {
  const int32_t t = *step;
  if (t < 0 || t >= steps) return;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = first; b < batch; b += stride) {
    positions[b] = all_positions[static_cast<int64_t>(t) * batch + b];
    lengths[b] = all_lengths[static_cast<int64_t>(t) * batch + b];
  }
  const uint16_t* from = inputs + static_cast<int64_t>(t) * units;
  for (int64_t i = first; i < units; i += stride) x[i] = from[i];
}

// outputs[t] = y ([units]), then *step = t + 1. One block: every thread has read t (and written
// its share) at the barrier before thread 0 changes it.
__global__ void decode_step_commit_kernel(int32_t* step, int32_t steps, const uint16_t* __restrict__ y,
                                          uint16_t* __restrict__ outputs, int64_t units) {
  const int32_t t = *step;
  if (t >= 0 && t < steps) {
    uint16_t* to = outputs + static_cast<int64_t>(t) * units;
    for (int64_t i = threadIdx.x; i < units; i += blockDim.x) to[i] = y[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) *step = t + 1;
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

namespace {

constexpr int kThreads = 256;

int64_t units_of(const Tensor& t) { return static_cast<int64_t>(t.nbytes() / sizeof(uint16_t)); }

}  // namespace

void decode_step_reset(Context& ctx, IndexTable& step) {
  launch(ctx, kernel_names::kDecodeStepReset, kernels::decode_step_reset_kernel, dim3(1), dim3(1), 0,
         step.mutable_device());
}

void decode_step_select(Context& ctx, const IndexTable& step, const IndexTable& all_positions,
                        const IndexTable& all_lengths, const Tensor& inputs, IndexTable& positions,
                        IndexTable& lengths, Tensor& x) {
  const int64_t units = units_of(x), batch = all_positions.cols();
  const int64_t work = std::max(units, batch);
  const int sms = cuda_backend(ctx).properties().multiProcessorCount;
  const int64_t blocks = std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 4 * int64_t{sms});
  launch(ctx, kernel_names::kDecodeStepSelect, kernels::decode_step_select_kernel, dim3(static_cast<unsigned>(blocks)),
         dim3(kThreads), 0, step.row(0).device, static_cast<int32_t>(all_positions.rows()),
         static_cast<int32_t>(batch), all_positions.row(0).device, all_lengths.row(0).device,
         positions.mutable_device(), lengths.mutable_device(), inputs.data_as<const uint16_t>(),
         x.data_as<uint16_t>(), units);
}

void decode_step_commit(Context& ctx, IndexTable& step, const Tensor& y, Tensor& outputs) {
  launch(ctx, kernel_names::kDecodeStepCommit, kernels::decode_step_commit_kernel, dim3(1), dim3(kThreads), 0,
         step.mutable_device(), static_cast<int32_t>(outputs.size(0)), y.data_as<const uint16_t>(),
         outputs.data_as<uint16_t>(), units_of(y));
}

}  // namespace blockscope::ops::cuda
