// fp8_linear beyond the op harness (which holds its f32/f16/bf16 outputs to the float64
// reference on every device): FP8 outputs through out_scale, saturating, with the amax taken
// before the scale; an e5m2 output from an e5m2 weight; two calls of one shape with different
// scales (the CUDA plan's descriptor is shared: each call must set its own pointers); the
// values worked by hand; its catalogue cost by hand (its prediction: cli_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/catalogue/catalogue.h"
#include "ops/fp8_linear/fp8_linear.h"
#include "reference/fp8_reference.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;

class Fp8Linear : public ::testing::TestWithParam<Device> {};

Tensor scalar(Context& ctx, float v) { return bt::tensor_of(ctx, {1}, DType::f32, {v}); }

// x = 1 in every element of a [2, 16] row pair, w row j = j / 8 (exact in e4m3 up to j = 15:
// 0 .. 1.875), scales 0.5 and 2: t[i][j] = 16 · (j / 8) · 1 = 2j, worked by hand.
TEST_P(Fp8Linear, ValuesWorkedByHand) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  std::vector<float> w_values;
  for (int j = 0; j < 16; ++j)
    for (int c = 0; c < 16; ++c) w_values.push_back(static_cast<float>(j) / 8.0f);
  const Tensor x = bt::tensor_of(ctx, {2, 16}, DType::fp8_e4m3, std::vector<float>(32, 1.0f));
  const Tensor w = bt::tensor_of(ctx, {16, 16}, DType::fp8_e4m3, w_values);
  Tensor y = ctx.empty({2, 16}, DType::f32);
  ops::Fp8LinearOptions options;
  options.out_amax = scalar(ctx, -1.0f);
  ops::fp8_linear(ctx, x, scalar(ctx, 0.5f), w, scalar(ctx, 2.0f), Tensor(), y, options);
  const std::vector<float> got = to_floats(y);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 16; ++j) EXPECT_EQ(got[static_cast<size_t>(i * 16 + j)], 2.0f * static_cast<float>(j));
  EXPECT_EQ(to_floats(options.out_amax)[0], 30.0f);
}

// An FP8 y: y = fp8(out_scale · t), saturating; the amax is of t, before out_scale.
TEST_P(Fp8Linear, Fp8OutputThroughOutScaleSaturates) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  const uint64_t seed = bt::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(GetParam());
  const Tensor x = bt::random_tensor(ctx, {5, 32}, DType::fp8_e4m3, seed, -2.0f, 2.0f);
  const Tensor w = bt::random_tensor(ctx, {16, 32}, DType::fp8_e5m2, seed + 1, -2.0f, 2.0f);
  const Tensor bias = bt::random_tensor(ctx, {16}, DType::bf16, seed + 2);
  for (const DType y_type : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    SCOPED_TRACE(dtype_name(y_type));
    Tensor wide = ctx.empty({5, 16}, DType::f32), narrow = ctx.empty({5, 16}, y_type);
    ops::Fp8LinearOptions plain;
    ops::fp8_linear(ctx, x, scalar(ctx, 0.25f), w, scalar(ctx, 0.5f), bias, wide, plain);
    ops::Fp8LinearOptions fp8;
    const float out_scale = 1000.0f;  // |t| about 1 (0.125 · a sum of 32 products of ±2): past 448 in e4m3 often
    fp8.out_scale = scalar(ctx, out_scale);
    fp8.out_amax = scalar(ctx, 0.0f);
    ops::fp8_linear(ctx, x, scalar(ctx, 0.25f), w, scalar(ctx, 0.5f), bias, narrow, fp8);
    const std::vector<float> t = to_floats(wide), q = to_floats(narrow);
    const reference::Fp8Kind kind = y_type == DType::fp8_e4m3 ? reference::Fp8Kind::e4m3 : reference::Fp8Kind::e5m2;
    float amax = 0;
    int saturated = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      amax = std::max(amax, std::fabs(t[i]));
      EXPECT_EQ(q[i], reference::fp8_round(static_cast<double>(t[i] * out_scale), kind)) << i << " t " << t[i];
      saturated += std::fabs(q[i]) == reference::fp8_largest(kind) ? 1 : 0;
    }
    EXPECT_EQ(to_floats(fp8.out_amax)[0], amax);
    if (y_type == DType::fp8_e4m3) {
      EXPECT_GT(saturated, 0) << "the case must reach saturation";
    }
  }
}

