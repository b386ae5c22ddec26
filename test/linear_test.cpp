// linear / matmul_add beyond the op harness (value against the reference on every device and dtype, in place, CUDA against the CPU,
// kernels, FLOPs and bytes, refused calls: test/op_harness_test.cpp):
// strided and 3-D rows, matmul_add, input errors, the CUDA GEMM plans (misaligned
// slices, size-one weight dims, autotune, epilogue fallback), and CUDA's weight-streaming skinny
// GEMM and its rule (ops/linear/skinny_gemm.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/linear/linear.h"
#include "profiler/recorder.h"
#include "test/op_test_helpers.h"
#include "reference/ops_reference.h"
#include "test/cuda_vs_cpu.h"
#include "ops/linear/batched_matmul.h"
#include "ops/linear/skinny_gemm.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "ops/common/cuda/cublaslt_gemm.h"
#endif

namespace blockscope {
namespace {

using ops::LinearActivation;
using ops::LinearPath;
using ops::WeightLayout;
using reference::RefTensor;
using testing::ScopedEnv;

constexpr LinearPath kPaths[] = {LinearPath::naive, LinearPath::epilogue, LinearPath::addmm};
constexpr WeightLayout kLayouts[] = {WeightLayout::out_in, WeightLayout::in_out};

// Bounds: testing::linear_bound (test/accuracy_bounds.h).

class LinearTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

struct Case {
  Shape x_shape;  // [..., in]
  int64_t out;
};

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
    // The same sums, but not always bit for bit: a GEMM library may pick another kernel (and
    // summation order) for another row stride (oneDNN does). Rows read from the wrong place
    // would be O(1) off. Allowed: another f32 summation order over k = 33 terms, then one
    // rounding step of the dtype either way.
    const std::vector<float> dense = to_floats(y_dense);
    EXPECT_LT(testing::max_relative_error(to_floats(y_view), std::vector<double>(dense.begin(), dense.end())),
              2 * dtype_epsilon(dtype()) + 16 * dtype_epsilon(DType::f32));
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
  const double tolerance = testing::linear_bound(expected, reference::linear_magnitude(ar, br, &cr, false), k, dtype());
  for (LinearPath path : kPaths) {
    SCOPED_TRACE(ops::path_name(path));
    Tensor out = testing::poisoned_tensor(ctx, {m, n}, dtype());
    ops::matmul_add(ctx, a, b, c, out, path);
    EXPECT_LE(testing::max_abs_error(to_floats(out), expected.data), tolerance);
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

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

TEST_P(CudaOps, LinearStridedRowsAnd3dInput) {
  Devices dev;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  // x: the right half of [2, 9, 2·48] (rows 96 elements apart), read without a copy.
  Tensor wide = random_tensor(dev.cpu, {2, 9, 96}, dtype(), seed);
  Tensor w = random_tensor(dev.cpu, {40, 48}, dtype(), seed + 1, -0.2f, 0.2f);
  Tensor b = random_tensor(dev.cpu, {40}, dtype(), seed + 2);
  Tensor wide_gpu = dev.gpu_copy(wide);
  Tensor y_gpu;
  Tensor y_cpu = dev.poisoned_pair({2, 9, 40}, dtype(), &y_gpu);
  ops::linear(dev.cpu, wide.slice(2, 48, 96), w, b, y_cpu, ops::LinearPath::epilogue);
  ops::linear(dev.gpu, wide_gpu.slice(2, 48, 96), dev.gpu_copy(w), dev.gpu_copy(b), y_gpu, ops::LinearPath::epilogue);
  expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), "strided rows");
}

// Columns [1, 1 + 32) of [8, 40]: the first element sits one element past an aligned address.
// cuBLASLt is told the operand's real (element) alignment and computes it, as the CPU does.
// Also with a bias one element off alignment.
TEST_P(CudaOps, LinearOnAMisalignedSliceMatchesTheCpu) {
  Devices dev;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Tensor wide = random_tensor(dev.cpu, {8, 40}, dtype(), seed);
  Tensor w = random_tensor(dev.cpu, {16, 32}, dtype(), seed + 1);
  Tensor bias_wide = random_tensor(dev.cpu, {17}, dtype(), seed + 2);
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    Tensor b_cpu = with_bias ? bias_wide.slice(0, 1, 17) : Tensor();
    Tensor b_gpu = with_bias ? dev.gpu_copy(bias_wide).slice(0, 1, 17) : Tensor();
    Tensor y_gpu;
    Tensor y_cpu = dev.poisoned_pair({8, 16}, dtype(), &y_gpu);
    ops::linear(dev.cpu, wide.slice(1, 1, 33), w, b_cpu, y_cpu, ops::LinearPath::epilogue);
    ops::linear(dev.gpu, dev.gpu_copy(wide).slice(1, 1, 33), dev.gpu_copy(w), b_gpu, y_gpu,
                ops::LinearPath::epilogue);
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), "misaligned slice");
  }
}

