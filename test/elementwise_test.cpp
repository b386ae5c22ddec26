// Elementwise ops (add with row broadcast, mul, scale, copy, causal masked_fill) against the
// float64 references, on every test device and dtype, with poisoned outputs and odd shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "ops/elementwise/elementwise.h"
#include "ops/common/cuda/fast_divmod.h"
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

// Elementwise results are one rounding of an f32 value: a few units of the storage roundoff.
double tolerance(DType dtype) { return 4.0 * dtype_epsilon(dtype) + 1e-7; }

class Elementwise : public ::testing::TestWithParam<Device> {};

TEST_P(Elementwise, AddSameShapeAndRowBroadcast) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  // (a shape, b shape): same shape, bias over the last dim, bias over the last two dims, a
  // single row, more than one chunk per row.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7, 33}, {7, 33}}, {{7, 33}, {33}}, {{3, 5, 17}, {5, 17}}, {{1, 1}, {1}}, {{3, 2500}, {2500}}, {{5000}, {5000}}};
  for (DType dtype : bt::all_dtypes()) {
    for (const auto& [a_shape, b_shape] : cases) {
      const uint64_t seed = bt::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype) << " a " << shape_str(a_shape)
                                        << " b " << shape_str(b_shape));
      Tensor a = bt::random_tensor(ctx, a_shape, dtype, seed);
      Tensor b = bt::random_tensor(ctx, b_shape, dtype, seed + 1);
      Tensor out = bt::poisoned_tensor(ctx, a_shape, dtype);
      ops::add(ctx, a, b, out);
      const RefTensor expected = reference::elementwise_add(reference::from_tensor(a), reference::from_tensor(b));
      const std::vector<float> actual = to_floats(out);
      EXPECT_EQ(bt::first_nan(actual), -1);
      EXPECT_LE(bt::max_relative_error(actual, expected.data), tolerance(dtype));

      ops::add(ctx, a, b, a);  // out may alias a
      EXPECT_LE(bt::max_relative_error(to_floats(a), expected.data), tolerance(dtype));
    }
  }
}

TEST_P(Elementwise, MulAndScale) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  for (DType dtype : bt::all_dtypes()) {
    for (const Shape& shape : {Shape{1}, Shape{7, 13}, Shape{2, 3, 1031}}) {
      const uint64_t seed = bt::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype) << " " << shape_str(shape));
      Tensor a = bt::random_tensor(ctx, shape, dtype, seed, -4.0f, 4.0f);
      Tensor b = bt::random_tensor(ctx, shape, dtype, seed + 1, -4.0f, 4.0f);
      Tensor product = bt::poisoned_tensor(ctx, shape, dtype);
      ops::mul(ctx, a, b, product);
      const RefTensor ra = reference::from_tensor(a), rb = reference::from_tensor(b);
      EXPECT_LE(bt::max_relative_error(to_floats(product), reference::elementwise_mul(ra, rb).data), tolerance(dtype));

      const float factor = -0.37f;
      Tensor scaled = bt::poisoned_tensor(ctx, shape, dtype);
      ops::scale(ctx, a, factor, scaled);
      const RefTensor expected = reference::elementwise_scale(ra, factor);
      EXPECT_LE(bt::max_relative_error(to_floats(scaled), expected.data), tolerance(dtype));
      ops::scale(ctx, a, factor, a);  // in place
      EXPECT_LE(bt::max_relative_error(to_floats(a), expected.data), tolerance(dtype));
    }
  }
}

TEST_P(Elementwise, KernelNames) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  const uint64_t seed = bt::fresh_seed();
  SCOPED_TRACE(seed);
  Tensor a = bt::random_tensor(ctx, {4, 8}, DType::f32, seed);
  Tensor bias = bt::random_tensor(ctx, {8}, DType::f32, seed + 1);
  Tensor out = ctx.empty({4, 8}, DType::f32);
  ops::add(ctx, a, bias, out);
  ops::mul(ctx, a, a, out);
  ops::scale(ctx, a, 2.0f, out);
  ops::copy(ctx, a, out);
  Tensor transposed_out = ctx.empty({8, 4}, DType::f32);
  ops::copy(ctx, a.transpose(0, 1), transposed_out);
  ctx.set_recorder(nullptr);
  EXPECT_EQ(kernel_names(recorder), (std::vector<std::string>{"add_kernel", "mul_kernel", "scale_kernel",
                                                                "Memcpy DtoD", "copy_kernel"}));
  ASSERT_EQ(recorder.ops().size(), 5u);
  EXPECT_EQ(recorder.ops()[0].name, "add");
  EXPECT_EQ(recorder.ops()[4].name, "copy");
}

