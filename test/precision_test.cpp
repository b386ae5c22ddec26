// FP8 as a storage dtype (runtime/dtype.h) and the precision ops (ops/precision/) beyond what the
// op harness checks: the dtype's facts worked out by hand, the float64 reference's rounding
// against hand values and against runtime/fp8.h, and the ops' special values on every device --
// NaN through amax and quantize, saturation, signed zeros, an empty x with a running amax, and
// the round trip a per-tensor recipe promises (error at most 2^-4 in e4m3, 2^-3 in e5m2, of
// values in the normal range once scaled by max / amax).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/precision/precision.h"
#include "profiler/recorder.h"
#include "reference/fp8_reference.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Fp8DType, FactsWorkedByHand) {
  EXPECT_EQ(dtype_size(DType::fp8_e4m3), 1u);
  EXPECT_EQ(dtype_size(DType::fp8_e5m2), 1u);
  EXPECT_STREQ(dtype_name(DType::fp8_e4m3), "fp8_e4m3");
  EXPECT_EQ(dtype_epsilon(DType::fp8_e4m3), 0.0625);  // 3 mantissa bits: 2^-4
  EXPECT_EQ(dtype_epsilon(DType::fp8_e5m2), 0.125);   // 2 mantissa bits: 2^-3
  EXPECT_EQ(dtype_max_finite(DType::fp8_e4m3), 448.0);  // 1.75 · 2^8
  EXPECT_EQ(dtype_max_finite(DType::fp8_e5m2), 57344.0);  // 1.75 · 2^15
  EXPECT_EQ(dtype_max_finite(DType::f16), 65504.0);
  for (const char* alias : {"fp8_e4m3", "float8_e4m3fn", "e4m3"}) {
    DType d = DType::f32;
    EXPECT_TRUE(parse_dtype(alias, &d)) << alias;
    EXPECT_EQ(d, DType::fp8_e4m3) << alias;
  }
  for (const char* alias : {"fp8_e5m2", "float8_e5m2", "e5m2"}) {
    DType d = DType::f32;
    EXPECT_TRUE(parse_dtype(alias, &d)) << alias;
    EXPECT_EQ(d, DType::fp8_e5m2) << alias;
  }
  DType d;
  EXPECT_FALSE(parse_dtype("fp8", &d));
  EXPECT_FALSE(parse_dtype("e4m3fnuz", &d));  // AMD's variant: another format
  EXPECT_TRUE(is_fp8(DType::fp8_e5m2));
  EXPECT_FALSE(is_fp8(DType::bf16));
  for (DType c : kComputeDTypes) EXPECT_FALSE(is_fp8(c));
}

// 0.3 lies in [0.25, 0.5): e4m3 steps by 2^-5 there (0.25 + 2 · 2^-5 = 0.3125 is nearest), e5m2
// by 2^-4 (0.25 + 2^-4 = 0.3125 too). Saturation keeps the sign; NaN stays NaN.
TEST(Fp8DType, StoringRoundsAndSaturates) {
  Context ctx(Device::cpu());
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    SCOPED_TRACE(dtype_name(fp8));
    const double max = dtype_max_finite(fp8);
    Tensor t = ctx.empty({7}, fp8);
    from_floats(t, {0.3f, -0.3f, 1e6f, -kInf, kNaN, -0.0f, 1.0f});
    const std::vector<float> back = to_floats(t);
    EXPECT_EQ(back[0], 0.3125f);
    EXPECT_EQ(back[1], -0.3125f);
    EXPECT_EQ(back[2], max);
    EXPECT_EQ(back[3], -max);
    EXPECT_TRUE(std::isnan(back[4]));
    EXPECT_TRUE(back[5] == 0.0f && std::signbit(back[5]));
    EXPECT_EQ(back[6], 1.0f);
    EXPECT_EQ(static_cast<const uint8_t*>(t.data())[4], 0x7F) << "the canonical NaN code";
    EXPECT_EQ(round_to(fp8, 1e6f), static_cast<float>(max));
  }
}

