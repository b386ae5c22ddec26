// linear / matmul_add: every path, dtype and weight layout against the float64 reference,
// the accuracy rule between paths, the kernel sequence of each path, and input errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/linear/linear.h"
#include "profiler/recorder.h"
#include "test/op_test_helpers.h"
#include "reference/ops_reference.h"

namespace blockscope {
namespace {

using ops::LinearActivation;
using ops::LinearPath;
using ops::WeightLayout;
using reference::RefTensor;

constexpr LinearPath kPaths[] = {LinearPath::naive, LinearPath::epilogue, LinearPath::addmm};
constexpr WeightLayout kLayouts[] = {WeightLayout::out_in, WeightLayout::in_out};

// Absolute error bound for one linear computed in f32 and stored in `dtype`:
//  - the f32 dot products: whatever the summation order, the error of element y is at most
//    γ_k · Σ|x||w| (γ_k ≈ k·u32); rounding errors of random sign make it grow like √k in
//    practice, so 4·√k·u32 · max(Σ|x||w| + |b|) is generous yet far below a wrong element
//    (which is off by about |y|);
//  - the stores: the naive path rounds up to three times to the dtype (GEMM result, bias add,
//    GELU, whose slope is below 1.13), each by at most u_d · |value|: 4·u_d · max|pre-activation|.
double linear_tolerance(const RefTensor& pre_activation, const RefTensor& magnitude, int64_t k, DType dtype) {
  const double u32 = dtype_epsilon(DType::f32), ud = dtype_epsilon(dtype);
  return 4.0 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))) * u32 * testing::max_abs(magnitude) +
         4.0 * ud * testing::max_abs(pre_activation);
}

class LinearTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

struct Case {
  Shape x_shape;  // [..., in]
  int64_t out;
};

TEST_P(LinearTest, EveryPathMatchesReference) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const std::vector<Case> cases = {{{1, 37}, 100}, {{7, 100}, 37}, {{2, 5, 64}, 48}, {{1000, 72}, 41}};
  for (const Case& c : cases) {
    const int64_t in = c.x_shape.back();
    for (WeightLayout layout : kLayouts) {
      for (bool with_bias : {false, true}) {
        for (LinearActivation act : {LinearActivation::none, LinearActivation::gelu_tanh}) {
          const uint64_t seed = testing::fresh_seed();
          SCOPED_TRACE(::testing::Message() << "seed " << seed << " x " << shape_str(c.x_shape) << " out " << c.out
                                            << " layout " << (layout == WeightLayout::out_in ? "out_in" : "in_out")
                                            << " bias " << with_bias << " gelu " << (act != LinearActivation::none));
          const bool out_in = layout == WeightLayout::out_in;
          const Tensor x = testing::random_tensor(ctx, c.x_shape, dtype(), seed);
          const Tensor w = testing::random_tensor(ctx, out_in ? Shape{c.out, in} : Shape{in, c.out}, dtype(), seed + 1);
          const Tensor bias = with_bias ? testing::random_tensor(ctx, {c.out}, dtype(), seed + 2) : Tensor();
          const RefTensor xr = testing::ref(x), wr = testing::ref(w), br = with_bias ? testing::ref(bias) : RefTensor();
          const RefTensor* bp = with_bias ? &br : nullptr;
          const RefTensor pre = reference::linear(xr, wr, bp, out_in);
          const RefTensor expected = act == LinearActivation::gelu_tanh
                                         ? reference::activation(pre, ops::Activation::gelu_tanh)
                                         : pre;
          const double tolerance = linear_tolerance(pre, reference::linear_magnitude(xr, wr, bp, out_in), in, dtype());

          double naive_error = 0;
          for (LinearPath path : kPaths) {
            SCOPED_TRACE(ops::path_name(path));
            Shape y_shape = c.x_shape;
            y_shape.back() = c.out;
            Tensor y = testing::poisoned_tensor(ctx, y_shape, dtype());
            ops::linear(ctx, x, w, bias, y, path, layout, act);
            const std::vector<float> got = to_floats(y);
            ASSERT_EQ(testing::first_nan(got), -1) << "unwritten (NaN) output element";
            EXPECT_LE(testing::max_abs_error(got, expected.data), tolerance);
            const double error = testing::max_relative_error(got, expected.data);
            if (path == LinearPath::naive) naive_error = error;
            else EXPECT_TRUE(testing::within_accuracy_rule(error, naive_error, dtype()))
                     << "error " << error << " vs naive " << naive_error;
          }
        }
      }
    }
  }
}

