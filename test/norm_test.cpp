// LayerNorm and RMSNorm against the float64 reference: hidden sizes that are not multiples of
// 8 (37, 100, 4097), rows 1 / 7 / many, strided rows, in place, undefined bias, eps placement,
// kernel names, and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/norm/norm.h"
#include "profiler/recorder.h"
#include "test/op_test_helpers.h"
#include "reference/ops_reference.h"
#include "test/cuda_vs_cpu.h"

namespace blockscope {
namespace {

using reference::RefTensor;

// Error bound, as a fraction of max |reference|, for a norm over N elements computed in f32:
//  - storing rounds once to the dtype (u_d · |y|);
//  - the f32 statistics: a sum of N terms has error ≤ N·u32 in the worst case and about √N·u32
//    with rounding errors of random sign; the mean's error, relative to the spread of x, passes
//    into every output. With |mean| up to 3× the spread (the inputs below), 4·√N·u32 is a few
//    times the measured error (f32 1.3e-6 at N = 4097: docs/TESTING.md) and far below a
//    misplaced or ignored eps (each norm runs at two eps).
double norm_tolerance(DType dtype, int64_t n) {
  return dtype_epsilon(dtype) + 4.0 * std::sqrt(static_cast<double>(n)) * dtype_epsilon(DType::f32);
}

class NormTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

struct Case {
  int64_t rows, n;
};
const std::vector<Case> kCases = {{1, 37}, {7, 100}, {1000, 37}, {300, 100}, {1, 4097}, {7, 4097}, {64, 4097}};

// Every norm at two eps: the usual one, and one that changes every output (inputs below have a
// variance of 1/3 and a mean square of 4/3), so an eps that is ignored or replaced is caught.
TEST_P(NormTest, LayerNormMatchesReference) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  for (const float eps : {1e-5f, 0.5f}) {
    for (const Case& c : kCases) {
      for (bool with_bias : {true, false}) {
        const uint64_t seed = testing::fresh_seed();
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " rows " << c.rows << " N " << c.n << " bias "
                                          << with_bias << " eps " << eps);
        // Values in [2, 4): a mean far from zero (a one-pass variance would lose digits).
        const Tensor x = testing::random_tensor(ctx, {c.rows, c.n}, dtype(), seed, 2.0f, 4.0f);
        const Tensor w = testing::random_tensor(ctx, {c.n}, dtype(), seed + 1);
        const Tensor b = with_bias ? testing::random_tensor(ctx, {c.n}, dtype(), seed + 2) : Tensor();
        const RefTensor br = with_bias ? testing::ref(b) : RefTensor();
        const RefTensor expected =
            reference::layer_norm(testing::ref(x), testing::ref(w), with_bias ? &br : nullptr, eps);
        Tensor y = testing::poisoned_tensor(ctx, {c.rows, c.n}, dtype());
        ops::layer_norm(ctx, x, w, b, eps, y);
        const std::vector<float> got = to_floats(y);
        ASSERT_EQ(testing::first_nan(got), -1);
        const double error = testing::max_relative_error(got, expected.data);
        testing::report_error("layer_norm." + testing::device_param_name(device()) + "." + dtype_name(dtype()), error);
        EXPECT_LE(error, norm_tolerance(dtype(), c.n));
      }
    }
  }
}

TEST_P(NormTest, RmsNormMatchesReference) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  for (const float eps : {1e-6f, 0.5f}) {
    for (const Case& c : kCases) {
      const uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " rows " << c.rows << " N " << c.n << " eps " << eps);
      const Tensor x = testing::random_tensor(ctx, {c.rows, c.n}, dtype(), seed, -2.0f, 2.0f);
      const Tensor w = testing::random_tensor(ctx, {c.n}, dtype(), seed + 1, 0.5f, 1.5f);
      const RefTensor expected = reference::rms_norm(testing::ref(x), testing::ref(w), eps);
      Tensor y = testing::poisoned_tensor(ctx, {c.rows, c.n}, dtype());
      ops::rms_norm(ctx, x, w, eps, y);
      const std::vector<float> got = to_floats(y);
      ASSERT_EQ(testing::first_nan(got), -1);
      const double error = testing::max_relative_error(got, expected.data);
      testing::report_error("rms_norm." + testing::device_param_name(device()) + "." + dtype_name(dtype()), error);
      EXPECT_LE(error, norm_tolerance(dtype(), c.n));
    }
  }
}

