// ops/common/cpu_math.h: the vectorisable exp_f32 against double-precision std::exp over a
// wide range of inputs (≤ 2 ulp for normal results, the documented bound), its edge cases, and
// the row kernels (which run the best clone the machine has) against plain loops, and the
// GELU (tanh) and SiLU rows against float64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/common/cpu_math.h"
#include "runtime/dtype.h"

namespace blockscope {
namespace {

using ops::cpu::exp_f32;

float from_bits(uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Error of `got` in units of the last place of the float nearest to `exact`.
double ulp_error(float got, double exact) {
  const double magnitude = std::fabs(exact);
  const double ulp = magnitude < std::numeric_limits<float>::min()
                         ? std::numeric_limits<float>::denorm_min()
                         : std::ldexp(1.0, std::ilogb(static_cast<float>(magnitude)) - 23);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

TEST(CpuMath, ExpWithinTwoUlpOverTheNormalRange) {
  // Every 61st float bit pattern (both signs) whose exp is a normal float: ~1e7 inputs from
  // 1e-38 in magnitude up to the overflow threshold, through the whole softmax range (x ≤ 0).
  double worst = 0.0;
  float worst_x = 0.0f;
  int64_t checked = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 61) {
    const float x = from_bits(static_cast<uint32_t>(bits));
    if (!(x >= -87.33f && x <= 88.72f)) continue;
    const double error = ulp_error(exp_f32(x), std::exp(static_cast<double>(x)));
    if (error > worst) {
      worst = error;
      worst_x = x;
    }
    ++checked;
  }
  EXPECT_GT(checked, 10'000'000);
  EXPECT_LE(worst, 2.0) << "worst input " << worst_x;
  std::printf("exp_f32: max error %.3f ulp (at x = %.9g) over %lld inputs\n", worst, worst_x,
              static_cast<long long>(checked));
}

TEST(CpuMath, ExpEdgesAndSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-inf), 0.0f);
  EXPECT_EQ(exp_f32(-1000.0f), 0.0f);
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_EQ(exp_f32(89.0f), inf);
  EXPECT_EQ(exp_f32(1000.0f), inf);
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
  // Largest finite result: exp(88.7228) just below FLT_MAX.
  EXPECT_TRUE(std::isfinite(exp_f32(88.7228f)));
  EXPECT_LE(ulp_error(exp_f32(88.7228f), std::exp(static_cast<double>(88.7228f))), 2.0);
  // Subnormal results: within two subnormal steps of the exact value.
  for (float x = -103.9f; x < -87.4f; x += 0.37f) {
    const double exact = std::exp(static_cast<double>(x));
    EXPECT_LE(std::fabs(static_cast<double>(exp_f32(x)) - exact), 2.0 * std::numeric_limits<float>::denorm_min())
        << "x = " << x;
  }
}

// The activations' errors, measured over every 61st float bit pattern in [−40, 40] against
// the float64 definitions: SiLU in ulps of the exact value; GELU (tanh) in ulps of the exact
// value for x ≥ 0 and, for x < 0, in units of 2⁻²⁴·(|gelu(x)| + |x|) — the activation test's
// measure — since u = √(2/π)(x + 0.044715x³) itself rounds in f32 and e^(−2u) multiplies that
// rounding by 2|u| (any f32 evaluation of u does; the tanh form loses far more to cancellation).
// Measured on the 2026-12 AMD EPYC VM: silu 2.3 ulp, gelu 1.7 ulp (x ≥ 0) and 0.83 units (x < 0).
TEST(CpuMath, GeluTanhAndSiluRowsAgainstFloat64) {
  const auto gelu_exact = [](double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
  };
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 61) {
    const float v = from_bits(static_cast<uint32_t>(bits));
    if (v >= -40.0f && v <= 40.0f) x.push_back(v);
  }
  ASSERT_GT(x.size(), 10'000'000u);
  std::vector<float> gelu = x, silu = x;
  ops::cpu::gelu_tanh_row(gelu.data(), static_cast<int64_t>(gelu.size()));
  ops::cpu::silu_row(silu.data(), static_cast<int64_t>(silu.size()));
  const double u32 = std::ldexp(1.0, -24);
  // Tiny x gives a subnormal x/2, whose rounding (half a subnormal step) is storage, not evaluation.
  const double half_subnormal = 0.5 * std::numeric_limits<float>::denorm_min();
  double silu_worst = 0.0, gelu_positive_worst = 0.0, gelu_negative_worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i];
    silu_worst = std::max(silu_worst, ulp_error(silu[i], xd / (1.0 + std::exp(-xd))));
    const double g = gelu_exact(xd);
    if (xd >= 0.0)
      gelu_positive_worst = std::max(gelu_positive_worst, ulp_error(gelu[i], g));
    else
      gelu_negative_worst = std::max(gelu_negative_worst, std::max(0.0, std::fabs(static_cast<double>(gelu[i]) - g) -
                                                                            half_subnormal) /
                                                              (u32 * (std::fabs(g) + std::fabs(xd))));
  }
  std::printf("silu_f32: %.3f ulp; gelu_tanh_f32: %.3f ulp (x >= 0), %.3f units (x < 0)\n", silu_worst,
              gelu_positive_worst, gelu_negative_worst);
  EXPECT_LE(silu_worst, 4.0);
  EXPECT_LE(gelu_positive_worst, 4.0);
  EXPECT_LE(gelu_negative_worst, 2.0);

  // Edges: the overflowing tails, infinities and NaN.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> edges = {1e13f, -1e13f, inf, -100.0f, 0.0f, nan};
  std::vector<float> gelu_edges = edges, silu_edges = edges;
  ops::cpu::gelu_tanh_row(gelu_edges.data(), static_cast<int64_t>(edges.size()));
  ops::cpu::silu_row(silu_edges.data(), static_cast<int64_t>(edges.size()));
  EXPECT_EQ(gelu_edges[0], 1e13f);
  EXPECT_EQ(gelu_edges[1], 0.0f);
  EXPECT_TRUE(std::signbit(gelu_edges[1]));
  EXPECT_EQ(gelu_edges[2], inf);
  EXPECT_EQ(gelu_edges[3], 0.0f);
  EXPECT_EQ(gelu_edges[4], 0.0f);
  EXPECT_TRUE(std::isnan(gelu_edges[5]));
  EXPECT_EQ(silu_edges[0], 1e13f);
  EXPECT_EQ(silu_edges[1], 0.0f);
  EXPECT_EQ(silu_edges[2], inf);
  EXPECT_EQ(silu_edges[3], 0.0f);  // exact value −3.7e-42, a subnormal
  EXPECT_EQ(silu_edges[4], 0.0f);
  EXPECT_TRUE(std::isnan(silu_edges[5]));
}

