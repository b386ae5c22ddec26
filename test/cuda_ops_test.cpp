// CUDA backend against the CPU backend: every op, path and dtype on odd shapes, with fresh
// random inputs (same values on both devices) and NaN-poisoned outputs, plus the cuBLASLt
// alignment error and the refusal of the flash path. Every test skips with the reason when no
// GPU is present (or CUDA is not built); the per-op tests (linear_test, ...) compare each
// device with the float64 references, so here the CPU backend is the oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/batched_matmul.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/softmax/softmax.h"
#include "profiler/recorder.h"
#include "runtime/error.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "ops/common/cuda/cublaslt_gemm.h"
#include "runtime/cuda/cuda_backend.h"
#endif

namespace blockscope {
namespace {

using testing::fresh_seed;
using testing::random_tensor;

// One CPU and one CUDA context; inputs are made on the CPU and copied, so both devices see the
// same values (exact: same dtype).
struct Devices {
  Context cpu{Device::cpu()};
  Context gpu{Device::cuda(0)};

  Tensor gpu_copy(const Tensor& host) { return gpu.copy_from(host); }
  Tensor poisoned_pair(const Shape& shape, DType dtype, Tensor* on_gpu) {
    *on_gpu = testing::poisoned_tensor(gpu, shape, dtype);
    return testing::poisoned_tensor(cpu, shape, dtype);
  }
};

// Agreement between the backends, relative to the largest value: f32 differs by summation
// order only; f16/bf16 may also round a few results to the neighbouring value.
double tolerance(DType dtype, double ulps = 4.0) {
  return dtype == DType::f32 ? 2e-5 * ulps / 4.0 : ulps * dtype_epsilon(dtype);
}

void expect_close(const Tensor& gpu_out, const Tensor& cpu_out, double tol, const std::string& what) {
  const std::vector<float> gpu_values = to_floats(gpu_out);
  const std::vector<float> cpu_values = to_floats(cpu_out);
  ASSERT_EQ(testing::first_nan(cpu_values), -1) << what << ": CPU output has an unwritten (NaN) element";
  const int64_t nan_at = testing::first_nan(gpu_values);
  ASSERT_EQ(nan_at, -1) << what << ": CUDA output element " << nan_at << " is NaN (unwritten or wrong)";
  const double error =
      testing::max_relative_error(gpu_values, std::vector<double>(cpu_values.begin(), cpu_values.end()));
  EXPECT_LE(error, tol) << what << ": CUDA vs CPU max relative error";
}

class CudaOps : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { BS_SKIP_IF_UNAVAILABLE(Device::cuda(0)); }
  DType dtype() const { return GetParam(); }
};

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

// ---- linear -------------------------------------------------------------------------------

TEST_P(CudaOps, LinearEveryPathLayoutBiasActivation) {
  Devices dev;
  struct Case {
    int64_t rows, in, out;
  };
  for (Case c : {Case{1, 8, 16}, Case{37, 53, 29}, Case{130, 96, 200}}) {
    for (ops::LinearPath path : {ops::LinearPath::naive, ops::LinearPath::epilogue, ops::LinearPath::addmm}) {
      for (ops::WeightLayout layout : {ops::WeightLayout::out_in, ops::WeightLayout::in_out}) {
        for (bool with_bias : {false, true}) {
          for (ops::LinearActivation act : {ops::LinearActivation::none, ops::LinearActivation::gelu_tanh}) {
            const uint64_t seed = fresh_seed();
            SCOPED_TRACE(seed);
            const std::string what = std::string(ops::path_name(path)) + " rows " + std::to_string(c.rows) +
                                     " in " + std::to_string(c.in) + " out " + std::to_string(c.out) +
                                     (layout == ops::WeightLayout::out_in ? " out_in" : " in_out") +
                                     (with_bias ? " bias" : "") +
                                     (act == ops::LinearActivation::gelu_tanh ? " gelu" : "");
            const Shape w_shape = layout == ops::WeightLayout::out_in ? Shape{c.out, c.in} : Shape{c.in, c.out};
            Tensor x = random_tensor(dev.cpu, {c.rows, c.in}, dtype(), seed);
            Tensor w = random_tensor(dev.cpu, w_shape, dtype(), seed + 1, -0.2f, 0.2f);
            Tensor b = with_bias ? random_tensor(dev.cpu, {c.out}, dtype(), seed + 2) : Tensor();
            Tensor y_gpu;
            Tensor y_cpu = dev.poisoned_pair({c.rows, c.out}, dtype(), &y_gpu);
            ops::linear(dev.cpu, x, w, b, y_cpu, path, layout, act);
            ops::linear(dev.gpu, dev.gpu_copy(x), dev.gpu_copy(w), with_bias ? dev.gpu_copy(b) : Tensor(), y_gpu, path,
                        layout, act);
            expect_close(y_gpu, y_cpu, tolerance(dtype()), what);
          }
        }
      }
    }
  }
}

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
  expect_close(y_gpu, y_cpu, tolerance(dtype()), "strided rows");
}