// The reference's rounding, by hand: ties go to the even mantissa; past the largest, saturation.
TEST(Fp8Reference, HandValues) {
  using reference::Fp8Kind;
  using reference::fp8_round;
  EXPECT_EQ(fp8_round(0.3, Fp8Kind::e4m3), 0.3125);
  EXPECT_EQ(fp8_round(449.0, Fp8Kind::e4m3), 448.0);
  EXPECT_EQ(fp8_round(-1e30, Fp8Kind::e4m3), -448.0);
  EXPECT_EQ(fp8_round(std::ldexp(1.0, -10), Fp8Kind::e4m3), 0.0);  // half of 2^-9: tie to 0 (even)
  EXPECT_EQ(fp8_round(3 * std::ldexp(1.0, -10), Fp8Kind::e4m3), std::ldexp(1.0, -8));  // 1.5 · 2^-9: to 2 · 2^-9
  EXPECT_EQ(fp8_round(17.0, Fp8Kind::e4m3), 16.0);   // 16 and 18 neighbour it: tie to 16 (mantissa 0)
  EXPECT_EQ(fp8_round(19.0, Fp8Kind::e4m3), 20.0);   // 18 (m = 1) and 20 (m = 2): to 20
  EXPECT_EQ(fp8_round(5.0, Fp8Kind::e5m2), 5.0);
  EXPECT_EQ(fp8_round(4.5, Fp8Kind::e5m2), 4.0);     // 4 (m = 0) and 5 (m = 1): to 4
  EXPECT_EQ(fp8_round(60000.0, Fp8Kind::e5m2), 57344.0);
  EXPECT_EQ(reference::fp8_largest(Fp8Kind::e5m2), 57344.0);
  EXPECT_TRUE(std::isnan(fp8_round(std::nan(""), Fp8Kind::e5m2)));
}

// The reference (a list of values, the nearest picked) and runtime/fp8.h (bit arithmetic) agree
// on fresh random floats across both formats' ranges.
TEST(Fp8Reference, AgreesWithTheRuntimeConversions) {
  const uint64_t seed = bt::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(Device::cpu());
  const Tensor x = bt::random_tensor(ctx, {20000}, DType::f32, seed, -1.0f, 1.0f);
  const std::vector<float> v = to_floats(x);
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    const reference::Fp8Kind kind = fp8 == DType::fp8_e4m3 ? reference::Fp8Kind::e4m3 : reference::Fp8Kind::e5m2;
    for (size_t i = 0; i < v.size(); ++i) {
      const float value = std::ldexp(v[i], static_cast<int>(i % 40) - 20);  // 2^-21 .. 2^19 in magnitude
      ASSERT_EQ(static_cast<double>(round_to(fp8, value)), reference::fp8_round(value, kind))
          << dtype_name(fp8) << " " << value;
    }
  }
}

class PrecisionOps : public ::testing::TestWithParam<Device> {};

Tensor scalar(Context& ctx, float value) { return bt::tensor_of(ctx, {1}, DType::f32, {value}); }
// A 1-D tensor of `values`.
Tensor filled(Context& ctx, const std::vector<float>& values, DType dtype) {
  return bt::tensor_of(ctx, {static_cast<int64_t>(values.size())}, dtype, values);
}

TEST_P(PrecisionOps, AmaxKeepsNanAndInfinity) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor out = scalar(ctx, 123.0f);
  ops::amax(ctx, filled(ctx, {1.0f, -7.5f, 2.0f}, DType::bf16), out);
  EXPECT_EQ(to_floats(out)[0], 7.5f);
  ops::amax(ctx, filled(ctx, {1.0f, -kInf, 2.0f}, DType::f32), out);
  EXPECT_EQ(to_floats(out)[0], kInf);
  std::vector<float> with_nan(3000, 0.5f);
  with_nan[2017] = kNaN;  // in a later block on CUDA
  with_nan[5] = -1e30f;
  ops::amax(ctx, filled(ctx, with_nan, DType::f32), out);
  EXPECT_TRUE(std::isnan(to_floats(out)[0]));
  ops::amax(ctx, ctx.empty({0, 4}, DType::f16), out);  // nothing: 0, overwriting the NaN
  EXPECT_EQ(to_floats(out)[0], 0.0f);
}

TEST_P(PrecisionOps, QuantizeSaturatesKeepsSignsAndNan) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  const Tensor x = filled(ctx, {1e4f, -1e4f, -0.0f, kNaN, 0.3f, 1e-9f}, DType::f32);
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    SCOPED_TRACE(dtype_name(fp8));
    Tensor y = ctx.empty({6}, fp8);
    ops::quantize(ctx, x, scalar(ctx, 10.0f), y);
    Context cpu(Device::cpu());
    const Tensor codes = cpu.copy_from(y);
    const uint8_t* c = static_cast<const uint8_t*>(codes.data());
    const uint8_t max_code = fp8 == DType::fp8_e4m3 ? 0x7E : 0x7B;
    EXPECT_EQ(c[0], max_code);
    EXPECT_EQ(c[1], 0x80 | max_code);
    EXPECT_EQ(c[2], 0x80) << "-0 keeps its sign";
    EXPECT_EQ(c[3], 0x7F) << "NaN: the canonical code";
    EXPECT_EQ(to_floats(codes)[4], 3.0f);  // 0.3 · 10 = 3 exactly after f32 rounding? 3.0000002 -> 3
    EXPECT_EQ(c[5], 0x00) << "1e-8 underflows to +0";
  }
}