TEST_P(Elementwise, CopyContiguousAndStrided) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  for (DType dtype : bt::all_dtypes()) {
    const uint64_t seed = bt::fresh_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype));
    Tensor src = bt::random_tensor(ctx, {3, 7, 5}, dtype, seed);
    const std::vector<float> values = to_floats(src);

    Tensor dst = bt::poisoned_tensor(ctx, {3, 7, 5}, dtype);
    ops::copy(ctx, src, dst);
    EXPECT_EQ(to_floats(dst), values);  // bit-exact: same dtype

    // Strided views: a permutation (innermost stride != 1) and a slice of the middle dim.
    for (const Tensor& view : {src.permute({2, 0, 1}), src.slice(1, 2, 6), src.transpose(0, 2).slice(0, 1, 4)}) {
      SCOPED_TRACE(view.str());
      Tensor gathered = bt::poisoned_tensor(ctx, view.shape(), dtype);
      ops::copy(ctx, view, gathered);
      EXPECT_EQ(to_floats(gathered), to_floats(view));
    }
  }
}

// The gathers the CUDA copy kernel sees in a block — the QKV split (a [B, S, H, D] slice of
// [B, S, 3, H, D]), the head merge ([B, H, S, D] → [B, S, H, D]), transposes — in 16-, 8-, 4-byte
// words and element by element (odd D, misaligned starts), every dtype, odd shapes: bit-exact
// against the CPU gather.
TEST_P(Elementwise, CopyGathersOfEveryShapeMatchTheCpu) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Context cpu(Device::cpu());
  for (DType dtype : bt::all_dtypes()) {
    for (const Shape& s : {Shape{1, 1, 1, 2}, Shape{2, 7, 3, 64}, Shape{1, 37, 4, 8}, Shape{2, 5, 3, 37},
                           Shape{1, 1000, 2, 4}, Shape{3, 9, 2, 6}}) {
      const int64_t B = s[0], S = s[1], H = s[2], D = s[3];
      const uint64_t seed = bt::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype) << " " << shape_str(s));
      const Tensor qkv = bt::random_tensor(ctx, {B, S, 3, H, D}, dtype, seed);
      const Tensor qkv_cpu = cpu.copy_from(qkv);
      const Tensor heads = bt::random_tensor(ctx, {B, H, S, D}, dtype, seed + 1);
      const Tensor heads_cpu = cpu.copy_from(heads);
      const Tensor odd = bt::random_tensor(ctx, {B * S * H * D + 1}, dtype, seed + 2);  // misaligned slices
      const Tensor odd_cpu = cpu.copy_from(odd);
      const std::vector<std::pair<Tensor, Tensor>> views = {
          {qkv.select(2, 1), qkv_cpu.select(2, 1)},                                   // QKV split: k
          {heads.transpose(1, 2), heads_cpu.transpose(1, 2)},                         // head merge
          {heads.transpose(2, 3), heads_cpu.transpose(2, 3)},                         // innermost stride != 1
          {qkv.select(2, 2).transpose(1, 2), qkv_cpu.select(2, 2).transpose(1, 2)},   // split + to heads
          {odd.slice(0, 1, B * S * H * D + 1).reshape({B, S, H, D}).transpose(1, 2),
           odd_cpu.slice(0, 1, B * S * H * D + 1).reshape({B, S, H, D}).transpose(1, 2)},
      };
      for (const auto& [view, view_cpu] : views) {
        SCOPED_TRACE(view.str());
        Tensor got = bt::poisoned_tensor(ctx, view.shape(), dtype);
        ops::copy(ctx, view, got);
        Tensor want = bt::poisoned_tensor(cpu, view.shape(), dtype);
        ops::copy(cpu, view_cpu, want);
        const std::vector<float> g = to_floats(got);
        EXPECT_EQ(bt::first_nan(g), -1);
        EXPECT_EQ(g, to_floats(want));
      }
    }
  }
}

TEST_P(Elementwise, MaskedFillCausalOutOfPlaceAndInPlace) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  const float minus_inf = -std::numeric_limits<float>::infinity();
  // Sq == Sk, Sq < Sk, Sq > Sk (whole rows masked), one element.
  for (const Shape& shape : {Shape{2, 3, 7, 7}, Shape{2, 5, 11}, Shape{11, 5}, Shape{1, 1}}) {
    for (DType dtype : bt::all_dtypes()) {
      const uint64_t seed = bt::fresh_seed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << dtype_name(dtype) << " " << shape_str(shape));
      profiler::Recorder recorder(ctx);
      ctx.set_recorder(&recorder);
      Tensor scores = bt::random_tensor(ctx, shape, dtype, seed);
      const std::vector<float> before = to_floats(scores);
      const RefTensor expected = reference::causal_masked_fill(reference::from_tensor(scores), minus_inf);

      Tensor out = bt::poisoned_tensor(ctx, shape, dtype);
      ops::masked_fill_causal(ctx, scores, minus_inf, out);
      EXPECT_EQ(bt::max_abs_error(to_floats(out), expected.data), 0.0);
      EXPECT_EQ(to_floats(scores), before) << "the out-of-place fill changed its input";

      ops::masked_fill_causal_(ctx, scores, minus_inf);
      EXPECT_EQ(bt::max_abs_error(to_floats(scores), expected.data), 0.0);
      ctx.set_recorder(nullptr);
      EXPECT_EQ(kernel_names(recorder), (std::vector<std::string>{"Memcpy DtoD", "masked_fill_causal_kernel",
                                                                    "masked_fill_causal_kernel"}));
    }
  }
}

