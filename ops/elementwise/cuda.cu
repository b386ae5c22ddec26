// CUDA elementwise ops: add (with row broadcast), mul, scale, copy (DtoD memcpy or a strided
// gather) and the causal masked_fill used by the naive attention paths.
// Inputs are validated by ops/elementwise/elementwise.cpp; only cheap invariants are checked.
#include <algorithm>

#include "ops/elementwise/backends.h"
#include "runtime/cuda/cuda_backend.h"
#include "ops/common/cuda/elementwise_map.cuh"
#include "ops/common/cuda/fast_divmod.h"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/vector_io.cuh"

namespace blockscope::ops::cuda::kernels {

template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n, int64_t b_period, bool vectorized) {
  binary_map(a, b, out, n, b_period, vectorized, [](float x, float y) { return x + y; });
}

template <typename T>
__global__ void mul_kernel(const T* a, const T* b, T* out, int64_t n, bool vectorized) {
  binary_map(a, b, out, n, n, vectorized, [](float x, float y) { return x * y; });
}

template <typename T>
__global__ void scale_kernel(const T* x, T* out, int64_t n, float factor, bool vectorized) {
  unary_map(x, out, n, vectorized, [factor](float v) { return v * factor; });
}

// A strided view described by up to kMaxDims (size, stride) pairs, outermost first (host side).
constexpr int kMaxDims = 8;
struct StridedLayout {
  int dims = 0;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
};

// The same view for the kernel, in words W (an element, or 2 to 8 consecutive elements of the
// contiguous last dimension moved as one 4-, 8- or 16-byte access): 32-bit sizes as
// FastDivmods and 32-bit strides (every index and offset below 2^31, checked on the host), or
// 64-bit ones (WIDE) for larger views.
template <bool WIDE>
struct CopyLayout;
template <>
struct CopyLayout<false> {
  int dims = 0;
  FastDivmod size[kMaxDims];
  uint32_t stride[kMaxDims];
};
template <>
struct CopyLayout<true> {
  int dims = 0;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
};

// dst (contiguous) = src (strided), word by word in logical order: the divisions of the index by
// every dimension but the outermost are multiply-high + shift (FastDivmod) on the 32-bit path.
template <typename W, bool WIDE>
__global__ void copy_kernel(const W* __restrict__ src, CopyLayout<WIDE> layout, W* __restrict__ dst,
                            int64_t n) {
  if constexpr (!WIDE) {
    const uint32_t count = static_cast<uint32_t>(n), step = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
      uint32_t rest = i, offset = 0;
#pragma unroll
      for (int d = kMaxDims - 1; d >= 1; --d) {
        if (d < layout.dims) {
          uint32_t q, r;
          layout.size[d].divmod(rest, q, r);
          offset += r * layout.stride[d];
          rest = q;
        }
      }
      offset += rest * layout.stride[0];
      dst[i] = src[offset];
    }
  } else {
    for (int64_t i = global_thread(); i < n; i += global_threads()) {
      int64_t rest = i, offset = 0;
      for (int d = layout.dims - 1; d >= 1; --d) {
        offset += (rest % layout.size[d]) * layout.stride[d];
        rest /= layout.size[d];
      }
      offset += rest * layout.stride[0];
      dst[i] = src[offset];
    }
  }
}