// max over outputs of |alpha|·Σ_k |a[.., m, k]·b[.., k, n]| for a [B, H, m, k] and b [B, Hkv, k, n]
// ([B, Hkv, n, k] when trans_b), head h reading kv head h / group: the scale both devices' f32
// sums err against. An output's own value can cancel to near zero (a 1×8×1 product does, now and
// then), so errors are measured against this, not against the largest output.
double batched_matmul_magnitude(const Tensor& a, const Tensor& b, bool trans_b, float alpha, int64_t group) {
  const std::vector<float> av = to_floats(a), bv = to_floats(b);
  const int64_t batch = a.size(0), heads = a.size(1), m = a.size(2), k = a.size(3);
  const int64_t kv_heads = b.size(1), n = trans_b ? b.size(2) : b.size(3);
  double largest = 0.0;
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int64_t kk = 0; kk < k; ++kk) {
            const double x = av[static_cast<size_t>(((bi * heads + h) * m + i) * k + kk)];
            const int64_t kvh = h / group;
            const int64_t at = trans_b ? ((bi * kv_heads + kvh) * n + j) * k + kk : ((bi * kv_heads + kvh) * k + kk) * n + j;
            sum += std::fabs(x * bv[static_cast<size_t>(at)]);
          }
          largest = std::max(largest, std::fabs(alpha) * sum);
        }
  return largest;
}

TEST_P(CudaOps, BatchedMatmulWithGqaGroupsAndAlpha) {
  Devices dev;
  struct Case {
    int64_t batch, heads, kv_heads, m, k, n;
  };
  for (Case c : {Case{1, 1, 1, 1, 8, 1}, Case{2, 4, 4, 7, 24, 13}, Case{2, 4, 2, 9, 16, 33}, Case{1, 8, 1, 5, 64, 17}}) {
    for (bool trans_b : {false, true}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed);
      const int64_t group = c.heads / c.kv_heads;
      const Shape b_shape = trans_b ? Shape{c.batch, c.kv_heads, c.n, c.k} : Shape{c.batch, c.kv_heads, c.k, c.n};
      Tensor a = random_tensor(dev.cpu, {c.batch, c.heads, c.m, c.k}, dtype(), seed);
      Tensor b = random_tensor(dev.cpu, b_shape, dtype(), seed + 1);
      Tensor out_gpu;
      Tensor out_cpu = dev.poisoned_pair({c.batch, c.heads, c.m, c.n}, dtype(), &out_gpu);
      ops::batched_matmul(dev.cpu, a, b, out_cpu, trans_b, 0.37f, group, "gemm_test");
      ops::batched_matmul(dev.gpu, dev.gpu_copy(a), dev.gpu_copy(b), out_gpu, trans_b, 0.37f, group, "gemm_test");
      const std::string what = "group " + std::to_string(group) + (trans_b ? " trans_b" : "") + " m " + std::to_string(c.m);
      const std::vector<float> gpu_values = to_floats(out_gpu), cpu_values = to_floats(out_cpu);
      ASSERT_EQ(testing::first_nan(cpu_values), -1) << what << ": CPU output has an unwritten (NaN) element";
      ASSERT_EQ(testing::first_nan(gpu_values), -1) << what << ": CUDA output has an unwritten (NaN) element";
      const double error = testing::max_abs_error(gpu_values, std::vector<double>(cpu_values.begin(), cpu_values.end()));
      EXPECT_LE(error, cuda_tolerance(dtype()) * batched_matmul_magnitude(a, b, trans_b, 0.37f, group))
          << what << ": CUDA vs CPU max error, relative to max |alpha|·Σ|a·b|";
    }
  }
}

// A 2-D weight with a size-1 dimension is contiguous whatever that dimension's stride
// (Tensor::is_contiguous), e.g. the transpose of a [in, 1] or [1, out] tensor. The CUDA linear
// took ldb from w.stride(0) and required w.stride(1) == 1, so these failed on CUDA only (ldb 1
// below k, or "must be 2-D with contiguous rows"); the rows are w.size(1) apart.
TEST_P(CudaOps, LinearWeightWithASizeOneDimensionOfAnyStride) {
  Devices dev;
  struct Case {
    const char* what;
    Shape stored;  // w is the transpose of a contiguous tensor of this shape
    ops::WeightLayout layout;
    int64_t in;
  };
  for (const Case& c : {Case{"[1, in] out_in (out 1)", {24, 1}, ops::WeightLayout::out_in, 24},
                        Case{"[out, 1] out_in (in 1)", {1, 20}, ops::WeightLayout::out_in, 1},
                        Case{"[1, out] in_out (in 1)", {20, 1}, ops::WeightLayout::in_out, 1}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    Tensor stored = random_tensor(dev.cpu, c.stored, dtype(), seed + 1, -0.5f, 0.5f);
    const Tensor w_cpu = stored.transpose(0, 1);
    const Tensor w_gpu = dev.gpu_copy(stored).transpose(0, 1);
    ASSERT_TRUE(w_cpu.is_contiguous() && w_gpu.is_contiguous()) << c.what;
    const int64_t out = c.layout == ops::WeightLayout::out_in ? w_cpu.size(0) : w_cpu.size(1);
    Tensor x = random_tensor(dev.cpu, {6, c.in}, dtype(), seed);
    Tensor b = random_tensor(dev.cpu, {out}, dtype(), seed + 2);
    for (ops::LinearPath path : {ops::LinearPath::naive, ops::LinearPath::epilogue, ops::LinearPath::addmm}) {
      Tensor y_gpu;
      Tensor y_cpu = dev.poisoned_pair({6, out}, dtype(), &y_gpu);
      ops::linear(dev.cpu, x, w_cpu, b, y_cpu, path, c.layout);
      ops::linear(dev.gpu, dev.gpu_copy(x), w_gpu, dev.gpu_copy(b), y_gpu, path, c.layout);
      expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), std::string(c.what) + " " + ops::path_name(path));
    }
  }
}

