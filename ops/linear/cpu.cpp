// CPU linear: GEMMs through cpu::fused_matmul or cpu::sgemm, with the same kernel structure as the CUDA
// paths so the profiler's kernel table tells the same story:
//   naive     "gemm" (result rounded to the tensor dtype), "bias_add_kernel", "gelu_tanh_kernel"
//   epilogue  one of "gemm_bias_gelu", "gemm_bias", "gemm_gelu", "gemm" (bias and GELU applied
//             in f32 before the single rounding)
//   addmm     "bias_broadcast_copy_kernel" (bias into every row of y), "gemm" with beta = 1,
//             then "gelu_tanh_kernel"
// With oneDNN each "gemm*" kernel is one matmul primitive on the operands' own dtypes, the bias,
// GELU and beta fused into it (cpu::fused_matmul) -- or, on a loaded weight, whichever candidate
// its plan timed fastest (cpu::MatmulPlan: oneDNN on the stored or a packed layout, or a linked
// library's f32 sgemm with the epilogue as a pass). Without oneDNN, under a cpu.gemm naming
// another library, or for a dtype oneDNN cannot run natively on this CPU, half-precision operands
// are widened to f32 scratch (allocated through ctx so the allocator statistics see it), f32
// operands are used in place, and the epilogue is a pass over the f32 result before its single
// rounding. Each GEMM kernel's profiler event names what ran (KernelEvent::implementation).
#include <algorithm>
#include <cstring>

#include "ops/activation/backends.h"
#include "ops/linear/backends.h"
#include "ops/common/cpu_math.h"
#include "ops/common/cpu_rows.h"
#include "ops/common/rows.h"
#include "profiler/scope.h"
#include "runtime/cpu/gemm.h"

