// CPU elementwise kernels: any storage dtype, computed in f32, OpenMP over chunks of rows.
// Inputs were validated by the public ops (ops/elementwise/elementwise.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops/elementwise/backends.h"
#include "ops/common/cpu_rows.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {
namespace {

// Elements per work item: large enough to amortise the dtype conversion loops, small enough
// that the f32 staging buffers live on the stack.
constexpr int64_t kElementwiseChunk = 1024;
// Below this many elements a parallel region costs more than the loop: stay on one thread.
constexpr int64_t kParallelElements = 1 << 15;

// Calls fn(offset, column, length) over [0, rows · row_length) in chunks that never cross a
// row; `column` is the offset inside the row (where a row-broadcast operand is read).
template <typename Fn>
void for_each_chunk(int64_t rows, int64_t row_length, Fn fn) {
  const int64_t chunks_per_row = (row_length + kElementwiseChunk - 1) / kElementwiseChunk;
  const int64_t pieces = rows * chunks_per_row;
#pragma omp parallel for schedule(static) if (rows * row_length >= kParallelElements)
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t row = p / chunks_per_row;
    const int64_t column = (p % chunks_per_row) * kElementwiseChunk;
    fn(row * row_length + column, column, std::min(kElementwiseChunk, row_length - column));
  }
}

// out = op(a, b) where b is either a's shape or a row of a's last dimension(s).
template <typename Op>
void binary(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  const DType dtype = a.dtype();
  const bool broadcast = b.numel() != a.numel();
  const int64_t row_length = broadcast ? b.numel() : a.numel();
  const int64_t rows = a.numel() / row_length;
  const void* a_data = a.data();
  const void* b_data = b.data();
  void* out_data = out.data();
  for_each_chunk(rows, row_length, [&](int64_t offset, int64_t column, int64_t length) {
    float x[kElementwiseChunk], y[kElementwiseChunk];
    load_row(dtype, element_at(dtype, a_data, offset), x, length);
    load_row(dtype, element_at(dtype, b_data, broadcast ? column : offset), y, length);
    for (int64_t i = 0; i < length; ++i) x[i] = op(x[i], y[i]);
    store_row(dtype, x, element_at(dtype, out_data, offset), length);
  });
}

// Fills the causal part (j > i + Sk - Sq) of every [Sq, Sk] matrix of contiguous `scores`.
// Typed on the element width (a std::fill_n the compiler vectorises), not one memcpy call per
// element: the naive attention path masks half of an [B, H, S, S] matrix here.
template <typename Word>
void fill_causal_words(Tensor& scores, Word value) {
  const int64_t sq = scores.size(-2), sk = scores.size(-1);
  const int64_t rows = scores.numel() / sk;  // rows of [..., Sq] flattened
  Word* base = static_cast<Word*>(scores.data());
#pragma omp parallel for schedule(static) if (scores.numel() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = r % sq;  // query index inside its matrix
    const int64_t first_masked = std::clamp<int64_t>(i + sk - sq + 1, 0, sk);
    std::fill_n(base + r * sk + first_masked, sk - first_masked, value);
  }
}

void fill_causal(Tensor& scores, float value) {
  const DType dtype = scores.dtype();
  unsigned char value_bytes[4] = {0, 0, 0, 0};
  store_from_float(dtype, value_bytes, value);
  if (dtype_size(dtype) == 4) {
    uint32_t word;
    std::memcpy(&word, value_bytes, sizeof word);
    fill_causal_words(scores, word);
  } else {
    uint16_t word;
    std::memcpy(&word, value_bytes, sizeof word);
    fill_causal_words(scores, word);
  }
}

// out[j] = src[j · stride] for j in [0, n), for 2- and 4-byte elements.
template <typename Word>
void gather_words(const Word* src, int64_t stride, Word* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = src[j * stride];
}

// A plain device-to-device copy of a contiguous tensor (the "Memcpy DtoD" of the trace).
void memcpy_within(Context& ctx, const Tensor& src, Tensor& dst) {
  profiler::KernelScope kernel(ctx, kernel_names::kMemcpyDtoD);
  ctx.backend().copy_within(dst.data(), src.data(), dst.nbytes());
}

}  // namespace

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  profiler::KernelScope kernel(ctx, kernel_names::kAdd);
  binary(a, b, out, [](float x, float y) { return x + y; });
}

void mul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  profiler::KernelScope kernel(ctx, kernel_names::kMul);
  binary(a, b, out, [](float x, float y) { return x * y; });
}

void scale(Context& ctx, const Tensor& x, float factor, Tensor& out) {
  profiler::KernelScope kernel(ctx, kernel_names::kScale);
  const DType dtype = x.dtype();
  const void* x_data = x.data();
  void* out_data = out.data();
  for_each_chunk(1, x.numel(), [&](int64_t offset, int64_t, int64_t length) {
    float values[kElementwiseChunk];
    load_row(dtype, element_at(dtype, x_data, offset), values, length);
    for (int64_t i = 0; i < length; ++i) values[i] *= factor;
    store_row(dtype, values, element_at(dtype, out_data, offset), length);
  });
}

void copy(Context& ctx, const Tensor& src, Tensor& dst) {
  if (src.is_contiguous()) return memcpy_within(ctx, src, dst);

  // Strided gather into contiguous dst: one work item per row of the last dimension.
  profiler::KernelScope kernel(ctx, kernel_names::kCopy);
  const int64_t dims = src.dim();
  const int64_t row_length = dims == 0 ? 1 : src.size(-1);
  const int64_t inner_stride = dims == 0 ? 1 : src.stride(-1);
  const int64_t rows = src.numel() / row_length;
  const int64_t element = static_cast<int64_t>(dtype_size(src.dtype()));
  const char* src_base = static_cast<const char*>(src.data());
  char* dst_base = static_cast<char*>(dst.data());
#pragma omp parallel for schedule(static) if (src.numel() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    // Offset (in elements) of row r's first element: decompose r over src.shape[0 : dims-1).
    int64_t remaining = r, offset = 0;
    for (int64_t d = dims - 2; d >= 0; --d) {
      offset += (remaining % src.size(d)) * src.stride(d);
      remaining /= src.size(d);
    }
    char* out_row = dst_base + r * row_length * element;
    const char* src_row = src_base + offset * element;
    if (inner_stride == 1) {  // each row contiguous (e.g. a transpose of the leading dims)
      std::memcpy(out_row, src_row, static_cast<size_t>(row_length * element));
    } else if (element == 4) {  // typed gathers, not one memcpy call per element
      gather_words(reinterpret_cast<const uint32_t*>(src_row), inner_stride, reinterpret_cast<uint32_t*>(out_row),
                   row_length);
    } else {
      gather_words(reinterpret_cast<const uint16_t*>(src_row), inner_stride, reinterpret_cast<uint16_t*>(out_row),
                   row_length);
    }
  }
}

void masked_fill_causal(Context& ctx, const Tensor& scores, float value, Tensor& out) {
  // Out of place is what PyTorch's masked_fill does: clone (a DtoD copy), then fill.
  memcpy_within(ctx, scores, out);
  profiler::KernelScope kernel(ctx, kernel_names::kMaskedFillCausal);
  fill_causal(out, value);
}

void masked_fill_causal_(Context& ctx, Tensor& scores, float value) {
  profiler::KernelScope kernel(ctx, kernel_names::kMaskedFillCausal);
  fill_causal(scores, value);
}

}  // namespace blockscope::ops::cpu
