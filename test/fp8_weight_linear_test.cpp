// Weight-only FP8: fp8_weight_linear's CPU dot products, each version this CPU runs
// (ops/fp8_weight_linear/cpu_kernels.h) -- every code widened exactly, in the vector steps and in
// the tails; sums within f32's bound of a float64 reference on odd shapes -- and the weights'
// codes and row scales (model/fp8_layer.h's Fp8RowWeight) worked out by hand. (The op itself,
// both devices, every dtype: the op harness, test/op_cases.cpp; whole workloads: cli_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "model/fp8_layer.h"
#include "ops/fp8_weight_linear/cpu_kernels.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/fp8.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace fw = ops::cpu::fp8_weight;
using testing::fresh_seed;
using testing::random_floats;

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

// Row c of w holds code c at column `at` and +0 elsewhere; x is 1 at `at`, 0 elsewhere: each
// dot is code c's value itself (NaN for the NaN codes, ±inf for e5m2's), bit for bit.
TEST(Fp8WeightDot, EveryCodeWidensExactlyInTheVectorStepsAndTheTail) {
  for (const fw::Isa isa : fw::isas_on_this_cpu()) {
    for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
      // k = 35: columns 0..31 go through both versions' vector steps, 32..34 through the tail.
      for (const int64_t at : {0, 5, 17, 31, 33}) {
        SCOPED_TRACE(std::string(fw::isa_name(isa)) + (format == Fp8Format::e5m2 ? " e5m2" : " e4m3") + " column " +
                     std::to_string(at));
        constexpr int64_t k = 35, n = 256;
        std::vector<uint8_t> w(static_cast<size_t>(n * k), 0);
        for (int64_t c = 0; c < n; ++c) w[static_cast<size_t>(c * k + at)] = static_cast<uint8_t>(c);
        std::vector<float> x(static_cast<size_t>(k), 0.0f);
        x[static_cast<size_t>(at)] = 1.0f;
        std::vector<float> t(static_cast<size_t>(n), -1.0f);
        fw::dot_rows(isa, x.data(), 1, w.data(), k, 0, n, format == Fp8Format::e5m2, t.data(), n);
        for (int64_t c = 0; c < n; ++c) {
          const float want = fp8_to_float(static_cast<uint8_t>(c), format);
          const float got = t[static_cast<size_t>(c)];
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << "code " << c;
          } else if (want == 0.0f) {  // -0 (0x80) sums to +0 from the zero the sums start at
            EXPECT_EQ(got, 0.0f) << "code " << c;
          } else {
            EXPECT_EQ(bits(got), bits(want)) << "code " << c << ": " << got << " vs " << want;
          }
        }
      }
    }
  }
}

// One call's shape: x [rows, k], w [n, k], sums wanted for weight rows [o0, o1).
struct DotShape {
  int64_t rows, k, n, o0, o1;
};

// t [rows, n] (poisoned with NaN before the call) against float64 sums of x's values times the
// codes' values: rows [o0, o1) within f32's accumulation bound -- (k + 1) · 2^-24 · Σ|products|,
// the products exact -- the others untouched.
void expect_sums(const DotShape& s, const std::vector<float>& x, const std::vector<uint8_t>& w, Fp8Format format,
                 const std::vector<float>& t) {
  for (int64_t m = 0; m < s.rows; ++m) {
    for (int64_t o = 0; o < s.n; ++o) {
      const float got = t[static_cast<size_t>(m * s.n + o)];
      if (o < s.o0 || o >= s.o1) {
        EXPECT_TRUE(std::isnan(got)) << "row " << o << " outside [o0, o1) was written";
        continue;
      }
      double want = 0.0, magnitude = 0.0;
      for (int64_t j = 0; j < s.k; ++j) {
        const double p = double(x[static_cast<size_t>(m * s.k + j)]) *
                         double(fp8_to_float(w[static_cast<size_t>(o * s.k + j)], format));
        want += p;
        magnitude += std::fabs(p);
      }
      EXPECT_LE(std::fabs(got - want), double(s.k + 1) * std::ldexp(1.0, -24) * magnitude) << "m " << m << " o " << o;
    }
  }
}

// Random codes (no NaN or infinity) of values up to ±300.
std::vector<uint8_t> random_codes(size_t n, uint64_t seed, Fp8Format format) {
  const std::vector<float> values = random_floats(n, seed, -300.0f, 300.0f);
  std::vector<uint8_t> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = float_to_fp8(values[i], format);
  return w;
}

