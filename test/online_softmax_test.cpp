// The shared online-softmax state (ops/common/online_softmax.h): update(), merge() and the
// split-key combine the CUDA flash attention and flash decode kernels use, on the host (the
// header is host and device). Hand-worked values first, then the combine against a one-pass
// float64 softmax on random rows split at random points.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/common/online_softmax.h"

namespace {

using blockscope::ops::BasicOnlineSoftmax;
using blockscope::ops::OnlineSoftmax;
using State = BasicOnlineSoftmax<double>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The state of values t (log2 units) by update(), one value at a time, and the weighted mean of
// vs: Σ 2^(t − m)·v / l, the normalised partial output a kernel writes.
template <typename Real>
BasicOnlineSoftmax<Real> run(const std::vector<Real>& t, const std::vector<Real>& v, Real& out) {
  BasicOnlineSoftmax<Real> s;
  Real acc = 0;
  for (size_t j = 0; j < t.size(); ++j) {
    const Real factor = update(s, t[j]);
    acc = acc * factor + s.weight(t[j]) * v[j];
  }
  out = acc * s.inverse_sum();
  return s;
}

// Worked by hand (every number exact in binary):
//   a: t = {3, 1}     m = 3, l = 2^0 + 2^-2 = 1.25
//   b: t = {4, 2, 2}  m = 4, l = 2^0 + 2^-2 + 2^-2 = 1.5
//   merge(a, b): M = max(3, 4) = 4, L = 1.25 · 2^(3−4) + 1.5 · 2^0 = 0.625 + 1.5 = 2.125,
//   the one-pass sum over all five: 2^-1 + 2^-3 + 2^0 + 2^-2 + 2^-2 = 2.125 as well.
//   lse = 4 + log2(2.125); a's share of the merged sum: 0.625 / 2.125 = 5/17.
//   With values v_a = {10, 2}, v_b = {1, −4, 8}: o_a = (10 + 0.25·2) / 1.25 = 8.4,
//   o_b = (1 − 1 + 2) / 1.5 = 4/3, and the combined output
//   (2^-1·10 + 2^-3·2 + 1 − 2^-2·4 + 2^-2·8) / 2.125 = 7.25 / 2.125 = 58/17.
TEST(OnlineSoftmax, MergeOfTwoHandWorkedStates) {
  State s;
  EXPECT_EQ(update(s, 3.0), 0.0);  // nothing seen: the outputs' factor is 0
  EXPECT_EQ(s.m, 3.0);
  EXPECT_EQ(s.l, 1.0);
  EXPECT_EQ(update(s, 1.0), 1.0);  // the max does not move
  EXPECT_EQ(s.l, 1.25);

  double o_a = 0, o_b = 0;
  const State a = run<double>({3, 1}, {10, 2}, o_a);
  const State b = run<double>({4, 2, 2}, {1, -4, 8}, o_b);
  EXPECT_EQ(a.m, 3.0);
  EXPECT_EQ(a.l, 1.25);
  EXPECT_EQ(b.m, 4.0);
  EXPECT_EQ(b.l, 1.5);
  EXPECT_DOUBLE_EQ(o_a, 8.4);
  EXPECT_DOUBLE_EQ(o_b, 4.0 / 3.0);

  for (const State& merged : {merge(a, b), merge(b, a)}) {
    EXPECT_EQ(merged.m, 4.0);
    EXPECT_EQ(merged.l, 2.125);
    EXPECT_DOUBLE_EQ(merged.lse(), 4.0 + std::log2(2.125));
    EXPECT_DOUBLE_EQ(merge_factor(a, merged), 5.0 / 17.0);
    EXPECT_DOUBLE_EQ(merge_factor(b, merged), 12.0 / 17.0);
  }
  // The same in float, as the kernels hold it (exact too).
  const OnlineSoftmax af{3.0f, 1.25f}, bf{4.0f, 1.5f};
  EXPECT_EQ(merge(af, bf).m, 4.0f);
  EXPECT_EQ(merge(af, bf).l, 2.125f);

  // The combine sees each split only by its lse and normalised output.
  const double lse[2] = {a.lse(), b.lse()}, out[2] = {o_a, o_b};
  EXPECT_NEAR(blockscope::ops::combine_splits(lse, 1, out, 1, 2), 58.0 / 17.0, 1e-14);
}

// The empty state (no visible key): m = −inf, l = 0, lse −inf; merging it changes nothing, and
// nothing in it is NaN.
TEST(OnlineSoftmax, TheEmptyStateIsTheIdentity) {
  const State empty;
  EXPECT_EQ(empty.m, -kInf);
  EXPECT_EQ(empty.l, 0.0);
  EXPECT_EQ(empty.lse(), -kInf);
  EXPECT_EQ(empty.base(), 0.0);
  EXPECT_EQ(empty.inverse_sum(), 0.0);
  const State a{3.0, 1.25};
  for (const State& merged : {merge(empty, a), merge(a, empty)}) {
    EXPECT_EQ(merged.m, a.m);
    EXPECT_EQ(merged.l, a.l);
  }
  const State both = merge(empty, empty);
  EXPECT_EQ(both.m, -kInf);
  EXPECT_EQ(both.l, 0.0);
  State rescaled;
  EXPECT_EQ(rescaled.rescale(-kInf), 0.0);  // a fully masked tile: exp2(−inf), not NaN
  EXPECT_EQ(rescaled.l, 0.0);
  EXPECT_EQ(State::from_lse(-kInf).l, 0.0);
  // A row no split saw is zeros, and an empty split's output is not read (NaN here).
  const double lse[2] = {-kInf, -kInf}, out[2] = {std::nan(""), std::nan("")};
  EXPECT_EQ(blockscope::ops::combine_splits(lse, 1, out, 1, 2), 0.0);
  const double lse1[2] = {-kInf, 2.0}, out1[2] = {std::nan(""), 7.0};
  EXPECT_EQ(blockscope::ops::combine_splits(lse1, 1, out1, 1, 2), 7.0);
}

// Random rows (logits up to ±40 in log2 units, up to 300 values), split at random points into
// up to 8 parts (empty ones included): the combine of the parts' (lse, output) equals the
// one-pass softmax-weighted mean, in float64 to 1e-12 and, in float as the kernels run it, to
// 1e-5 of the row's largest |v|.
TEST(OnlineSoftmax, CombineOfRandomSplitsIsTheOnePassSoftmax) {
  std::mt19937_64 rng(20261206);
  std::uniform_real_distribution<double> logit(-40.0, 40.0), value(-1.0, 1.0);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 300);
    const int splits = 1 + static_cast<int>(rng() % 8);
    const double spread = trial % 2 ? 1.0 : 0.1;  // peaked and flat rows
    std::vector<double> t(n), v(n);
    for (int j = 0; j < n; ++j) t[j] = logit(rng) * spread, v[j] = value(rng);
    // One pass: max, Σ 2^(t − max), Σ 2^(t − max)·v.
    double top = -kInf;
    for (double x : t) top = std::max(top, x);
    double sum = 0, weighted = 0;
    for (int j = 0; j < n; ++j) sum += std::exp2(t[j] - top), weighted += std::exp2(t[j] - top) * v[j];
    const double want = weighted / sum;