// k = 0 (no input features / no keys): an empty sum. The CPU gives y = bias (or 0) then the
// activation, and c = 0 for batched_matmul; CUDA must give the same.
TEST_P(CudaOps, LinearAndBatchedMatmulWithKZero) {
  Devices dev;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  for (ops::LinearPath path : {ops::LinearPath::naive, ops::LinearPath::epilogue, ops::LinearPath::addmm}) {
    for (ops::WeightLayout layout : {ops::WeightLayout::out_in, ops::WeightLayout::in_out}) {
      for (bool with_bias : {false, true}) {
        for (ops::LinearActivation act : {ops::LinearActivation::none, ops::LinearActivation::gelu_tanh}) {
          const Shape w_shape = layout == ops::WeightLayout::out_in ? Shape{13, 0} : Shape{0, 13};
          Tensor b = with_bias ? random_tensor(dev.cpu, {13}, dtype(), seed) : Tensor();
          Tensor y_gpu;
          Tensor y_cpu = dev.poisoned_pair({5, 13}, dtype(), &y_gpu);
          ops::linear(dev.cpu, dev.cpu.empty({5, 0}, dtype()), dev.cpu.empty(w_shape, dtype()), b, y_cpu, path, layout,
                      act);
          ops::linear(dev.gpu, dev.gpu.empty({5, 0}, dtype()), dev.gpu.empty(w_shape, dtype()),
                      with_bias ? dev.gpu_copy(b) : Tensor(), y_gpu, path, layout, act);
          expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()),
                       std::string("k = 0 ") + ops::path_name(path) + (with_bias ? " bias" : "") +
                           (act == ops::LinearActivation::gelu_tanh ? " gelu" : ""));
        }
      }
    }
  }
  for (bool trans_b : {false, true}) {
    const Shape b_shape = trans_b ? Shape{2, 1, 7, 0} : Shape{2, 1, 0, 7};
    Tensor c_gpu;
    Tensor c_cpu = dev.poisoned_pair({2, 3, 4, 7}, dtype(), &c_gpu);
    ops::batched_matmul(dev.cpu, dev.cpu.empty({2, 3, 4, 0}, dtype()), dev.cpu.empty(b_shape, dtype()), c_cpu, trans_b,
                        1.0f, 3, "gemm_test");
    ops::batched_matmul(dev.gpu, dev.gpu.empty({2, 3, 4, 0}, dtype()), dev.gpu.empty(b_shape, dtype()), c_gpu, trans_b,
                        1.0f, 3, "gemm_test");
    const std::vector<float> values = to_floats(c_gpu);
    for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], 0.0f) << "element " << i << (trans_b ? " trans_b" : "");
    expect_cuda_matches_cpu(c_gpu, c_cpu, 0.0, "batched k = 0");
  }
}

// GemmSettings::autotune (API only, never exercised before): the timed candidates run on a
// scratch output, so addmm's bias copy in y (beta = 1) must survive, and the plan is made
// before the kernel scope opens, so each call is still one kernel event with its own name.
TEST_P(CudaOps, LinearWithAutotunedPlansMatchesCpu) {
#ifndef BLOCKSCOPE_WITH_CUDA
  GTEST_SKIP() << "CUDA is not built";
#else
  Devices dev;
  ops::cuda::cublaslt::GemmSettings& settings = ops::cuda::cublaslt::settings(dev.gpu);
  settings.autotune = true;
  settings.autotune_candidates = 4;
  settings.autotune_iterations = 2;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 70, in = 96, out = 80;
  Tensor x = random_tensor(dev.cpu, {rows, in}, dtype(), seed);
  Tensor w = random_tensor(dev.cpu, {out, in}, dtype(), seed + 1, -0.2f, 0.2f);
  Tensor b = random_tensor(dev.cpu, {out}, dtype(), seed + 2);
  const Tensor x_gpu = dev.gpu_copy(x), w_gpu = dev.gpu_copy(w), b_gpu = dev.gpu_copy(b);
  struct Case {
    ops::LinearPath path;
    ops::LinearActivation act;
    std::vector<std::string> kernels;
  };
  for (const Case& c : {Case{ops::LinearPath::addmm, ops::LinearActivation::none, {"bias_broadcast_copy_kernel", "gemm"}},
                        Case{ops::LinearPath::epilogue, ops::LinearActivation::gelu_tanh, {"gemm_bias_gelu"}},
                        Case{ops::LinearPath::epilogue, ops::LinearActivation::none, {"gemm_bias"}}}) {
    const size_t plans_before = ops::cuda::cublaslt::cached_plans(dev.gpu);
    Tensor y_gpu;
    Tensor y_cpu = dev.poisoned_pair({rows, out}, dtype(), &y_gpu);
    ops::linear(dev.cpu, x, w, b, y_cpu, c.path, ops::WeightLayout::out_in, c.act);
    profiler::Recorder recorder(dev.gpu);
    dev.gpu.set_recorder(&recorder);
    ops::linear(dev.gpu, x_gpu, w_gpu, b_gpu, y_gpu, c.path, ops::WeightLayout::out_in, c.act);
    dev.gpu.set_recorder(nullptr);
    recorder.resolve();
    EXPECT_EQ(testing::kernel_names(recorder), c.kernels) << ops::path_name(c.path);
    EXPECT_EQ(ops::cuda::cublaslt::cached_plans(dev.gpu), plans_before + 1) << "one new (autotuned) plan per epilogue";
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), std::string("autotuned ") + ops::path_name(c.path));
  }