// Random codes (no NaN or infinity) and x on shapes across the vector widths and row blocks:
// each sum within f32's accumulation bound of a float64 one, on rows o0..o1 only.
TEST(Fp8WeightDot, SumsMatchFloat64OnOddShapes) {
  for (const fw::Isa isa : fw::isas_on_this_cpu()) {
    for (const DotShape& s : std::vector<DotShape>{{1, 1, 3, 0, 3}, {3, 7, 9, 2, 9}, {4, 16, 8, 0, 8}, {5, 17, 6, 1, 5},
                                                   {9, 100, 13, 0, 13}, {16, 301, 21, 4, 21}}) {
      for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE(std::string(fw::isa_name(isa)) + " rows " + std::to_string(s.rows) + " k " + std::to_string(s.k) +
                     " seed " + std::to_string(seed));
        const std::vector<float> x = random_floats(static_cast<size_t>(s.rows * s.k), seed, -2.0f, 2.0f);
        const std::vector<uint8_t> w = random_codes(static_cast<size_t>(s.n * s.k), seed + 1, format);
        std::vector<float> t(static_cast<size_t>(s.rows * s.n), std::nanf(""));
        fw::dot_rows(isa, x.data(), s.rows, w.data(), s.k, s.o0, s.o1, format == Fp8Format::e5m2, t.data(), s.n);
        expect_sums(s, x, w, format, t);
      }
    }
  }
}

uint16_t bf16_bits(float v) { return static_cast<uint16_t>(bits(v) >> 16); }  // exact for the values used

// The bf16-x version (VDPBF16PS) where this CPU has AVX512_BF16: every code exact (x one-hot), in
// the 32-code steps and the tail; random sums on odd shapes within f32's bound.
TEST(Fp8WeightDot, Bf16VersionWidensEveryCodeAndSumsLikeFloat64) {
  if (!fw::bf16_dot_on_this_cpu()) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16: the bf16 version does not run here (the others are tested above)";
  }
  for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    for (const int64_t at : {0, 16, 31, 33}) {  // k = 35: 32 in the vector step, 3 in the tail
      SCOPED_TRACE(std::string(format == Fp8Format::e5m2 ? "e5m2" : "e4m3") + " column " + std::to_string(at));
      constexpr int64_t k = 35, n = 256;
      std::vector<uint8_t> w(static_cast<size_t>(n * k), 0);
      for (int64_t c = 0; c < n; ++c) w[static_cast<size_t>(c * k + at)] = static_cast<uint8_t>(c);
      std::vector<uint16_t> x(static_cast<size_t>(k), 0);
      x[static_cast<size_t>(at)] = bf16_bits(1.0f);
      std::vector<float> t(static_cast<size_t>(n), -1.0f);
      fw::dot_rows_bf16(x.data(), 1, w.data(), k, 0, n, format == Fp8Format::e5m2, t.data(), n);
      for (int64_t c = 0; c < n; ++c) {
        const float want = fp8_to_float(static_cast<uint8_t>(c), format), got = t[static_cast<size_t>(c)];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "code " << c;
        } else {
          EXPECT_EQ(got, want) << "code " << c;  // ±0 compare equal
        }
      }
    }
  }
  for (const DotShape& s : std::vector<DotShape>{{1, 1, 3, 0, 3}, {2, 31, 17, 0, 17}, {3, 64, 9, 2, 9},
                                                 {5, 100, 6, 1, 5}, {8, 301, 13, 0, 13}, {16, 96, 21, 4, 21}}) {
    for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE("rows " + std::to_string(s.rows) + " k " + std::to_string(s.k) + " seed " + std::to_string(seed));
      // x's bf16 bits (random f32 values cut to bf16) and the values they stand for.
      std::vector<float> x = random_floats(static_cast<size_t>(s.rows * s.k), seed, -2.0f, 2.0f);
      std::vector<uint16_t> x_bits(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        x_bits[i] = bf16_bits(x[i]);
        const uint32_t wide = static_cast<uint32_t>(x_bits[i]) << 16;
        std::memcpy(&x[i], &wide, sizeof(float));
      }
      const std::vector<uint8_t> w = random_codes(static_cast<size_t>(s.n * s.k), seed + 1, format);
      std::vector<float> t(static_cast<size_t>(s.rows * s.n), std::nanf(""));
      fw::dot_rows_bf16(x_bits.data(), s.rows, w.data(), s.k, s.o0, s.o1, format == Fp8Format::e5m2, t.data(), s.n);
      expect_sums(s, x, w, format, t);
    }
  }
}