// scores [matrices, sq, sk] (rows = matrices·sq): element (i, j) with j > i + sk - sq gets
// `value`. One block per row in a grid-stride loop; threads cover the masked tail of the row.
template <typename T>
__global__ void masked_fill_causal_kernel(T* scores, int64_t rows, int64_t sq, int64_t sk, float value) {
  const T fill = from_float<T>(value);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % sq;
    const int64_t first_masked = i + sk - sq + 1 < 0 ? 0 : i + sk - sq + 1;
    T* line = scores + row * sk;
    for (int64_t j = first_masked + threadIdx.x; j < sk; j += blockDim.x) line[j] = fill;
  }
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {


namespace {

constexpr int kThreads = 256;

int sm_count(Context& ctx) { return cuda_backend(ctx).properties().multiProcessorCount; }

// Threads needed: one per pack when vectorised, else one per element.
int64_t work_items(int64_t n, bool vectorized, DType dtype) { return vectorized ? n / pack_elems(dtype) + 1 : n; }

// Merges adjacent dimensions that are contiguous with each other and drops size-1 ones, so the
// gather kernel does as few divisions as the view allows.
kernels::StridedLayout collapse(const Tensor& t) {
  std::vector<int64_t> sizes, strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 1) continue;
    if (!sizes.empty() && strides.back() == t.stride(d) * t.size(d)) {
      sizes.back() *= t.size(d);
      strides.back() = t.stride(d);
    } else {
      sizes.push_back(t.size(d));
      strides.push_back(t.stride(d));
    }
  }
  BS_CHECK_INPUT(static_cast<int>(sizes.size()) <= kernels::kMaxDims, "copy: ", t.str(), " has ", sizes.size(),
                 " non-mergeable dimensions; the CUDA gather supports ", kernels::kMaxDims);
  kernels::StridedLayout layout;
  layout.dims = static_cast<int>(sizes.size());
  for (int d = 0; d < layout.dims; ++d) {
    layout.size[d] = sizes[d];
    layout.stride[d] = strides[d];
  }
  return layout;
}

// Word size for the gather: the widest of 16, 8, 4 bytes (and the element itself) such that the
// last dimension is contiguous and a whole number of words, every other stride a whole number of
// words, and both base addresses aligned to it.
int64_t copy_word_bytes(const kernels::StridedLayout& l, const void* src, const void* dst, int64_t esize) {
  const int last = l.dims - 1;
  for (int64_t bytes : {16, 8, 4}) {
    if (bytes <= esize) break;
    const int64_t group = bytes / esize;
    bool ok = l.dims > 0 && l.stride[last] == 1 && l.size[last] % group == 0 &&
              reinterpret_cast<uintptr_t>(src) % bytes == 0 && reinterpret_cast<uintptr_t>(dst) % bytes == 0;
    for (int d = 0; ok && d < last; ++d) ok = l.stride[d] % group == 0;
    if (ok) return bytes;
  }
  return esize;
}

template <typename W>
void launch_copy(Context& ctx, const Tensor& src, Tensor& dst, const kernels::StridedLayout& words, int64_t n) {
  // 32-bit path: every word index and every source offset below 2^31, strides non-negative.
  int64_t max_offset = 0;
  bool narrow = n < (int64_t{1} << 31);
  for (int d = 0; d < words.dims; ++d) {
    narrow = narrow && words.stride[d] >= 0 && kernels::fits_fast_divmod(words.size[d], n);
    max_offset += (words.size[d] - 1) * std::max<int64_t>(words.stride[d], 0);
  }
  narrow = narrow && max_offset < (int64_t{1} << 31);
  const unsigned blocks = grid_for(n, kThreads, sm_count(ctx));
  const W* from = static_cast<const W*>(src.data());
  W* to = static_cast<W*>(dst.data());
  if (narrow) {
    kernels::CopyLayout<false> l;
    l.dims = words.dims;
    for (int d = 0; d < l.dims; ++d) {
      l.size[d] = kernels::FastDivmod(static_cast<uint32_t>(words.size[d]));
      l.stride[d] = static_cast<uint32_t>(words.stride[d]);
    }
    launch(ctx, kernel_names::kCopy, kernels::copy_kernel<W, false>, blocks, kThreads, 0, from, l, to, n);
  } else {
    kernels::CopyLayout<true> l;
    l.dims = words.dims;
    for (int d = 0; d < l.dims; ++d) {
      l.size[d] = words.size[d];
      l.stride[d] = words.stride[d];
    }
    launch(ctx, kernel_names::kCopy, kernels::copy_kernel<W, true>, blocks, kThreads, 0, from, l, to, n);
  }
}