TEST_P(Elementwise, MaskedFillCausalMasksTheRightElements) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  // Sq = 2, Sk = 4: bottom-right aligned, query 0 sees keys 0..2, query 1 sees all four.
  Tensor scores = ctx.empty({2, 4}, DType::f32);
  from_floats(scores, {1, 2, 3, 4, 5, 6, 7, 8});
  ops::masked_fill_causal_(ctx, scores, -7.0f);
  EXPECT_EQ(to_floats(scores), (std::vector<float>{1, 2, 3, -7, 5, 6, 7, 8}));
}

TEST_P(Elementwise, ErrorsNameTheTensors) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Tensor a = ctx.empty({4, 6}, DType::f32);
  Tensor bad_bias = ctx.empty({5}, DType::f32);
  Tensor half = ctx.empty({4, 6}, DType::f16);
  Tensor out = ctx.empty({4, 6}, DType::f32);
  Tensor wrong_shape = ctx.empty({6, 4}, DType::f32);
  expect_input_error([&] { ops::add(ctx, a, bad_bias, out); }, {"add", "f32[5]", "f32[4, 6]"});
  expect_input_error([&] { ops::add(ctx, a, half, out); }, {"add", "f16[4, 6]", "dtype"});
  expect_input_error([&] { ops::mul(ctx, a, wrong_shape, out); }, {"mul", "f32[6, 4]", "same shape"});
  Tensor strided_out = wrong_shape.transpose(0, 1);
  expect_input_error([&] { ops::scale(ctx, a, 2.0f, strided_out); }, {"scale", "contiguous"});
  expect_input_error([&] { ops::copy(ctx, a, wrong_shape); }, {"copy", "f32[6, 4]"});
  Tensor vector = ctx.empty({6}, DType::f32);
  expect_input_error([&] { ops::masked_fill_causal_(ctx, vector, 0.0f); }, {"masked_fill_causal_", "f32[6]", "2-D"});
  expect_input_error([&] { ops::masked_fill_causal(ctx, a, 0.0f, a); }, {"masked_fill_causal", "aliases"});
}

// The copy kernel's magic-number division (ops/common/cuda/fast_divmod.h), checked on the host
// (the device uses __umulhi, the same product): every divisor edge and random pairs, n < 2^31.
TEST(FastDivmod, MatchesDivisionBelowTwoToThe31) {
  std::mt19937_64 rng(bt::fresh_seed());
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 37, 64, 1000, 4097, 65535, 65537, (1u << 30) + 1, (1u << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % ((1u << 31) - 1)));
  for (uint32_t d : divisors) {
    const ops::cuda::kernels::FastDivmod fd(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - 2, 2 * d - 1};
    for (int i = 0; i < 2000; ++i) ns.push_back(static_cast<uint32_t>(rng() % (1u << 31)));
    for (uint32_t n : ns) {
      if (n >= (1u << 31)) continue;
      uint32_t q, r;
      fd.divmod(n, q, r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d) << n << " % " << d;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Elementwise, ::testing::ValuesIn(bt::test_devices()), bt::device_test_name);

// ---- CUDA against the CPU backend (the CPU is the oracle: test/cuda_vs_cpu.h) ---------------

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
      expect_cuda_matches_cpu(out_gpu, out_cpu, cuda_tolerance(dtype(), 1.0), "add" + shape);
      ops::add(dev.cpu, a, bias, out_cpu);
      ops::add(dev.gpu, a_gpu, bias_gpu, out_gpu);
      expect_cuda_matches_cpu(out_gpu, out_cpu, cuda_tolerance(dtype(), 1.0), "add broadcast" + shape);
      ops::mul(dev.cpu, a, b, out_cpu);
      ops::mul(dev.gpu, a_gpu, b_gpu, out_gpu);
      expect_cuda_matches_cpu(out_gpu, out_cpu, cuda_tolerance(dtype(), 1.0), "mul" + shape);
      ops::scale(dev.cpu, a, -1.7f, a);  // in place
      ops::scale(dev.gpu, a_gpu, -1.7f, a_gpu);
      expect_cuda_matches_cpu(a_gpu, a, cuda_tolerance(dtype(), 1.0), "scale in place" + shape);

      // A transposed view: the strided gather kernel.
      Tensor t_gpu;
      Tensor t_cpu = dev.poisoned_pair({cols, rows}, dtype(), &t_gpu);
      ops::copy(dev.cpu, b.transpose(0, 1), t_cpu);
      ops::copy(dev.gpu, b_gpu.transpose(0, 1), t_gpu);
      expect_cuda_matches_cpu(t_gpu, t_cpu, 0.0, "copy transposed" + shape);
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
    expect_cuda_matches_cpu(out_gpu, out_cpu, 0.0, "masked_fill " + what);
    ops::masked_fill_causal_(dev.cpu, scores, -1e4f);
    ops::masked_fill_causal_(dev.gpu, scores_gpu, -1e4f);
    expect_cuda_matches_cpu(scores_gpu, scores, 0.0, "masked_fill_ " + what);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::Values(DType::f32, DType::f16, DType::bf16), dtype_param_name);

}  // namespace
}  // namespace blockscope
