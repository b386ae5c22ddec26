// CPU activations: one "kernel" per call, rows (or chunks) in parallel, computed in f32.
#include <algorithm>
#include <vector>

#include "ops/activation/backends.h"
#include "ops/common/cpu_math.h"
#include "ops/common/cpu_rows.h"
#include "ops/common/rows.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {
namespace {

// x[0, n) = act(x[0, n)): the activation's vectorised row where it has one (ops/common/activations.h),
// else its host definition per element.
void activation_row(Activation act, float* x, int64_t n) {
  const ActivationInfo& info = activation_info(act);
  if (info.row != nullptr) {
    info.row(x, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) x[i] = info.value(x[i]);
}

// Elements per work item: big enough to amortise the dtype switch, small enough to balance.
constexpr int64_t kActivationChunk = 4096;

}  // namespace

void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act) {
  profiler::KernelScope kernel(ctx, kernel_names::activation(act));
  const int64_t n = x.numel();
  const int64_t chunks = (n + kActivationChunk - 1) / kActivationChunk;
  // Each chunk is loaded into f32 before it is stored, so y may alias x.
#pragma omp parallel if (n >= kParallelMinElements)
  {
    std::vector<float> buf(static_cast<size_t>(kActivationChunk));
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kActivationChunk, count = std::min(kActivationChunk, n - begin);
      load_row(x.dtype(), element_ptr(x, begin), buf.data(), count);
      activation_row(act, buf.data(), count);
      store_row(y.dtype(), buf.data(), element_ptr(y, begin), count);
    }
  }
}

void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act) {
  profiler::KernelScope kernel(ctx, kernel_names::gated_activation(act));
  RowLayout g, u;
  row_layout(gate, &g);  // checked by ops::gated_activation
  row_layout(up, &u);
  const int64_t rows = g.rows, cols = g.cols;  // gate, up, y: [rows, cols]
#pragma omp parallel if (rows * cols >= kParallelMinElements)
  {
    std::vector<float> gf(static_cast<size_t>(cols)), uf(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      load_row(gate.dtype(), element_ptr(gate, r * g.row_stride), gf.data(), cols);
      load_row(up.dtype(), element_ptr(up, r * u.row_stride), uf.data(), cols);
      activation_row(act, gf.data(), cols);
      for (int64_t j = 0; j < cols; ++j) gf[j] *= uf[j];
      store_row(y.dtype(), gf.data(), element_ptr(y, r * cols), cols);
    }
  }
}

}  // namespace blockscope::ops::cpu
