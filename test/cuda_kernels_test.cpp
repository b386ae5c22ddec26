// What the CUDA backend launches, read from the profiler's recorder: kernel names and counts
// per path (docs/ARCHITECTURE.md's table: the series' lessons), and the launch details the launch helper
// records (grid, block, registers, occupancy). Skips with the reason when no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/mlp/mlp.h"
#include "ops/softmax/softmax.h"
#include "profiler/recorder.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

using Names = std::vector<std::string>;

// Records the kernels one call launches.
template <typename Call>
Names kernels_of(Context& ctx, Call call) {
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  try {
    call();
  } catch (...) {
    ctx.set_recorder(nullptr);
    throw;
  }
  ctx.set_recorder(nullptr);
  recorder.resolve();
  return testing::kernel_names(recorder);
}

class CudaKernels : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { BS_SKIP_IF_UNAVAILABLE(Device::cuda(0)); }
  DType dtype() const { return GetParam(); }
};

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

TEST_P(CudaKernels, AttentionPathsLaunchTheSeriesKernelCounts) {
  Context ctx(Device::cuda(0));
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Tensor q = testing::random_tensor(ctx, {2, 4, 33, 64}, dtype(), seed);
  Tensor k = testing::random_tensor(ctx, {2, 2, 33, 64}, dtype(), seed + 1);
  Tensor v = testing::random_tensor(ctx, {2, 2, 33, 64}, dtype(), seed + 2);
  Tensor out = testing::poisoned_tensor(ctx, q.shape(), dtype());
  auto run = [&](ops::AttentionPath path) {
    return kernels_of(ctx, [&] { ops::attention(ctx, q, k, v, out, path, true, 0.125f); });
  };
  // naive: 6 kernels, the out-of-place masked_fill's copy among them (the series' Part 3).
  EXPECT_EQ(run(ops::AttentionPath::naive),
            (Names{"gemm_qk", "scale_kernel", "Memcpy DtoD", "masked_fill_causal_kernel", "softmax_kernel", "gemm_pv"}));
  EXPECT_EQ(run(ops::AttentionPath::inplace),
            (Names{"gemm_qk", "scale_kernel", "masked_fill_causal_kernel", "softmax_kernel", "gemm_pv"}));
  EXPECT_EQ(run(ops::AttentionPath::fused_softmax), (Names{"gemm_qk", "softmax_causal_scale_kernel", "gemm_pv"}));
}

TEST_P(CudaKernels, LinearPathsLaunchOneTwoOrThreeKernels) {
  Context ctx(Device::cuda(0));
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Tensor x = testing::random_tensor(ctx, {64, 96}, dtype(), seed);
  Tensor w = testing::random_tensor(ctx, {128, 96}, dtype(), seed + 1);
  Tensor b = testing::random_tensor(ctx, {128}, dtype(), seed + 2);
  Tensor y = testing::poisoned_tensor(ctx, {64, 128}, dtype());
  auto run = [&](ops::LinearPath path, ops::LinearActivation act) {
    return kernels_of(ctx, [&] { ops::linear(ctx, x, w, b, y, path, ops::WeightLayout::out_in, act); });
  };
  const auto none = ops::LinearActivation::none, gelu = ops::LinearActivation::gelu_tanh;
  EXPECT_EQ(run(ops::LinearPath::naive, none), (Names{"gemm", "bias_add_kernel"}));
  EXPECT_EQ(run(ops::LinearPath::naive, gelu), (Names{"gemm", "bias_add_kernel", "gelu_tanh_kernel"}));
  EXPECT_EQ(run(ops::LinearPath::epilogue, none), (Names{"gemm_bias"}));
  EXPECT_EQ(run(ops::LinearPath::epilogue, gelu), (Names{"gemm_bias_gelu"}));
  EXPECT_EQ(run(ops::LinearPath::addmm, none), (Names{"bias_broadcast_copy_kernel", "gemm"}));
}