// eps goes inside the square root: with a spread of 1e-2 and eps = 1e-2, eps dominates the
// variance, so eps outside the root (or forgotten) is far off.
TEST_P(NormTest, EpsIsInsideTheSquareRoot) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 5, n = 100;
  const float eps = 1e-2f;
  const Tensor x = testing::random_tensor(ctx, {rows, n}, dtype(), seed, -0.01f, 0.01f);
  const Tensor w = testing::random_tensor(ctx, {n}, dtype(), seed + 1);
  const Tensor b = testing::random_tensor(ctx, {n}, dtype(), seed + 2);
  const RefTensor xr = testing::ref(x), wr = testing::ref(w), br = testing::ref(b);
  Tensor y = testing::poisoned_tensor(ctx, {rows, n}, dtype());
  ops::layer_norm(ctx, x, w, b, eps, y);
  EXPECT_LE(testing::max_relative_error(to_floats(y), reference::layer_norm(xr, wr, &br, eps).data),
            norm_tolerance(dtype(), n));
  ops::rms_norm(ctx, x, w, eps, y);
  EXPECT_LE(testing::max_relative_error(to_floats(y), reference::rms_norm(xr, wr, eps).data),
            norm_tolerance(dtype(), n));
}

// Rows may be strided (a column slice of a wider tensor), and y may be x itself.
TEST_P(NormTest, StridedRowsAndInPlace) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 13, n = 100;
  const Tensor wide = testing::random_tensor(ctx, {rows, n + 28}, dtype(), seed);
  const Tensor x_view = wide.slice(1, 20, 20 + n);
  const Tensor w = testing::random_tensor(ctx, {n}, dtype(), seed + 1);
  const Tensor b = testing::random_tensor(ctx, {n}, dtype(), seed + 2);
  for (bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms_norm" : "layer_norm");
    auto run = [&](const Tensor& in, Tensor& out) {
      if (rms) ops::rms_norm(ctx, in, w, 1e-5f, out);
      else ops::layer_norm(ctx, in, w, b, 1e-5f, out);
    };
    Tensor x_dense = ctx.copy_from(x_view);
    Tensor y_dense = testing::poisoned_tensor(ctx, {rows, n}, dtype());
    Tensor y_view = testing::poisoned_tensor(ctx, {rows, n}, dtype());
    run(x_dense, y_dense);
    run(x_view, y_view);
    const std::vector<float> expected = to_floats(y_dense);
    EXPECT_EQ(to_floats(y_view), expected);
    run(x_dense, x_dense);  // in place
    EXPECT_EQ(to_floats(x_dense), expected);
  }
  // A 3-D x [B, S, N] normalises each of the B·S rows.
  const Tensor x3 = testing::random_tensor(ctx, {2, 3, n}, dtype(), seed + 3);
  Tensor y3 = testing::poisoned_tensor(ctx, {2, 3, n}, dtype());
  ops::rms_norm(ctx, x3, w, 1e-5f, y3);
  EXPECT_LE(testing::max_relative_error(to_floats(y3), reference::rms_norm(testing::ref(x3), testing::ref(w), 1e-5).data),
            norm_tolerance(dtype(), n));
}