#endif
}

// Where cuBLASLt has no algorithm for the BIAS / GELU_BIAS / GELU epilogue, the epilogue path
// runs the DEFAULT epilogue and our own kernels, visibly: the kernel table shows them and a
// note on stderr (once per shape) says why. GemmSettings::force_epilogue_fallback stands in
// for the heuristic's refusal (the simulated heuristic, like the real one on most shapes,
// accepts every element-aligned bias).
TEST_P(CudaOps, LinearEpilogueFallsBackWhenCublasLtHasNoAlgorithm) {
#ifndef BLOCKSCOPE_WITH_CUDA
  GTEST_SKIP() << "CUDA is not built";
#else
  Devices dev;
  ops::cuda::cublaslt::settings(dev.gpu).force_epilogue_fallback = true;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 37, in = 64, out = 50;
  Tensor x = random_tensor(dev.cpu, {rows, in}, dtype(), seed);
  Tensor w = random_tensor(dev.cpu, {out, in}, dtype(), seed + 1, -0.2f, 0.2f);
  Tensor b = random_tensor(dev.cpu, {out}, dtype(), seed + 2);
  const Tensor x_gpu = dev.gpu_copy(x), w_gpu = dev.gpu_copy(w), b_gpu = dev.gpu_copy(b);
  struct Case {
    ops::LinearActivation act;
    bool bias;
    std::vector<std::string> kernels;
  };
  for (const Case& c : {Case{ops::LinearActivation::gelu_tanh, true, {"gemm", "bias_add_kernel", "gelu_tanh_kernel"}},
                        Case{ops::LinearActivation::none, true, {"gemm", "bias_add_kernel"}},
                        Case{ops::LinearActivation::gelu_tanh, false, {"gemm", "gelu_tanh_kernel"}}}) {
    const Tensor no_bias;
    Tensor y_gpu;
    Tensor y_cpu = dev.poisoned_pair({rows, out}, dtype(), &y_gpu);
    // The CPU's naive path rounds where the fallback does (after the GEMM, the bias, the GELU).
    ops::linear(dev.cpu, x, w, c.bias ? b : no_bias, y_cpu, ops::LinearPath::naive, ops::WeightLayout::out_in, c.act);
    ::testing::internal::CaptureStderr();
    profiler::Recorder recorder(dev.gpu);
    dev.gpu.set_recorder(&recorder);
    for (int call = 0; call < 2; ++call) {
      ops::linear(dev.gpu, x_gpu, w_gpu, c.bias ? b_gpu : no_bias, y_gpu, ops::LinearPath::epilogue,
                  ops::WeightLayout::out_in, c.act);
    }
    dev.gpu.set_recorder(nullptr);
    const std::string err = ::testing::internal::GetCapturedStderr();
    recorder.resolve();
    std::vector<std::string> twice = c.kernels;
    twice.insert(twice.end(), c.kernels.begin(), c.kernels.end());
    EXPECT_EQ(testing::kernel_names(recorder), twice);
    const size_t note = err.find("epilogue is not used");
    EXPECT_NE(note, std::string::npos) << err;
    EXPECT_EQ(err.find("epilogue is not used", note + 1), std::string::npos) << "one note per shape: " << err;
    EXPECT_NE(err.find("force_epilogue_fallback"), std::string::npos) << err;
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), "epilogue fallback");
  }
  // The knob off again: the fused epilogue is back.
  ops::cuda::cublaslt::settings(dev.gpu).force_epilogue_fallback = false;
  Tensor y_gpu = testing::poisoned_tensor(dev.gpu, {rows, out}, dtype());
  profiler::Recorder recorder(dev.gpu);
  dev.gpu.set_recorder(&recorder);
  ops::linear(dev.gpu, x_gpu, w_gpu, b_gpu, y_gpu, ops::LinearPath::epilogue, ops::WeightLayout::out_in,
              ops::LinearActivation::gelu_tanh);
  dev.gpu.set_recorder(nullptr);
  recorder.resolve();
  EXPECT_EQ(testing::kernel_names(recorder), std::vector<std::string>{"gemm_bias_gelu"});
#endif
}