// The series' Part 2: a GeGLU MLP is 5 kernels eager and 3 with the fused gate|up GEMM and
// act·mul kernel; GPT-2's plain MLP is 5 kernels naive and 2 with epilogues. CUDA and CPU agree.
TEST_P(CudaKernels, MlpPathsLaunchTheSeriesKernelCountsAndMatchTheCpu) {
  Context ctx(Device::cuda(0));
  Context cpu(Device::cpu());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t rows = 19, d_model = 48, d_ff = 136;
  Tensor x_cpu = testing::random_tensor(cpu, {rows, d_model}, dtype(), seed);
  Tensor x = ctx.copy_from(x_cpu);
  auto weight = [&](Context& on, const Shape& shape, uint64_t s) {
    return on.copy_from(testing::random_tensor(cpu, shape, dtype(), s, -0.15f, 0.15f));
  };
  auto make = [&](Context& on, bool gated) {
    ops::MlpWeights w;
    w.gated = gated;
    w.activation = ops::Activation::gelu_tanh;  // GeGLU, and GPT-2's gelu_new
    if (gated) {
      w.gate_weight = weight(on, {d_ff, d_model}, seed + 1);
      w.up_weight = weight(on, {d_ff, d_model}, seed + 2);
      w.down_weight = weight(on, {d_model, d_ff}, seed + 3);
      ops::pack_gate_up(on, w);
    } else {
      w.fc_weight = weight(on, {d_ff, d_model}, seed + 4);
      w.fc_bias = weight(on, {d_ff}, seed + 5);
      w.proj_weight = weight(on, {d_model, d_ff}, seed + 6);
      w.proj_bias = weight(on, {d_model}, seed + 7);
    }
    return w;
  };
  struct Case {
    bool gated;
    ops::MlpPath path;
    size_t kernels;
  };
  for (Case c : {Case{true, ops::MlpPath::naive, 5}, Case{true, ops::MlpPath::fused, 3},
                 Case{false, ops::MlpPath::naive, 5}, Case{false, ops::MlpPath::epilogue, 2}}) {
    const std::string what = std::string(c.gated ? "gated " : "plain ") + ops::path_name(c.path);
    const ops::MlpWeights w_gpu = make(ctx, c.gated), w_cpu = make(cpu, c.gated);
    Tensor y = testing::poisoned_tensor(ctx, {rows, d_model}, dtype());
    Tensor y_cpu = testing::poisoned_tensor(cpu, {rows, d_model}, dtype());
    const Names names = kernels_of(ctx, [&] { ops::mlp(ctx, x, w_gpu, y, c.path); });
    EXPECT_EQ(names.size(), c.kernels) << what << ": " << ::testing::PrintToString(names);
    ops::mlp(cpu, x_cpu, w_cpu, y_cpu, c.path);
    const std::vector<float> got = to_floats(y), want = to_floats(y_cpu);
    ASSERT_EQ(testing::first_nan(got), -1) << what << ": unwritten output";
    const double tol = dtype() == DType::f32 ? 2e-5 : 8.0 * dtype_epsilon(dtype());
    EXPECT_LE(testing::max_relative_error(got, std::vector<double>(want.begin(), want.end())), tol) << what;
  }
}

TEST_P(CudaKernels, GatedActivationIsOneKernelAndElementwiseOpsOneEach) {
  Context ctx(Device::cuda(0));
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Tensor gate_up = testing::random_tensor(ctx, {16, 2 * 40}, dtype(), seed);
  Tensor y = testing::poisoned_tensor(ctx, {16, 40}, dtype());
  EXPECT_EQ(kernels_of(ctx,
                       [&] {
                         ops::gated_activation(ctx, gate_up.slice(1, 0, 40), gate_up.slice(1, 40, 80), y,
                                               ops::Activation::silu);
                       }),
            (Names{"gated_silu_mul_kernel"}));
  Tensor contiguous = testing::poisoned_tensor(ctx, {16, 80}, dtype());
  EXPECT_EQ(kernels_of(ctx, [&] { ops::copy(ctx, gate_up, contiguous); }), (Names{"Memcpy DtoD"}));
  Tensor transposed = testing::poisoned_tensor(ctx, {80, 16}, dtype());
  EXPECT_EQ(kernels_of(ctx, [&] { ops::copy(ctx, gate_up.transpose(0, 1), transposed); }), (Names{"copy_kernel"}));
}

TEST_P(CudaKernels, LaunchHelperRecordsConfigurationRegistersAndOccupancy) {
  Context ctx(Device::cuda(0));
  // Rows of 4000: the block-per-row softmax, whose block reduction has a __shared__ scratch (the
  // warp-per-row one for rows up to 1024 has no static shared memory: 0 bytes, says ptxas).
  Tensor x = testing::random_tensor(ctx, {300, 4000}, dtype(), testing::fresh_seed());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  ops::softmax(ctx, x, x);
  ctx.set_recorder(nullptr);
  recorder.resolve();
  ASSERT_EQ(recorder.kernels().size(), 1u);
  const profiler::KernelEvent& kernel = recorder.kernels()[0];
  EXPECT_EQ(kernel.name, "softmax_kernel");
  EXPECT_GE(kernel.grid.x, 1u);
  EXPECT_EQ(kernel.block.x % 32, 0u);
#if defined(BLOCKSCOPE_SIM_WITHOUT_PTXAS)
  // A simulated-GPU build without nvcc: the sim has no ptxas figures and says so (-1), never 0.
  EXPECT_EQ(kernel.registers, -1);
  std::printf("[ simulated GPU ] built without nvcc: registers and static shared memory unknown\n");
#else
  // Registers and static shared memory come from ptxas (sm_90): on a GPU from the kernel itself,
  // on the simulated GPU from nvcc-sim's `nvcc -cubin --resource-usage` of the same source.
  EXPECT_GT(kernel.registers, 0);
  EXPECT_GT(kernel.static_smem, 0);  // the block reduction's scratch
#endif
  EXPECT_GT(kernel.occupancy, 0.0);
  EXPECT_LE(kernel.occupancy, 1.0);
  EXPECT_GE(kernel.device_end_us, kernel.device_start_us);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKernels, ::testing::ValuesIn(kComputeDTypes),
                         dtype_param_name);

}  // namespace
}  // namespace blockscope
