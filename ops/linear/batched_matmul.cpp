// Public batched matmul: validation once for every device, then run_op (ops/common/dispatch.h).
#include "ops/linear/batched_matmul.h"

#include "ops/linear/backends.h"
#include "ops/common/flops.h"
#include "ops/common/dispatch.h"
#include "runtime/error.h"

namespace blockscope::ops {
namespace {

// Product of every dimension but the last two (the flattened batch).
int64_t flat_batch(const Tensor& t) {
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) batch *= t.size(d);
  return batch;
}

}  // namespace

void batched_matmul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha,
                    int64_t b_group, const char* kernel_name) {
  const char* b_role = trans_b ? " (transposed: [..., n, k])" : " ([..., k, n])";
  for (const Tensor* t : {&a, &b, static_cast<const Tensor*>(&c)}) {
    const char* role = t == &a ? "a" : t == &b ? "b" : "c";
    BS_CHECK_INPUT(t->defined(), "batched_matmul: ", role, " is an undefined tensor");
    BS_CHECK_INPUT(t->device() == ctx.device(), "batched_matmul: ", role, " ", t->str(), " is on ",
                   t->device().str(), " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t->dim() >= 2, "batched_matmul: ", role, " ", t->str(), " must be at least 2-D");
    BS_CHECK_INPUT(t->is_contiguous(), "batched_matmul: ", role, " ", t->str(), " must be contiguous");
  }
  BS_CHECK_INPUT(a.dtype() == b.dtype() && a.dtype() == c.dtype(), "batched_matmul: a ", a.str(), ", b ", b.str(),
                 " and c ", c.str(), " must have the same dtype");
  BS_CHECK_INPUT(b_group >= 1, "batched_matmul: b_group must be at least 1, got ", b_group);

  const int64_t k = a.size(-1);
  const int64_t b_depth = trans_b ? b.size(-1) : b.size(-2);
  const int64_t n = trans_b ? b.size(-2) : b.size(-1);
  BS_CHECK_INPUT(b_depth == k, "batched_matmul: a ", a.str(), " has k = ", k, " but b ", b.str(), b_role, " has k = ",
                 b_depth);
  Shape expected_c = a.shape();
  expected_c.back() = n;
  BS_CHECK_INPUT(c.shape() == expected_c, "batched_matmul: c ", c.str(), " must be ", shape_str(expected_c),
                 " for a ", a.str(), " and b ", b.str(), b_role);
  BS_CHECK_INPUT(flat_batch(a) == b_group * flat_batch(b), "batched_matmul: the batch of a ", a.str(), " (",
                 flat_batch(a), ") must be b_group (", b_group, ") times the batch of b ", b.str(), " (",
                 flat_batch(b), ")");
  // Every element of c is a k-term dot product.
  const double flops = gemm_flops(c.numel(), 1, k);
  run_op(ctx,
         {"batched_matmul", kernel_name, profiler::Family::linear, {&a, &b}, {&c}, flops,
          c.numel() == 0},
         [&] { cpu::batched_matmul(ctx, a, b, c, trans_b, alpha, b_group, kernel_name); },
         [&] { cuda::batched_matmul(ctx, a, b, c, trans_b, alpha, b_group, kernel_name); });
}

}  // namespace blockscope::ops