// A plan cached while autotune was off must not serve forever once it is turned on: the first
// call that may autotune re-plans it (replacing, not adding, the cache entry).
TEST_P(CudaOps, PlanMadeBeforeAutotuneIsReplannedWhenItIsTurnedOn) {
#ifndef BLOCKSCOPE_WITH_CUDA
  GTEST_SKIP() << "CUDA is not built";
#else
  Devices dev;
  ops::cuda::cublaslt::GemmSettings& settings = ops::cuda::cublaslt::settings(dev.gpu);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 70, in = 96, out = 80;
  Tensor x = random_tensor(dev.cpu, {rows, in}, dtype(), seed);
  Tensor w = random_tensor(dev.cpu, {out, in}, dtype(), seed + 1, -0.2f, 0.2f);
  Tensor b = random_tensor(dev.cpu, {out}, dtype(), seed + 2);
  const Tensor x_gpu = dev.gpu_copy(x), w_gpu = dev.gpu_copy(w), b_gpu = dev.gpu_copy(b);
  Tensor y_gpu;
  Tensor y_cpu = dev.poisoned_pair({rows, out}, dtype(), &y_gpu);
  ops::linear(dev.cpu, x, w, b, y_cpu, ops::LinearPath::epilogue, ops::WeightLayout::out_in);
  settings.autotune = false;
  const size_t plans_before = ops::cuda::cublaslt::cached_plans(dev.gpu);
  const size_t tuned_before = ops::cuda::cublaslt::autotuned_plans(dev.gpu);
  ops::linear(dev.gpu, x_gpu, w_gpu, b_gpu, y_gpu, ops::LinearPath::epilogue, ops::WeightLayout::out_in);
  ASSERT_EQ(ops::cuda::cublaslt::cached_plans(dev.gpu), plans_before + 1);
  EXPECT_EQ(ops::cuda::cublaslt::autotuned_plans(dev.gpu), tuned_before) << "autotune is off: the plan is the heuristic's";
  settings.autotune = true;
  settings.autotune_candidates = 4;
  settings.autotune_iterations = 2;
  ops::linear(dev.gpu, x_gpu, w_gpu, b_gpu, y_gpu, ops::LinearPath::epilogue, ops::WeightLayout::out_in);
  EXPECT_EQ(ops::cuda::cublaslt::cached_plans(dev.gpu), plans_before + 1) << "the entry is replaced, not added";
  EXPECT_EQ(ops::cuda::cublaslt::autotuned_plans(dev.gpu), tuned_before + 1) << "the old plan was re-planned with autotune";
  expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), "re-planned");
  // And it stays: a third call neither re-plans nor adds.
  ops::linear(dev.gpu, x_gpu, w_gpu, b_gpu, y_gpu, ops::LinearPath::epilogue, ops::WeightLayout::out_in);
  EXPECT_EQ(ops::cuda::cublaslt::cached_plans(dev.gpu), plans_before + 1);
  EXPECT_EQ(ops::cuda::cublaslt::autotuned_plans(dev.gpu), tuned_before + 1);
#endif
}

// ---- CUDA's weight-streaming skinny GEMM (ops/linear/skinny_gemm.h) ------------------------


// The rule alone (host code: runs in every build).
TEST(WeightStreamingRule, TakesSkinnyAlignedOutInGemmsOfAtLeastAMebibyteOfWeights) {
  using ops::WeightStreamingMode;
  ops::SkinnyGemm g;
  g.rows = 4;
  g.in = 1024;
  g.out = 512;
  g.dtype = DType::bf16;  // 1 MiB of weights: the threshold
  g.layout = WeightLayout::out_in;
  g.path = LinearPath::epilogue;
  g.rows_aligned16 = true;
  const auto with = [&](auto change) {
    ops::SkinnyGemm c = g;
    change(c);
    return c;
  };
  const auto automatic = WeightStreamingMode::automatic, on = WeightStreamingMode::on, off = WeightStreamingMode::off;
  EXPECT_EQ(ops::kWeightStreamingMaxRows, 16);
  EXPECT_EQ(ops::kWeightStreamingMinWeightBytes, 1 << 20);
  EXPECT_TRUE(ops::use_weight_streaming(g, automatic));
  EXPECT_TRUE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.path = LinearPath::naive; }), automatic));
  EXPECT_TRUE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.rows = 1; }), automatic));
  EXPECT_TRUE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.rows = 16; }), automatic));
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.rows = 17; }), automatic));
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.rows = 17; }), on));
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.rows = 0; }), on));
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.in = 0; }), on));
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.layout = WeightLayout::in_out; }), on));
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.path = LinearPath::addmm; }), on));
  EXPECT_FALSE(ops::use_weight_streaming(g, off));
  // Misaligned rows: cuBLASLt under auto, the kernel's scalar loads when forced.
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.rows_aligned16 = false; }), automatic));
  EXPECT_TRUE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.rows_aligned16 = false; }), on));
  // One byte of weights short of the threshold (bf16: 2 bytes an element): cuBLASLt under auto.
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.out = 511; }), automatic));
  EXPECT_TRUE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.out = 511; }), on));
  EXPECT_TRUE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.dtype = DType::f32, c.out = 256; }), automatic));
  EXPECT_FALSE(ops::use_weight_streaming(with([](ops::SkinnyGemm& c) { c.out = int64_t{1} << 31; }), on));

  // The alignment facts: bases, x's row stride (rows > 1), w's row length (out > 1), in bytes.
  alignas(16) static unsigned char buffer[64];
  const void* a = buffer;
  const void* a2 = buffer + 2;
  EXPECT_TRUE(ops::weight_streaming_rows_aligned16(a, 16, 3, a, 8, 5, DType::bf16));
  EXPECT_FALSE(ops::weight_streaming_rows_aligned16(a2, 16, 3, a, 8, 5, DType::bf16));
  EXPECT_FALSE(ops::weight_streaming_rows_aligned16(a, 16, 3, a2, 8, 5, DType::bf16));
  EXPECT_FALSE(ops::weight_streaming_rows_aligned16(a, 12, 3, a, 8, 5, DType::bf16));
  EXPECT_TRUE(ops::weight_streaming_rows_aligned16(a, 12, 1, a, 8, 5, DType::bf16));  // one row: no stride
  EXPECT_FALSE(ops::weight_streaming_rows_aligned16(a, 16, 3, a, 13, 5, DType::bf16));
  EXPECT_TRUE(ops::weight_streaming_rows_aligned16(a, 16, 3, a, 13, 1, DType::bf16));  // one output: no row length
  EXPECT_TRUE(ops::weight_streaming_rows_aligned16(a, 4, 3, a, 4, 5, DType::f32));
  EXPECT_FALSE(ops::weight_streaming_rows_aligned16(a, 4, 3, a, 6, 5, DType::f32));

  // The variable, read at each call: auto (or unset / empty), on, off; anything else refused by name.
  {
    ScopedEnv unset(ops::kWeightStreamingEnv, "");
    EXPECT_EQ(ops::weight_streaming_mode(), automatic);
  }
  for (const auto& [text, mode] : {std::pair{"auto", automatic}, std::pair{"on", on}, std::pair{"off", off}}) {
    ScopedEnv set(ops::kWeightStreamingEnv, text);
    EXPECT_EQ(ops::weight_streaming_mode(), mode) << text;
  }
  ScopedEnv bad(ops::kWeightStreamingEnv, "yes");
  testing::expect_input_error([] { ops::weight_streaming_mode(); }, {"BLOCKSCOPE_LINEAR_WEIGHT_STREAMING", "'yes'"});
}