// Columns [1, 1 + 32) of [8, 40]: the first element sits one element past an aligned address.
// cuBLASLt is told the operand's real (element) alignment and computes it, as the CPU does;
// it used to be refused as "not 16-byte aligned" (found on the simulated GPU by
// LinearTest.StridedRowsGiveTheSameResult). Also with a bias one element off alignment.
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
    expect_close(y_gpu, y_cpu, tolerance(dtype()), "misaligned slice");
  }
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
      expect_close(out_gpu, out_cpu, tolerance(dtype()),
                   "group " + std::to_string(group) + (trans_b ? " trans_b" : "") + " m " + std::to_string(c.m));
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
      expect_close(y_gpu, y_cpu, tolerance(dtype()), std::string(c.what) + " " + ops::path_name(path));
    }
  }
}

// k = 0 (no input features / no keys): an empty sum. The CPU gives y = bias (or 0) then the
// activation, and c = 0 for batched_matmul; CUDA used to refuse both with a runtime error.
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
          expect_close(y_gpu, y_cpu, tolerance(dtype()),
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
    expect_close(c_gpu, c_cpu, 0.0, "batched k = 0");
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
    expect_close(y_gpu, y_cpu, tolerance(dtype()), std::string("autotuned ") + ops::path_name(c.path));
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
    expect_close(y_gpu, y_cpu, tolerance(dtype()), "epilogue fallback");
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
  expect_close(y_gpu, y_cpu, tolerance(dtype()), "re-planned");
  // And it stays: a third call neither re-plans nor adds.
  ops::linear(dev.gpu, x_gpu, w_gpu, b_gpu, y_gpu, ops::LinearPath::epilogue, ops::WeightLayout::out_in);
  EXPECT_EQ(ops::cuda::cublaslt::cached_plans(dev.gpu), plans_before + 1);
  EXPECT_EQ(ops::cuda::cublaslt::autotuned_plans(dev.gpu), tuned_before + 1);
#endif
}

// ---- elementwise --------------------------------------------------------------------------

TEST_P(CudaOps, ElementwiseAddMulScaleCopy) {
  Devices dev;
  for (int64_t rows : {1, 3, 37}) {
    for (int64_t cols : {1, 7, 64, 1000}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed);
      const std::string shape = " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
      Tensor a = random_tensor(dev.cpu, {rows, cols}, dtype(), seed);
      Tensor b = random_tensor(dev.cpu, {rows, cols}, dtype(), seed + 1);
      Tensor bias = random_tensor(dev.cpu, {cols}, dtype(), seed + 2);
      Tensor a_gpu = dev.gpu_copy(a), b_gpu = dev.gpu_copy(b), bias_gpu = dev.gpu_copy(bias);
      Tensor out_gpu;
      Tensor out_cpu = dev.poisoned_pair({rows, cols}, dtype(), &out_gpu);

      ops::add(dev.cpu, a, b, out_cpu);
      ops::add(dev.gpu, a_gpu, b_gpu, out_gpu);
      expect_close(out_gpu, out_cpu, tolerance(dtype(), 1.0), "add" + shape);
      ops::add(dev.cpu, a, bias, out_cpu);
      ops::add(dev.gpu, a_gpu, bias_gpu, out_gpu);
      expect_close(out_gpu, out_cpu, tolerance(dtype(), 1.0), "add broadcast" + shape);
      ops::mul(dev.cpu, a, b, out_cpu);
      ops::mul(dev.gpu, a_gpu, b_gpu, out_gpu);
      expect_close(out_gpu, out_cpu, tolerance(dtype(), 1.0), "mul" + shape);
      ops::scale(dev.cpu, a, -1.7f, a);  // in place
      ops::scale(dev.gpu, a_gpu, -1.7f, a_gpu);
      expect_close(a_gpu, a, tolerance(dtype(), 1.0), "scale in place" + shape);

      // A transposed view: the strided gather kernel.
      Tensor t_gpu;
      Tensor t_cpu = dev.poisoned_pair({cols, rows}, dtype(), &t_gpu);
      ops::copy(dev.cpu, b.transpose(0, 1), t_cpu);
      ops::copy(dev.gpu, b_gpu.transpose(0, 1), t_gpu);
      expect_close(t_gpu, t_cpu, 0.0, "copy transposed" + shape);
    }
  }
}