// dst = src on the device: one "Memcpy DtoD" when src is contiguous, the gather kernel else
// (in 16-byte words when the innermost dimension allows: the QKV split and the head merge).
void copy_into(Context& ctx, const Tensor& src, Tensor& dst) {
  BS_CHECK(dst.is_contiguous(), "copy: dst ", dst.str(), " must be contiguous");
  if (src.is_contiguous()) {
    cuda::memcpy_dtod(ctx, dst.data(), src.data(), src.nbytes());
    return;
  }
  if (src.numel() == 0) return;
  kernels::StridedLayout layout = collapse(src);
  if (layout.dims == 0) layout = {1, {1}, {1}};  // every dimension of size 1
  const int64_t esize = static_cast<int64_t>(dtype_size(src.dtype()));
  const int64_t word = copy_word_bytes(layout, src.data(), dst.data(), esize);
  kernels::StridedLayout words = layout;
  if (word != esize) {
    const int64_t group = word / esize;
    for (int d = 0; d + 1 < words.dims; ++d) words.stride[d] /= group;
    words.size[words.dims - 1] /= group;
  }
  const int64_t n = src.numel() * esize / word;
  switch (word) {
    case 16: launch_copy<uint4>(ctx, src, dst, words, n); return;
    case 8: launch_copy<uint2>(ctx, src, dst, words, n); return;
    case 4: launch_copy<uint32_t>(ctx, src, dst, words, n); return;
    default: launch_copy<uint16_t>(ctx, src, dst, words, n); return;
  }
}

void fill_causal(Context& ctx, Tensor& scores, float value) {
  BS_CHECK(scores.is_contiguous() && scores.dim() >= 2, "masked_fill_causal: scores ", scores.str(),
           " must be contiguous [..., Sq, Sk]");
  const int64_t sq = scores.size(-2), sk = scores.size(-1);
  if (scores.numel() == 0) return;
  const int64_t rows = scores.numel() / sk;
  // Rows with nothing to mask still cost a block visit; at most 32 blocks per SM sweep them.
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, static_cast<int64_t>(sm_count(ctx)) * 32));
  const unsigned threads = static_cast<unsigned>(std::clamp<int64_t>((sk + 31) / 32 * 32, 32, 256));
  dispatch_dtype(scores.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, kernel_names::kMaskedFillCausal, kernels::masked_fill_causal_kernel<T>, blocks, threads, 0,
           scores.data_as<T>(), rows, sq, sk, value);
  });
}

}  // namespace

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  BS_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "add: operands must be contiguous");
  const int64_t n = a.numel(), period = b.numel();
  BS_CHECK(period > 0 && n % period == 0, "add: b ", b.str(), " does not tile a ", a.str());
  const bool vectorized = aligned16(a.data()) && aligned16(b.data()) && aligned16(out.data()) &&
                          period % pack_elems(a.dtype()) == 0;
  dispatch_dtype(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, kernel_names::kAdd, kernels::add_kernel<T>,
           grid_for(work_items(n, vectorized, a.dtype()), kThreads, sm_count(ctx)),
           kThreads, 0, a.data_as<const T>(), b.data_as<const T>(), out.data_as<T>(), n, period, vectorized);
  });
}

void mul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  BS_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "mul: operands must be contiguous");
  BS_CHECK(a.numel() == b.numel(), "mul: ", a.str(), " and ", b.str(), " differ in size");
  const int64_t n = a.numel();
  const bool vectorized = aligned16(a.data()) && aligned16(b.data()) && aligned16(out.data());
  dispatch_dtype(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, kernel_names::kMul, kernels::mul_kernel<T>,
           grid_for(work_items(n, vectorized, a.dtype()), kThreads, sm_count(ctx)),
           kThreads, 0, a.data_as<const T>(), b.data_as<const T>(), out.data_as<T>(), n, vectorized);
  });
}

void scale(Context& ctx, const Tensor& x, float factor, Tensor& out) {
  BS_CHECK(x.is_contiguous() && out.is_contiguous(), "scale: operands must be contiguous");
  const int64_t n = x.numel();
  const bool vectorized = aligned16(x.data()) && aligned16(out.data());
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, kernel_names::kScale, kernels::scale_kernel<T>,
           grid_for(work_items(n, vectorized, x.dtype()), kThreads, sm_count(ctx)),
           kThreads, 0, x.data_as<const T>(), out.data_as<T>(), n, factor, vectorized);
  });
}

void copy(Context& ctx, const Tensor& src, Tensor& dst) { copy_into(ctx, src, dst); }

void masked_fill_causal(Context& ctx, const Tensor& scores, float value, Tensor& out) {
  // The series' lesson: out of place is a real copy (Memcpy DtoD) and then the fill.
  copy_into(ctx, scores, out);
  fill_causal(ctx, out, value);
}

void masked_fill_causal_(Context& ctx, Tensor& scores, float value) { fill_causal(ctx, scores, value); }

}  // namespace blockscope::ops::cuda
