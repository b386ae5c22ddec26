// The activations as f32 device functors (ops/activation/cuda.cu's kernels, and epilogues that
// apply one in a register, e.g. ops/linear/weight_streaming.cuh): one expression per activation,
// so every kernel computes the same bits.
#pragma once

namespace blockscope::ops::cuda::kernels {

// Device copies of the scalar definitions in ops/activation (f32, full-precision libm).
struct GeluErf {
  __device__ float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};
struct GeluTanh {
  __device__ float operator()(float x) const {
    const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);  // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(inner));
  }
};
struct Silu {
  __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
struct Relu {
  __device__ float operator()(float x) const { return x < 0.0f ? 0.0f : x; }  // NaN stays NaN, as torch.relu
};

}  // namespace blockscope::ops::cuda::kernels
