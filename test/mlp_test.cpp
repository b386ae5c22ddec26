// The MLP (plain GPT-2 style and gated GeGLU / SwiGLU) beyond the op harness
// (value against the reference on every device and dtype, in place, CUDA against the CPU,
// kernels, FLOPs and bytes, refused calls: test/op_harness_test.cpp): both weight layouts, the accuracy rule between paths,
// pack_gate_up, and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/mlp/mlp.h"
#include "profiler/recorder.h"
#include "test/op_test_helpers.h"
#include "reference/ops_reference.h"

namespace blockscope {
namespace {

using ops::Activation;
using ops::MlpPath;
using ops::MlpWeights;
using ops::WeightLayout;
using reference::RefTensor;

// Bounds: testing::mlp_plain_bound and mlp_gated_bound (test/accuracy_bounds.h).

class MlpTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

struct Shape3 {
  int64_t rows, d, f;
};
const std::vector<Shape3> kShapes = {{1, 37, 100}, {7, 48, 96}, {300, 64, 172}};

// Weights scaled so activations stay O(1): uniform in ±1/√fan_in.
Tensor weight(Context& ctx, const Shape& shape, int64_t fan_in, DType dtype, uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  return testing::random_tensor(ctx, shape, dtype, seed, -bound, bound);
}

// Runs the naive path and `fused_path` on poisoned outputs: each within `tolerance` of the
// float64 reference, and the fused path within the accuracy rule of the naive one.
void expect_naive_and_fused_paths(Context& ctx, const Tensor& x, const MlpWeights& w, const RefTensor& expected,
                                  double tolerance, MlpPath fused_path) {
  const DType dtype = x.dtype();
  double naive_error = 0;
  for (MlpPath path : {MlpPath::naive, fused_path}) {
    SCOPED_TRACE(ops::path_name(path));
    Tensor y = testing::poisoned_tensor(ctx, x.shape(), dtype);
    ops::mlp(ctx, x, w, y, path);
    const std::vector<float> got = to_floats(y);
    ASSERT_EQ(testing::first_nan(got), -1);
    EXPECT_LE(testing::max_abs_error(got, expected.data), tolerance);
    const double error = testing::max_relative_error(got, expected.data);
    if (path == MlpPath::naive) naive_error = error;
    else EXPECT_TRUE(testing::within_accuracy_rule(error, naive_error, dtype))
             << "error " << error << " vs naive " << naive_error;
  }
}

TEST_P(MlpTest, PlainPathsMatchReference) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  for (const Shape3& s : kShapes) {
    for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
      for (bool biases : {true, false}) {
        for (Activation act : {Activation::gelu_tanh, Activation::gelu_erf}) {
          const uint64_t seed = testing::fresh_seed();
          SCOPED_TRACE(::testing::Message() << "seed " << seed << " rows " << s.rows << " d " << s.d << " F " << s.f
                                            << (layout == WeightLayout::out_in ? " out_in" : " in_out") << " biases "
                                            << biases << " " << ops::activation_name(act));
          const bool oi = layout == WeightLayout::out_in;
          MlpWeights w;
          w.activation = act;
          w.layout = layout;
          w.fc_weight = weight(ctx, oi ? Shape{s.f, s.d} : Shape{s.d, s.f}, s.d, dtype(), seed + 1);
          w.proj_weight = weight(ctx, oi ? Shape{s.d, s.f} : Shape{s.f, s.d}, s.f, dtype(), seed + 2);
          if (biases) {
            w.fc_bias = testing::random_tensor(ctx, {s.f}, dtype(), seed + 3);
            w.proj_bias = testing::random_tensor(ctx, {s.d}, dtype(), seed + 4);
          }
          const Tensor x = testing::random_tensor(ctx, {s.rows, s.d}, dtype(), seed);
          const RefTensor xr = testing::ref(x), fc = testing::ref(w.fc_weight), proj = testing::ref(w.proj_weight);
          const RefTensor fcb = biases ? testing::ref(w.fc_bias) : RefTensor();
          const RefTensor projb = biases ? testing::ref(w.proj_bias) : RefTensor();
          const RefTensor* fcbp = biases ? &fcb : nullptr;
          const RefTensor* projbp = biases ? &projb : nullptr;
          const RefTensor expected = reference::mlp_plain(xr, fc, fcbp, proj, projbp, act, oi);
          const double tolerance =
              testing::mlp_plain_bound(xr, fc, fcbp, proj, projbp, act, oi, expected, dtype());
          expect_naive_and_fused_paths(ctx, x, w, expected, tolerance, MlpPath::epilogue);
        }
      }
    }
  }
}