TEST_P(PrecisionOps, RunningAmaxTakesTheMaximumAndNan) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor y = ctx.empty({3}, DType::fp8_e4m3);
  Tensor running = scalar(ctx, 5.0f);
  ops::quantize(ctx, filled(ctx, {1.0f, -2.0f, 3.0f}, DType::bf16), scalar(ctx, 1.0f), y, running);
  EXPECT_EQ(to_floats(running)[0], 5.0f) << "max(5, 3)";
  ops::quantize(ctx, filled(ctx, {1.0f, -9.0f, 3.0f}, DType::bf16), scalar(ctx, 1.0f), y, running);
  EXPECT_EQ(to_floats(running)[0], 9.0f);
  ops::quantize(ctx, filled(ctx, {1.0f, kNaN, 3.0f}, DType::f32), scalar(ctx, 1.0f), y, running);
  EXPECT_TRUE(std::isnan(to_floats(running)[0]));

  // An empty x: nothing runs, the running amax stays.
  Tensor kept = scalar(ctx, 2.5f);
  Tensor none = ctx.empty({0}, DType::fp8_e4m3);
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  ops::quantize(ctx, ctx.empty({0}, DType::f32), scalar(ctx, 1.0f), none, kept);
  ctx.set_recorder(nullptr);
  EXPECT_EQ(to_floats(kept)[0], 2.5f);
  ASSERT_EQ(recorder.ops().size(), 1u);
  EXPECT_TRUE(recorder.kernels().empty());
}

// A per-tensor recipe: scale = max / amax(x), then x -> FP8 -> x · (1 / scale). Every value whose
// scaled magnitude is in the format's normal range comes back within one rounding (u = 2^-4 in
// e4m3, 2^-3 in e5m2); the largest comes back to within that of itself (no saturation).
TEST_P(PrecisionOps, RoundTripWithinOneFp8Rounding) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  const uint64_t seed = bt::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(GetParam());
  const Tensor x = bt::random_tensor(ctx, {37, 129}, DType::bf16, seed, -3.0f, 3.0f);
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    SCOPED_TRACE(dtype_name(fp8));
    Tensor amax = scalar(ctx, 0.0f);
    ops::amax(ctx, x, amax);
    const float a = to_floats(amax)[0];
    const float max = static_cast<float>(dtype_max_finite(fp8));
    const float smallest_normal = fp8 == DType::fp8_e4m3 ? 0.015625f : 6.1035156e-05f;  // 2^-6, 2^-14
    Tensor y = ctx.empty(x.shape(), fp8), back = ctx.empty(x.shape(), DType::f32);
    ops::quantize(ctx, x, scalar(ctx, max / a), y);
    ops::dequantize(ctx, y, scalar(ctx, a / max), back);
    const std::vector<float> in = to_floats(x), out = to_floats(back);
    int normal = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      if (std::fabs(in[i]) * (max / a) < smallest_normal) continue;
      ++normal;
      EXPECT_LE(std::fabs(out[i] - in[i]), dtype_epsilon(fp8) * std::fabs(in[i]) * (1 + 1e-5)) << i << " " << in[i];
    }
    EXPECT_GT(normal, 4000);
  }
}

// CUDA's casts read 16-byte packs where x starts 16-byte aligned (and y on its words); views
// starting elsewhere take the element-by-element loop. Both give the CPU's codes and amax, with
// a tail past the last whole pack.
TEST_P(PrecisionOps, UnalignedViewsGiveTheSameCodes) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  const uint64_t seed = bt::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(GetParam());
  for (DType dtype : kComputeDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t n = 8 * 37 + 5;
    const Tensor base = bt::random_tensor(ctx, {n + 3}, dtype, seed, -30.0f, 30.0f);
    Tensor y_base = ctx.empty({n + 3}, DType::fp8_e4m3);
    for (int64_t x_offset : {0, 1, 3}) {
      for (int64_t y_offset : {0, 1}) {
        const Tensor x = base.slice(0, x_offset, x_offset + n);
        Tensor y = y_base.slice(0, y_offset, y_offset + n);
        Tensor amax = scalar(ctx, 0.0f), running = scalar(ctx, 0.0f);
        ops::quantize(ctx, x, scalar(ctx, 10.0f), y, running);
        ops::amax(ctx, x, amax);
        const std::vector<float> in = to_floats(x), got = to_floats(y);
        float want_amax = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(got[static_cast<size_t>(i)], round_to(DType::fp8_e4m3, in[static_cast<size_t>(i)] * 10.0f))
              << "x offset " << x_offset << " y offset " << y_offset << " element " << i;
          want_amax = std::max(want_amax, std::fabs(in[static_cast<size_t>(i)]));
        }
        EXPECT_EQ(to_floats(amax)[0], want_amax);
        EXPECT_EQ(to_floats(running)[0], want_amax);
      }
    }
  }
}

