// Tests of the sim's cuBLASLt FP8 matmul: what it computes (the harness, with the float64
// reference and the error bounds: cublaslt_fp8_harness.h; the refusals and attributes:
// cublaslt_fp8_refusals_test.cpp). Fresh random inputs in every run (seeded from the clock,
// printed on failure), D poisoned before each call.
#include "cublaslt_fp8_harness.h"

#include <cuda_fp8.h>

#include "sim/cublaslt_model.h"

#include <chrono>

namespace {

using namespace cublaslt_fp8_test;

uint32_t fresh_seed() { return static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()); }

class Fp8Gemm : public CublasLtFp8 {
 protected:
  void SetUp() override {
    CublasLtFp8::SetUp();
    seed_ = fresh_seed();
    rng_.seed(seed_);
    RecordProperty("seed", std::to_string(seed_));
  }
  // A (k x m, TRANSA = T) and B (k x n) of the given FP8 types, random in [-2, 2].
  void operands(T ta, T tb, uint64_t m, uint64_t n, uint64_t k, int32_t batch = 1) {
    A_ = make_mat(ta, k, m, -1, batch);
    B_ = make_mat(tb, k, n, -1, batch);
    fill_random(A_, rng_);
    fill_random(B_, rng_);
  }
  uint32_t seed_ = 0;
  std::mt19937 rng_;
  Mat A_, B_;
};

// ---- FP8 inputs, 16/32-bit outputs -------------------------------------------------------------
TEST_F(Fp8Gemm, E4M3InputsToBf16F16AndF32) {
  for (const T out : {T::BF16, T::F16, T::F32}) {
    SCOPED_TRACE(testing::Message() << "D type " << int(out) << ", seed " << seed_);
    operands(T::E4M3, T::E4M3, 32, 24, 64);
    Mat C = make_mat(out, 32, 24), D = make_mat(out, 32, 24);
    Spec s;
    s.alpha = 0.75f;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    check(s, A_, B_, C, D);
    // beta * C, C separate from D.
    fill_random(C, rng_);
    s.beta = -0.5f;
    D = make_mat(out, 32, 24);
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    check(s, A_, B_, C, D);
  }
}

TEST_F(Fp8Gemm, InPlaceWhenCAndDShareTheType) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  operands(T::E4M3, T::E4M3, 16, 8, 32);
  Mat D = make_mat(T::BF16, 16, 8);
  fill_random(D, rng_);
  Mat C = make_mat(T::BF16, 16, 8);  // a copy of D's starting values, for the reference
  for (uint64_t j = 0; j < 8; ++j)
    for (uint64_t i = 0; i < 16; ++i) C.set(0, i, j, D.get(0, i, j));
  Spec s;
  s.beta = 1.0f;
  ASSERT_EQ(gemm(s, A_, B_, D, D), CUBLAS_STATUS_SUCCESS);
  check(s, A_, B_, C, D);
}

// m and n not multiples of 16 where the documented rules allow: n is free, m * sizeof(C) must be
// a multiple of 16 bytes (m = 24 with a 16-bit C, m = 20 with f32); strided batches.
TEST_F(Fp8Gemm, OddShapesAndBatches) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  {
    operands(T::E4M3, T::E4M3, 24, 13, 48, 2);
    Mat C = make_mat(T::BF16, 24, 13, -1, 2), D = make_mat(T::BF16, 24, 13, 32, 2, 32 * 14);
    Spec s;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    check(s, A_, B_, C, D);
  }
  {
    operands(T::E5M2, T::E4M3, 20, 7, 16);
    Mat C = make_mat(T::F32, 20, 7), D = make_mat(T::F32, 20, 7);
    Spec s;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    check(s, A_, B_, C, D);
  }
}

// ---- FP8 outputs ---------------------------------------------------------------------------------
TEST_F(Fp8Gemm, E4M3TimesE5M2ToE5M2AndE5M2TimesE4M3ToE4M3) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  {
    operands(T::E4M3, T::E5M2, 32, 16, 32);
    Mat C = make_mat(T::BF16, 32, 16), D = make_mat(T::E5M2, 32, 16);
    Spec s;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    const CheckResult r = check(s, A_, B_, C, D);
    EXPECT_GT(r.exact_codes, r.elements * 9 / 10) << "too few elements away from a rounding boundary to test";
  }
  {
    operands(T::E5M2, T::E4M3, 16, 16, 32);
    Mat C = make_mat(T::F16, 16, 16), D = make_mat(T::E4M3, 16, 16);
    Spec s;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    const CheckResult r = check(s, A_, B_, C, D);
    EXPECT_GT(r.exact_codes, r.elements * 9 / 10);
  }
}

