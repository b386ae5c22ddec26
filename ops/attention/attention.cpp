// Public attention: validation once for every device, then one of four paths.
// The composite paths (naive, inplace, fused_softmax) are written here once in terms of public
// ops, so they run on any device; flash dispatches to a per-device kernel.
#include "ops/attention/attention.h"

#include <limits>

#include "ops/attention/backends.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/batched_matmul.h"
#include "ops/softmax/softmax.h"
#include "ops/common/dispatch.h"
#include "ops/common/flops.h"
#include "runtime/error.h"

namespace blockscope::ops {
namespace {

// flash reads every tensor through its strides (the head dim contiguous), so q, k, v and out
// may be views such as the [B, S, H, D] halves of a fused QKV projection; the materialising
// paths hand q, k and v to GEMMs that need contiguous heads.
void check_attention_inputs(const Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, bool strided_ok) {
  const Tensor* tensors[] = {&q, &k, &v, &out};
  const char* roles[] = {"q", "k", "v", "out"};
  for (int i = 0; i < 4; ++i) {
    const Tensor& t = *tensors[i];
    BS_CHECK_INPUT(t.defined(), "attention: ", roles[i], " is an undefined tensor");
    BS_CHECK_INPUT(t.device() == ctx.device(), "attention: ", roles[i], " ", t.str(), " is on ", t.device().str(),
                   " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t.dim() == 4, "attention: ", roles[i], " ", t.str(), " must be 4-D ",
                   i == 1 || i == 2 ? "[B, Hkv, Sk, D]" : "[B, H, Sq, D]");
    if (strided_ok) {
      BS_CHECK_INPUT(t.stride(3) == 1 || t.size(3) == 1, "attention: ", roles[i], " ", t.str(),
                     " must have a contiguous head dim (stride 1 in the last dimension) for the flash path");
    } else {
      BS_CHECK_INPUT(t.is_contiguous(), "attention: ", roles[i], " ", t.str(),
                     " must be contiguous (only the flash path reads strided views)");
    }
    BS_CHECK_INPUT(t.dtype() == q.dtype(), "attention: ", roles[i], " ", t.str(), " and q ", q.str(),
                   " have different dtypes");
  }
  BS_CHECK_INPUT(k.shape() == v.shape(), "attention: k ", k.str(), " and v ", v.str(), " must have the same shape");
  BS_CHECK_INPUT(out.shape() == q.shape(), "attention: out ", out.str(), " must have the shape of q ", q.str());
  BS_CHECK_INPUT(k.size(0) == q.size(0), "attention: k ", k.str(), " and q ", q.str(), " have different batch sizes");
  BS_CHECK_INPUT(k.size(3) == q.size(3), "attention: k ", k.str(), " and q ", q.str(),
                 " have different head dims (D)");
  BS_CHECK_INPUT(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "attention: q ", q.str(), " has H = ", q.size(1),
                 " heads, which is not a multiple of the Hkv = ", k.size(1), " heads of k ", k.str());
}

// naive, inplace and fused_softmax: scores [B, H, Sq, Sk] in the tensor dtype, as PyTorch
// eager has them. GQA: the b_group = H / Hkv query heads sharing a kv head are read as one
// taller matrix.
void materialising_attention(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                             AttentionPath path, bool causal, float scale) {
  const int64_t group = q.size(1) / k.size(1);
  const Shape scores_shape{q.size(0), q.size(1), q.size(2), k.size(2)};
  const float minus_inf = -std::numeric_limits<float>::infinity();
  Tensor scores = ctx.empty(scores_shape, q.dtype());

  if (path == AttentionPath::fused_softmax) {
    // The GEMM applies the scale (alpha), so the fused softmax kernel scales by 1.
    batched_matmul(ctx, q, k, scores, /*trans_b=*/true, scale, group, kernel_names::kGemmQk);
    softmax_scale_causal(ctx, scores, 1.0f, causal, scores);
  } else {
    batched_matmul(ctx, q, k, scores, /*trans_b=*/true, 1.0f, group, kernel_names::kGemmQk);
    ops::scale(ctx, scores, scale, scores);
    if (causal && path == AttentionPath::inplace) {
      masked_fill_causal_(ctx, scores, minus_inf);
      softmax(ctx, scores, scores);
    } else if (causal) {
      // Out of place, as `scores.masked_fill(mask, -inf)`: a second [B, H, Sq, Sk] buffer.
      Tensor masked = ctx.empty(scores_shape, q.dtype());
      masked_fill_causal(ctx, scores, minus_inf, masked);
      softmax(ctx, masked, scores);  // the probabilities reuse the raw scores' buffer
    } else {
      softmax(ctx, scores, scores);
    }
  }
  batched_matmul(ctx, scores, v, out, /*trans_b=*/false, 1.0f, group, kernel_names::kGemmPv);
}

}  // namespace

double attention_flops(int64_t batch, int64_t heads, int64_t sq, int64_t sk, int64_t head_dim, bool causal) {
  // Two GEMMs of 2·D FLOPs per (query, key) pair, over the pairs the mask keeps: every pair
  // without one, those causal_visible_pairs counts with one (Sq = 1 over Sk keys: all Sk).
  const double pairs = causal ? causal_visible_pairs(sq, sk) : static_cast<double>(sq) * static_cast<double>(sk);
  return 4.0 * static_cast<double>(batch) * static_cast<double>(heads) * pairs * static_cast<double>(head_dim);
}

double attention_scores_bytes(int64_t batch, int64_t heads, int64_t sq, int64_t sk, DType dtype) {
  return static_cast<double>(batch) * static_cast<double>(heads) * static_cast<double>(sq) *
         static_cast<double>(sk) * static_cast<double>(dtype_size(dtype));
}

void attention(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, AttentionPath path,
               bool causal, float scale) {
  check_attention_inputs(ctx, q, k, v, out, path == AttentionPath::flash);
  const OpRecord record{"attention",
                        path_name(path),
                        profiler::Family::attention,
                        {&q, &k, &v},
                        {&out},
                        attention_flops(q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), causal),
                        out.numel() == 0};  // bytes: q, k, v read once, out written once
  if (path == AttentionPath::flash) {
    run_op(ctx, record, [&] { cpu::attention_flash(ctx, q, k, v, out, causal, scale); },
           [&] { cuda::attention_flash(ctx, q, k, v, out, causal, scale); });
    return;
  }
  run_composite_op(ctx, record, [&] { materialising_attention(ctx, q, k, v, out, path, causal, scale); });
}

}  // namespace blockscope::ops
