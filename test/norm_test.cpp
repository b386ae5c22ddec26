// LayerNorm and RMSNorm beyond the op harness (value against the reference on every device and dtype, in place, CUDA against the CPU,
// kernels, FLOPs and bytes, refused calls: test/op_harness_test.cpp):
// eps inside the square root, strided rows, every row-kernel shape against the CPU.
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

// Bounds: testing::norm_bound (test/accuracy_bounds.h).

class NormTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

struct Case {
  int64_t rows, n;
};
const std::vector<Case> kCases = {{1, 37}, {7, 100}, {1000, 37}, {300, 100}, {1, 4097}, {7, 4097}, {64, 4097}};

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
            testing::norm_bound(dtype(), n));
  ops::rms_norm(ctx, x, w, eps, y);
  EXPECT_LE(testing::max_relative_error(to_floats(y), reference::rms_norm(xr, wr, eps).data),
            testing::norm_bound(dtype(), n));
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
            testing::norm_bound(dtype(), n));
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
    const double tol = testing::norm_bound(dtype(), c.n) * (dtype() == DType::f32 ? 100.0 : 1.0);
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
    EXPECT_LE(testing::max_relative_error(gz, expected_rms.data), testing::norm_bound(dtype(), c.n));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, NormTest, testing::device_dtype_values(), testing::device_dtype_name);

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

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

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::ValuesIn(kComputeDTypes), dtype_param_name);

}  // namespace
}  // namespace blockscope