// Non-power-of-two scales, so that a scale applied twice, dropped, or applied to the wrong
// operand moves the result by more than a code.
TEST_F(Fp8Gemm, ScalesAToDWithAnFp8D) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  operands(T::E4M3, T::E4M3, 32, 16, 32);
  DevFloat sa(0.75f), sb(1.5f), sd(0.3f);
  Mat C = make_mat(T::BF16, 32, 16), D = make_mat(T::E4M3, 32, 16);
  Spec s;
  s.alpha = 1.25f;
  s.scale[0] = sa.p;
  s.scale[1] = sb.p;
  s.scale[3] = sd.p;
  ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
  const CheckResult r = check(s, A_, B_, C, D);
  EXPECT_GT(r.exact_codes, r.elements * 9 / 10);
}

TEST_F(Fp8Gemm, ScaleCMultipliesBetaC) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  operands(T::E4M3, T::E4M3, 16, 16, 16);
  DevFloat sc(2.5f), sd(0.5f);
  for (const T out : {T::BF16, T::E4M3}) {
    Mat C = make_mat(T::BF16, 16, 16), D = make_mat(out, 16, 16);
    fill_random(C, rng_);
    Spec s;
    s.beta = 0.75f;
    s.scale[2] = sc.p;
    if (fp8(out)) s.scale[3] = sd.p;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    check(s, A_, B_, C, D);
  }
}

TEST_F(Fp8Gemm, AmaxIsOfTheResultBeforeScaleD) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  operands(T::E4M3, T::E4M3, 32, 16, 64);
  DevFloat sd(0.3f), amax(-1.0f);
  for (const T out : {T::E4M3, T::BF16}) {
    Mat C = make_mat(T::BF16, 32, 16), D = make_mat(out, 32, 16);
    Spec s;
    s.epilogue = CUBLASLT_EPILOGUE_GELU;  // amax is of the epilogue's output
    if (fp8(out)) s.scale[3] = sd.p;
    s.amax = amax.p;
    *amax.p = -1.0f;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    const CheckResult r = check(s, A_, B_, C, D);
    EXPECT_NEAR(*amax.p, r.amax_ref, r.amax_bound + kU * r.amax_ref) << "D type " << int(out);
  }
  // No amax pointer: nothing is computed or written, and the GEMM is the same.
  Mat C = make_mat(T::BF16, 32, 16), D = make_mat(T::E4M3, 32, 16);
  Spec s;
  s.scale[3] = sd.p;
  *amax.p = -1.0f;
  ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
  check(s, A_, B_, C, D);
  EXPECT_EQ(*amax.p, -1.0f);
}

// Beyond the largest finite value the output saturates (satfinite): E4M3 0x7E / 0xFE (448),
// E5M2 0x7B / 0xFB (57344); NaN is never produced from finite inputs.
TEST_F(Fp8Gemm, OutputsPastTheRangeSaturate) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const uint64_t m = 16, n = 16, k = 16;
  Mat A = make_mat(T::E4M3, k, m), B = make_mat(T::E5M2, k, n);
  std::uniform_int_distribution<int> coin(0, 1);
  std::vector<int> sign(m);
  for (uint64_t i = 0; i < m; ++i) sign[i] = coin(rng_) ? 1 : -1;
  for (uint64_t i = 0; i < m; ++i)
    for (uint64_t q = 0; q < k; ++q) A.set(0, q, i, 256.0 * sign[i]);
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t q = 0; q < k; ++q) B.set(0, q, j, j % 2 ? 1.0 : 256.0);  // 16 * 256 * 1 = 4096, or 16 * 65536
  for (const T out : {T::E4M3, T::E5M2}) {
    Mat C = make_mat(T::F16, m, n), D = make_mat(out, m, n);
    Spec s;
    ASSERT_EQ(gemm(s, A, B, C, D), CUBLAS_STATUS_SUCCESS);
    const uint8_t max_code = out == T::E4M3 ? 0x7e : 0x7b;
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i) {
        const double exact = 16.0 * 256.0 * sign[i] * (j % 2 ? 1.0 : 256.0);
        if (std::fabs(exact) <= max_finite(out)) {
          EXPECT_EQ(D.code(0, i, j), encode_fp8(exact, out)) << i << "," << j;
        } else {
          EXPECT_EQ(D.code(0, i, j), sign[i] > 0 ? max_code : (max_code | 0x80)) << "D type " << int(out) << " " << i << "," << j;
        }
      }
    check(s, A, B, C, D);
  }
}