namespace blockscope::ops::cpu {
namespace {

// A row-major f32 matrix: rows `ld` elements apart. `storage` keeps scratch alive.
struct F32Matrix {
  float* data = nullptr;
  int64_t ld = 0;
  Tensor storage;
};

// f32 view of `rows` rows of `cols` elements of t, `row_stride` apart: t itself when it is
// f32, else a widened copy.
F32Matrix widen(Context& ctx, const Tensor& t, int64_t rows, int64_t cols, int64_t row_stride) {
  if (t.dtype() == DType::f32) return {t.data_as<float>(), row_stride, Tensor()};
  F32Matrix m{nullptr, cols, ctx.empty({rows, cols}, DType::f32)};
  m.data = m.storage.data_as<float>();
#pragma omp parallel for if (rows * cols >= kParallelMinElements) schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    load_row(t.dtype(), element_ptr(t, r * row_stride), m.data + r * cols, cols);
  return m;
}

// Where a GEMM writes [rows, out]: y itself when f32, else f32 scratch stored back by finish().
F32Matrix output_buffer(Context& ctx, Tensor& y, int64_t rows, int64_t out) {
  if (y.dtype() == DType::f32) return {y.data_as<float>(), out, Tensor()};
  F32Matrix m{nullptr, out, ctx.empty({rows, out}, DType::f32)};
  m.data = m.storage.data_as<float>();
  return m;
}

// Applies bias and/or tanh-GELU in f32 to the [rows, out] result, then rounds it into y (a
// no-op store when the result already lives in y).
void finish(F32Matrix& c, const Tensor& bias, bool gelu, Tensor& y, int64_t rows, int64_t out) {
  std::vector<float> bias_f32;
  if (bias.defined()) {
    bias_f32.resize(static_cast<size_t>(out));
    load_row(bias.dtype(), bias.data(), bias_f32.data(), out);
  }
  const bool writes_y = c.storage.defined();
  if (!bias.defined() && !gelu && !writes_y) return;
#pragma omp parallel for if (rows * out >= kParallelMinElements) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c.data + r * c.ld;
    if (!bias_f32.empty())
      for (int64_t j = 0; j < out; ++j) row[j] += bias_f32[j];
    if (gelu) gelu_tanh_row(row, out);
    if (writes_y) store_row(y.dtype(), row, element_ptr(y, r * out), out);
  }
}

// c = x · op(w) + beta · c, with x [rows, in] (row stride from `xrows`), w as `layout`.
void gemm(Context& ctx, const Tensor& x, const RowLayout& xrows, const Tensor& w, WeightLayout layout, int64_t out,
          float beta, F32Matrix& c) {
  const int64_t in = xrows.cols;
  const F32Matrix xf = widen(ctx, x, xrows.rows, in, xrows.row_stride);
  const int64_t w_rows = w.size(0), w_cols = w.size(1);
  const F32Matrix wf = widen(ctx, w, w_rows, w_cols, w_cols);
  // out_in: W stored [out, in], Y = X · Wᵀ (trans_b); in_out: W stored [in, out], Y = X · W.
  blockscope::cpu::sgemm(false, layout == WeightLayout::out_in, xrows.rows, out, in, 1.0f, xf.data, xf.ld, wf.data,
                         wf.ld, beta, c.data, c.ld);
}

// y [rows, out] (contiguous) = act(x · op(w) + bias + beta · y) as one oneDNN matmul, in the
// operands' own dtypes: what ran (cpu::fused_matmul), or null (nothing done) where fused_matmul
// cannot run it. bias may be undefined.
const char* fused_gemm(const Tensor& x, const RowLayout& xrows, const Tensor& w, WeightLayout layout, int64_t out,
                       const Tensor& bias, bool gelu, float beta, Tensor& y) {
  if (xrows.rows == 0 || xrows.cols == 0 || out == 0) return nullptr;
  blockscope::cpu::Matmul mm;
  mm.m = xrows.rows;
  mm.n = out;
  mm.k = xrows.cols;
  mm.a = {x.data(), x.dtype(), xrows.row_stride, 0, false};
  // out_in: W stored [out, in], op(B) = Wᵀ; in_out: W stored [in, out].
  mm.b = {w.data(), w.dtype(), w.size(1), 0, layout == WeightLayout::out_in};
  // A loaded weight may run from a copy packed once (cpu::MatmulPlan).
  if (w.storage()->read_only()) mm.b_read_only = w.storage().get();
  mm.c = y.data();
  mm.c_dtype = y.dtype();
  mm.ldc = out;
  mm.beta = beta;
  if (bias.defined()) {
    mm.bias = bias.data();
    mm.bias_dtype = bias.dtype();
  }
  mm.gelu_tanh = gelu;
  mm.gelu_tanh_row = gelu_tanh_row;  // for the plan's candidates that run the epilogue as a pass
  return blockscope::cpu::fused_matmul(mm);
}

// One GEMM kernel: y [xrows.rows, out] = act(x · op(w) + bias + beta · y) as one oneDNN matmul
// where it runs these dtypes, else the run's sgemm on f32 (half-precision operands widened) with
// bias and GELU as a pass over its f32 result before the single rounding. The kernel's event
// says which ran.
void gemm_kernel(Context& ctx, profiler::KernelScope& kernel, const Tensor& x, const RowLayout& xrows, const Tensor& w,
                 WeightLayout layout, int64_t out, const Tensor& bias, bool gelu, float beta, Tensor& y) {
  if (const char* ran = fused_gemm(x, xrows, w, layout, out, bias, gelu, beta, y)) {
    kernel.set_implementation(ran);
    return;
  }
  const int64_t rows = xrows.rows;
  F32Matrix c = output_buffer(ctx, y, rows, out);
  if (beta != 0.0f && c.storage.defined()) {  // beta reads y: widen it into the scratch
#pragma omp parallel for if (rows * out >= kParallelMinElements) schedule(static)
    for (int64_t r = 0; r < rows; ++r) load_row(y.dtype(), element_ptr(y, r * out), c.data + r * out, out);
  }
  gemm(ctx, x, xrows, w, layout, out, beta, c);
  finish(c, bias, gelu, y, rows, out);
  const bool widened = x.dtype() != DType::f32 || w.dtype() != DType::f32 || y.dtype() != DType::f32;
  kernel.set_implementation(std::string(blockscope::cpu::sgemm_implementation()) + (widened ? ", f32 widened" : "") +
                            (bias.defined() || gelu ? ", epilogue as a separate pass" : ""));
}

// Elementwise pass over y [rows, out] (contiguous) in f32: y = f(y[, bias]) rounded.
template <typename RowFn>
void rows_pass(Tensor& y, int64_t rows, int64_t out, RowFn fn) {
#pragma omp parallel if (rows * out >= kParallelMinElements)
  {
    std::vector<float> row(static_cast<size_t>(out));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      void* ptr = element_ptr(y, r * out);
      load_row(y.dtype(), ptr, row.data(), out);
      fn(row.data());
      store_row(y.dtype(), row.data(), ptr, out);
    }
  }
}

