// Row geometry shared by the row-wise ops (linear, activations, norms): a tensor [..., N] seen
// as `rows` rows of N contiguous elements, `row_stride` elements apart. Column slices of a
// wider tensor (the gate/up halves of a [rows, 2F] GEMM output) fit this shape; a transposed
// view does not.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace blockscope::ops {

// CPU loops over fewer elements than this stay on the calling thread: forking a team costs
// more than the work (and on a shared, oversubscribed machine, much more).
constexpr int64_t kParallelMinElements = 1 << 15;

struct RowLayout {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // elements from row r to row r + 1
};

// True (and fills *out) when t's last dimension is contiguous and its leading dimensions
// collapse into one row index with a single stride. A 0-d tensor is one row of one element.
inline bool row_layout(const Tensor& t, RowLayout* out) {
  const int64_t n = t.dim();
  RowLayout layout;
  layout.cols = n == 0 ? 1 : t.size(-1);
  if (n > 0 && layout.cols > 1 && t.stride(-1) != 1) return false;
  layout.rows = layout.cols == 0 ? 0 : t.numel() / layout.cols;
  layout.row_stride = layout.cols;
  // Walk the leading dims from the innermost; size-1 dims place no constraint.
  bool have_stride = false;
  int64_t expected = 0;  // stride the next-outer dim must have
  for (int64_t d = n - 2; d >= 0; --d) {
    const int64_t size = t.size(d), stride = t.stride(d);
    if (size == 1) continue;
    if (!have_stride) {
      layout.row_stride = stride;
      have_stride = true;
    } else if (stride != expected) {
      return false;
    }
    expected = stride * size;
  }
  *out = layout;
  return true;
}

// Elements from one row of t to the next, for a tensor row_layout() accepts (a single row
// reports its own width, so the result is a valid leading dimension for BLAS and kernels).
// `op` names the caller in the error for a tensor that is not such a view.
inline int64_t leading_dimension(const char* op, const Tensor& t) {
  RowLayout layout;
  BS_CHECK(row_layout(t, &layout), op, ": ", t.str(), " must have contiguous rows with one row stride");
  return layout.rows <= 1 ? layout.cols : layout.row_stride;
}

// True when a and b share storage and the element ranges they can touch intersect (a cheap,
// conservative test: interleaved views that never meet still count as overlapping).
inline bool may_overlap(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return false;
  auto span = [](const Tensor& t, int64_t* lo, int64_t* hi) {  // [lo, hi] in storage elements
    *lo = *hi = t.offset();
    for (int64_t d = 0; d < t.dim(); ++d) {
      const int64_t reach = (t.size(d) - 1) * t.stride(d);
      if (reach < 0) *lo += reach;
      else *hi += reach;
    }
  };
  int64_t alo, ahi, blo, bhi;
  span(a, &alo, &ahi);
  span(b, &blo, &bhi);
  const int64_t as = static_cast<int64_t>(dtype_size(a.dtype())), bs = static_cast<int64_t>(dtype_size(b.dtype()));
  return alo * as < (bhi + 1) * bs && blo * bs < (ahi + 1) * as;  // byte ranges intersect
}

// Address of element `index` (counted from the tensor's first element, in elements) for
// byte arithmetic on any dtype; CPU code pairs it with cpu::load_row / store_row.
inline char* element_ptr(const Tensor& t, int64_t index) {
  return static_cast<char*>(t.data()) + index * static_cast<int64_t>(dtype_size(t.dtype()));
}

}  // namespace blockscope::ops
