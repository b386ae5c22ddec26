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
#include "test/cuda_vs_cpu.h"
#include "ops/linear/batched_matmul.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "ops/common/cuda/cublaslt_gemm.h"
#endif

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

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

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
            expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype()), what);
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
      expect_cuda_matches_cpu(out_gpu, out_cpu, cuda_tolerance(dtype()),
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

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::Values(DType::f32, DType::f16, DType::bf16), dtype_param_name);

}  // namespace
}  // namespace blockscope
