// CUDA rotary position embedding (Hugging Face "rotate_half" convention): for each head
// vector, pairs (d, d + D/2) rotate by angle pos · theta^(-2d/D).
// Angles follow Hugging Face's float32 quantities, as the CPU backend and the float64 reference
// do: inv_freq rounded to float, angle = float(pos) · inv_freq as a float product; cos and sin
// of that float angle are then taken in double and rounded once.
#include "ops/common/backends.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/elementwise_map.cuh"
#include "runtime/cuda/launch.cuh"
#include "runtime/cuda/vector_io.cuh"

namespace blockscope::cuda_kernels {

// Element strides of a [B, H, S, D] view.
struct Strides4 {
  int64_t b, h, s, d;
};

// One thread per (b, h, s, d) with d < D/2. x and y may be the same view (in place): each
// thread reads both elements of its pair before writing them.
template <typename T>
__global__ void rope_kernel(const T* x, Strides4 xs, T* y, Strides4 ys, int64_t heads, int64_t seq, int64_t dim,
                            int64_t pairs, double theta, int64_t position_offset) {
  const int64_t half = dim / 2;
  for (int64_t t = global_thread(); t < pairs; t += global_threads()) {
    const int64_t d = t % half;
    const int64_t row = t / half;  // (b·H + h)·S + s
    const int64_t s = row % seq, h = (row / seq) % heads, b = row / (seq * heads);
    // The CPU backend's expression, term for term, so both round to the same float.
    const float inv_freq =
        static_cast<float>(1.0 / pow(theta, 2.0 * static_cast<double>(d) / static_cast<double>(dim)));
    const float angle = __fmul_rn(static_cast<float>(position_offset + s), inv_freq);  // never fused
    double sin_d, cos_d;
    sincos(static_cast<double>(angle), &sin_d, &cos_d);
    const float sin_a = static_cast<float>(sin_d), cos_a = static_cast<float>(cos_d);

    const T* in = x + b * xs.b + h * xs.h + s * xs.s;
    T* out = y + b * ys.b + h * ys.h + s * ys.s;
    const float first = to_float(in[d * xs.d]), second = to_float(in[(d + half) * xs.d]);
    out[d * ys.d] = from_float<T>(first * cos_a - second * sin_a);
    out[(d + half) * ys.d] = from_float<T>(second * cos_a + first * sin_a);
  }
}

}  // namespace blockscope::cuda_kernels

namespace blockscope::ops::cuda {

void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset) {
  BS_CHECK(x.dim() == 4 && y.dim() == 4 && x.size(-1) % 2 == 0, "rope: x ", x.str(), " and y ", y.str(),
           " must be [B, H, S, D] with D even");
  const int64_t heads = x.size(1), seq = x.size(2), dim = x.size(3);
  const int64_t pairs = x.numel() / 2;
  if (pairs == 0) return;
  const cuda_kernels::Strides4 xs{x.stride(0), x.stride(1), x.stride(2), x.stride(3)};
  const cuda_kernels::Strides4 ys{y.stride(0), y.stride(1), y.stride(2), y.stride(3)};
  constexpr int kThreads = 256;
  const unsigned blocks = cuda_detail::grid_for(pairs, kThreads, cuda_backend(ctx).properties().multiProcessorCount);
  cuda_detail::dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cuda_detail::launch(ctx, "rope_kernel", cuda_kernels::rope_kernel<T>, blocks, kThreads, 0, x.data_as<const T>(),
                        xs, y.data_as<T>(), ys, heads, seq, dim, pairs, static_cast<double>(theta),
                        position_offset);
  });
}

}  // namespace blockscope::ops::cuda
