// CPU RoPE (convention in ops/rope/rope.cpp): one "kernel"; the cos/sin table [S][cos | sin][D/2]
// of ops/rope/rope_table.h (the CUDA backend's too) is built first, then every (b, h, s) head
// vector is rotated in f32, each product rounded before the sum (no FMA: the CUDA kernel rounds
// the same way, so both backends give the same bits). Each vector is loaded whole before it is
// stored, so y may be the same view as x (in place).
#include <cmath>
#include <vector>

#include "ops/rope/backends.h"
#include "ops/common/cpu_rows.h"
#include "ops/common/rows.h"
#include "ops/rope/rope_table.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {

void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset, IndexView positions) {
  profiler::KernelScope kernel(ctx, kernel_names::kRope);
  const int64_t batch = x.size(0), heads = x.size(1), seq = x.size(2), dim = x.size(3), half = dim / 2;
  if (x.numel() == 0) return;

  // The table both backends use (ops/rope/rope_table.h): [S][cos | sin][D/2], or with
  // per-sequence positions [B · S][cos | sin][D/2].
  const std::vector<float> inv_freq = rope_inv_freq(theta, dim);
  const int64_t table_rows = positions.defined() ? batch * seq : seq;
  Tensor table = ctx.empty({table_rows, 2, half}, DType::f32);
  float* rows = table.data_as<float>();
#pragma omp parallel for if (table_rows * half >= kParallelMinElements) schedule(static)
  for (int64_t r = 0; r < table_rows; ++r) {
    const int64_t position = positions.defined() ? positions[r / seq] + r % seq : position_offset + r;
    rope_table_row(inv_freq, position, rows + r * 2 * half);
  }

  const DType dtype = x.dtype();
  const size_t esize = dtype_size(dtype);
  const int64_t xs3 = x.stride(3), ys3 = y.stride(3);
#pragma omp parallel if (x.numel() >= kParallelMinElements)
  {
    std::vector<float> in(static_cast<size_t>(dim)), out(static_cast<size_t>(dim));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < batch * heads * seq; ++i) {  // i = (b · H + h) · S + s
      const int64_t s = i % seq, h = (i / seq) % heads, b = i / (seq * heads);
      const char* src = static_cast<const char*>(x.data()) +
                        (b * x.stride(0) + h * x.stride(1) + s * x.stride(2)) * static_cast<int64_t>(esize);
      char* dst = static_cast<char*>(y.data()) +
                  (b * y.stride(0) + h * y.stride(1) + s * y.stride(2)) * static_cast<int64_t>(esize);
      if (xs3 == 1) {
        load_row(dtype, src, in.data(), dim);
      } else {
        for (int64_t d = 0; d < dim; ++d) in[d] = load_as_float(dtype, src + d * xs3 * static_cast<int64_t>(esize));
      }
      const float* c = rows + (positions.defined() ? b * seq + s : s) * 2 * half;
      const float* sn = c + half;
      for (int64_t d = 0; d < half; ++d) {
        out[d] = in[d] * c[d] - in[d + half] * sn[d];
        out[d + half] = in[d + half] * c[d] + in[d] * sn[d];
      }
      if (ys3 == 1) {
        store_row(dtype, out.data(), dst, dim);
      } else {
        for (int64_t d = 0; d < dim; ++d) store_from_float(dtype, dst + d * ys3 * static_cast<int64_t>(esize), out[d]);
      }
    }
  }
}

}  // namespace blockscope::ops::cpu
