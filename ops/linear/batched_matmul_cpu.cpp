// CPU batched matmul, GQA folded into the rows of A: one strided-batched oneDNN matmul in the
// tensors' own dtype (cpu::fused_matmul); without it, one f32 GEMM per kv batch entry.
#include <algorithm>

#include "ops/linear/backends.h"
#include "ops/common/cpu_rows.h"
#include "profiler/scope.h"
#include "runtime/cpu/gemm.h"

namespace blockscope::ops::cpu {
namespace {

// Converts n elements between storage dtype and f32 in parallel (large operands).
void load_parallel(DType dtype, const void* src, float* dst, int64_t n) {
  constexpr int64_t kPiece = 1 << 14;
#pragma omp parallel for schedule(static) if (n > kPiece)
  for (int64_t start = 0; start < n; start += kPiece) {
    load_row(dtype, element_at(dtype, src, start), dst + start, std::min(kPiece, n - start));
  }
}
void store_parallel(DType dtype, const float* src, void* dst, int64_t n) {
  constexpr int64_t kPiece = 1 << 14;
#pragma omp parallel for schedule(static) if (n > kPiece)
  for (int64_t start = 0; start < n; start += kPiece) {
    store_row(dtype, src + start, element_at(dtype, dst, start), std::min(kPiece, n - start));
  }
}

}  // namespace

void batched_matmul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha,
                    int64_t b_group, const char* kernel_name) {
  profiler::KernelScope kernel(ctx, kernel_name);
  const DType dtype = a.dtype();
  const int64_t k = a.size(-1);
  const int64_t n = c.size(-1);
  // b_group consecutive A matrices share one B matrix and are contiguous: read them as one
  // [b_group · m, k] matrix (GQA without a copy).
  const int64_t rows = b_group * a.size(-2);
  const int64_t a_block = rows * k, b_block = k * n, c_block = rows * n;
  const int64_t ldb = trans_b ? k : n;
  const int64_t batch_b = c.numel() / c_block;  // c is not empty (the public op returns early)

  blockscope::cpu::Matmul mm;
  mm.batch = batch_b;
  mm.m = rows;
  mm.n = n;
  mm.k = k;
  mm.a = {a.data(), dtype, k, a_block, false};
  mm.b = {b.data(), dtype, ldb, b_block, trans_b};
  mm.c = c.data();
  mm.c_dtype = dtype;
  mm.ldc = n;
  mm.c_batch_stride = c_block;
  mm.alpha = alpha;
  if (const char* ran = k > 0 ? blockscope::cpu::fused_matmul(mm) : nullptr) {
    kernel.set_implementation(ran);
    return;
  }
  kernel.set_implementation(std::string(blockscope::cpu::sgemm_implementation()) +
                            (dtype == DType::f32 ? "" : ", f32 widened") + ", per batch entry");

  if (dtype == DType::f32) {
    const float* a_data = a.data_as<const float>();
    const float* b_data = b.data_as<const float>();
    float* c_data = c.data_as<float>();
    for (int64_t batch = 0; batch < batch_b; ++batch) {
      blockscope::cpu::sgemm(false, trans_b, rows, n, k, alpha, a_data + batch * a_block, k,
                             b_data + batch * b_block, ldb, 0.0f, c_data + batch * c_block, n);
    }
    return;
  }

  // f16 / bf16: stage one batch entry at a time in f32 scratch (seen by the allocator stats).
  Tensor a32 = ctx.empty({a_block}, DType::f32);
  Tensor b32 = ctx.empty({b_block}, DType::f32);
  Tensor c32 = ctx.empty({c_block}, DType::f32);
  for (int64_t batch = 0; batch < batch_b; ++batch) {
    load_parallel(dtype, element_at(dtype, a.data(), batch * a_block), a32.data_as<float>(), a_block);
    load_parallel(dtype, element_at(dtype, b.data(), batch * b_block), b32.data_as<float>(), b_block);
    blockscope::cpu::sgemm(false, trans_b, rows, n, k, alpha, a32.data_as<const float>(), k,
                           b32.data_as<const float>(), ldb, 0.0f, c32.data_as<float>(), n);
    store_parallel(dtype, c32.data_as<const float>(), element_at(dtype, c.data(), batch * c_block), c_block);
  }
}

}  // namespace blockscope::ops::cpu