// Every kernel shape the CUDA norms pick (a warp per row up to 1024 elements, a block per row up
// to 16384, streaming beyond; packs or elements), rows 1 / 7 / 1000, a mean 100x the spread
// (a one-pass E[x²] - E[x]² would lose every digit), against the reference and the CPU.
TEST_P(NormTest, EveryRowShapeMatchesReferenceAndCpu) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  Context cpu(Device::cpu());
  const float eps = 1e-5f;
  for (const Case& c : std::vector<Case>{{1, 1}, {7, 8}, {1000, 64}, {7, 1000}, {1, 1024}, {7, 4096}, {2, 16400}, {1, 20000}}) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " rows " << c.rows << " N " << c.n);
    const Tensor x = testing::random_tensor(ctx, {c.rows, c.n}, dtype(), seed, 99.0f, 101.0f);
    const Tensor w = testing::random_tensor(ctx, {c.n}, dtype(), seed + 1);
    const Tensor b = testing::random_tensor(ctx, {c.n}, dtype(), seed + 2);
    const RefTensor br = testing::ref(b);
    const RefTensor expected = reference::layer_norm(testing::ref(x), testing::ref(w), &br, eps);
    Tensor y = testing::poisoned_tensor(ctx, {c.rows, c.n}, dtype());
    ops::layer_norm(ctx, x, w, b, eps, y);
    const std::vector<float> got = to_floats(y);
    ASSERT_EQ(testing::first_nan(got), -1);
    // x is stored in the dtype: its own rounding (relative to the spread 2 at |x| ~ 100) is part
    // of the reference's input, so the bound is the usual one times the mean / spread ratio for f32.
    const double tol = norm_tolerance(dtype(), c.n) * (dtype() == DType::f32 ? 100.0 : 1.0);
    if (c.n > 1) {
      EXPECT_LE(testing::max_relative_error(got, expected.data), tol);
    }
    Tensor yc = testing::poisoned_tensor(cpu, {c.rows, c.n}, dtype());
    ops::layer_norm(cpu, cpu.copy_from(x), cpu.copy_from(w), cpu.copy_from(b), eps, yc);
    EXPECT_LE(testing::max_relative_error(got, testing::to_doubles(yc)), 2.0 * tol);

    const RefTensor expected_rms = reference::rms_norm(testing::ref(x), testing::ref(w), eps);
    Tensor z = testing::poisoned_tensor(ctx, {c.rows, c.n}, dtype());
    ops::rms_norm(ctx, x, w, eps, z);
    const std::vector<float> gz = to_floats(z);
    ASSERT_EQ(testing::first_nan(gz), -1);
    EXPECT_LE(testing::max_relative_error(gz, expected_rms.data), norm_tolerance(dtype(), c.n));
  }
}

TEST_P(NormTest, KernelNames) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  const uint64_t seed = testing::fresh_seed();
  const Tensor x = testing::random_tensor(ctx, {4, 10}, dtype(), seed);
  const Tensor w = testing::random_tensor(ctx, {10}, dtype(), seed + 1);
  Tensor y = ctx.empty({4, 10}, dtype());
  ops::layer_norm(ctx, x, w, Tensor(), 1e-5f, y);
  ops::rms_norm(ctx, x, w, 1e-5f, y);
  EXPECT_EQ(testing::kernel_names(recorder), (std::vector<std::string>{"layer_norm_kernel", "rms_norm_kernel"}));
  ASSERT_EQ(recorder.ops().size(), 2u);
  EXPECT_EQ(recorder.ops()[0].name, "layer_norm");
  EXPECT_EQ(recorder.ops()[1].name, "rms_norm");
  ctx.set_recorder(nullptr);
}

TEST_P(NormTest, BadInputsAreNamedErrors) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  const DType other = dtype() == DType::f32 ? DType::bf16 : DType::f32;
  const Tensor x = testing::random_tensor(ctx, {4, 10}, dtype(), seed);
  const Tensor w = testing::random_tensor(ctx, {10}, dtype(), seed);
  Tensor y = ctx.empty({4, 10}, dtype());
  const Tensor w_bad = testing::random_tensor(ctx, {11}, dtype(), seed);
  testing::expect_input_error([&] { ops::layer_norm(ctx, x, w_bad, Tensor(), 1e-5f, y); }, {w_bad.str(), x.str()});
  testing::expect_input_error([&] { ops::rms_norm(ctx, x, w_bad, 1e-5f, y); }, {w_bad.str(), x.str()});
  testing::expect_input_error([&] { ops::layer_norm(ctx, x, w, w_bad, 1e-5f, y); }, {"bias", w_bad.str()});
  Tensor y_bad = ctx.empty({4, 11}, dtype());
  testing::expect_input_error([&] { ops::rms_norm(ctx, x, w, 1e-5f, y_bad); }, {y_bad.str(), x.str()});
  const Tensor w_other = testing::random_tensor(ctx, {10}, other, seed);
  testing::expect_input_error([&] { ops::rms_norm(ctx, x, w_other, 1e-5f, y); }, {"dtype", w_other.str()});
  const Tensor x_t = testing::random_tensor(ctx, {10, 4}, dtype(), seed).transpose(0, 1);
  testing::expect_input_error([&] { ops::layer_norm(ctx, x_t, w, Tensor(), 1e-5f, y); }, {x_t.str()});
  testing::expect_input_error([&] { ops::layer_norm(ctx, x, w, Tensor(), -1.0f, y); }, {"eps"});
}