TEST(CpuMath, RowKernelsMatchPlainLoops) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int64_t n : {0, 1, 3, 7, 8, 15, 63, 64, 65, 129, 1000, 4099}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = normal(rng);
    float expected_max = -std::numeric_limits<float>::infinity();
    for (float v : x) expected_max = std::max(expected_max, v);
    EXPECT_EQ(ops::cpu::row_max(x.data(), n), expected_max) << "n = " << n;

    std::vector<float> y = x;
    const float sum = ops::cpu::exp_shifted_sum(y.data(), n, expected_max);
    double expected_sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      // The kernel's argument is the f32 difference (as any f32 softmax's is).
      const double exact = std::exp(static_cast<double>(x[j] - expected_max));
      expected_sum += exact;
      EXPECT_LE(ulp_error(y[j], exact), 2.0) << "n = " << n << ", j = " << j;
    }
    EXPECT_NEAR(sum, expected_sum, 1e-6 * (1.0 + expected_sum)) << "n = " << n;

    const std::vector<float> before = y;
    ops::cpu::scale_row(y.data(), n, 0.375f);
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(y[j], before[j] * 0.375f) << "n = " << n << ", j = " << j;
  }
  // A row of -inf: the maximum is -inf (callers turn such rows into zeros).
  std::vector<float> masked(5, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(ops::cpu::row_max(masked.data(), 5), -std::numeric_limits<float>::infinity());
}

