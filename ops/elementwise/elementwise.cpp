// Public elementwise ops: validation once for every device, then run_op (ops/common/dispatch.h).
#include "ops/elementwise/elementwise.h"

#include <algorithm>
#include <string>

#include "ops/common/checks.h"
#include "ops/common/dispatch.h"
#include "ops/common/flops.h"
#include "ops/elementwise/backends.h"
#include "runtime/error.h"

namespace blockscope::ops {
namespace {

// True when b's shape equals the last b.dim() dimensions of a's shape (row broadcast).
bool is_trailing_shape(const Tensor& a, const Tensor& b) {
  if (b.dim() == 0 || b.dim() > a.dim()) return false;
  return std::equal(b.shape().begin(), b.shape().end(), a.shape().end() - b.dim());
}

// Elements of scores [..., Sq, Sk] that the causal mask covers.
double masked_count(const Tensor& scores) {
  const int64_t sq = scores.size(-2), sk = scores.size(-1);
  return causal_masked_elements(sq * sk == 0 ? 0 : scores.numel() / (sq * sk), sq, sk);
}

void check_scores(const Context& ctx, const char* op, const Tensor& scores) {
  check_on_context(ctx, op, "scores", scores);
  BS_CHECK_INPUT(scores.dim() >= 2, op, ": scores ", scores.str(), " must be [..., Sq, Sk] (at least 2-D)");
  check_contiguous(op, "scores", scores);
}

}  // namespace

double causal_masked_elements(int64_t matrices, int64_t sq, int64_t sk) {
  // Row i keeps keys j <= i + Sk - Sq; the rest of its Sk are masked.
  const double per_matrix =
      sq <= 0 || sk <= 0 ? 0.0 : static_cast<double>(sq) * static_cast<double>(sk) - causal_visible_pairs(sq, sk);
  return per_matrix * static_cast<double>(matrices);
}

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  check_on_context(ctx, "add", "a", a);
  check_on_context(ctx, "add", "b", b);
  check_on_context(ctx, "add", "out", out);
  check_same_dtype("add", "a", a, "b", b);
  check_same_dtype("add", "a", a, "out", out);
  BS_CHECK_INPUT(a.shape() == b.shape() || is_trailing_shape(a, b), "add: b ", b.str(),
                 " must have the shape of a ", a.str(), " or of its last dimension(s) (row broadcast)");
  check_same_shape("add", "a", a, "out", out);
  check_contiguous("add", "a", a);
  check_contiguous("add", "b", b);
  check_contiguous("add", "out", out);
  run_op(ctx, {"add", "", profiler::Family::elementwise, {&a, &b}, {&out}, static_cast<double>(a.numel()),
                a.numel() == 0},
         [&] { cpu::add(ctx, a, b, out); }, [&] { cuda::add(ctx, a, b, out); });
}

void mul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  check_on_context(ctx, "mul", "a", a);
  check_on_context(ctx, "mul", "b", b);
  check_on_context(ctx, "mul", "out", out);
  check_same_dtype("mul", "a", a, "b", b);
  check_same_dtype("mul", "a", a, "out", out);
  check_same_shape("mul", "a", a, "b", b);
  check_same_shape("mul", "a", a, "out", out);
  check_contiguous("mul", "a", a);
  check_contiguous("mul", "b", b);
  check_contiguous("mul", "out", out);
  run_op(ctx, {"mul", "", profiler::Family::elementwise, {&a, &b}, {&out}, static_cast<double>(a.numel()),
                a.numel() == 0},
         [&] { cpu::mul(ctx, a, b, out); }, [&] { cuda::mul(ctx, a, b, out); });
}

void scale(Context& ctx, const Tensor& x, float factor, Tensor& out) {
  check_on_context(ctx, "scale", "x", x);
  check_on_context(ctx, "scale", "out", out);
  check_same_dtype("scale", "x", x, "out", out);
  check_same_shape("scale", "x", x, "out", out);
  check_contiguous("scale", "x", x);
  check_contiguous("scale", "out", out);
  run_op(ctx, {"scale", "", profiler::Family::elementwise, {&x}, {&out}, static_cast<double>(x.numel()),
                x.numel() == 0},
         [&] { cpu::scale(ctx, x, factor, out); }, [&] { cuda::scale(ctx, x, factor, out); });
}

void copy(Context& ctx, const Tensor& src, Tensor& dst) {
  check_on_context(ctx, "copy", "src", src);
  check_on_context(ctx, "copy", "dst", dst);
  check_same_dtype("copy", "src", src, "dst", dst);
  check_same_shape("copy", "src", src, "dst", dst);
  check_contiguous("copy", "dst", dst);
  run_op(ctx, {"copy", "", profiler::Family::copy, {&src}, {&dst}, 0.0,
                src.numel() == 0},
         [&] { cpu::copy(ctx, src, dst); }, [&] { cuda::copy(ctx, src, dst); });
}

void masked_fill_causal(Context& ctx, const Tensor& scores, float value, Tensor& out) {
  check_scores(ctx, "masked_fill_causal", scores);
  check_on_context(ctx, "masked_fill_causal", "out", out);
  check_same_dtype("masked_fill_causal", "scores", scores, "out", out);
  check_same_shape("masked_fill_causal", "scores", scores, "out", out);
  check_contiguous("masked_fill_causal", "out", out);
  BS_CHECK_INPUT(scores.numel() == 0 || scores.data() != out.data(), "masked_fill_causal: out ", out.str(),
                 " aliases scores; use masked_fill_causal_ for in-place masking");
  const double masked_bytes = masked_count(scores) * static_cast<double>(dtype_size(scores.dtype()));
  OpRecord record{"masked_fill", "", profiler::Family::elementwise, {&scores}, {&out}, 0.0, scores.numel() == 0,
                  /*causal_fill=*/true};
  record.with_bytes(record.bytes() + masked_bytes);  // the copy, then the masked elements again
  run_op(ctx, record,
         [&] { cpu::masked_fill_causal(ctx, scores, value, out); }, [&] { cuda::masked_fill_causal(ctx, scores, value, out); });
}

void masked_fill_causal_(Context& ctx, Tensor& scores, float value) {
  check_scores(ctx, "masked_fill_causal_", scores);
  const double masked_bytes = masked_count(scores) * static_cast<double>(dtype_size(scores.dtype()));
  run_op(ctx,
         OpRecord{"masked_fill_", "", profiler::Family::elementwise, {&scores}, {&scores}, 0.0, scores.numel() == 0,
                  /*causal_fill=*/true}
             .with_bytes(masked_bytes),
         [&] { cpu::masked_fill_causal_(ctx, scores, value); }, [&] { cuda::masked_fill_causal_(ctx, scores, value); });
}

}  // namespace blockscope::ops
