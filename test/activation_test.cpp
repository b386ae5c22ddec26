// Activations and the gated act(gate) · up against the float64 reference, in place, on the
// strided gate/up halves of one [rows, 2F] tensor, kernel names, and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "profiler/recorder.h"
#include "test/op_test_helpers.h"
#include "reference/ops_reference.h"
#include "test/cuda_vs_cpu.h"

namespace blockscope {
namespace {

using ops::Activation;
using reference::RefTensor;

constexpr Activation kActivations[] = {Activation::gelu_erf, Activation::gelu_tanh, Activation::silu,
                                       Activation::relu};

// Per element, in units of u32 = 2^-24 (f32's unit roundoff): |y - ref| less the storage
// rounding (the dtype's unit roundoff times |ref|, plus half f16's smallest subnormal; none for
// f32), over u32 · (|ref| + |x|). The f32 evaluation (erf, tanh, exp, a
// few products) costs a few ulps of |y|, or of |x| in the negative tails where gelu(x) =
// x·Φ(x) comes from 1 + erf(...) with cancellation. For the gated form x is |gate·up|.
double evaluation_ulps(const std::vector<float>& got, const RefTensor& expected, const RefTensor& x, DType dtype) {
  const double storage = dtype == DType::f32 ? 0.0 : dtype_epsilon(dtype);
  const double subnormal = dtype == DType::f16 ? std::ldexp(1.0, -25) : 0.0;
  const double u32 = dtype_epsilon(DType::f32);
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double ref = expected.data[i];
    const double error = std::abs(static_cast<double>(got[i]) - ref) - storage * std::abs(ref) - subnormal;
    worst = std::max(worst, error / (u32 * (std::abs(ref) + std::abs(x.data[i])) + 1e-300));
  }
  return worst;
}
// Measured (docs/TESTING.md): at most 1.4 units on the CPU, with or without the gate
// product; a GELU constant off in its 4th digit costs about 50.
constexpr double kActivationUlps = 6.0;

class ActivationTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(ActivationTest, MatchesReferenceOutOfPlaceAndInPlace) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  for (const Shape& shape : {Shape{1}, Shape{7, 37}, Shape{1000, 100}, Shape{3, 5, 4097}}) {
    for (Activation act : kActivations) {
      const uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << shape_str(shape) << " "
                                        << ops::activation_name(act));
      Tensor x = testing::random_tensor(ctx, shape, dtype(), seed, -4.0f, 4.0f);
      const RefTensor expected = reference::activation(testing::ref(x), act);
      Tensor y = testing::poisoned_tensor(ctx, shape, dtype());
      ops::activation(ctx, x, y, act);
      const std::vector<float> got = to_floats(y);
      ASSERT_EQ(testing::first_nan(got), -1);
      const double ulps = evaluation_ulps(got, expected, testing::ref(x), dtype());
      testing::report_error(std::string("activation.") + ops::activation_name(act) + "." +
                                testing::device_param_name(device()) + "." + dtype_name(dtype()),
                            ulps);
      EXPECT_LE(ulps, kActivationUlps);
      ops::activation(ctx, x, x, act);  // in place: y aliases x
      EXPECT_EQ(to_floats(x), got);
    }
  }
}

// The fused path's intermediate never exists: gate and up are column halves of one
// [rows, 2F] GEMM output (strided views), y is [rows, F].
TEST_P(ActivationTest, GatedOnStridedHalvesMatchesReference) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  for (const auto& [rows, f] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 37}, {1000, 100}, {3, 4097}}) {
    for (Activation act : kActivations) {
      const uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " rows " << rows << " F " << f << " "
                                        << ops::activation_name(act));
      const Tensor gate_up = testing::random_tensor(ctx, {rows, 2 * f}, dtype(), seed, -4.0f, 4.0f);
      const Tensor gate = gate_up.slice(1, 0, f), up = gate_up.slice(1, f, 2 * f);
      const RefTensor expected = reference::gated_activation(testing::ref(gate), testing::ref(up), act);
      Tensor y = testing::poisoned_tensor(ctx, {rows, f}, dtype());
      ops::gated_activation(ctx, gate, up, y, act);
      const std::vector<float> got = to_floats(y);
      ASSERT_EQ(testing::first_nan(got), -1);
      // One more f32 product than activation(): the evaluation error is scaled by |up|.
      RefTensor gate_times_up = testing::ref(gate);
      const RefTensor up_ref = testing::ref(up);
      for (size_t i = 0; i < gate_times_up.data.size(); ++i) gate_times_up.data[i] *= up_ref.data[i];
      const double ulps = evaluation_ulps(got, expected, gate_times_up, dtype());
      testing::report_error(std::string("gated_activation.") + ops::activation_name(act) + "." +
                                testing::device_param_name(device()) + "." + dtype_name(dtype()),
                            ulps);
      EXPECT_LE(ulps, kActivationUlps);

      // Contiguous gate and up give bit-identical results.
      const Tensor gate_dense = ctx.copy_from(gate), up_dense = ctx.copy_from(up);
      Tensor y_dense = testing::poisoned_tensor(ctx, {rows, f}, dtype());
      ops::gated_activation(ctx, gate_dense, up_dense, y_dense, act);
      EXPECT_EQ(to_floats(y_dense), got);
    }
  }
}