// The scale step by hand: 448 / 7 = 64 (margin 1: 32), 57344 / 7 = 8192; the inverse exact.
TEST_P(PrecisionOps, ScaleUpdateWorkedByHand) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor history = filled(ctx, {2.0f, 7.0f, 3.0f}, DType::f32);
  Tensor scale = scalar(ctx, 1.0f), inverse = scalar(ctx, 0.0f);
  ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e4m3, ops::AmaxAlgo::max, 0, false});
  EXPECT_EQ(to_floats(scale)[0], 64.0f);
  EXPECT_EQ(to_floats(inverse)[0], 1.0f / 64.0f);
  ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e4m3, ops::AmaxAlgo::max, 1, false});
  EXPECT_EQ(to_floats(scale)[0], 32.0f);
  ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e5m2, ops::AmaxAlgo::max, 0, false});
  EXPECT_EQ(to_floats(scale)[0], 8192.0f);
  ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e4m3, ops::AmaxAlgo::most_recent, 0, false});
  EXPECT_EQ(to_floats(scale)[0], 224.0f);  // 448 / 2, the newest entry
  EXPECT_EQ(to_floats(history), (std::vector<float>{2.0f, 7.0f, 3.0f})) << "no roll: the history stays";
}

// What keeps the scale: a NaN anywhere in a max history, an all-zero history, an infinity; what
// saturates it: an amax so small the quotient overflows (FLT_MAX, its inverse still finite).
TEST_P(PrecisionOps, ScaleUpdateKeepsTheScaleOnBadAmaxes) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor scale = scalar(ctx, 5.0f), inverse = scalar(ctx, 0.0f);
  for (const std::vector<float>& bad : std::vector<std::vector<float>>{{1.0f, kNaN, 2.0f}, {0.0f, 0.0f}, {kInf}}) {
    Tensor history = filled(ctx, bad, DType::f32);
    ops::fp8_scale_update(ctx, history, scale, inverse, {});
    EXPECT_EQ(to_floats(scale)[0], 5.0f);
    EXPECT_EQ(to_floats(inverse)[0], 0.2f);
  }
  Tensor tiny = filled(ctx, {1e-38f}, DType::f32);
  ops::fp8_scale_update(ctx, tiny, scale, inverse, {});
  EXPECT_EQ(to_floats(scale)[0], std::numeric_limits<float>::max());
  EXPECT_GT(to_floats(inverse)[0], 0.0f);
}

// Delayed scaling over steps, as Transformer Engine's DelayedScaling: each step quantizes with
// the scale the history gave, accumulating its amax into entry 0, then updates and rolls. A
// spike (100) sets the scale for as long as it stays in the 2-entry history, then leaves it.
TEST_P(PrecisionOps, DelayedScalingRollsItsHistory) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor history = filled(ctx, {0.0f, 0.0f}, DType::f32);
  Tensor scale = scalar(ctx, 1.0f), inverse = scalar(ctx, 1.0f);
  const std::vector<float> step_amax = {1.0f, 100.0f, 2.0f, 2.0f};
  const std::vector<float> want_scale = {448.0f, 4.48f, 4.48f, 224.0f};
  const std::vector<std::vector<float>> want_history = {{0, 1}, {0, 100}, {0, 2}, {0, 2}};
  // The spike met step 1's scale of 448: 100 · 448 = 100 times e4m3's largest value, clipped.
  const std::vector<std::vector<float>> want_saturation = {{1, 0, 0}, {2, 1, 100}, {3, 1, 100}, {4, 1, 100}};
  Tensor y = ctx.empty({2}, DType::fp8_e4m3), saturation = filled(ctx, {0, 0, 0}, DType::f32);
  for (size_t step = 0; step < step_amax.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    ops::quantize(ctx, filled(ctx, {-step_amax[step], 0.5f}, DType::bf16), scale, y, history.slice(0, 0, 1));
    ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e4m3, ops::AmaxAlgo::max, 0, true}, saturation);
    EXPECT_EQ(to_floats(scale)[0], want_scale[step]);
    EXPECT_EQ(to_floats(history), want_history[step]);
    EXPECT_EQ(to_floats(saturation), want_saturation[step]);
  }
}

