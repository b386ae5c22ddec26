// RoPE beyond the op harness (value against the reference on every device and dtype, in place, CUDA against the CPU,
// kernels, FLOPs and bytes, refused calls: test/op_harness_test.cpp):
// strided and permuted views in and out of place, known values that pin the pairing
// (d, d + D/2), and CUDA bit-identical to the CPU on strided views.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/rope/rope.h"
#include "profiler/recorder.h"
#include "runtime/index_table.h"
#ifdef BLOCKSCOPE_WITH_CUDA
#include "runtime/cuda/cuda_graph.h"
#endif
#include "test/op_test_helpers.h"
#include "reference/ops_reference.h"
#include "test/cuda_vs_cpu.h"

namespace blockscope {
namespace {

using reference::RefTensor;

// Bounds: testing::rope_bound (test/accuracy_bounds.h).

class RopeTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

// q taken as a [B, H, S, D] view of a [B, S, H, D] projection output (a permute, no copy),
// and a view whose D axis is strided; both out of place and in place on the view itself.
TEST_P(RopeTest, StridedViewsAndInPlace) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t B = 2, S = 9, H = 3, D = 16;
  const float theta = 10000.0f;
  const int64_t offset = 5;
  Tensor bshd = testing::random_tensor(ctx, {B, S, H, D}, dtype(), seed);
  Tensor bhds = testing::random_tensor(ctx, {B, H, D, S}, dtype(), seed + 1);
  for (Tensor view : {bshd.permute({0, 2, 1, 3}), bhds.transpose(2, 3)}) {
    SCOPED_TRACE(view.str());
    ASSERT_FALSE(view.is_contiguous());
    const RefTensor xr = testing::ref(view);
    const RefTensor expected = reference::rope(xr, theta, offset);
    Tensor y = testing::poisoned_tensor(ctx, view.shape(), dtype());
    ops::rope(ctx, view, y, theta, offset);
    const std::vector<float> got = to_floats(y);
    ASSERT_EQ(testing::first_nan(got), -1);
    EXPECT_LE(testing::max_abs_error(got, expected.data), testing::rope_bound(xr, expected, dtype()));
    ops::rope(ctx, view, view, theta, offset);  // in place on the strided view
    EXPECT_EQ(to_floats(view), got);
  }
  Tensor dense = testing::random_tensor(ctx, {B, H, S, D}, dtype(), seed + 2);
  Tensor y = testing::poisoned_tensor(ctx, dense.shape(), dtype());
  ops::rope(ctx, dense, y, theta, offset);
  ops::rope(ctx, dense, dense, theta, offset);  // in place, contiguous
  EXPECT_EQ(to_floats(dense), to_floats(y));
}

// Unit vectors pin the convention: pairs are (d, d + D/2) (rotate_half), not (2d, 2d + 1)
// (interleaved), and pair d turns by pos · theta^(-2d/D).
TEST_P(RopeTest, UnitVectorsRotateByTheRightAngle) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const int64_t D = 4, pos = 3;
  const double theta = 100.0;
  for (int64_t d : {int64_t{0}, int64_t{1}}) {
    SCOPED_TRACE(d);
    Tensor x = ctx.empty({1, 1, 1, D}, dtype());
    std::vector<float> unit(D, 0.0f);
    unit[d] = 1.0f;
    from_floats(x, unit);
    Tensor y = testing::poisoned_tensor(ctx, x.shape(), dtype());
    ops::rope(ctx, x, y, static_cast<float>(theta), pos);
    const double angle = pos * std::pow(theta, -2.0 * d / D);  // 3 and 0.3
    std::vector<double> expected(D, 0.0);
    expected[d] = std::cos(angle);
    expected[d + D / 2] = std::sin(angle);
    EXPECT_LE(testing::max_abs_error(to_floats(y), expected), 2.0 * dtype_epsilon(dtype()) + 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, RopeTest, testing::device_dtype_values(), testing::device_dtype_name);

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

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
    expect_cuda_matches_cpu(y_gpu, y_cpu, cuda_tolerance(dtype(), 2.0), "rope D " + std::to_string(head_dim));
    ops::rope(dev.cpu, q, q, 500000.0f, 3);  // in place on the view
    ops::rope(dev.gpu, q_gpu, q_gpu, 500000.0f, 3);
    expect_cuda_matches_cpu(qkv_gpu, qkv, cuda_tolerance(dtype(), 2.0), "rope in place D " + std::to_string(head_dim));
  }
}