// Rows of x may be a strided view (columns of a wider tensor); the result must not change.
TEST_P(LinearTest, StridedRowsGiveTheSameResult) {
  BS_SKIP_IF_UNAVAILABLE(device());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(device());
  const int64_t rows = 9, in = 33, out = 20;
  const Tensor wide = testing::random_tensor(ctx, {rows, in + 7}, dtype(), seed);
  const Tensor x_view = wide.slice(1, 3, 3 + in);  // [rows, in], row stride in + 7
  const Tensor x_dense = ctx.copy_from(x_view);
  const Tensor w = testing::random_tensor(ctx, {out, in}, dtype(), seed + 1);
  const Tensor bias = testing::random_tensor(ctx, {out}, dtype(), seed + 2);
  for (LinearPath path : kPaths) {
    SCOPED_TRACE(ops::path_name(path));
    Tensor y_view = testing::poisoned_tensor(ctx, {rows, out}, dtype());
    Tensor y_dense = testing::poisoned_tensor(ctx, {rows, out}, dtype());
    ops::linear(ctx, x_view, w, bias, y_view, path);
    ops::linear(ctx, x_dense, w, bias, y_dense, path);
    EXPECT_EQ(to_floats(y_view), to_floats(y_dense));
  }
}

// The series' Part 1 module: out = a · b + c, a [m, k], b [k, n], c [n].
TEST_P(LinearTest, MatmulAddIsLinearWithInOutWeights) {
  BS_SKIP_IF_UNAVAILABLE(device());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(device());
  const int64_t m = 64, k = 64, n = 64;
  const Tensor a = testing::random_tensor(ctx, {m, k}, dtype(), seed);
  const Tensor b = testing::random_tensor(ctx, {k, n}, dtype(), seed + 1);
  const Tensor c = testing::random_tensor(ctx, {n}, dtype(), seed + 2);
  const RefTensor ar = testing::ref(a), br = testing::ref(b), cr = testing::ref(c);
  const RefTensor expected = reference::linear(ar, br, &cr, false);
  const double tolerance = linear_tolerance(expected, reference::linear_magnitude(ar, br, &cr, false), k, dtype());
  for (LinearPath path : kPaths) {
    SCOPED_TRACE(ops::path_name(path));
    Tensor out = testing::poisoned_tensor(ctx, {m, n}, dtype());
    ops::matmul_add(ctx, a, b, c, out, path);
    EXPECT_LE(testing::max_abs_error(to_floats(out), expected.data), tolerance);
  }
}

// Kernel names per path (shared with the CUDA backend), and the op event's FLOPs.
TEST_P(LinearTest, KernelSequencePerPath) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 6, in = 10, out = 12;
  const Tensor x = testing::random_tensor(ctx, {rows, in}, dtype(), seed);
  const Tensor w = testing::random_tensor(ctx, {out, in}, dtype(), seed + 1);
  const Tensor bias = testing::random_tensor(ctx, {out}, dtype(), seed + 2);
  using Names = std::vector<std::string>;
  struct Expectation {
    LinearPath path;
    bool bias;
    LinearActivation act;
    Names kernels;
  };
  const LinearActivation none = LinearActivation::none, gelu = LinearActivation::gelu_tanh;
  const std::vector<Expectation> expectations = {
      {LinearPath::naive, true, none, {"gemm", "bias_add_kernel"}},
      {LinearPath::naive, true, gelu, {"gemm", "bias_add_kernel", "gelu_tanh_kernel"}},
      {LinearPath::naive, false, none, {"gemm"}},
      {LinearPath::naive, false, gelu, {"gemm", "gelu_tanh_kernel"}},
      {LinearPath::epilogue, true, none, {"gemm_bias"}},
      {LinearPath::epilogue, true, gelu, {"gemm_bias_gelu"}},
      {LinearPath::epilogue, false, none, {"gemm"}},
      {LinearPath::epilogue, false, gelu, {"gemm_gelu"}},
      {LinearPath::addmm, true, none, {"bias_broadcast_copy_kernel", "gemm"}},
      {LinearPath::addmm, true, gelu, {"bias_broadcast_copy_kernel", "gemm", "gelu_tanh_kernel"}},
      {LinearPath::addmm, false, none, {"gemm"}},
  };
  for (const Expectation& e : expectations) {
    SCOPED_TRACE(::testing::Message() << ops::path_name(e.path) << " bias " << e.bias << " gelu "
                                      << (e.act == gelu));
    recorder.clear();
    Tensor y = testing::poisoned_tensor(ctx, {rows, out}, dtype());
    ops::linear(ctx, x, w, e.bias ? bias : Tensor(), y, e.path, WeightLayout::out_in, e.act);
    EXPECT_EQ(testing::kernel_names(recorder), e.kernels);
    ASSERT_EQ(recorder.ops().size(), 1u);
    const profiler::OpEvent& op = recorder.ops()[0];
    EXPECT_EQ(op.name, "linear");
    EXPECT_EQ(op.path, ops::path_name(e.path));
    EXPECT_EQ(op.flops, 2.0 * rows * in * out);
    const double bytes = static_cast<double>((rows * in + out * in + (e.bias ? out : 0) + rows * out) * dtype_size(dtype()));
    EXPECT_EQ(op.bytes, bytes);
    for (const profiler::KernelEvent& k : recorder.kernels()) EXPECT_EQ(k.op, 0);
  }
  ctx.set_recorder(nullptr);
}

