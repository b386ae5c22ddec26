// Rotary position embedding: validation, then run_op (ops/common/dispatch.h).
//
// Convention (Hugging Face Llama, rotate_half): for a head vector x of size D and h = D / 2,
//   y[d]     = x[d]     · cos(a_d) - x[d + h] · sin(a_d)
//   y[d + h] = x[d + h] · cos(a_d) + x[d]     · sin(a_d),     d < h,
// with a_d = pos · inv_freq[d]. Like HF, the frequencies and angles are float32 quantities:
// inv_freq[d] = float(theta^(-2d/D)) (evaluated in double, then rounded once — HF evaluates
// it in float32, which can differ from this by an ulp), a_d = float(float(pos) · inv_freq[d])
// (HF's float32 matmul), and cos/sin are taken of that float angle. For large positions this
// float angle is what HF computes, not the exact pos·theta^(-2d/D). The rotation is done in
// f32 and rounded once to the output dtype (HF rounds cos/sin to the dtype first; we do not).
#include "ops/rope/rope.h"

#include "ops/rope/backends.h"
#include "ops/common/dispatch.h"
#include "runtime/error.h"

namespace blockscope::ops {

namespace {

void rope_checked(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset, IndexView positions) {
  BS_CHECK_INPUT(x.defined(), "rope: input x is undefined");
  BS_CHECK_INPUT(y.defined(), "rope: output y is undefined");
  for (const Tensor* t : {&x, static_cast<const Tensor*>(&y)}) {
    BS_CHECK_INPUT(t->device() == ctx.device(), "rope: tensor ", t->str(), " is on ", t->device().str(),
                   " but the context runs on ", ctx.device().str());
  }
  BS_CHECK_INPUT(x.dim() == 4, "rope: x must be [B, H, S, D], got ", x.str());
  BS_CHECK_INPUT(x.size(3) % 2 == 0, "rope: head dim D must be even, got x ", x.str());
  BS_CHECK_INPUT(y.shape() == x.shape(), "rope: output y ", y.str(), " must have x's shape ", x.str());
  BS_CHECK_INPUT(y.dtype() == x.dtype(), "rope: dtypes differ: x ", x.str(), ", y ", y.str());
  const bool same_view = y.storage() == x.storage() && y.offset() == x.offset() && y.strides() == x.strides();
  BS_CHECK_INPUT(y.is_contiguous() || same_view, "rope: output y ", y.str(),
                 " must be contiguous or the very same view as x (in place)");
  BS_CHECK_INPUT(theta > 0.0f, "rope: theta must be > 0, got ", theta);
  BS_CHECK_INPUT(position_offset >= 0, "rope: position_offset must be >= 0, got ", position_offset);
  if (positions.defined()) {
    BS_CHECK_INPUT(positions.count == x.size(0), "rope: ", positions.count, " positions for B = ", x.size(0),
                   " sequences of x ", x.str());
    check_index_view(ctx, "rope", "the positions", positions);
    for (int64_t b = 0; b < positions.count; ++b)  // a bounded view: its lowest positions
      BS_CHECK_INPUT(positions.lowest(b) >= 0, "rope: sequence ", b, " has position ", positions.lowest(b),
                     "; it must be >= 0");
  }
  // Per element: two multiplies and one add (cos/sin tables not counted).
  run_op(ctx,
         {"rope", "", profiler::Family::rope, {&x}, {&y}, kRopeFlopsPerElement * static_cast<double>(x.numel()),
          x.numel() == 0},
         [&] { cpu::rope(ctx, x, y, theta, position_offset, positions); },
         [&] { cuda::rope(ctx, x, y, theta, position_offset, positions); });
}

}  // namespace

void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset) {
  rope_checked(ctx, x, y, theta, position_offset, IndexView{});
}

void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, IndexView positions) {
  BS_CHECK_INPUT(positions.defined(), "rope: per-sequence positions are undefined");
  rope_checked(ctx, x, y, theta, 0, positions);
}

}  // namespace blockscope::ops