    // Split points: sorted random cuts (repeats make empty splits).
    std::vector<int> cuts = {0};
    for (int i = 1; i < splits; ++i) cuts.push_back(static_cast<int>(rng() % (n + 1)));
    cuts.push_back(n);
    std::sort(cuts.begin() + 1, cuts.end() - 1);
    std::vector<double> lse(splits), out(splits);
    std::vector<float> lse_f(splits), out_f(splits);
    State merged_by_hand;
    for (int i = 0; i < splits; ++i) {
      const std::vector<double> ti(t.begin() + cuts[i], t.begin() + cuts[i + 1]);
      const std::vector<double> vi(v.begin() + cuts[i], v.begin() + cuts[i + 1]);
      const State s = run(ti, vi, out[i]);
      lse[i] = s.lse();
      merged_by_hand = merge(merged_by_hand, s);
      const std::vector<float> tf(ti.begin(), ti.end()), vf(vi.begin(), vi.end());
      const OnlineSoftmax sf = run(tf, vf, out_f[i]);
      lse_f[i] = sf.lse();
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", n " << n << ", splits " << splits);
    EXPECT_EQ(merged_by_hand.m, top);
    EXPECT_NEAR(merged_by_hand.l, sum, 1e-12 * sum);
    EXPECT_NEAR(blockscope::ops::combine_splits(lse.data(), 1, out.data(), 1, splits), want, 1e-12);
    EXPECT_NEAR(blockscope::ops::combine_splits(lse_f.data(), 1, out_f.data(), 1, splits), want, 1e-5);
  }
}

}  // namespace