TEST_P(ActivationTest, KernelNames) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Tensor x = testing::random_tensor(ctx, {5, 6}, dtype(), seed);
  Tensor y = ctx.empty({5, 6}, dtype());
  const std::vector<std::pair<Activation, std::string>> names = {{Activation::gelu_erf, "gelu"},
                                                                 {Activation::gelu_tanh, "gelu_tanh"},
                                                                 {Activation::silu, "silu"},
                                                                 {Activation::relu, "relu"}};
  for (const auto& [act, name] : names) {
    recorder.clear();
    ops::activation(ctx, x, y, act);
    EXPECT_EQ(testing::kernel_names(recorder), std::vector<std::string>{name + "_kernel"});
    recorder.clear();
    ops::gated_activation(ctx, x, x, y, act);
    EXPECT_EQ(testing::kernel_names(recorder), std::vector<std::string>{"gated_" + name + "_mul_kernel"});
  }
  ctx.set_recorder(nullptr);
}

// Spot values that pin each formula (not just agreement with the reference's formula).
TEST(ActivationValue, KnownValues) {
  EXPECT_NEAR(ops::activation_value(Activation::gelu_erf, 1.0f), 0.8413447460685429, 1e-6);
  EXPECT_NEAR(ops::activation_value(Activation::gelu_tanh, 1.0f), 0.8411919906082768, 1e-6);
  EXPECT_NEAR(ops::activation_value(Activation::silu, 1.0f), 0.7310585786300049, 1e-6);
  EXPECT_EQ(ops::activation_value(Activation::relu, -2.0f), 0.0f);
  EXPECT_EQ(ops::activation_value(Activation::relu, 3.0f), 3.0f);
  EXPECT_TRUE(std::isnan(ops::activation_value(Activation::relu, NAN)));
  EXPECT_EQ(ops::activation_value(Activation::silu, -200.0f), -0.0f);  // exp overflow handled
}

TEST_P(ActivationTest, BadInputsAreNamedErrors) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  const DType other = dtype() == DType::f32 ? DType::f16 : DType::f32;
  const Tensor x = testing::random_tensor(ctx, {4, 8}, dtype(), seed);
  Tensor y_shape = ctx.empty({4, 9}, dtype());
  testing::expect_input_error([&] { ops::activation(ctx, x, y_shape, Activation::silu); }, {x.str(), y_shape.str()});
  Tensor y_dtype = ctx.empty({4, 8}, other);
  testing::expect_input_error([&] { ops::activation(ctx, x, y_dtype, Activation::relu); }, {"dtype", y_dtype.str()});
  const Tensor x_t = testing::random_tensor(ctx, {8, 4}, dtype(), seed).transpose(0, 1);
  Tensor y = ctx.empty({4, 8}, dtype());
  testing::expect_input_error([&] { ops::activation(ctx, x_t, y, Activation::gelu_erf); }, {x_t.str(), "contiguous"});
  const Tensor up_bad = testing::random_tensor(ctx, {4, 7}, dtype(), seed);
  testing::expect_input_error([&] { ops::gated_activation(ctx, x, up_bad, y, Activation::silu); },
                              {x.str(), up_bad.str()});
  testing::expect_input_error([&] { ops::gated_activation(ctx, x_t, x, y, Activation::silu); }, {x_t.str()});
  testing::expect_input_error([&] { ops::gated_activation(ctx, x, x, y_dtype, Activation::silu); }, {"dtype"});
}

INSTANTIATE_TEST_SUITE_P(Devices, ActivationTest, testing::device_dtype_values(), testing::device_dtype_name);

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

TEST_P(CudaOps, ActivationsPlainAndGated) {
  Devices dev;
  for (ops::Activation act :
       {ops::Activation::gelu_erf, ops::Activation::gelu_tanh, ops::Activation::silu, ops::Activation::relu}) {
    for (int64_t cols : {1, 7, 64, 300}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed);
      const std::string what = std::string(ops::activation_name(act)) + " cols " + std::to_string(cols);
      Tensor x = random_tensor(dev.cpu, {5, cols}, dtype(), seed, -4.0f, 4.0f);
      Tensor x_gpu = dev.gpu_copy(x);
      Tensor y_gpu;
      Tensor y_cpu = dev.poisoned_pair({5, cols}, dtype(), &y_gpu);
      ops::activation(dev.cpu, x, y_cpu, act);
      ops::activation(dev.gpu, x_gpu, y_gpu, act);
      expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), what);

      // gate | up as the two column halves of one [rows, 2F] tensor (the fused MLP path).
      Tensor gate_up = random_tensor(dev.cpu, {5, 2 * cols}, dtype(), seed + 1, -3.0f, 3.0f);
      Tensor gate_up_gpu = dev.gpu_copy(gate_up);
      Tensor g_gpu;
      Tensor g_cpu = dev.poisoned_pair({5, cols}, dtype(), &g_gpu);
      ops::gated_activation(dev.cpu, gate_up.slice(1, 0, cols), gate_up.slice(1, cols, 2 * cols), g_cpu, act);
      ops::gated_activation(dev.gpu, gate_up_gpu.slice(1, 0, cols), gate_up_gpu.slice(1, cols, 2 * cols), g_gpu, act);
      expect_cuda_matches_cpu(g_gpu, g_cpu, cuda_tolerance(dtype(), 2.0), "gated " + what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::Values(DType::f32, DType::f16, DType::bf16), dtype_param_name);

}  // namespace
}  // namespace blockscope
