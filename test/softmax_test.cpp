// softmax and softmax_scale_causal beyond the op harness (value against the reference on every device and dtype, in place, CUDA against the CPU,
// kernels, FLOPs and bytes, refused calls: test/op_harness_test.cpp):
// huge logits, fully masked rows (zeros, not NaN), NaN rows, every row-kernel shape.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/softmax/softmax.h"
#include "profiler/recorder.h"
#include "runtime/error.h"
#include "reference/attention_reference.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"
#include "test/cuda_vs_cpu.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;
using bt::expect_input_error;
using bt::kernel_names;
using reference::RefTensor;

// The worst row's relative error (rows of n: a row is measured against its own largest
// probability), recorded under "softmax.<dtype>" with its share of bt::softmax_bound.
double row_error(const std::vector<float>& got, const std::vector<double>& want, int64_t n, DType dtype) {
  const double error = bt::max_row_relative_error(got, want, static_cast<size_t>(n));
  bt::report_error(std::string("softmax.") + dtype_name(dtype), error, bt::softmax_bound(dtype, n));
  return error;
}

class Softmax : public ::testing::TestWithParam<Device> {};

TEST_P(Softmax, HugeLogitsDoNotOverflow) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  // ±3e4 fits f16 (max 65504), but exp(3e4) overflows everything: the max must come off first.
  for (DType dtype : bt::compute_dtypes()) {
    const uint64_t seed = bt::fresh_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype));
    Tensor x = bt::random_tensor(ctx, {9, 257}, dtype, seed, -3.0e4f, 3.0e4f);
    Tensor y = bt::poisoned_tensor(ctx, {9, 257}, dtype);
    ops::softmax(ctx, x, y);
    const RefTensor expected = reference::softmax_rows(reference::from_tensor(x));
    EXPECT_LE(bt::max_relative_error(to_floats(y), expected.data), bt::softmax_bound(dtype, 257));

    Tensor z = bt::poisoned_tensor(ctx, {9, 257}, dtype);
    ops::softmax_scale_causal(ctx, x, 1.0f, true, z);
    const RefTensor expected_causal = reference::softmax_scale_causal(reference::from_tensor(x), 1.0, true);
    EXPECT_LE(bt::max_relative_error(to_floats(z), expected_causal.data), bt::softmax_bound(dtype, 257));
  }
}

TEST_P(Softmax, FullyMaskedRowIsZeros) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (DType dtype : bt::compute_dtypes()) {
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
              bt::softmax_bound(dtype, 4));
  }
}

// Every kernel shape the CUDA softmax picks (a warp per row up to 1024, a block per row up to
// 16384, streaming beyond; 16-byte packs or elements), rows 1 / 7 / 1000, against the float64
// reference and against the CPU backend; causal with Sq != Sk (limits <= 0 give zero rows).
TEST_P(Softmax, EveryRowShapeMatchesReferenceAndCpu) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Context cpu(Device::cpu());
  struct C { int64_t rows, n; };
  for (DType dtype : bt::compute_dtypes()) {
    for (const C c : {C{1, 1}, C{7, 37}, C{1000, 37}, C{7, 64}, C{7, 1000}, C{1, 1024}, C{7, 1032}, C{1, 4097},
                      C{3, 4096}, C{2, 16400}, C{1, 20000}}) {
      const uint64_t seed = bt::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype) << " " << c.rows << "x" << c.n);
      Tensor x = bt::random_tensor(ctx, {c.rows, c.n}, dtype, seed, -8.0f, 8.0f);
      Tensor y = bt::poisoned_tensor(ctx, {c.rows, c.n}, dtype);
      ops::softmax(ctx, x, y);
      const std::vector<float> got = to_floats(y);
      ASSERT_EQ(bt::first_nan(got), -1);
      EXPECT_LE(row_error(got, reference::softmax_rows(reference::from_tensor(x)).data, c.n, dtype), bt::softmax_bound(dtype, c.n));
      Tensor xc = cpu.copy_from(x);
      Tensor yc = bt::poisoned_tensor(cpu, {c.rows, c.n}, dtype);
      ops::softmax(cpu, xc, yc);
      EXPECT_LE(bt::max_relative_error(got, bt::to_doubles(yc)), 2.0 * bt::softmax_bound(dtype, c.n));

      // Causal, Sq = rows > Sk for the short rows: the first rows see nothing (zeros).
      const int64_t sq = c.rows;
      for (float scale : {0.125f, 1.0f}) {
        Tensor z = bt::poisoned_tensor(ctx, {1, sq, c.n}, dtype);
        const Tensor x3 = x.reshape({1, sq, c.n});
        ops::softmax_scale_causal(ctx, x3, scale, true, z);
        const std::vector<float> gz = to_floats(z);
        ASSERT_EQ(bt::first_nan(gz), -1);
        EXPECT_LE(row_error(gz, reference::softmax_scale_causal(reference::from_tensor(x3), scale, true).data, c.n, dtype),
                  bt::softmax_bound(dtype, c.n));
      }
    }
  }
}

