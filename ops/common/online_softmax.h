// The online-softmax state of one row, shared by the CUDA flash attention and flash decode
// kernels (ops/attention/flash_kernels.cuh, ops/decode_attention/cuda.cu) and by the split-key
// combine (ops/common/cuda/split_combine.cuh). Host and device: a plain header, so CPU tests
// check merge() with hand-worked values and against a one-pass float64 softmax.
//
// The unit: base 2. A score s enters as t = s · scale · log2(e) (the softmax scale and log2(e)
// folded into one constant, FlashParams::scale_log2 and DecodeParams::scale_log2), so that
//   m = max_j t_j,   l = Σ_j 2^(t_j − m),   lse = m + log2(l)   (= log2 Σ_j 2^(t_j)),
// and softmax(s)_j = 2^(t_j − lse). Why base 2: exp2 is the GPU's instruction (MUFU.EX2;
// expf is exp2 after a multiply by log2(e)), so folding the scale in costs one multiply per
// score instead of two; and with every kernel's partials in one unit, one combine merges
// both ops' splits with no conversion between them (decode's partials were natural-log (m, l)
// before, flash's a base-2 lse: two formulas for one merge).
//
// A row that has seen no visible key has m = −inf and l = 0: base() is then 0, so exp2 is
// taken of −inf (0), never of NaN (−inf − −inf), and lse() is −inf (a weight of 0 in a merge).
//
// The FP32-core flash kernel (flash_attention_simple_kernel) keeps its max in score units and
// scales the differences (a precision choice for f32 scores, see there); it writes no partial.
#pragma once

#include <cmath>

#include "ops/common/host_device.h"

namespace blockscope::ops {

namespace online_softmax_detail {
BS_HOST_DEVICE inline float exp2_of(float x) { return exp2f(x); }
BS_HOST_DEVICE inline double exp2_of(double x) { return exp2(x); }
BS_HOST_DEVICE inline float log2_of(float x) { return log2f(x); }
BS_HOST_DEVICE inline double log2_of(double x) { return log2(x); }
// fmax: a NaN operand is ignored, as the kernels' tile maxima (fmaxf) ignore it.
BS_HOST_DEVICE inline float max_of(float a, float b) { return fmaxf(a, b); }
BS_HOST_DEVICE inline double max_of(double a, double b) { return fmax(a, b); }
}  // namespace online_softmax_detail

// Real: float in the kernels; double in the tests (the same algebra as an oracle).
template <typename Real>
struct BasicOnlineSoftmax {
  Real m = -static_cast<Real>(INFINITY);  // running max of t (log2 units)
  Real l = 0;                             // running Σ 2^(t − m)

  // The state of a finished partial known only by its lse (a split of the combine): m = lse,
  // l = 1, since Σ 2^(t − lse) = 1; an empty partial (lse = −inf) is the empty state.
  BS_HOST_DEVICE static BasicOnlineSoftmax from_lse(Real lse) {
    BasicOnlineSoftmax s;
    if (lse != -static_cast<Real>(INFINITY)) s.m = lse, s.l = 1;
    return s;
  }

  // What exponents are taken against: m, or 0 while m = −inf.
  BS_HOST_DEVICE Real base() const { return m == -static_cast<Real>(INFINITY) ? Real(0) : m; }
  // 2^(t − base()): the weight of a value t against this state's max.
  BS_HOST_DEVICE Real weight(Real t) const { return online_softmax_detail::exp2_of(t - base()); }

  // The first half of an update by a tile whose largest t is tile_max: the max moves to
  // max(m, tile_max) and l is rescaled to it. Returns the rescale factor 2^(m_old − m_new)
  // (0 while nothing was seen), by which the caller multiplies its running outputs; it then
  // adds the tile's weight(t) to l (and weight(t)·v to its outputs).
  BS_HOST_DEVICE Real rescale(Real tile_max) {
    const Real new_m = online_softmax_detail::max_of(m, tile_max);
    const Real new_base = new_m == -static_cast<Real>(INFINITY) ? Real(0) : new_m;
    const Real factor = online_softmax_detail::exp2_of(m - new_base);
    m = new_m;
    l *= factor;
    return factor;
  }

  // log2 Σ 2^t over what was seen; −inf for nothing.
  BS_HOST_DEVICE Real lse() const {
    return l > 0 ? m + online_softmax_detail::log2_of(l) : -static_cast<Real>(INFINITY);
  }
  // 1 / l, or 0 for a row that saw nothing (its output is zeros).
  BS_HOST_DEVICE Real inverse_sum() const { return l > 0 ? Real(1) / l : Real(0); }
};

using OnlineSoftmax = BasicOnlineSoftmax<float>;

// One value t: rescale to it, add its weight. Returns the rescale factor of the outputs.
template <typename Real>
BS_HOST_DEVICE inline Real update(BasicOnlineSoftmax<Real>& s, Real t) {
  const Real factor = s.rescale(t);
  s.l += s.weight(t);
  return factor;
}

// The state of the union of two disjoint sets of values:
//   M = max(a.m, b.m),   L = a.l · 2^(a.m − M) + b.l · 2^(b.m − M).
// Associative and commutative (up to rounding); merging the empty state changes nothing.
// A normalised partial output o_a enters the merged one with merge_factor(a, merged).
template <typename Real>
BS_HOST_DEVICE inline BasicOnlineSoftmax<Real> merge(const BasicOnlineSoftmax<Real>& a,
                                                    const BasicOnlineSoftmax<Real>& b) {
  BasicOnlineSoftmax<Real> r;
  r.m = online_softmax_detail::max_of(a.m, b.m);
  const Real base = r.base();
  r.l = (a.l > 0 ? a.l * online_softmax_detail::exp2_of(a.m - base) : Real(0)) +
        (b.l > 0 ? b.l * online_softmax_detail::exp2_of(b.m - base) : Real(0));
  return r;
}

// The share of `part` in `merged` (merged = merge of part with others): part.l · 2^(part.m −
// merged.m) / merged.l, the weight its normalised output has in the merged normalised output.
template <typename Real>
BS_HOST_DEVICE inline Real merge_factor(const BasicOnlineSoftmax<Real>& part, const BasicOnlineSoftmax<Real>& merged) {
  if (!(part.l > 0) || !(merged.l > 0)) return Real(0);
  return part.l * merged.weight(part.m) / merged.l;
}

// The split-key combine of one output element: `splits` partials, partial i with lse
// lse[i · lse_stride] and normalised output out[i · out_stride] (one layout for every caller:
// ops/common/cuda/split_combine.cuh). Two passes: the merged state of every split, then
// Σ_i 2^(lse_i − M) · o_i / L. A row no split saw (every lse −inf) is 0.
template <typename Real, typename Index>
BS_HOST_DEVICE inline Real combine_splits(const Real* lse, Index lse_stride, const Real* out, Index out_stride,
                                          int splits) {
  BasicOnlineSoftmax<Real> total;
  for (int i = 0; i < splits; ++i) total = merge(total, BasicOnlineSoftmax<Real>::from_lse(lse[i * lse_stride]));
  if (!(total.l > 0)) return Real(0);
  Real sum = 0;
  for (int i = 0; i < splits; ++i) {
    const Real partial_lse = lse[i * lse_stride];
    if (partial_lse != -static_cast<Real>(INFINITY)) sum += total.weight(partial_lse) * out[i * out_stride];
  }
  return sum / total.l;
}

}  // namespace blockscope::ops