// The saturation count by hand (scale 1, e4m3's 448, clipping above 464): an amax of 448 reaches
// the largest value; 460 rounds to it as its nearest value (not clipped); 896 passes 464, twice
// the largest; a NaN is an update, not a saturation; 672 (1.5x) saturates again without raising
// the largest ratio; e5m2 (57344, clipping above 61440): 60000 rounds, 114688 is 2x.
TEST_P(PrecisionOps, ScaleUpdateCountsSaturationByHand) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor saturation = filled(ctx, {0, 0, 0}, DType::f32);
  const std::vector<std::pair<float, std::vector<float>>> steps = {
      {448.0f, {1, 0, 0}}, {460.0f, {2, 0, 0}}, {896.0f, {3, 1, 2}}, {kNaN, {4, 1, 2}}, {672.0f, {5, 2, 2}}};
  for (const auto& [amax, want] : steps) {
    SCOPED_TRACE("amax " + std::to_string(amax));
    Tensor history = filled(ctx, {amax, 1.0f}, DType::f32), scale = scalar(ctx, 1.0f), inverse = scalar(ctx, 0.0f);
    ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e4m3, ops::AmaxAlgo::max, 0, true}, saturation);
    EXPECT_EQ(to_floats(saturation), want);
  }
  Tensor e5m2 = filled(ctx, {0, 0, 0}, DType::f32), history = filled(ctx, {60000.0f}, DType::f32);
  Tensor scale = scalar(ctx, 1.0f), inverse = scalar(ctx, 0.0f);
  ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e5m2, ops::AmaxAlgo::max, 0, false}, e5m2);
  EXPECT_EQ(to_floats(e5m2), (std::vector<float>{1, 0, 0}));
  history = filled(ctx, {114688.0f}, DType::f32);
  scale = scalar(ctx, 1.0f);
  ops::fp8_scale_update(ctx, history, scale, inverse, {DType::fp8_e5m2, ops::AmaxAlgo::max, 0, false}, e5m2);
  EXPECT_EQ(to_floats(e5m2), (std::vector<float>{2, 1, 2}));
  bt::expect_input_error(
      [&] {
        Tensor two = filled(ctx, {0, 0}, DType::f32);
        ops::fp8_scale_update(ctx, history, scale, inverse, {}, two);
      },
      {"fp8_scale_update", "saturation", "f32 [3]"});
}

TEST_P(PrecisionOps, RecordedInThePrecisionFamily) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  Tensor y = ctx.empty({2, 3}, DType::fp8_e5m2), amax = scalar(ctx, 0.0f);
  const Tensor x = bt::random_tensor(ctx, {2, 3}, DType::bf16, bt::fresh_seed());
  ops::quantize(ctx, x, scalar(ctx, 1.0f), y, amax);
  ctx.set_recorder(nullptr);
  ASSERT_EQ(recorder.ops().size(), 1u);
  EXPECT_EQ(recorder.ops()[0].name, "quantize");
  EXPECT_EQ(recorder.ops()[0].flops, 12.0);         // a multiply and a compare per element
  EXPECT_EQ(recorder.ops()[0].bytes, 12 + 4 + 6 + 8);  // x bf16, the scale, y FP8, amax read and written
  ASSERT_EQ(recorder.kernels().size(), 1u);
  EXPECT_EQ(recorder.kernels()[0].name, "fp8_quantize_amax_kernel");
  // Each op is recorded under its compute side's dtype (its catalogue call's): quantize its
  // input's, dequantize its output's -- never FP8, which a profile's dtype must not become.
  EXPECT_EQ(recorder.ops()[0].dtype, DType::bf16);
  ctx.set_recorder(&recorder);
  Tensor back = ctx.empty({2, 3}, DType::f16);
  ops::dequantize(ctx, y, scalar(ctx, 1.0f), back);
  ctx.set_recorder(nullptr);
  ASSERT_EQ(recorder.ops().size(), 2u);
  EXPECT_EQ(recorder.ops()[1].name, "dequantize");
  EXPECT_EQ(recorder.ops()[1].dtype, DType::f16);
}

INSTANTIATE_TEST_SUITE_P(Devices, PrecisionOps, ::testing::ValuesIn(bt::test_devices()), bt::device_test_name);

}  // namespace
}  // namespace blockscope