// NaN semantics, as on the CPU: a NaN next to a finite value makes the whole row NaN; a row of
// only -inf (and NaN) is zeros; masked NaNs (causal, past the limit) do not count.
TEST_P(Softmax, NanRowsAndMaskedRows) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Context cpu(Device::cpu());
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (DType dtype : bt::compute_dtypes()) {
    for (int64_t n : {int64_t{8}, int64_t{37}, int64_t{1000}, int64_t{4097}, int64_t{20000}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " n " << n);
      std::vector<float> v(static_cast<size_t>(3 * n), 0.25f);
      v[static_cast<size_t>(n / 2)] = nan;                                   // row 0: NaN among finite
      for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(n + j)] = -inf;  // row 1: -inf and a NaN
      v[static_cast<size_t>(n + n - 1)] = nan;
      for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(2 * n + j)] = static_cast<float>(j % 7);
      v[static_cast<size_t>(3 * n - 1)] = nan;                               // row 2: NaN at the end
      Tensor x = ctx.empty({3, n}, dtype);
      from_floats(x, v);
      Tensor y = bt::poisoned_tensor(ctx, {3, n}, dtype);
      ops::softmax(ctx, x, y);
      const std::vector<float> got = to_floats(y);
      Tensor xc = cpu.copy_from(x);
      Tensor yc = bt::poisoned_tensor(cpu, {3, n}, dtype);
      ops::softmax(cpu, xc, yc);
      const std::vector<float> want = to_floats(yc);
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_TRUE(std::isnan(got[j])) << j;
        EXPECT_EQ(got[n + j], 0.0f) << j;
        EXPECT_TRUE(std::isnan(got[2 * n + j])) << j;
        EXPECT_EQ(std::isnan(want[j]), std::isnan(got[j]));
        EXPECT_EQ(want[n + j], got[n + j]);
      }
      // Causal with Sq = Sk = 3 rows of n: row i sees j <= i + n - 3; the NaN at the end of
      // row 2 is visible, a NaN at the end of row 0 (masked when n > 1) is not.
      std::vector<float> w(static_cast<size_t>(3 * n), 1.0f);
      w[static_cast<size_t>(n - 1)] = nan;
      w[static_cast<size_t>(3 * n - 1)] = nan;
      Tensor xs = ctx.empty({1, 3, n}, dtype);
      from_floats(xs, w);
      Tensor z = bt::poisoned_tensor(ctx, {1, 3, n}, dtype);
      ops::softmax_scale_causal(ctx, xs, 0.5f, true, z);
      const std::vector<float> gz = to_floats(z);
      if (n >= 3) {
        EXPECT_EQ(bt::first_nan(std::vector<float>(gz.begin(), gz.begin() + 2 * n)), -1);
        EXPECT_TRUE(std::isnan(gz[2 * n]));
        EXPECT_EQ(gz[n - 1], 0.0f);
        EXPECT_NEAR(gz[0], 1.0 / static_cast<double>(n - 2), 4.0 * dtype_epsilon(dtype));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Softmax, ::testing::ValuesIn(bt::test_devices()), bt::device_test_name);

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