// ---- Epilogues with FP8 inputs --------------------------------------------------------------------
TEST_F(Fp8Gemm, BiasAndGeluEpilogues) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const uint64_t m = 32, n = 16, k = 32;
  struct Case {
    cublasLtEpilogue_t epilogue;
    T c, d, bias;  // the table's bias type for that row
  };
  const Case cases[] = {
      {CUBLASLT_EPILOGUE_BIAS, T::BF16, T::BF16, T::BF16},     {CUBLASLT_EPILOGUE_BIAS, T::F16, T::F16, T::F16},
      {CUBLASLT_EPILOGUE_RELU_BIAS, T::F32, T::F32, T::BF16},  {CUBLASLT_EPILOGUE_GELU_BIAS, T::F16, T::E4M3, T::F16},
      {CUBLASLT_EPILOGUE_GELU_BIAS, T::BF16, T::E4M3, T::BF16}, {CUBLASLT_EPILOGUE_GELU, T::BF16, T::BF16, T::BF16},
      {CUBLASLT_EPILOGUE_RELU, T::BF16, T::E4M3, T::BF16},
  };
  DevFloat sd(0.6f);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "epilogue " << c.epilogue << ", C " << int(c.c) << ", D " << int(c.d));
    operands(T::E4M3, T::E4M3, m, n, k);
    Bias bias = make_bias(c.bias, m, rng_);
    Mat C = make_mat(c.c, m, n), D = make_mat(c.d, m, n);
    Spec s;
    s.epilogue = c.epilogue;
    if (has_bias(c.epilogue)) s.bias = bias.mat.data();
    if (fp8(c.d)) s.scale[3] = sd.p;
    ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
    check(s, A_, B_, C, D, bias.values);
    if (has_bias(c.epilogue)) {  // the same with BIAS_DATA_TYPE naming the table's type
      s.bias_type = cuda_type(c.bias);
      D = make_mat(c.d, m, n);
      ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
      check(s, A_, B_, C, D, bias.values);
    }
  }
}

// FAST_ACCUM is accepted; the sim's sum is the same f32 sum with it (see the model's notes).
TEST_F(Fp8Gemm, FastAccumIsAcceptedAndChangesNothingInTheSim) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  operands(T::E4M3, T::E4M3, 32, 16, 64);
  Mat C = make_mat(T::BF16, 32, 16), D0 = make_mat(T::BF16, 32, 16), D1 = make_mat(T::BF16, 32, 16);
  Spec s;
  ASSERT_EQ(gemm(s, A_, B_, C, D0), CUBLAS_STATUS_SUCCESS);
  s.fast_accum = 1;
  ASSERT_EQ(gemm(s, A_, B_, C, D1), CUBLAS_STATUS_SUCCESS);
  check(s, A_, B_, C, D1);
  EXPECT_EQ(std::memcmp(D0.data(), D1.data(), D0.elems * 2), 0);
}

TEST_F(Fp8Gemm, KernelNamesCarryTheFp8Types) {
  operands(T::E4M3, T::E4M3, 16, 16, 16);
  Bias bias = make_bias(T::BF16, 16, rng_);
  Mat C = make_mat(T::BF16, 16, 16), D = make_mat(T::BF16, 16, 16);
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  s.bias = bias.mat.data();
  ASSERT_EQ(gemm(s, A_, B_, C, D), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(blockscope::sim::last_kernel_name(), "sim_gemm_e4m3_bf16_tn_bias");
  operands(T::E4M3, T::E5M2, 16, 16, 16);
  Mat D8 = make_mat(T::E5M2, 16, 16);
  ASSERT_EQ(gemm(Spec{}, A_, B_, C, D8), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(blockscope::sim::last_kernel_name(), "sim_gemm_e4m3_e5m2_e5m2_tn");
}

// The sim's FP8 conversions against NVIDIA's host implementation in <cuda_fp8.h> (and the
// decoding against this file's, from the format definitions): every code, and the rounding of
// one float in every 2^9 bit patterns (both signs, every exponent, NaN and infinities).
TEST(Fp8Codes, MatchCudaFp8) {
  namespace lt = blockscope::sim::cublaslt;
  for (const T t : {T::E4M3, T::E5M2}) {
    const lt::Elem e = t == T::E4M3 ? lt::Elem::E4M3 : lt::Elem::E5M2;
    const __nv_fp8_interpretation_t kind = t == T::E4M3 ? __NV_E4M3 : __NV_E5M2;
    for (int c = 0; c < 256; ++c) {
      const double mine = decode_fp8(uint8_t(c), t), sim = lt::fp8_to_double(uint8_t(c), e);
      const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), kind);
      const double nvidia = __half2float(__half(h));
      if (std::isnan(mine)) {
        EXPECT_TRUE(std::isnan(sim) && std::isnan(nvidia)) << c;
      } else {
        EXPECT_EQ(sim, mine) << "code " << c;
        EXPECT_EQ(nvidia, mine) << "code " << c;
      }
    }
    int mismatches = 0;
    for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 509) {
      float f;
      const uint32_t b32 = static_cast<uint32_t>(bits);
      std::memcpy(&f, &b32, 4);
      const uint8_t nvidia = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, kind);
      const uint8_t sim = lt::double_to_fp8(f, e);
      if (sim != nvidia && mismatches++ < 5) ADD_FAILURE() << f << ": sim 0x" << std::hex << int(sim) << ", <cuda_fp8.h> 0x" << int(nvidia);
    }
    EXPECT_EQ(mismatches, 0);
  }
}

}  // namespace