// k = 0 (x [rows, 0]): the product is an empty sum, so y = bias (or 0), then the activation.
// The CPU took its row count from x (0 rows when in = 0) and left y unwritten; CUDA refused.
TEST_P(LinearTest, NoInputFeaturesGiveBiasOrZeros) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 5, out = 13;
  const Tensor x = ctx.empty({rows, 0}, dtype());
  const Tensor bias = testing::random_tensor(ctx, {out}, dtype(), seed);
  const std::vector<float> bias_values = to_floats(bias);
  for (WeightLayout layout : kLayouts) {
    const Tensor w = ctx.empty(layout == WeightLayout::out_in ? Shape{out, 0} : Shape{0, out}, dtype());
    for (bool with_bias : {false, true}) {
      // Expected: every row is the bias (or zeros), through the same activation op when GELU.
      Tensor pre = ctx.empty({rows, out}, dtype());
      std::vector<float> pre_values(static_cast<size_t>(rows * out), 0.0f);
      if (with_bias)
        for (int64_t r = 0; r < rows; ++r) std::copy(bias_values.begin(), bias_values.end(), pre_values.begin() + r * out);
      from_floats(pre, pre_values);
      Tensor activated = ctx.empty({rows, out}, dtype());
      ops::activation(ctx, pre, activated, ops::Activation::gelu_tanh);
      for (LinearActivation act : {LinearActivation::none, LinearActivation::gelu_tanh}) {
        for (LinearPath path : kPaths) {
          SCOPED_TRACE(::testing::Message() << ops::path_name(path) << " bias " << with_bias << " gelu "
                                            << (act != LinearActivation::none) << " layout "
                                            << (layout == WeightLayout::out_in ? "out_in" : "in_out"));
          Tensor y = testing::poisoned_tensor(ctx, {rows, out}, dtype());
          ops::linear(ctx, x, w, with_bias ? bias : Tensor(), y, path, layout, act);
          EXPECT_EQ(to_floats(y), to_floats(act == LinearActivation::none ? pre : activated));
        }
      }
    }
  }
}

TEST_P(LinearTest, BadInputsAreNamedErrors) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  const DType other = dtype() == DType::f32 ? DType::bf16 : DType::f32;
  const Tensor x = testing::random_tensor(ctx, {4, 8}, dtype(), seed);
  const Tensor w = testing::random_tensor(ctx, {6, 8}, dtype(), seed + 1);
  const Tensor bias = testing::random_tensor(ctx, {6}, dtype(), seed + 2);
  Tensor y = ctx.empty({4, 6}, dtype());
  const std::string xs = x.str(), ws = w.str();
  // in mismatch: the [out, in] weight given as in_out.
  testing::expect_input_error([&] { ops::linear(ctx, x, w, bias, y, LinearPath::naive, WeightLayout::in_out); },
                              {xs, ws, "in_out"});
  const Tensor w_bad = testing::random_tensor(ctx, {6, 9}, dtype(), seed);
  testing::expect_input_error([&] { ops::linear(ctx, x, w_bad, bias, y, LinearPath::epilogue); },
                              {xs, w_bad.str()});
  Tensor y_bad = ctx.empty({4, 7}, dtype());
  testing::expect_input_error([&] { ops::linear(ctx, x, w, bias, y_bad, LinearPath::epilogue); },
                              {y_bad.str(), "[4, 6]"});
  const Tensor bias_bad = testing::random_tensor(ctx, {5}, dtype(), seed);
  testing::expect_input_error([&] { ops::linear(ctx, x, w, bias_bad, y, LinearPath::addmm); }, {bias_bad.str()});
  const Tensor w_other = testing::random_tensor(ctx, {6, 8}, other, seed);
  testing::expect_input_error([&] { ops::linear(ctx, x, w_other, bias, y, LinearPath::naive); },
                              {"dtype", w_other.str()});
  const Tensor x_t = testing::random_tensor(ctx, {8, 4}, dtype(), seed).transpose(0, 1);  // columns not contiguous
  testing::expect_input_error([&] { ops::linear(ctx, x_t, w, bias, y, LinearPath::naive); }, {x_t.str()});
  const Tensor w_t = testing::random_tensor(ctx, {8, 6}, dtype(), seed).transpose(0, 1);
  testing::expect_input_error([&] { ops::linear(ctx, x, w_t, bias, y, LinearPath::naive); },
                              {w_t.str(), "contiguous"});
  testing::expect_input_error([&] { ops::linear(ctx, Tensor(), w, bias, y, LinearPath::naive); }, {"undefined"});
  // y written over its own input: x [4, 8] and y [4, 6] carved from one buffer.
  Tensor shared = testing::random_tensor(ctx, {4, 8}, dtype(), seed);
  Tensor y_alias = shared.reshape({32}).slice(0, 0, 24).reshape({4, 6});
  testing::expect_input_error([&] { ops::linear(ctx, shared, w, bias, y_alias, LinearPath::naive); },
                              {"overlaps", shared.str()});
}

INSTANTIATE_TEST_SUITE_P(Devices, LinearTest, testing::device_dtype_values(), testing::device_dtype_name);

}  // namespace
}  // namespace blockscope