// Both backends rotate with the same cos/sin table (ops/rope/rope_table.h) and round the same
// products: the CUDA result is the CPU's, bit for bit — packed and element paths (D 64, 128,
// odd small D, a strided D axis), offsets past 2^16 (windowed tables) and fresh inputs.
TEST_P(CudaOps, RopeIsBitIdenticalToCpu) {
  Devices dev;
  Context& ctx = dev.gpu;
  Context& cpu = dev.cpu;
  const std::vector<Shape> shapes = {{1, 1, 1, 2}, {2, 3, 7, 6}, {1, 7, 37, 64}, {1, 2, 1000, 128}, {3, 1, 5, 16}};
  for (const Shape& shape : shapes) {
    for (int64_t offset : {int64_t{0}, int64_t{4093}, int64_t{70001}}) {
      const uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " x " << shape_str(shape) << " offset " << offset);
      const Tensor x = testing::random_tensor(ctx, shape, dtype(), seed);
      Tensor y = testing::poisoned_tensor(ctx, shape, dtype());
      ops::rope(ctx, x, y, 10000.0f, offset);
      Tensor yc = testing::poisoned_tensor(cpu, shape, dtype());
      ops::rope(cpu, cpu.copy_from(x), yc, 10000.0f, offset);
      EXPECT_EQ(to_floats(y), to_floats(yc));
      // A view whose D axis has stride 2 (element path), and a permuted one ([B, S, H, D] memory).
      Tensor wide = testing::random_tensor(ctx, {shape[0], shape[1], shape[2], shape[3], 2}, dtype(), seed + 1);
      Tensor ys = testing::poisoned_tensor(ctx, shape, dtype());
      ops::rope(ctx, wide.select(4, 1), ys, 500000.0f, offset);
      Tensor ysc = testing::poisoned_tensor(cpu, shape, dtype());
      ops::rope(cpu, cpu.copy_from(wide).select(4, 1), ysc, 500000.0f, offset);
      EXPECT_EQ(to_floats(ys), to_floats(ysc));
      Tensor bshd = testing::random_tensor(ctx, {shape[0], shape[2], shape[1], shape[3]}, dtype(), seed + 2);
      Tensor yp = testing::poisoned_tensor(ctx, shape, dtype());
      ops::rope(ctx, bshd.permute({0, 2, 1, 3}), yp, 10000.0f, offset);
      Tensor ypc = testing::poisoned_tensor(cpu, shape, dtype());
      ops::rope(cpu, cpu.copy_from(bshd).permute({0, 2, 1, 3}), ypc, 10000.0f, offset);
      ys = yp;
      ysc = ypc;
      EXPECT_EQ(to_floats(ys), to_floats(ysc));
    }
  }
}

#ifdef BLOCKSCOPE_WITH_CUDA
// A bounded positions view (runtime/index_table.h; a decode step replayed from a CUDA graph): the
// device values change between calls inside [lowest, highest]. One call sizes the cos/sin table for
// the whole range — here across the 4096-position table boundary and past 2^16 (a window) — so
// a graph captured afterwards needs no upload, and each replay rotates by the device values of
// the moment, bit for bit as the CPU with those positions.
TEST_P(CudaOps, RopeWithBoundedPositionsCoversTheirRange) {
  Devices dev;
  const Shape shape{2, 3, 1, 64};
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Tensor x = testing::random_tensor(dev.gpu, shape, dtype(), seed);
  const Tensor x_cpu = dev.cpu.copy_from(x);
  for (const auto& [low, high] : {std::pair<std::vector<int32_t>, std::vector<int32_t>>{{4090, 10}, {5000, 20}},
                                  {{65000, 70500}, {70600, 74000}}}) {
    IndexTable positions = IndexTable::bounded(dev.gpu, low, high, 1, 2);
    Tensor y = testing::poisoned_tensor(dev.gpu, shape, dtype());
    ops::rope(dev.gpu, x, y, 10000.0f, positions.row(0));  // at the lowest positions
    dev.gpu.synchronize();
    CudaGraph graph;
    graph.capture(dev.gpu, [&] { ops::rope(dev.gpu, x, y, 10000.0f, positions.row(0)); });
    for (const std::vector<int32_t>& now : {low, high, std::vector<int32_t>{(low[0] + high[0]) / 2, high[1] - 1}}) {
      dev.gpu.backend().copy_to_device(positions.mutable_device(), now.data(), now.size() * sizeof(int32_t));
      graph.replay();
      dev.gpu.synchronize();
      const IndexTable exact(dev.cpu, now, 1, 2);
      Tensor want = testing::poisoned_tensor(dev.cpu, shape, dtype());
      ops::rope(dev.cpu, x_cpu, want, 10000.0f, exact.row(0));
      EXPECT_EQ(to_floats(y), to_floats(want)) << "positions " << now[0] << ", " << now[1];
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::ValuesIn(kComputeDTypes), dtype_param_name);

}  // namespace
}  // namespace blockscope