void bias_add_kernel(Context& ctx, const Tensor& bias, Tensor& y, int64_t rows, int64_t out) {
  profiler::KernelScope kernel(ctx, kernel_names::kBiasAdd);
  std::vector<float> b(static_cast<size_t>(out));
  load_row(bias.dtype(), bias.data(), b.data(), out);
  rows_pass(y, rows, out, [&](float* row) {
    for (int64_t j = 0; j < out; ++j) row[j] += b[j];
  });
}

void gelu_tanh_kernel(Context& ctx, Tensor& y, int64_t rows, int64_t out) {
  profiler::KernelScope kernel(ctx, kernel_names::activation(Activation::gelu_tanh));
  rows_pass(y, rows, out, [&](float* row) {
    gelu_tanh_row(row, out);
  });
}

}  // namespace

void linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, LinearPath path,
            WeightLayout layout, LinearActivation act) {
  RowLayout xrows;
  row_layout(x, &xrows);  // checked by ops::linear
  const int64_t out = y.size(-1);
  // rows from y when in = 0: row_layout counts 0 rows for a [rows, 0] x, which left y unwritten
  // (k = 0 means an empty sum: y = bias, or 0, then the activation).
  const int64_t rows = xrows.cols == 0 ? (out == 0 ? 0 : y.numel() / out) : xrows.rows;
  xrows.rows = rows;
  const bool gelu = act == LinearActivation::gelu_tanh;
  switch (path) {
    case LinearPath::naive: {
      {
        // The GEMM result is rounded to y's dtype before the bias kernel reads it back: that
        // extra trip through memory (and rounding) is what the naive path costs.
        profiler::KernelScope kernel(ctx, kernel_names::kGemm);
        gemm_kernel(ctx, kernel, x, xrows, w, layout, out, Tensor(), false, 0.0f, y);
      }
      if (bias.defined()) bias_add_kernel(ctx, bias, y, rows, out);
      if (gelu) gelu_tanh_kernel(ctx, y, rows, out);
      return;
    }
    case LinearPath::epilogue: {
      profiler::KernelScope kernel(ctx, kernel_names::gemm_with_epilogue(bias.defined(), gelu));
      gemm_kernel(ctx, kernel, x, xrows, w, layout, out, bias, gelu, 0.0f, y);
      return;
    }
    case LinearPath::addmm: {
      if (bias.defined()) {
        // torch.compile's addmm: the bias is copied into every row of the output first.
        profiler::KernelScope kernel(ctx, kernel_names::kBiasBroadcastCopy);
        const size_t row_bytes = static_cast<size_t>(out) * dtype_size(y.dtype());
#pragma omp parallel for if (rows * out >= kParallelMinElements) schedule(static)
        for (int64_t r = 0; r < rows; ++r) std::memcpy(element_ptr(y, r * out), bias.data(), row_bytes);
      }
      {
        profiler::KernelScope kernel(ctx, kernel_names::kGemm);
        gemm_kernel(ctx, kernel, x, xrows, w, layout, out, Tensor(), false, bias.defined() ? 1.0f : 0.0f, y);
      }
      if (gelu) gelu_tanh_kernel(ctx, y, rows, out);
      return;
    }
  }
}

}  // namespace blockscope::ops::cpu