TEST(CpuMath, TileKernelsMatchDoubleSums) {
  // Shapes of flash's tiles, and odd ones (a column count above 64, a depth not a multiple of 8).
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  struct Shape {
    int64_t rows, cols, d;
  };
  for (const Shape& sh : {Shape{64, 64, 64}, Shape{7, 19, 13}, Shape{3, 130, 128}, Shape{1, 1, 1}}) {
    const int64_t ldk = sh.cols + 3, lds = sh.cols + 5;
    std::vector<float> q(static_cast<size_t>(sh.rows * sh.d)), kt(static_cast<size_t>(sh.d * ldk));
    std::vector<float> v(static_cast<size_t>(sh.cols * sh.d)), s(static_cast<size_t>(sh.rows * lds), -1.0f);
    for (float& x : q) x = uniform(rng);
    for (float& x : kt) x = uniform(rng);
    for (float& x : v) x = uniform(rng);
    const float scale = 0.125f;
    ops::cpu::tile_scores(q.data(), kt.data(), ldk, sh.rows, sh.cols, sh.d, scale, s.data(), lds);
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int64_t c = 0; c < sh.cols; ++c) {
        double exact = 0.0, magnitude = 0.0;
        for (int64_t p = 0; p < sh.d; ++p) {
          exact += static_cast<double>(q[r * sh.d + p]) * kt[p * ldk + c];
          magnitude += std::fabs(static_cast<double>(q[r * sh.d + p]) * kt[p * ldk + c]);
        }
        // Worst-case f32 rounding of the blocked sum: (8 + d/8 + 1) roundings of the magnitude.
        const double bound = (8.0 + static_cast<double>(sh.d) / 8.0 + 2.0) * 6e-8 * scale * magnitude;
        EXPECT_NEAR(s[r * lds + c], scale * exact, bound) << r << ", " << c;
      }
    std::vector<float> o(static_cast<size_t>(sh.rows * sh.d), 0.5f);
    ops::cpu::tile_accumulate(s.data(), lds, v.data(), sh.rows, sh.cols, sh.d, o.data());
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int64_t p = 0; p < sh.d; ++p) {
        double exact = 0.5, magnitude = 0.5;
        for (int64_t c = 0; c < sh.cols; ++c) {
          exact += static_cast<double>(s[r * lds + c]) * v[c * sh.d + p];
          magnitude += std::fabs(static_cast<double>(s[r * lds + c]) * v[c * sh.d + p]);
        }
        // Worst case of a running f32 sum of cols + 1 terms (with or without FMA).
        EXPECT_NEAR(o[r * sh.d + p], exact, (static_cast<double>(sh.cols) + 2.0) * 6e-8 * magnitude) << r << ", " << p;
      }
  }
}

uint32_t to_bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

TEST(CpuMath, SixteenBitRowsToF32AreBitExactOnEveryPattern) {
  std::vector<f16> halves(65536);
  std::vector<bf16> brains(65536);
  for (uint32_t b = 0; b < 65536; ++b) {
    halves[b].bits = static_cast<uint16_t>(b);
    brains[b].bits = static_cast<uint16_t>(b);
  }
  std::vector<float> out(65536);
  ops::cpu::f16_to_f32(halves.data(), out.data(), 65536);
  for (uint32_t b = 0; b < 65536; ++b)
    ASSERT_EQ(to_bits(out[b]), to_bits(f16_to_float(halves[b]))) << "f16 bits 0x" << std::hex << b;
  ops::cpu::bf16_to_f32(brains.data(), out.data(), 65536);
  for (uint32_t b = 0; b < 65536; ++b)
    ASSERT_EQ(to_bits(out[b]), to_bits(bf16_to_float(brains[b]))) << "bf16 bits 0x" << std::hex << b;
}

TEST(CpuMath, F32RowsTo16BitAreBitExact) {
  // Every 16-bit value widened (exact representables), each ± one f32 ulp and the halfway
  // points between neighbours (the rounding ties), then a sweep of every 101st f32 pattern.
  std::vector<float> inputs;
  for (uint32_t b = 0; b < 65536; ++b) {
    for (float v : {f16_to_float(f16{static_cast<uint16_t>(b)}), bf16_to_float(bf16{static_cast<uint16_t>(b)})}) {
      const uint32_t bits = to_bits(v);
      for (uint32_t x : {bits, bits + 1, bits - 1, bits + 0x1000u, bits + 0x8000u, bits + 0xfffu, bits + 0x7fffu})
        inputs.push_back(from_bits(x));
    }
  }
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 101) inputs.push_back(from_bits(static_cast<uint32_t>(bits)));
  const int64_t n = static_cast<int64_t>(inputs.size());
  std::vector<f16> halves(inputs.size());
  std::vector<bf16> brains(inputs.size());
  ops::cpu::f32_to_f16(inputs.data(), halves.data(), n);
  ops::cpu::f32_to_bf16(inputs.data(), brains.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(halves[i].bits, float_to_f16(inputs[i]).bits) << "f32 bits 0x" << std::hex << to_bits(inputs[i]);
    ASSERT_EQ(brains[i].bits, float_to_bf16(inputs[i]).bits) << "f32 bits 0x" << std::hex << to_bits(inputs[i]);
  }
}

}  // namespace
}  // namespace blockscope
