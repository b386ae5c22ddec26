// softmax and softmax_scale_causal against the float64 references: every test device and
// dtype, odd row lengths, huge logits, fully masked rows (zeros, not NaN), errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/softmax/softmax.h"
#include "profiler/recorder.h"
#include "runtime/error.h"
#include "test/reference/attention_reference.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;
using bt::expect_input_error;
using bt::kernel_names;
using reference::RefTensor;

// Probabilities are at most 1: the f32 exp and sum cost a few f32 ulps, the final store one
// rounding of the storage type. Errors are relative to the largest probability.
double tolerance(DType dtype) { return 4.0 * dtype_epsilon(dtype) + 2e-6; }

class Softmax : public ::testing::TestWithParam<Device> {};

TEST_P(Softmax, MatchesReference) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  for (DType dtype : bt::all_dtypes()) {
    for (const Shape& shape : {Shape{1, 1}, Shape{7, 33}, Shape{3, 5, 1000}, Shape{2, 4097}}) {
      const uint64_t seed = bt::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype) << " " << shape_str(shape));
      Tensor x = bt::random_tensor(ctx, shape, dtype, seed, -6.0f, 6.0f);
      Tensor y = bt::poisoned_tensor(ctx, shape, dtype);
      ops::softmax(ctx, x, y);
      const RefTensor expected = reference::softmax_rows(reference::from_tensor(x));
      const std::vector<float> actual = to_floats(y);
      EXPECT_EQ(bt::first_nan(actual), -1);
      EXPECT_LE(bt::max_relative_error(actual, expected.data), tolerance(dtype));

      ops::softmax(ctx, x, x);  // y may alias x
      EXPECT_LE(bt::max_relative_error(to_floats(x), expected.data), tolerance(dtype));
    }
  }
}

TEST_P(Softmax, HugeLogitsDoNotOverflow) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  // ±3e4 fits f16 (max 65504), but exp(3e4) overflows everything: the max must come off first.
  for (DType dtype : bt::all_dtypes()) {
    const uint64_t seed = bt::fresh_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype));
    Tensor x = bt::random_tensor(ctx, {9, 257}, dtype, seed, -3.0e4f, 3.0e4f);
    Tensor y = bt::poisoned_tensor(ctx, {9, 257}, dtype);
    ops::softmax(ctx, x, y);
    const RefTensor expected = reference::softmax_rows(reference::from_tensor(x));
    EXPECT_LE(bt::max_relative_error(to_floats(y), expected.data), tolerance(dtype));

    Tensor z = bt::poisoned_tensor(ctx, {9, 257}, dtype);
    ops::softmax_scale_causal(ctx, x, 1.0f, true, z);
    const RefTensor expected_causal = reference::softmax_scale_causal(reference::from_tensor(x), 1.0, true);
    EXPECT_LE(bt::max_relative_error(to_floats(z), expected_causal.data), tolerance(dtype));
  }
}

TEST_P(Softmax, FullyMaskedRowIsZeros) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (DType dtype : bt::all_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    // Row 0 all -inf, row 1 partly -inf, row 2 finite.
    Tensor x = ctx.empty({3, 4}, dtype);
    from_floats(x, {minus_inf, minus_inf, minus_inf, minus_inf, 0.5f, minus_inf, -0.5f, minus_inf, 1, 2, 3, 4});
    Tensor y = bt::poisoned_tensor(ctx, {3, 4}, dtype);
    ops::softmax(ctx, x, y);
    const std::vector<float> actual = to_floats(y);
    EXPECT_EQ(bt::first_nan(actual), -1);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(actual[j], 0.0f) << "column " << j;
    EXPECT_EQ(actual[5], 0.0f);
    EXPECT_LE(bt::max_relative_error(actual, reference::softmax_rows(reference::from_tensor(x)).data),
              tolerance(dtype));
  }
}

TEST_P(Softmax, ScaleCausalMatchesReference) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  // Sq == Sk, Sq < Sk, Sq > Sk (the first Sq - Sk rows see no key: zeros), a single element.
  for (const Shape& shape : {Shape{2, 3, 7, 7}, Shape{2, 13, 70}, Shape{70, 13}, Shape{1, 1}, Shape{1, 129, 129}}) {
    for (DType dtype : bt::all_dtypes()) {
      for (bool causal : {true, false}) {
        const uint64_t seed = bt::fresh_seed();
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype) << " " << shape_str(shape)
                                          << (causal ? " causal" : " full"));
        const float scale = 0.125f;
        Tensor x = bt::random_tensor(ctx, shape, dtype, seed, -30.0f, 30.0f);
        Tensor y = bt::poisoned_tensor(ctx, shape, dtype);
        ops::softmax_scale_causal(ctx, x, scale, causal, y);
        const RefTensor expected = reference::softmax_scale_causal(reference::from_tensor(x), scale, causal);
        const std::vector<float> actual = to_floats(y);
        EXPECT_EQ(bt::first_nan(actual), -1);
        EXPECT_LE(bt::max_relative_error(actual, expected.data), tolerance(dtype));
      }
    }
  }
}

TEST_P(Softmax, OneKernelEach) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  const uint64_t seed = bt::fresh_seed();
  SCOPED_TRACE(seed);
  Tensor x = bt::random_tensor(ctx, {2, 9, 9}, DType::bf16, seed);
  Tensor y = ctx.empty({2, 9, 9}, DType::bf16);
  ops::softmax(ctx, x, y);
  ops::softmax_scale_causal(ctx, x, 0.5f, true, y);
  ctx.set_recorder(nullptr);
  ASSERT_EQ(recorder.kernels().size(), 2u);
  EXPECT_EQ(recorder.kernels()[0].name, "softmax_kernel");
  EXPECT_EQ(recorder.kernels()[1].name, "softmax_causal_scale_kernel");
  ASSERT_EQ(recorder.ops().size(), 2u);
  EXPECT_EQ(recorder.ops()[0].name, "softmax");
  EXPECT_EQ(recorder.ops()[1].name, "softmax_scale_causal");
}

TEST_P(Softmax, ErrorsNameTheTensors) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor x = ctx.empty({4, 6}, DType::f32);
  Tensor y_shape = ctx.empty({4, 7}, DType::f32);
  Tensor y_dtype = ctx.empty({4, 6}, DType::bf16);
  Tensor vector = ctx.empty({6}, DType::f32);
  expect_input_error([&] { ops::softmax(ctx, x, y_shape); }, {"softmax", "f32[4, 6]", "f32[4, 7]"});
  expect_input_error([&] { ops::softmax(ctx, x, y_dtype); }, {"softmax", "bf16[4, 6]", "dtype"});
  expect_input_error([&] { ops::softmax_scale_causal(ctx, vector, 1.0f, true, vector); },
                     {"softmax_scale_causal", "f32[6]", "[..., Sq, Sk]"});
  Tensor transposed = ctx.empty({6, 4}, DType::f32).transpose(0, 1);
  expect_input_error([&] { ops::softmax(ctx, transposed, x); }, {"softmax", "contiguous"});
}

INSTANTIATE_TEST_SUITE_P(Devices, Softmax, ::testing::ValuesIn(bt::test_devices()), bt::device_test_name);

}  // namespace
}  // namespace blockscope