// A NaN in the result (here from the bias) is skipped by out_amax on both devices, as the
// simulated cuBLASLt's AMAX_D skips it: the amax is the other elements' largest.
TEST_P(Fp8Linear, OutAmaxSkipsANan) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  std::vector<float> w_values(16 * 16, 0.0f);
  for (int j = 0; j < 16; ++j) w_values[static_cast<size_t>(j * 16)] = static_cast<float>(j);  // t[i][j] = j
  std::vector<float> bias_values(16, 0.0f);
  bias_values[3] = std::numeric_limits<float>::quiet_NaN();
  Tensor y = ctx.empty({2, 16}, DType::bf16);
  ops::Fp8LinearOptions options;
  options.out_amax = scalar(ctx, -1.0f);
  ops::fp8_linear(ctx, bt::tensor_of(ctx, {2, 16}, DType::fp8_e4m3, std::vector<float>(32, 1.0f)), scalar(ctx, 1.0f),
                  bt::tensor_of(ctx, {16, 16}, DType::fp8_e4m3, w_values), scalar(ctx, 1.0f),
                  bt::tensor_of(ctx, {16}, DType::bf16, bias_values), y, options);
  const std::vector<float> got = to_floats(y);
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_EQ(got[15], 15.0f);
  EXPECT_EQ(to_floats(options.out_amax)[0], 15.0f);
}

// One shape, two scale tensors: CUDA's cached plan shares its descriptor, and each call sets its
// own scale and amax pointers (a stale pointer gives the first call's scale to the second).
TEST_P(Fp8Linear, EachCallUsesItsOwnScales) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  const uint64_t seed = bt::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(GetParam());
  const Tensor x = bt::random_tensor(ctx, {3, 16}, DType::fp8_e4m3, seed, -2.0f, 2.0f);
  const Tensor w = bt::random_tensor(ctx, {16, 16}, DType::fp8_e4m3, seed + 1, -2.0f, 2.0f);
  Tensor first = ctx.empty({3, 16}, DType::f32), second = ctx.empty({3, 16}, DType::f32);
  ops::Fp8LinearOptions a, b;
  a.out_amax = scalar(ctx, 0.0f);
  b.out_amax = scalar(ctx, 0.0f);
  ops::fp8_linear(ctx, x, scalar(ctx, 1.0f), w, scalar(ctx, 1.0f), Tensor(), first, a);
  ops::fp8_linear(ctx, x, scalar(ctx, 4.0f), w, scalar(ctx, 1.0f), Tensor(), second, b);
  const std::vector<float> one = to_floats(first), four = to_floats(second);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(four[i], 4.0f * one[i]) << i;  // powers of two: exact
  EXPECT_EQ(to_floats(b.out_amax)[0], 4.0f * to_floats(a.out_amax)[0]);
}

INSTANTIATE_TEST_SUITE_P(Devices, Fp8Linear, ::testing::ValuesIn(bt::test_devices()), bt::device_test_name);

// The cost the catalogue gives, by hand: M = 64, K = 128, N = 256, bias, amax, bf16 y:
// 2·64·128·256 FLOPs; bytes 64·128 + 256·128 (FP8) + 2·256 (bias) + 64·256·2 (y) + 3·4 (two
// scales and the amax).
TEST(Fp8LinearCost, WorkedByHand) {
  ops::OpCall call;
  call.sizes = {{"M", 64}, {"K", 128}, {"N", 256}};
  call.flags = {{"bias", true}, {"amax", true}};
  call.dtype = DType::bf16;
  const ops::OpCost cost = ops::op_spec("fp8_linear").cost(call);
  EXPECT_EQ(cost.flops, 2.0 * 64 * 128 * 256);
  EXPECT_EQ(cost.bytes, 64.0 * 128 + 256.0 * 128 + 2 * 256 + 64.0 * 256 * 2 + 12);
  call.dtype = DType::fp8_e4m3;  // an FP8 y: 1 byte each, and its out_scale
  EXPECT_EQ(ops::op_spec("fp8_linear").cost(call).bytes, 64.0 * 128 + 256.0 * 128 + 2 * 256 + 64.0 * 256 + 16);
  EXPECT_EQ(ops::launched_kernels(ops::op_spec("fp8_linear"), call, DeviceType::cuda),
            std::vector<std::string>{"fp8_gemm_bias"});
}

}  // namespace
}  // namespace blockscope
