// CUDA activations: GELU (erf), GELU (tanh), SiLU, ReLU, and the fused gated act(gate) · up of
// GeGLU / SwiGLU MLPs (one kernel instead of activation + mul: the intermediate never makes
// an extra trip through memory).
#include "ops/activation/backends.h"
#include "ops/activation/device_functions.cuh"
#include "ops/common/rows.h"
#include "runtime/cuda/cuda_backend.h"
#include "ops/common/cuda/elementwise_map.cuh"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/vector_io.cuh"

namespace blockscope::ops::cuda::kernels {

template <typename T>
__global__ void gelu_kernel(const T* x, T* y, int64_t n, bool vectorized) { unary_map(x, y, n, vectorized, GeluErf{}); }
template <typename T>
__global__ void gelu_tanh_kernel(const T* x, T* y, int64_t n, bool vectorized) {
  unary_map(x, y, n, vectorized, GeluTanh{});
}
template <typename T>
__global__ void silu_kernel(const T* x, T* y, int64_t n, bool vectorized) { unary_map(x, y, n, vectorized, Silu{}); }
template <typename T>
__global__ void relu_kernel(const T* x, T* y, int64_t n, bool vectorized) { unary_map(x, y, n, vectorized, Relu{}); }

// y[r, c] = act(gate[r, c]) · up[r, c] for r < rows, c < cols; each operand's rows are
// contiguous and `ld` elements apart (gate and up may be the two halves of one [rows, 2F]
// GEMM output). Vectorised when cols, every ld and every pointer allow 16-byte packs.
template <typename T, typename Act>
__device__ __forceinline__ void gated_map(const T* gate, int64_t gate_ld, const T* up, int64_t up_ld, T* y,
                                          int64_t y_ld, int64_t rows, int64_t cols, bool vectorized, Act act) {
  constexpr int P = Pack<T>::size;
  if (vectorized) {
    const int64_t packs_per_row = cols / P;
    const int64_t packs = rows * packs_per_row;
    for (int64_t p = global_thread(); p < packs; p += global_threads()) {
      const int64_t r = p / packs_per_row, c = (p - r * packs_per_row) * P;
      const Pack<T> g = load_pack(gate + r * gate_ld + c);
      const Pack<T> u = load_pack(up + r * up_ld + c);
      Pack<T> out;
#pragma unroll
      for (int e = 0; e < P; ++e) out.v[e] = from_float<T>(act(to_float(g.v[e])) * to_float(u.v[e]));
      store_pack(y + r * y_ld + c, out);
    }
    return;
  }
  const int64_t n = rows * cols;
  for (int64_t i = global_thread(); i < n; i += global_threads()) {
    const int64_t r = i / cols, c = i - r * cols;
    y[r * y_ld + c] = from_float<T>(act(to_float(gate[r * gate_ld + c])) * to_float(up[r * up_ld + c]));
  }
}

#define BLOCKSCOPE_GATED_KERNEL(name, Act)                                                                     \
  template <typename T>                                                                                        \
  __global__ void name(const T* gate, int64_t gate_ld, const T* up, int64_t up_ld, T* y, int64_t y_ld,         \
                       int64_t rows, int64_t cols, bool vectorized) {                                          \
    gated_map(gate, gate_ld, up, up_ld, y, y_ld, rows, cols, vectorized, Act{});                               \
  }
BLOCKSCOPE_GATED_KERNEL(gated_gelu_mul_kernel, GeluErf)
BLOCKSCOPE_GATED_KERNEL(gated_gelu_tanh_mul_kernel, GeluTanh)
BLOCKSCOPE_GATED_KERNEL(gated_silu_mul_kernel, Silu)
BLOCKSCOPE_GATED_KERNEL(gated_relu_mul_kernel, Relu)
#undef BLOCKSCOPE_GATED_KERNEL

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {


namespace {

constexpr int kThreads = 256;

}  // namespace

void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act) {
  BS_CHECK(x.is_contiguous() && y.is_contiguous(), "activation: x and y must be contiguous");
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool vectorized = aligned16(x.data()) && aligned16(y.data());
  const int64_t work = vectorized ? n / pack_elems(x.dtype()) + 1 : n;
  const unsigned blocks = grid_for(work, kThreads, cuda_backend(ctx).properties().multiProcessorCount);
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.data_as<const T>();
    T* out = y.data_as<T>();
    const char* name = kernel_names::activation(act);
    switch (act) {
      case Activation::gelu_erf:
        return launch(ctx, name, kernels::gelu_kernel<T>, blocks, kThreads, 0, in, out, n, vectorized);
      case Activation::gelu_tanh:
        return launch(ctx, name, kernels::gelu_tanh_kernel<T>, blocks, kThreads, 0, in, out, n, vectorized);
      case Activation::silu:
        return launch(ctx, name, kernels::silu_kernel<T>, blocks, kThreads, 0, in, out, n, vectorized);
      case Activation::relu:
        return launch(ctx, name, kernels::relu_kernel<T>, blocks, kThreads, 0, in, out, n, vectorized);
    }
  });
}

void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act) {
  const int64_t cols = gate.size(-1);
  const int64_t rows = cols == 0 ? 0 : gate.numel() / cols;
  if (rows == 0 || cols == 0) return;
  const int64_t gate_ld = leading_dimension("gated_activation", gate),
                up_ld = leading_dimension("gated_activation", up), y_ld = leading_dimension("gated_activation", y);
  const int64_t pack = pack_elems(gate.dtype());
  const bool vectorized = aligned16(gate.data()) && aligned16(up.data()) && aligned16(y.data()) && cols % pack == 0 &&
                          gate_ld % pack == 0 && up_ld % pack == 0 && y_ld % pack == 0;
  const int64_t work = vectorized ? rows * cols / pack : rows * cols;
  const unsigned blocks = grid_for(work, kThreads, cuda_backend(ctx).properties().multiProcessorCount);
  dispatch_dtype(gate.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* g = gate.data_as<const T>();
    const T* u = up.data_as<const T>();
    T* out = y.data_as<T>();
    const char* name = kernel_names::gated_activation(act);
    switch (act) {
      case Activation::gelu_erf:
        return launch(ctx, name, kernels::gated_gelu_mul_kernel<T>, blocks, kThreads, 0, g, gate_ld, u, up_ld, out, y_ld,
                      rows, cols, vectorized);
      case Activation::gelu_tanh:
        return launch(ctx, name, kernels::gated_gelu_tanh_mul_kernel<T>, blocks, kThreads, 0, g, gate_ld, u, up_ld, out,
                      y_ld, rows, cols, vectorized);
      case Activation::silu:
        return launch(ctx, name, kernels::gated_silu_mul_kernel<T>, blocks, kThreads, 0, g, gate_ld, u, up_ld, out, y_ld,
                      rows, cols, vectorized);
      case Activation::relu:
        return launch(ctx, name, kernels::gated_relu_mul_kernel<T>, blocks, kThreads, 0, g, gate_ld, u, up_ld, out, y_ld,
                      rows, cols, vectorized);
    }
  });
}

}  // namespace blockscope::ops::cuda
