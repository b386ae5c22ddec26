// CUDA linear (three paths) and the batched GEMM of the attention paths, on cuBLASLt
// (ops/common/cuda/cublaslt_gemm.h maps row-major onto column-major).
//
//   naive     GEMM (DEFAULT epilogue), bias_add_kernel [, gelu_tanh_kernel]
//   epilogue  one GEMM with the BIAS / GELU_BIAS (or GELU) epilogue; where cuBLASLt has no
//             algorithm for that epilogue (cublaslt::epilogue_available), the naive kernels
//             instead, with a note on stderr once per shape
//   addmm     bias_broadcast_copy_kernel into y, then GEMM with beta = 1 [, gelu_tanh_kernel]
//             (what torch.compile makes of matmul + add)
//
// On the naive and epilogue paths, a skinny GEMM (rows ≤ 16, [out, in] weights: a decode step)
// runs our weight-streaming kernel instead of cuBLASLt where ops/linear/skinny_gemm.h's rule says
// so (BLOCKSCOPE_LINEAR_WEIGHT_STREAMING=auto|on|off): linear_weight_streaming in place of gemm on
// the naive path (then the same bias and GELU kernels), linear_weight_streaming_bias[_gelu] /
// _gelu as the epilogue path's one kernel.
#include <algorithm>
#include <string>
#include <type_traits>

#include "ops/activation/backends.h"
#include "ops/linear/backends.h"
#include "ops/linear/skinny_gemm.h"
#include "ops/common/rows.h"
#include "profiler/scope.h"
#include "ops/common/cuda/cublaslt_gemm.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_check.h"
#include "ops/common/cuda/elementwise_map.cuh"
#include "ops/common/cuda/fast_divmod.h"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/vector_io.cuh"
#include "ops/linear/weight_streaming.cuh"

namespace blockscope::ops::cuda::kernels {

// y[r, c] += bias[c]; y: [rows, cols] contiguous (n = rows · cols), bias: [cols].
template <typename T>
__global__ void bias_add_kernel(T* y, const T* bias, int64_t n, int64_t cols, bool vectorized) {
  binary_map(y, bias, y, n, cols, vectorized, [](float v, float b) { return v + b; });
}

// y[r, c] = bias[c]: the bias broadcast into the output before a beta = 1 GEMM. When every index is
// below 2^31 (kNarrow) the indices are 32-bit and the column of an element comes from a FastDivmod
// (multiply-high and shift); only beyond, 64-bit indices and a 64-bit modulo (a call to the
// division routine per element).
template <typename T, bool kNarrow>
__global__ void bias_broadcast_copy_kernel(const T* bias, T* y, int64_t n, int64_t cols, FastDivmod column,
                                           bool vectorized) {
  using Index = std::conditional_t<kNarrow, uint32_t, int64_t>;
  constexpr int P = Pack<T>::size;
  const auto column_of = [&](Index i) -> Index {
    if constexpr (kNarrow) {
      uint32_t q, r;
      column.divmod(i, q, r);
      return r;
    } else {
      return i % cols;
    }
  };
  const Index first = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  const Index total = static_cast<Index>(n);
  Index done = 0;
  if (vectorized) {
    const Index packs = total / P;
    for (Index p = first; p < packs; p += stride) store_pack(y + p * P, load_pack(bias + column_of(p * P)));
    done = packs * P;
  }
  for (Index i = done + first; i < total; i += stride) y[i] = bias[column_of(i)];
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

using cublaslt::Epilogue;

namespace {

constexpr int kThreads = 256;

// Row stride of x viewed as [rows, in] (ops/common/rows.h): every row contiguous, rows
// evenly spaced; a single row may use any leading dimension >= in.
int64_t rows_stride(const Tensor& x) {
  const int64_t ld = leading_dimension("linear", x);
  BS_CHECK_INPUT(ld >= x.size(-1), "linear: rows of x ", x.str(), " overlap (row stride ", ld, " < ", x.size(-1),
                 "); cuBLASLt needs distinct rows: make x contiguous");
  return ld;
}

void bias_kernel(Context& ctx, const char* name, bool add, const Tensor& bias, Tensor& y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const bool vectorized = aligned16(y.data()) && aligned16(bias.data()) && cols % pack_elems(y.dtype()) == 0;
  const unsigned blocks = grid_for(vectorized ? n / pack_elems(y.dtype()) + 1 : n, kThreads,
                                   cuda_backend(ctx).properties().multiProcessorCount);
  dispatch_dtype(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (add) {
      launch(ctx, name, kernels::bias_add_kernel<T>, blocks, kThreads, 0, y.data_as<T>(),
             bias.data_as<const T>(), n, cols, vectorized);
    } else if (kernels::fits_fast_divmod(cols, n)) {
      launch(ctx, name, kernels::bias_broadcast_copy_kernel<T, true>, blocks, kThreads, 0, bias.data_as<const T>(),
             y.data_as<T>(), n, cols, kernels::FastDivmod(static_cast<uint32_t>(cols)), vectorized);
    } else {
      launch(ctx, name, kernels::bias_broadcast_copy_kernel<T, false>, blocks, kThreads, 0, bias.data_as<const T>(),
             y.data_as<T>(), n, cols, kernels::FastDivmod(), vectorized);
    }
  });
}

// t = 0 (all bits zero is 0.0 in f32, f16 and bf16): the product of a k = 0 GEMM, as the CPU's
// BLAS convention gives it. cuBLASLt is never asked for k = 0 (its kernels are not documented
// for an empty reduction).
void zero_fill(Context& ctx, Tensor& t) {
  profiler::KernelScope scope(ctx, kernel_names::kMemset);
  BS_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.nbytes(), cuda_backend(ctx).stream()));
}

}  // namespace

void linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, LinearPath path,
            WeightLayout layout, LinearActivation act) {
  const int64_t in = x.size(-1);
  const int64_t out = layout == WeightLayout::out_in ? w.size(0) : w.size(1);
  const int64_t rows = in == 0 ? (out == 0 ? 0 : y.numel() / out) : x.numel() / in;
  // ops::linear has checked w.is_contiguous(), which ignores the stride of a size-1 dimension
  // ([out, 1] or [1, in] views may carry any): the rows are w.size(1) apart, whatever
  // w.stride(0) says (as on the CPU), and w.stride(1) is not checked for the same reason.
  BS_CHECK(w.dim() == 2 && w.is_contiguous(), "linear: weight ", w.str(), " must be 2-D and contiguous");
  BS_CHECK(y.is_contiguous(), "linear: y ", y.str(), " must be contiguous");
  if (rows == 0 || out == 0) return;
  const bool has_bias = bias.defined();
  const bool gelu = act == LinearActivation::gelu_tanh;
  if (in == 0) {
    // k = 0: X · W is an empty sum, so y = bias (or 0), then the activation, as on the CPU.
    if (has_bias) bias_kernel(ctx, kernel_names::kBiasBroadcastCopy, false, bias, y, rows, out);
    else zero_fill(ctx, y);
    if (gelu) cuda::activation(ctx, y, y, Activation::gelu_tanh);  // no op scope: part of linear
    return;
  }

  SkinnyGemm skinny;
  skinny.rows = rows;
  skinny.in = in;
  skinny.out = out;
  skinny.dtype = x.dtype();
  skinny.layout = layout;
  skinny.path = path;
  const int64_t ldx = rows_stride(x);
  skinny.rows_aligned16 = weight_streaming_rows_aligned16(x.data(), ldx, rows, w.data(), in, out, x.dtype());
  if (use_weight_streaming(skinny, weight_streaming_mode())) {
    static_assert(kWeightStreamingMaxRows <= 16, "launch_weight_streaming has row buckets up to 16");
    if (path == LinearPath::epilogue) {
      launch_weight_streaming(ctx, kernel_names::gemm_with_epilogue(has_bias, gelu, /*streaming=*/true), x, ldx, w,
                              Tensor(), bias, gelu, y, rows, in, out, skinny.rows_aligned16);
      return;
    }
    // naive: the product alone, then the bias and GELU kernels as after cuBLASLt's GEMM.
    launch_weight_streaming(ctx, kernel_names::kWeightStreaming, x, ldx, w, Tensor(), Tensor(), false, y, rows, in,
                            out, skinny.rows_aligned16);
    if (has_bias) bias_kernel(ctx, kernel_names::kBiasAdd, true, bias, y, rows, out);
    if (gelu) cuda::activation(ctx, y, y, Activation::gelu_tanh);  // no op scope: part of linear
    return;
  }

  cublaslt::RowMajorGemm g;
  g.dtype = x.dtype();
  g.m = rows;
  g.n = out;
  g.k = in;
  g.a = x.data();
  g.lda = ldx;
  g.b = w.data();
  g.ldb = w.size(1);  // not w.stride(0): see the weight check above
  g.trans_b = layout == WeightLayout::out_in;  // [out, in]: Y = X · Wᵀ
  g.d = y.data();
  g.ldd = out;

  switch (path) {
    case LinearPath::naive:
      g.name = kernel_names::kGemm;
      cublaslt::gemm(ctx, g);
      if (has_bias) bias_kernel(ctx, kernel_names::kBiasAdd, true, bias, y, rows, out);
      if (gelu) cuda::activation(ctx, y, y, Activation::gelu_tanh);  // no op scope: part of linear
      return;
    case LinearPath::epilogue:
      g.epilogue = has_bias ? (gelu ? Epilogue::gelu_bias : Epilogue::bias) : (gelu ? Epilogue::gelu : Epilogue::none);
      g.name = kernel_names::gemm_with_epilogue(has_bias, gelu);
      g.bias = has_bias ? bias.data() : nullptr;
      if (!cublaslt::epilogue_available(ctx, g)) {
        // cuBLASLt has no algorithm for this epilogue here (a note on stderr says so, once per
        // shape): the naive path's kernels instead, which the kernel table shows.
        g.epilogue = Epilogue::none;
        g.name = kernel_names::kGemm;
        g.bias = nullptr;
        cublaslt::gemm(ctx, g);
        if (has_bias) bias_kernel(ctx, kernel_names::kBiasAdd, true, bias, y, rows, out);
        if (gelu) cuda::activation(ctx, y, y, Activation::gelu_tanh);  // no op scope: part of linear
        return;
      }
      cublaslt::gemm(ctx, g);
      return;
    case LinearPath::addmm:
      g.name = kernel_names::kGemm;
      if (has_bias) {
        bias_kernel(ctx, kernel_names::kBiasBroadcastCopy, false, bias, y, rows, out);
        g.beta = 1.0f;
      }
      cublaslt::gemm(ctx, g);
      if (gelu) cuda::activation(ctx, y, y, Activation::gelu_tanh);  // no op scope: part of linear
      return;
  }
}