TEST_P(CudaOps, CausalMaskedFillOutOfPlaceAndInPlace) {
  Devices dev;
  struct Case {
    int64_t sq, sk;
  };
  // Sq > Sk leaves the first rows fully masked; Sq < Sk is the decode-like bottom-right case.
  for (Case c : {Case{1, 1}, Case{7, 7}, Case{9, 5}, Case{5, 33}}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const std::string what = "Sq " + std::to_string(c.sq) + " Sk " + std::to_string(c.sk);
    Tensor scores = random_tensor(dev.cpu, {2, 3, c.sq, c.sk}, dtype(), seed);
    Tensor scores_gpu = dev.gpu_copy(scores);
    Tensor out_gpu;
    Tensor out_cpu = dev.poisoned_pair(scores.shape(), dtype(), &out_gpu);
    ops::masked_fill_causal(dev.cpu, scores, -1e4f, out_cpu);
    ops::masked_fill_causal(dev.gpu, scores_gpu, -1e4f, out_gpu);
    expect_close(out_gpu, out_cpu, 0.0, "masked_fill " + what);
    ops::masked_fill_causal_(dev.cpu, scores, -1e4f);
    ops::masked_fill_causal_(dev.gpu, scores_gpu, -1e4f);
    expect_close(scores_gpu, scores, 0.0, "masked_fill_ " + what);
  }
}

// ---- activations --------------------------------------------------------------------------

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
      expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), what);

      // gate | up as the two column halves of one [rows, 2F] tensor (the fused MLP path).
      Tensor gate_up = random_tensor(dev.cpu, {5, 2 * cols}, dtype(), seed + 1, -3.0f, 3.0f);
      Tensor gate_up_gpu = dev.gpu_copy(gate_up);
      Tensor g_gpu;
      Tensor g_cpu = dev.poisoned_pair({5, cols}, dtype(), &g_gpu);
      ops::gated_activation(dev.cpu, gate_up.slice(1, 0, cols), gate_up.slice(1, cols, 2 * cols), g_cpu, act);
      ops::gated_activation(dev.gpu, gate_up_gpu.slice(1, 0, cols), gate_up_gpu.slice(1, cols, 2 * cols), g_gpu, act);
      expect_close(g_gpu, g_cpu, tolerance(dtype(), 2.0), "gated " + what);
    }
  }
}

// ---- softmax ------------------------------------------------------------------------------

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
    expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), "softmax n " + std::to_string(n));
    const std::vector<float> out = to_floats(y_gpu);
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(out[static_cast<size_t>(2 * n + j)], 0.0f) << "fully masked row";
    ops::softmax(dev.gpu, x_gpu, x_gpu);  // in place
    expect_close(x_gpu, y_cpu, tolerance(dtype(), 2.0), "softmax in place n " + std::to_string(n));
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
        EXPECT_NEAR(gpu[static_cast<size_t>(j)], cpu[static_cast<size_t>(j)], tolerance(dtype(), 2.0)) << what;
      }
    }
  }
}