// What one GPU call of linear recorded, and its error against the float64 reference.
struct StreamedCall {
  std::vector<std::string> kernels;
  std::string implementation;  // the first kernel's
};

// y = linear(x, w, bias) [+ tanh-GELU] on the GPU (x_gpu: the GPU operand, maybe a view, with
// x_cpu's values; w and bias copied from the CPU tensors given, or w_gpu when defined), recorded,
// and checked against the float64 reference: error within linear_bound, i.e. measured against
// max Σ|x·w| (an output's own value can cancel to near zero), through GELU's largest slope.
StreamedCall run_and_check(Devices& dev, const Tensor& x_cpu, const Tensor& x_gpu, const Tensor& w_cpu,
                           const Tensor& b_cpu, LinearPath path, LinearActivation act, const std::string& what,
                           const Tensor& w_gpu_given = Tensor()) {
  const DType dtype = x_cpu.dtype();
  const int64_t in = x_cpu.size(-1), out = w_cpu.size(0);
  const Tensor w_gpu = w_gpu_given.defined() ? w_gpu_given : dev.gpu_copy(w_cpu);
  const Tensor b_gpu = b_cpu.defined() ? dev.gpu_copy(b_cpu) : Tensor();
  Shape y_shape = x_cpu.shape();
  y_shape.back() = out;
  Tensor y = testing::poisoned_tensor(dev.gpu, y_shape, dtype);
  profiler::Recorder recorder(dev.gpu);
  dev.gpu.set_recorder(&recorder);
  ops::linear(dev.gpu, x_gpu, w_gpu, b_gpu, y, path, WeightLayout::out_in, act);
  dev.gpu.set_recorder(nullptr);
  recorder.resolve();
  StreamedCall call;
  call.kernels = testing::kernel_names(recorder);
  if (!recorder.kernels().empty()) call.implementation = recorder.kernels()[0].implementation;

  const RefTensor xr = testing::ref(x_cpu), wr = testing::ref(w_cpu);
  RefTensor br;
  if (b_cpu.defined()) br = testing::ref(b_cpu);
  const RefTensor* bp = b_cpu.defined() ? &br : nullptr;
  const bool gelu = act == LinearActivation::gelu_tanh;
  const RefTensor pre = reference::linear(xr, wr, bp, true);
  const RefTensor expected = gelu ? reference::activation(pre, ops::Activation::gelu_tanh) : pre;
  double bound = testing::linear_bound(pre, reference::linear_magnitude(xr, wr, bp, true), in, dtype);
  // The naive path stores x·wᵀ in the dtype before the bias kernel adds b: that rounding is
  // u_d·|x·wᵀ|, which exceeds linear_bound's u_d·|x·wᵀ + b| where the bias cancels the product
  // (an out = 1 case did: 2.1e-4 against 1.8e-4 in bf16).
  if (path == LinearPath::naive && bp != nullptr)
    bound += dtype_epsilon(dtype) * testing::max_abs(reference::linear(xr, wr, nullptr, true));
  if (gelu) bound *= testing::kMaxActivationSlope;
  const std::vector<float> values = to_floats(y);
  const int64_t nan_at = testing::first_nan(values);
  EXPECT_EQ(nan_at, -1) << what << ": output element " << nan_at << " is NaN (unwritten or wrong)";
  if (nan_at == -1) {
    EXPECT_LE(testing::max_abs_error(values, expected.data), bound)
        << what << ": max error against the float64 reference, bound from max Σ|x·w|";
  }
  return call;
}

std::string shape_label(int64_t rows, int64_t in, int64_t out) {
  return "rows " + std::to_string(rows) + " in " + std::to_string(in) + " out " + std::to_string(out);
}

