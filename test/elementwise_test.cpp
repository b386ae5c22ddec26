// What the op harness (test/op_harness_test.cpp) does not check for the elementwise ops: the
// copy kernel's gathers of a block against the CPU bit for bit, the causal mask's exact
// elements, and the copy kernel's magic-number division.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "ops/elementwise/elementwise.h"
#include "ops/softmax/softmax.h"
#include "ops/common/cuda/fast_divmod.h"
#include "profiler/recorder.h"
#include "runtime/error.h"
#include "reference/attention_reference.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;
using bt::expect_input_error;
using bt::kernel_names;
using reference::RefTensor;

class Elementwise : public ::testing::TestWithParam<Device> {};

// The gathers the CUDA copy kernel sees in a block — the QKV split (a [B, S, H, D] slice of
// [B, S, 3, H, D]), the head merge ([B, H, S, D] → [B, S, H, D]), transposes — in 16-, 8-, 4-byte
// words and element by element (odd D, misaligned starts), every dtype, odd shapes: bit-exact
// against the CPU gather.
TEST_P(Elementwise, CopyGathersOfEveryShapeMatchTheCpu) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  Context cpu(Device::cpu());
  for (DType dtype : bt::compute_dtypes()) {
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

TEST_P(Elementwise, MaskedFillCausalMasksTheRightElements) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  // Sq = 2, Sk = 4: bottom-right aligned, query 0 sees keys 0..2, query 1 sees all four.
  Tensor scores = ctx.empty({2, 4}, DType::f32);
  from_floats(scores, {1, 2, 3, 4, 5, 6, 7, 8});
  ops::masked_fill_causal_(ctx, scores, -7.0f);
  EXPECT_EQ(to_floats(scores), (std::vector<float>{1, 2, 3, -7, 5, 6, 7, 8}));
}

// Issue 43: run.check_finite knows the causal mask writes -inf by design: masked_fill's masked
// elements are skipped (before: every naive and inplace attention run failed the check), its
// other elements and every op after it (the softmax, the attention) are checked as always.
TEST_P(Elementwise, CheckFiniteSkipsOnlyTheCausalMasksFill) {
  BS_SKIP_IF_UNAVAILABLE(GetParam());
  Context ctx(GetParam());
  ctx.set_check_finite_after_each_op(true);
  const float inf = std::numeric_limits<float>::infinity();
  for (const Shape& shape : {Shape{2, 3, 5}, Shape{2, 5, 3}, Shape{4, 4}}) {
    SCOPED_TRACE(shape_str(shape));
    Tensor scores = bt::random_tensor(ctx, shape, DType::f32, bt::fresh_seed());
    Tensor masked = ctx.empty(shape, DType::f32);
    EXPECT_NO_THROW(ops::masked_fill_causal(ctx, scores, -inf, masked));
    EXPECT_NO_THROW(ops::masked_fill_causal_(ctx, scores, -inf));
    // A non-finite value where the mask keeps the score is still named: the last element of
    // each matrix is always kept (bottom-right alignment).
    std::vector<float> values = to_floats(masked);
    values.back() = inf;
    from_floats(scores, values);
    try {
      ops::masked_fill_causal(ctx, scores, -inf, masked);
      ADD_FAILURE() << "an inf the mask keeps passed the check";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("run.check_finite: op 'masked_fill'"), std::string::npos) << error.what();
    }
    // What follows is checked as every op: a softmax of the masked scores is finite...
    values.back() = 0.0f;
    from_floats(scores, values);
    ops::masked_fill_causal_(ctx, scores, -inf);
    Tensor probabilities = ctx.empty(shape, DType::f32);
    EXPECT_NO_THROW(ops::softmax(ctx, scores, probabilities));
    // ...and a scale of them (-inf * 2) is not: the skip is the fill's alone.
    Tensor scaled = ctx.empty(shape, DType::f32);
    try {
      ops::scale(ctx, scores, 2.0f, scaled);
      ADD_FAILURE() << "the scale's -inf passed the check";  // every shape here masks some element
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("run.check_finite: op 'scale'"), std::string::npos) << error.what();
    }
  }
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

}  // namespace
}  // namespace blockscope