TEST_P(CudaOps, SoftmaxScaleCausal) {
  Devices dev;
  struct Case {
    int64_t sq, sk;
  };
  for (Case c : {Case{1, 1}, Case{7, 7}, Case{9, 4}, Case{5, 130}, Case{64, 64}}) {
    for (bool causal : {false, true}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed);
      Tensor x = random_tensor(dev.cpu, {2, 3, c.sq, c.sk}, dtype(), seed, -6.0f, 6.0f);
      Tensor y_gpu;
      Tensor y_cpu = dev.poisoned_pair(x.shape(), dtype(), &y_gpu);
      ops::softmax_scale_causal(dev.cpu, x, 0.125f, causal, y_cpu);
      ops::softmax_scale_causal(dev.gpu, dev.gpu_copy(x), 0.125f, causal, y_gpu);
      expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0),
                   "Sq " + std::to_string(c.sq) + " Sk " + std::to_string(c.sk) + (causal ? " causal" : ""));
    }
  }
}

// ---- norms and RoPE -----------------------------------------------------------------------

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
    expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), "layer_norm" + what);
    fill_nan(y_cpu);
    fill_nan(y_gpu);
    ops::layer_norm(dev.cpu, x, w, Tensor(), 1e-5f, y_cpu);
    ops::layer_norm(dev.gpu, x_gpu, w_gpu, Tensor(), 1e-5f, y_gpu);
    expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), "layer_norm without bias" + what);
    fill_nan(y_cpu);
    fill_nan(y_gpu);
    ops::rms_norm(dev.cpu, x, w, 1e-6f, y_cpu);
    ops::rms_norm(dev.gpu, x_gpu, w_gpu, 1e-6f, y_gpu);
    expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), "rms_norm" + what);
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
      expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), "layer_norm strided" + what);
      fill_nan(y_cpu);
      fill_nan(y_gpu);
      ops::rms_norm(dev.cpu, x, w, 1e-6f, y_cpu);
      ops::rms_norm(dev.gpu, x_gpu, w_gpu, 1e-6f, y_gpu);
      expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), "rms_norm strided" + what);
    }
  }
}

TEST_P(CudaOps, RopeStridedViewAndInPlace) {
  Devices dev;
  for (int64_t head_dim : {2, 64, 128}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const int64_t batch = 2, seq = 7, heads = 3;
    // q as a view of a [B, S, 3, H, D] qkv tensor, permuted to [B, H, S, D] (strided, no copy).
    Tensor qkv = random_tensor(dev.cpu, {batch, seq, 3, heads, head_dim}, dtype(), seed);
    Tensor qkv_gpu = dev.gpu_copy(qkv);
    Tensor q = qkv.select(2, 0).permute({0, 2, 1, 3});
    Tensor q_gpu = qkv_gpu.select(2, 0).permute({0, 2, 1, 3});
    Tensor y_gpu;
    Tensor y_cpu = dev.poisoned_pair({batch, heads, seq, head_dim}, dtype(), &y_gpu);
    ops::rope(dev.cpu, q, y_cpu, 10000.0f, 1000);
    ops::rope(dev.gpu, q_gpu, y_gpu, 10000.0f, 1000);
    expect_close(y_gpu, y_cpu, tolerance(dtype(), 2.0), "rope D " + std::to_string(head_dim));
    ops::rope(dev.cpu, q, q, 500000.0f, 3);  // in place on the view
    ops::rope(dev.gpu, q_gpu, q_gpu, 500000.0f, 3);
    expect_close(qkv_gpu, qkv, tolerance(dtype(), 2.0), "rope in place D " + std::to_string(head_dim));
  }
}

// ---- attention ----------------------------------------------------------------------------