TEST_P(MlpTest, GatedPathsMatchReference) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  for (const Shape3& s : kShapes) {
    for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
      for (Activation act : {Activation::gelu_tanh, Activation::silu}) {  // GeGLU, SwiGLU
        const uint64_t seed = testing::fresh_seed();
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " rows " << s.rows << " d " << s.d << " F " << s.f
                                          << (layout == WeightLayout::out_in ? " out_in " : " in_out ")
                                          << ops::activation_name(act));
        const bool oi = layout == WeightLayout::out_in;
        MlpWeights w;
        w.gated = true;
        w.activation = act;
        w.layout = layout;
        w.gate_weight = weight(ctx, oi ? Shape{s.f, s.d} : Shape{s.d, s.f}, s.d, dtype(), seed + 1);
        w.up_weight = weight(ctx, oi ? Shape{s.f, s.d} : Shape{s.d, s.f}, s.d, dtype(), seed + 2);
        w.down_weight = weight(ctx, oi ? Shape{s.d, s.f} : Shape{s.f, s.d}, s.f, dtype(), seed + 3);
        ops::pack_gate_up(ctx, w);
        const Tensor x = testing::random_tensor(ctx, {s.rows, s.d}, dtype(), seed);
        const RefTensor xr = testing::ref(x), gw = testing::ref(w.gate_weight), uw = testing::ref(w.up_weight),
                        dw = testing::ref(w.down_weight);
        const RefTensor expected = reference::mlp_gated(xr, gw, uw, dw, act, oi);
        const double tolerance = testing::mlp_gated_bound(xr, gw, uw, dw, act, oi, expected, dtype());
        expect_naive_and_fused_paths(ctx, x, w, expected, tolerance, MlpPath::fused);
      }
    }
  }
}

// pack_gate_up: [gate; up] rows for out_in, [gate | up] columns for in_out.
TEST_P(MlpTest, PackGateUpConcatenates) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t d = 5, f = 3;
  for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
    const bool oi = layout == WeightLayout::out_in;
    MlpWeights w;
    w.gated = true;
    w.layout = layout;
    w.gate_weight = testing::random_tensor(ctx, oi ? Shape{f, d} : Shape{d, f}, dtype(), seed);
    w.up_weight = testing::random_tensor(ctx, oi ? Shape{f, d} : Shape{d, f}, dtype(), seed + 1);
    ops::pack_gate_up(ctx, w);
    const int64_t dim = oi ? 0 : 1;
    ASSERT_EQ(w.gate_up_weight.shape(), oi ? (Shape{2 * f, d}) : (Shape{d, 2 * f}));
    EXPECT_EQ(to_floats(w.gate_up_weight.slice(dim, 0, f)), to_floats(w.gate_weight));
    EXPECT_EQ(to_floats(w.gate_up_weight.slice(dim, f, 2 * f)), to_floats(w.up_weight));
  }
}

TEST_P(MlpTest, BadInputsAreNamedErrors) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  const int64_t rows = 3, d = 8, f = 12;
  const Tensor x = testing::random_tensor(ctx, {rows, d}, dtype(), seed);
  Tensor y = ctx.empty({rows, d}, dtype());
  MlpWeights plain;
  plain.fc_weight = testing::random_tensor(ctx, {f, d}, dtype(), seed);
  plain.proj_weight = testing::random_tensor(ctx, {d, f}, dtype(), seed);
  MlpWeights gated;
  gated.gated = true;
  gated.gate_weight = testing::random_tensor(ctx, {f, d}, dtype(), seed);
  gated.up_weight = testing::random_tensor(ctx, {f, d}, dtype(), seed);
  gated.down_weight = testing::random_tensor(ctx, {d, f}, dtype(), seed);
  // Wrong path for the kind: the message names both.
  testing::expect_input_error([&] { ops::mlp(ctx, x, plain, y, MlpPath::fused); }, {"fused", "plain"});
  testing::expect_input_error([&] { ops::mlp(ctx, x, gated, y, MlpPath::epilogue); }, {"epilogue", "gated"});
  // Fused before pack_gate_up.
  testing::expect_input_error([&] { ops::mlp(ctx, x, gated, y, MlpPath::fused); }, {"gate_up_weight", "pack_gate_up"});
  // x does not match the weights.
  const Tensor x_bad = testing::random_tensor(ctx, {rows, d + 1}, dtype(), seed);
  Tensor y_bad = ctx.empty({rows, d + 1}, dtype());
  testing::expect_input_error([&] { ops::mlp(ctx, x_bad, plain, y_bad, MlpPath::naive); },
                              {"fc_weight", plain.fc_weight.str(), x_bad.str()});
  MlpWeights wrong_down = gated;
  wrong_down.down_weight = testing::random_tensor(ctx, {d, f + 1}, dtype(), seed);
  testing::expect_input_error([&] { ops::mlp(ctx, x, wrong_down, y, MlpPath::naive); },
                              {"down_weight", wrong_down.down_weight.str()});
  Tensor y_wrong = ctx.empty({rows, d + 2}, dtype());
  testing::expect_input_error([&] { ops::mlp(ctx, x, plain, y_wrong, MlpPath::naive); }, {y_wrong.str()});
  MlpWeights unequal = gated;
  unequal.up_weight = testing::random_tensor(ctx, {f + 1, d}, dtype(), seed);
  testing::expect_input_error([&] { ops::pack_gate_up(ctx, unequal); }, {unequal.up_weight.str()});
  testing::expect_input_error([&] { ops::pack_gate_up(ctx, plain); }, {"not gated"});
}

INSTANTIATE_TEST_SUITE_P(Devices, MlpTest, testing::device_dtype_values(), testing::device_dtype_name);

}  // namespace
}  // namespace blockscope