TEST_P(CudaOps, SoftmaxPlainLargeLogitsAndFullyMaskedRows) {
  Devices dev;
  for (int64_t n : {1, 7, 128, 1000, 4099}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    // Logits up to ±80: exp would overflow f32 without the max subtracted.
    Tensor x = random_tensor(dev.cpu, {6, n}, dtype(), seed, -80.0f, 80.0f);
    std::vector<float> values = to_floats(x);
    for (int64_t j = 0; j < n; ++j) values[static_cast<size_t>(2 * n + j)] = -INFINITY;  // row 2 fully masked
    from_floats(x, values);
    Tensor x_gpu = dev.gpu_copy(x);
    Tensor y_gpu;
    Tensor y_cpu = dev.poisoned_pair({6, n}, dtype(), &y_gpu);
    ops::softmax(dev.cpu, x, y_cpu);
    ops::softmax(dev.gpu, x_gpu, y_gpu);
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "softmax n " + std::to_string(n));
    const std::vector<float> out = to_floats(y_gpu);
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(out[static_cast<size_t>(2 * n + j)], 0.0f) << "fully masked row";
    ops::softmax(dev.gpu, x_gpu, x_gpu);  // in place
    expect_cuda_matches_cpu(x_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "softmax in place n " + std::to_string(n));
  }
}

// A NaN logit makes its whole row NaN on the CPU (max ignores it, exp and the sum propagate
// it); CUDA must not lose it when it is the first value a thread reads (column 0: thread 0's
// first element, before any finite value). Rows without NaN are unaffected.
TEST_P(CudaOps, SoftmaxNanLogitGivesANanRowAsOnTheCpu) {
  Devices dev;
  for (int64_t n : {7, 64, 1000}) {
    for (bool fused : {false, true}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed);
      const std::string what = "n " + std::to_string(n) + (fused ? " fused causal" : "");
      Tensor x = random_tensor(dev.cpu, {1, 1, 3, n}, dtype(), seed, -6.0f, 6.0f);
      std::vector<float> values = to_floats(x);
      values[0] = std::numeric_limits<float>::quiet_NaN();  // row 0, column 0
      from_floats(x, values);
      Tensor y_gpu;
      Tensor y_cpu = dev.poisoned_pair(x.shape(), dtype(), &y_gpu);
      if (fused) {
        // Sk > Sq: row 0 sees columns 0 .. n - 3, so it has finite values besides the NaN.
        ops::softmax_scale_causal(dev.cpu, x, 0.5f, true, y_cpu);
        ops::softmax_scale_causal(dev.gpu, dev.gpu_copy(x), 0.5f, true, y_gpu);
      } else {
        ops::softmax(dev.cpu, x, y_cpu);
        ops::softmax(dev.gpu, dev.gpu_copy(x), y_gpu);
      }
      const std::vector<float> cpu = to_floats(y_cpu), gpu = to_floats(y_gpu);
      const int64_t visible = fused ? n - 2 : n;
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(std::isnan(gpu[static_cast<size_t>(j)]), std::isnan(cpu[static_cast<size_t>(j)]))
            << what << " column " << j;
        if (j < visible) {
          ASSERT_TRUE(std::isnan(gpu[static_cast<size_t>(j)])) << what << " column " << j;
        }
      }
      for (int64_t j = n; j < 3 * n; ++j) {
        ASSERT_FALSE(std::isnan(gpu[static_cast<size_t>(j)])) << what << " row " << j / n;
        EXPECT_NEAR(gpu[static_cast<size_t>(j)], cpu[static_cast<size_t>(j)], cuda_tolerance(dtype(), 2.0)) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::ValuesIn(kComputeDTypes), dtype_param_name);

}  // namespace
}  // namespace blockscope