// Forced on (the kernel wherever it is able), over rows 1..16, in with and without a partial
// pack (13, 257: a scalar tail where rows = out = 1, scalar rows otherwise) and out not a multiple
// of the outputs per block, each with and without bias and GELU on both paths; every call must
// have run the weight-streaming kernel, 16-byte loads exactly where every row is 16-byte aligned.
TEST_P(CudaOps, LinearWeightStreamingMatchesTheReference) {
  Devices dev;
  ScopedEnv force(ops::kWeightStreamingEnv, "on");
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  struct Variant {
    LinearPath path;
    bool bias;
    LinearActivation act;
    std::vector<std::string> kernels;
  };
  const auto none = LinearActivation::none, gelu = LinearActivation::gelu_tanh;
  const std::vector<Variant> variants = {
      {LinearPath::epilogue, true, gelu, {"linear_weight_streaming_bias_gelu"}},
      {LinearPath::epilogue, false, none, {"linear_weight_streaming"}},
      {LinearPath::naive, true, none, {"linear_weight_streaming", "bias_add_kernel"}},
      {LinearPath::epilogue, true, none, {"linear_weight_streaming_bias"}},
      {LinearPath::naive, false, gelu, {"linear_weight_streaming", "gelu_tanh_kernel"}},
      {LinearPath::epilogue, false, gelu, {"linear_weight_streaming_gelu"}},
  };
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype()));
  uint64_t shape_index = 0;
  for (int64_t rows : {1, 3, 8, 16}) {
    for (int64_t in : {8, 13, 64, 257, 1024}) {
      for (int64_t out : {1, 7, 96, 513}) {
        const uint64_t s = seed + 3 * shape_index;
        const Tensor x = random_tensor(dev.cpu, {rows, in}, dtype(), s);
        const Tensor w = random_tensor(dev.cpu, {out, in}, dtype(), s + 1);
        const Tensor b = random_tensor(dev.cpu, {out}, dtype(), s + 2);
        const Tensor x_gpu = dev.gpu_copy(x);
        const bool vector = (in * elem) % 16 == 0 || (rows == 1 && out == 1);
        for (const Variant& variant : variants) {
          const std::string what = shape_label(rows, in, out) + " " + ops::path_name(variant.path) +
                                   (variant.bias ? " bias" : "") + (variant.act == gelu ? " gelu" : "");
          const StreamedCall call =
              run_and_check(dev, x, x_gpu, w, variant.bias ? b : Tensor(), variant.path, variant.act, what);
          EXPECT_EQ(call.kernels, variant.kernels) << what;
          EXPECT_EQ(call.implementation, std::string(dtype_name(dtype())) +
                                             (vector ? ", 16-byte loads" : ", scalar loads (rows not 16-byte aligned)"))
              << what;
        }
        ++shape_index;
      }
    }
  }
}

// x rows as strided views, misaligned x, w and bias: under auto, aligned rows stream and
// misaligned ones go to cuBLASLt (which is told their real alignment); forced on, misaligned
// rows run the kernel's scalar loads. Right either way. 1 MiB of bf16/f16 weights, 2 MiB of f32.
TEST_P(CudaOps, LinearWeightStreamingOnStridedAndMisalignedOperands) {
  Devices dev;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 5, in = 1024, out = 512, pack = 16 / static_cast<int64_t>(dtype_size(dtype()));
  const Tensor wide = random_tensor(dev.cpu, {rows, in + 2 * pack}, dtype(), seed);  // row stride: 16-byte multiple
  const Tensor odd = random_tensor(dev.cpu, {rows, in + 3}, dtype(), seed + 1);        // row stride: not
  const Tensor w = random_tensor(dev.cpu, {out, in}, dtype(), seed + 2);
  const Tensor b_wide = random_tensor(dev.cpu, {out + 1}, dtype(), seed + 3);
  const Tensor b = b_wide.slice(0, 1, out + 1);  // one element past an aligned address
  const Tensor wide_gpu = dev.gpu_copy(wide), odd_gpu = dev.gpu_copy(odd);
  // The weight one element past an aligned address: a contiguous view into a longer buffer.
  const Tensor w_flat = random_tensor(dev.cpu, {out * in + 1}, dtype(), seed + 4);
  const Tensor w_shifted = w_flat.slice(0, 1, out * in + 1).reshape({out, in});
  const Tensor w_shifted_gpu = dev.gpu_copy(w_flat).slice(0, 1, out * in + 1).reshape({out, in});
  struct Case {
    const char* what;
    Tensor x_cpu, x_gpu;
    bool misaligned_w;
    bool aligned;
  };
  const std::vector<Case> cases = {
      {"strided rows, 16-byte aligned", wide.slice(1, pack, pack + in), wide_gpu.slice(1, pack, pack + in), false, true},
      {"x one element off", wide.slice(1, 1, 1 + in), wide_gpu.slice(1, 1, 1 + in), false, false},
      {"x row stride off", odd.slice(1, 0, in), odd_gpu.slice(1, 0, in), false, false},
      {"w one element off", wide.slice(1, pack, pack + in), wide_gpu.slice(1, pack, pack + in), true, false},
  };
  for (const Case& c : cases) {
    for (const char* mode : {"auto", "on"}) {
      ScopedEnv set(ops::kWeightStreamingEnv, mode);
      const std::string what = std::string(c.what) + ", BLOCKSCOPE_LINEAR_WEIGHT_STREAMING=" + mode;
      const StreamedCall call =
          run_and_check(dev, c.x_cpu, c.x_gpu, c.misaligned_w ? w_shifted : w, b, LinearPath::epilogue,
                        LinearActivation::gelu_tanh, what, c.misaligned_w ? w_shifted_gpu : Tensor());
      const bool streams = c.aligned || std::string(mode) == "on";
      EXPECT_EQ(call.kernels, std::vector<std::string>{streams ? "linear_weight_streaming_bias_gelu" : "gemm_bias_gelu"})
          << what;
      if (streams) {
        EXPECT_NE(call.implementation.find(c.aligned ? "16-byte loads" : "scalar loads"), std::string::npos)
            << what << ": " << call.implementation;
      }
    }
  }
}