TEST_P(CudaOps, AttentionMaterialisingPathsWithGqa) {
  Devices dev;
  struct Case {
    int64_t batch, heads, kv_heads, sq, sk, d;
  };
  for (Case c : {Case{1, 2, 2, 1, 1, 64}, Case{2, 4, 2, 7, 7, 64}, Case{1, 4, 1, 9, 33, 128}, Case{2, 2, 2, 13, 5, 64}}) {
    for (ops::AttentionPath path :
         {ops::AttentionPath::naive, ops::AttentionPath::inplace, ops::AttentionPath::fused_softmax}) {
      for (bool causal : {false, true}) {
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE(seed);
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
        Tensor q = random_tensor(dev.cpu, {c.batch, c.heads, c.sq, c.d}, dtype(), seed);
        Tensor k = random_tensor(dev.cpu, {c.batch, c.kv_heads, c.sk, c.d}, dtype(), seed + 1);
        Tensor v = random_tensor(dev.cpu, {c.batch, c.kv_heads, c.sk, c.d}, dtype(), seed + 2);
        Tensor out_gpu;
        Tensor out_cpu = dev.poisoned_pair(q.shape(), dtype(), &out_gpu);
        ops::attention(dev.cpu, q, k, v, out_cpu, path, causal, scale);
        ops::attention(dev.gpu, dev.gpu_copy(q), dev.gpu_copy(k), dev.gpu_copy(v), out_gpu, path, causal, scale);
        expect_close(out_gpu, out_cpu, tolerance(dtype(), 8.0),
                     std::string(ops::path_name(path)) + (causal ? " causal" : "") + " H " + std::to_string(c.heads) +
                         " Hkv " + std::to_string(c.kv_heads) + " Sq " + std::to_string(c.sq) + " Sk " +
                         std::to_string(c.sk));
      }
    }
  }
}

// The CUDA flash kernels (tensor cores for f16/bf16 at head_dim 64 and 128, FP32 cores
// otherwise) against the CPU's flash, which shares no code with them.
TEST_P(CudaOps, FlashAttentionMatchesTheCpu) {
  Devices dev;
  struct Case {
    int64_t batch, heads, kv_heads, sq, sk, d;
  };
  for (Case c : {Case{1, 2, 2, 1, 1, 64}, Case{2, 4, 2, 7, 70, 64}, Case{1, 4, 1, 65, 33, 128},
                 Case{2, 2, 2, 13, 5, 64}, Case{1, 2, 1, 20, 20, 80}}) {
    for (bool causal : {false, true}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " H " << c.heads << " Hkv " << c.kv_heads << " Sq "
                                        << c.sq << " Sk " << c.sk << " D " << c.d << (causal ? " causal" : ""));
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      Tensor q = random_tensor(dev.cpu, {c.batch, c.heads, c.sq, c.d}, dtype(), seed);
      Tensor k = random_tensor(dev.cpu, {c.batch, c.kv_heads, c.sk, c.d}, dtype(), seed + 1);
      Tensor v = random_tensor(dev.cpu, {c.batch, c.kv_heads, c.sk, c.d}, dtype(), seed + 2);
      Tensor out_gpu;
      Tensor out_cpu = dev.poisoned_pair(q.shape(), dtype(), &out_gpu);
      ops::attention(dev.cpu, q, k, v, out_cpu, ops::AttentionPath::flash, causal, scale);
      ops::attention(dev.gpu, dev.gpu_copy(q), dev.gpu_copy(k), dev.gpu_copy(v), out_gpu, ops::AttentionPath::flash,
                     causal, scale);
      // Both round P differently (the tensor-core kernel rounds it to the input type for P·V).
      expect_close(out_gpu, out_cpu, tolerance(dtype(), 8.0), "flash");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::Values(DType::f32, DType::f16, DType::bf16), dtype_param_name);

// Two contexts on two GPUs in one thread: creating the second makes its GPU current, and ops on
// the first must still launch on the first (cuda_backend(ctx) selects the device). Launching on
// the wrong GPU with the first GPU's pointers fails or leaves the poisoned output unwritten.
TEST(CudaMultiDevice, OpsLaunchOnTheirContextsGpu) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA GPUs, found " << cuda_device_count();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Context cpu(Device::cpu());
  Context first(Device::cuda(0));
  Context second(Device::cuda(1));  // now the current device
  const Tensor host = random_tensor(cpu, {37, 65}, DType::f32, seed);
  Tensor x0 = first.copy_from(host), x1 = second.copy_from(host);
  Tensor y0 = testing::poisoned_tensor(first, host.shape(), DType::f32);
  Tensor y1 = testing::poisoned_tensor(second, host.shape(), DType::f32);
  ops::scale(first, x0, 2.0f, y0);
  ops::softmax(second, x1, y1);
  first.synchronize();
  second.synchronize();
  const std::vector<float> in = to_floats(host), got0 = to_floats(y0);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got0[i], 2.0f * in[i]) << "element " << i;
  EXPECT_EQ(testing::first_nan(to_floats(y1)), -1);
}