INSTANTIATE_TEST_SUITE_P(Devices, NormTest, testing::device_dtype_values(), testing::device_dtype_name);

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

TEST_P(CudaOps, LayerNormAndRmsNorm) {
  Devices dev;
  for (int64_t n : {1, 7, 768, 1000}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    // An offset mean: the two-pass variance must not cancel.
    Tensor x = random_tensor(dev.cpu, {2, 5, n}, dtype(), seed, 2.0f, 4.0f);
    Tensor w = random_tensor(dev.cpu, {n}, dtype(), seed + 1, 0.5f, 1.5f);
    Tensor b = random_tensor(dev.cpu, {n}, dtype(), seed + 2);
    Tensor x_gpu = dev.gpu_copy(x), w_gpu = dev.gpu_copy(w), b_gpu = dev.gpu_copy(b);
    Tensor y_gpu;
    Tensor y_cpu = dev.poisoned_pair(x.shape(), dtype(), &y_gpu);
    const std::string what = " n " + std::to_string(n);
    ops::layer_norm(dev.cpu, x, w, b, 1e-5f, y_cpu);
    ops::layer_norm(dev.gpu, x_gpu, w_gpu, b_gpu, 1e-5f, y_gpu);
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "layer_norm" + what);
    fill_nan(y_cpu);
    fill_nan(y_gpu);
    ops::layer_norm(dev.cpu, x, w, Tensor(), 1e-5f, y_cpu);
    ops::layer_norm(dev.gpu, x_gpu, w_gpu, Tensor(), 1e-5f, y_gpu);
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "layer_norm without bias" + what);
    fill_nan(y_cpu);
    fill_nan(y_gpu);
    ops::rms_norm(dev.cpu, x, w, 1e-6f, y_cpu);
    ops::rms_norm(dev.gpu, x_gpu, w_gpu, 1e-6f, y_gpu);
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "rms_norm" + what);
  }
}

// x may be a row-strided view (ops/norm/norm.h), as on the CPU. The row stride decides the
// vector path too: a column slice out of rows of odd length (ld 129) has aligned data and
// n % pack == 0 but misaligned row starts, so it must take the element-by-element path; a
// slice with ld 136 keeps every row start 16-byte aligned (f32 and f16/bf16 packs).
TEST_P(CudaOps, NormsOnRowStridedViews) {
  Devices dev;
  const int64_t rows = 6, n = 64;
  for (int64_t ld : {int64_t{129}, int64_t{136}}) {
    for (int64_t first : {int64_t{0}, int64_t{8}, int64_t{3}}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed);
      const std::string what = " ld " + std::to_string(ld) + " first column " + std::to_string(first);
      Tensor wide = random_tensor(dev.cpu, {rows, ld}, dtype(), seed, 2.0f, 4.0f);
      Tensor w = random_tensor(dev.cpu, {n}, dtype(), seed + 1, 0.5f, 1.5f);
      Tensor b = random_tensor(dev.cpu, {n}, dtype(), seed + 2);
      Tensor wide_gpu = dev.gpu_copy(wide), w_gpu = dev.gpu_copy(w), b_gpu = dev.gpu_copy(b);
      const Tensor x = wide.slice(1, first, first + n);
      const Tensor x_gpu = wide_gpu.slice(1, first, first + n);
      Tensor y_gpu;
      Tensor y_cpu = dev.poisoned_pair({rows, n}, dtype(), &y_gpu);
      ops::layer_norm(dev.cpu, x, w, b, 1e-5f, y_cpu);
      ops::layer_norm(dev.gpu, x_gpu, w_gpu, b_gpu, 1e-5f, y_gpu);
      expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "layer_norm strided" + what);
      fill_nan(y_cpu);
      fill_nan(y_gpu);
      ops::rms_norm(dev.cpu, x, w, 1e-6f, y_cpu);
      ops::rms_norm(dev.gpu, x_gpu, w_gpu, 1e-6f, y_gpu);
      expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "rms_norm strided" + what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::Values(DType::f32, DType::f16, DType::bf16), dtype_param_name);

}  // namespace
}  // namespace blockscope