// The rule's choice is what the kernel table shows: a decode-shaped x [B, 1, d] with 1 MiB or
// more of [out, in] weights streams under auto (the naive path keeping its bias and GELU kernels);
// 17 rows, in_out weights, the addmm path, small weights or off keep cuBLASLt. Values checked
// every time.
TEST_P(CudaOps, LinearWeightStreamingRuleIsVisibleInTheKernelTable) {
  Devices dev;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t in = 1024, out = 512;
  const Tensor w = random_tensor(dev.cpu, {out, in}, dtype(), seed);
  const Tensor b = random_tensor(dev.cpu, {out}, dtype(), seed + 1);
  const Tensor x4 = random_tensor(dev.cpu, {4, 1, in}, dtype(), seed + 2);
  const Tensor x17 = random_tensor(dev.cpu, {17, in}, dtype(), seed + 3);
  const Tensor w_small = random_tensor(dev.cpu, {96, 64}, dtype(), seed + 4);
  const Tensor x_small = random_tensor(dev.cpu, {4, 64}, dtype(), seed + 5);
  const Tensor b_small = random_tensor(dev.cpu, {96}, dtype(), seed + 6);
  const auto none = LinearActivation::none, gelu = LinearActivation::gelu_tanh;
  using Names = std::vector<std::string>;
  const auto run = [&](const char* mode, const Tensor& x, const Tensor& wt, const Tensor& bias, LinearPath path,
                       LinearActivation act, const std::string& what) {
    ScopedEnv set(ops::kWeightStreamingEnv, mode);
    return run_and_check(dev, x, dev.gpu_copy(x), wt, bias, path, act, what + " (" + mode + ")").kernels;
  };
  EXPECT_EQ(run("auto", x4, w, b, LinearPath::epilogue, gelu, "decode"), Names{"linear_weight_streaming_bias_gelu"});
  EXPECT_EQ(run("", x4, w, b, LinearPath::epilogue, none, "decode"), Names{"linear_weight_streaming_bias"});
  EXPECT_EQ(run("auto", x4, w, Tensor(), LinearPath::epilogue, none, "decode"), Names{"linear_weight_streaming"});
  EXPECT_EQ(run("auto", x4, w, b, LinearPath::naive, gelu, "decode"),
            (Names{"linear_weight_streaming", "bias_add_kernel", "gelu_tanh_kernel"}));
  EXPECT_EQ(run("auto", x4, w, b, LinearPath::addmm, none, "decode"), (Names{"bias_broadcast_copy_kernel", "gemm"}));
  EXPECT_EQ(run("on", x4, w, b, LinearPath::addmm, none, "decode"), (Names{"bias_broadcast_copy_kernel", "gemm"}));
  EXPECT_EQ(run("off", x4, w, b, LinearPath::epilogue, gelu, "decode"), Names{"gemm_bias_gelu"});
  EXPECT_EQ(run("off", x4, w, b, LinearPath::naive, none, "decode"), (Names{"gemm", "bias_add_kernel"}));
  EXPECT_EQ(run("auto", x17, w, b, LinearPath::epilogue, none, "17 rows"), Names{"gemm_bias"});
  EXPECT_EQ(run("on", x17, w, b, LinearPath::epilogue, none, "17 rows"), Names{"gemm_bias"});
  EXPECT_EQ(run("auto", x_small, w_small, b_small, LinearPath::epilogue, none, "small weights"), Names{"gemm_bias"});
  EXPECT_EQ(run("on", x_small, w_small, b_small, LinearPath::epilogue, none, "small weights"),
            Names{"linear_weight_streaming_bias"});
  {
    // [in, out] weights (Conv1D): columns, not rows, per output: cuBLASLt.
    ScopedEnv set(ops::kWeightStreamingEnv, "on");
    const Tensor w_in_out = random_tensor(dev.cpu, {in, out}, dtype(), seed + 7);
    Tensor y_gpu;
    Tensor y_cpu = dev.poisoned_pair({4, 1, out}, dtype(), &y_gpu);
    ops::linear(dev.cpu, x4, w_in_out, b, y_cpu, LinearPath::epilogue, WeightLayout::in_out);
    profiler::Recorder recorder(dev.gpu);
    dev.gpu.set_recorder(&recorder);
    ops::linear(dev.gpu, dev.gpu_copy(x4), dev.gpu_copy(w_in_out), dev.gpu_copy(b), y_gpu, LinearPath::epilogue,
                WeightLayout::in_out);
    dev.gpu.set_recorder(nullptr);
    recorder.resolve();
    EXPECT_EQ(testing::kernel_names(recorder), Names{"gemm_bias"});
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), "in_out");
  }
  // A value the variable does not take: refused, naming it, before any kernel runs.
  ScopedEnv bad(ops::kWeightStreamingEnv, "always");
  Tensor y = testing::poisoned_tensor(dev.gpu, {4, 1, out}, dtype());
  testing::expect_input_error(
      [&] { ops::linear(dev.gpu, dev.gpu_copy(x4), dev.gpu_copy(w), dev.gpu_copy(b), y, LinearPath::epilogue); },
      {"BLOCKSCOPE_LINEAR_WEIGHT_STREAMING", "always"});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::ValuesIn(kComputeDTypes), dtype_param_name);

}  // namespace
}  // namespace blockscope
