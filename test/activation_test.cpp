// What the op harness (test/op_harness_test.cpp) does not check for the activations: known
// values that pin each formula, and the gated form on strided gate/up halves bit-identical to
// contiguous gate and up.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "profiler/recorder.h"
#include "test/op_test_helpers.h"
#include "reference/ops_reference.h"

namespace blockscope {
namespace {

using ops::Activation;
using reference::RefTensor;

constexpr Activation kActivations[] = {Activation::gelu_erf, Activation::gelu_tanh, Activation::silu,
                                       Activation::relu};

// The bound (in f32 ulps of |y| + |x|): testing::activation_ulps, test/accuracy_bounds.h.

class ActivationTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

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
      const double ulps = testing::activation_ulps(got, expected, gate_times_up, dtype());
      testing::report_error(std::string("gated_activation.") + ops::activation_name(act) + "." +
                                testing::device_param_name(device()) + "." + dtype_name(dtype()),
                            ulps);
      EXPECT_LE(ulps, testing::kActivationUlps);

      // Contiguous gate and up give bit-identical results.
      const Tensor gate_dense = ctx.copy_from(gate), up_dense = ctx.copy_from(up);
      Tensor y_dense = testing::poisoned_tensor(ctx, {rows, f}, dtype());
      ops::gated_activation(ctx, gate_dense, up_dense, y_dense, act);
      EXPECT_EQ(to_floats(y_dense), got);
    }
  }
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

// The activation table (ops/common/activations.h): every enumerator has its row, names and
// kernel names are distinct, every name and alias parses back to its activation, the vectorised
// CPU row (where there is one) computes what the host definition does.
TEST(ActivationTable, EveryActivationHasItsOwnRowNamesAndKernels) {
  ASSERT_EQ(ops::activations().size(), ops::kActivationCount);
  std::set<std::string> seen;
  for (size_t i = 0; i < ops::kActivationCount; ++i) {
    const Activation act = static_cast<Activation>(i);
    const ops::ActivationInfo& row = ops::activation_info(act);
    EXPECT_EQ(row.act, act);
    EXPECT_EQ(ops::activations()[i], act);
    for (const char* name : {row.name, row.kernel, row.gated_kernel}) EXPECT_TRUE(seen.insert(name).second) << name;
    Activation parsed = act == Activation::relu ? Activation::silu : Activation::relu;
    ASSERT_TRUE(ops::parse_activation(row.name, &parsed)) << row.name;
    EXPECT_EQ(parsed, act) << row.name;
    for (const char* alias : row.aliases) {
      if (alias == nullptr) continue;
      EXPECT_TRUE(seen.insert(alias).second) << alias;
      parsed = act == Activation::relu ? Activation::silu : Activation::relu;
      ASSERT_TRUE(ops::parse_activation(alias, &parsed)) << alias;
      EXPECT_EQ(parsed, act) << alias;
    }
    EXPECT_GT(row.flops_per_element, 0.0) << row.name;
    if (row.row != nullptr) {
      std::vector<float> x;
      for (int k = -40; k <= 40; ++k) x.push_back(0.25f * static_cast<float>(k) + 0.01f);
      std::vector<float> y = x;
      row.row(y.data(), static_cast<int64_t>(y.size()));
      for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(y[k], row.value(x[k]), 1e-6f * (1.0f + std::fabs(y[k]))) << row.name;
    }
  }
  Activation untouched = Activation::silu;
  EXPECT_FALSE(ops::parse_activation("gelu_tanhh", &untouched));
  EXPECT_FALSE(ops::parse_activation("", &untouched));
  EXPECT_EQ(untouched, Activation::silu);
}

INSTANTIATE_TEST_SUITE_P(Devices, ActivationTest, testing::device_dtype_values(), testing::device_dtype_name);

}  // namespace
}  // namespace blockscope