// The backend's own entry points (timing marks, synchronize, memory_available, copies) must
// select the context's GPU like the ops do: the recorder takes its first mark before the op
// reaches cuda_backend(ctx), with the other context's GPU still current. An event recorded on
// another device's stream is cudaErrorInvalidResourceHandle, so without the fix the first mark
// (or resolve) throws.
TEST(CudaMultiDevice, RecorderOnTheFirstContextAfterTheSecondWasCreated) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA GPUs, found " << cuda_device_count();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Context cpu(Device::cpu());
  Context first(Device::cuda(0));
  Context second(Device::cuda(1));  // now the current device
  const Tensor host = random_tensor(cpu, {37, 65}, DType::f32, seed);
  Tensor x0 = first.copy_from(host);
  Tensor y0 = testing::poisoned_tensor(first, host.shape(), DType::f32);
  Tensor x1 = second.copy_from(host);  // the second context's GPU is current again
  EXPECT_GT(first.backend().memory_available(), 0u);
  profiler::Recorder recorder(first);
  first.set_recorder(&recorder);
  ops::scale(first, x0, 2.0f, y0);
  first.set_recorder(nullptr);
  Tensor y1 = testing::poisoned_tensor(second, host.shape(), DType::f32);  // second current again
  ops::softmax(second, x1, y1);
  ASSERT_NO_THROW(recorder.resolve());
  ASSERT_EQ(recorder.ops().size(), 1u);
  const profiler::OpEvent& op = recorder.ops()[0];
  EXPECT_TRUE(std::isfinite(op.device_start_us) && std::isfinite(op.device_end_us));
  EXPECT_GE(op.device_end_us, op.device_start_us);
  first.synchronize();
  second.synchronize();
  const std::vector<float> in = to_floats(host), got0 = to_floats(y0);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got0[i], 2.0f * in[i]) << "element " << i;
}

// Two contexts on one GPU have two streams and nothing orders them: an op on context B reading
// a tensor that context A's stream wrote could run before A's kernels finish. Ops refuse such
// an input (InputError naming the fix) and ctx.copy_from, which synchronises A's stream first,
// is the hand-over. The simulated GPU cannot show the race itself (it runs every queue lazily
// in enqueue order, so B's kernels always see A's finished results): this tests the mechanism.
TEST(CudaMultiContext, OpsRefuseAnInputFromAnotherContextsStreamOnTheSameGpu) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Context cpu(Device::cpu());
  Context a(Device::cuda(0)), b(Device::cuda(0));
  const Tensor host = random_tensor(cpu, {37, 65}, DType::f32, seed);
  Tensor x = a.copy_from(host);
  Tensor produced = testing::poisoned_tensor(a, host.shape(), DType::f32);
  ops::scale(a, x, 2.0f, produced);  // queued on a's stream, not synchronised
  Tensor y = testing::poisoned_tensor(b, host.shape(), DType::f32);
  profiler::Recorder recorder(b);
  b.set_recorder(&recorder);
  testing::expect_input_error([&] { ops::scale(b, produced, 3.0f, y); },
                              {"scale", "another context", "cuda:0", "copy_from"});
  b.set_recorder(nullptr);
  EXPECT_TRUE(recorder.ops().empty()) << "a refused call records no op";
  // The hand-over: copy_from synchronises a's stream, then the op runs on b's.
  const Tensor handed = b.copy_from(produced);
  ops::scale(b, handed, 3.0f, y);
  const std::vector<float> in = to_floats(host), got = to_floats(y);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got[i], 6.0f * in[i]) << "element " << i;
  // The same tensors on their own context are fine.
  EXPECT_NO_THROW(ops::scale(a, produced, 0.5f, produced));
}

}  // namespace
}  // namespace blockscope