TEST(Fp8WeightDot, RefusesAVersionThisCpuDoesNotRun) {
  const std::vector<fw::Isa>& available = fw::isas_on_this_cpu();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(available.back(), fw::Isa::scalar) << "the scalar version runs everywhere";
  for (const fw::Isa isa : {fw::Isa::avx512, fw::Isa::avx2}) {
    if (std::find(available.begin(), available.end(), isa) != available.end()) continue;
    float x = 1.0f, t = 0.0f;
    uint8_t w = 0;
    EXPECT_THROW(fw::dot_rows(isa, &x, 1, &w, 1, 0, 1, false, &t, 1), Error) << fw::isa_name(isa);
  }
  if (!fw::bf16_dot_on_this_cpu()) {
    const uint16_t x = 0;
    float t = 0.0f;
    uint8_t w = 0;
    EXPECT_THROW(fw::dot_rows_bf16(&x, 1, &w, 1, 0, 1, false, &t, 1), Error);
  }
}

// Row scales and codes by hand (e4m3, largest 448):
//   row 0  [1, -2, 0.5, 4]      amax 4: scale 112, codes 112, -224, 56, 448 (all exact), factor 1/112
//   row 1  zeros                scale 1 (the rule keeps it), codes 0, factor 1
//   row 2  [1344, 1, -3, 0]     amax 1344: scale f32(1/3); 1344·scale rounds to 448; 1·scale =
//                               0.3333 lies between e4m3's 0.3125 and 0.34375, nearer the latter;
//                               -3·scale = -1 exactly (f32(1/3)·3 rounds to 1)
// Stored [out, in] or, for GPT-2's Conv1D, [in, out]: the same codes either way.
TEST(Fp8RowWeight, ScalesAndCodesWorkedByHand) {
  Context ctx(Device::cpu());
  const std::vector<float> rows = {1, -2, 0.5f, 4, 0, 0, 0, 0, 1344, 1, -3, 0};
  std::vector<float> columns(12);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) columns[static_cast<size_t>(c * 3 + r)] = rows[static_cast<size_t>(r * 4 + c)];
  const Tensor out_in = testing::tensor_of(ctx, {3, 4}, DType::f32, rows);
  const Tensor in_out = testing::tensor_of(ctx, {4, 3}, DType::f32, columns);
  for (const auto& [weight, layout] : {std::make_pair(out_in, ops::WeightLayout::out_in),
                                       std::make_pair(in_out, ops::WeightLayout::in_out)}) {
    SCOPED_TRACE(layout == ops::WeightLayout::in_out ? "in_out" : "out_in");
    const Fp8RowWeight w(ctx, weight, DType::fp8_e4m3, layout, "w");
    ASSERT_EQ(w.codes().shape(), Shape({3, 4}));
    EXPECT_EQ(w.codes().dtype(), DType::fp8_e4m3);
    EXPECT_EQ(to_floats(w.codes()), std::vector<float>({112, -224, 56, 448, 0, 0, 0, 0, 448, 0.34375f, -1, 0}));
    const float third = 1.0f / 3.0f;  // f32(448 / 1344)
    EXPECT_EQ(to_floats(w.scale()), std::vector<float>({1.0f / 112.0f, 1.0f, 1.0f / third}));
    EXPECT_EQ(w.nbytes(), 12u + 3u * 4u);
  }
}

TEST(Fp8RowWeight, RefusesANonFiniteWeightByNameAndPosition) {
  Context ctx(Device::cpu());
  std::vector<float> values(12, 0.5f);
  values[7] = std::numeric_limits<float>::infinity();  // [1, 3] as stored [3, 4]
  const Tensor weight = testing::tensor_of(ctx, {3, 4}, DType::f32, values);
  testing::expect_input_error([&] { Fp8RowWeight(ctx, weight, DType::fp8_e5m2, ops::WeightLayout::out_in, "h.0.mlp.fc"); },
                              {"precision.weights", "h.0.mlp.fc", "inf", "[1, 3]", "finite"});
  // [4, 3] as stored for in_out: element 7 is [2, 1], output row 1.
  const Tensor conv1d = testing::tensor_of(ctx, {4, 3}, DType::f32, values);
  testing::expect_input_error([&] { Fp8RowWeight(ctx, conv1d, DType::fp8_e4m3, ops::WeightLayout::in_out, "c_fc"); },
                              {"c_fc", "[2, 1]"});
}

}  // namespace
}  // namespace blockscope