void batched_matmul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha,
                    int64_t b_group, const char* kernel_name) {
  BS_CHECK(a.is_contiguous() && b.is_contiguous() && c.is_contiguous(), "batched_matmul: operands must be contiguous");
  BS_CHECK(b_group >= 1, "batched_matmul: b_group ", b_group, " must be positive");
  const int64_t m = a.size(-2), k = a.size(-1);
  const int64_t n = trans_b ? b.size(-2) : b.size(-1);
  const int64_t batch = m * k == 0 ? (m * n == 0 ? 0 : c.numel() / (m * n)) : a.numel() / (m * k);
  if (batch == 0 || m == 0 || n == 0) return;
  BS_CHECK(batch % b_group == 0, "batched_matmul: batch ", batch, " is not a multiple of b_group ", b_group);
  if (k == 0) {  // an empty sum: c = 0, as on the CPU (e.g. attention's PV with no keys, Sk = 0)
    zero_fill(ctx, c);
    return;
  }

  // GQA: the b_group query heads sharing one kv head are consecutive and contiguous, so A is
  // read as [batch / b_group, b_group · m, k] — one strided-batched GEMM, no copy.
  cublaslt::RowMajorGemm g;
  g.name = kernel_name;
  g.dtype = a.dtype();
  g.batch = batch / b_group;
  g.m = b_group * m;
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = k;
  g.stride_a = b_group * m * k;
  g.b = b.data();
  g.ldb = trans_b ? k : n;
  g.stride_b = k * n;
  g.trans_b = trans_b;
  g.d = c.data();
  g.ldd = n;
  g.stride_d = b_group * m * n;
  g.alpha = alpha;
  cublaslt::gemm(ctx, g);
}

}  // namespace blockscope::ops::cuda
